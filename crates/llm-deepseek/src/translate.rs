//! Translation of DeepSeek chat-completion chunks into [`StreamChunk`]s (`wire-protocol.md` §6–§8).
//!
//! Pure and synchronous: feed each SSE `data:` payload to [`Translator::event`]; it appends the
//! chunks to emit. Block indexes are assigned in first-seen order across reasoning, text and tool
//! calls; `finish_reason` and usage are held until `[DONE]`, which emits every `block-end`, then
//! `usage`, then `finish`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use dsh_llm::{
    BlockKind, ContentBlock, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage, codes,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct WireChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<WireChoice<'a>>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<WireToolCall<'a>>>,
}

#[derive(Deserialize)]
struct WireToolCall<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// `wire-protocol.md` §8: input excludes cached tokens; cache reads from `cached_tokens`,
    /// else `prompt_cache_hit_tokens`.
    fn to_usage(&self) -> TokenUsage {
        let cache_read = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens);
        let prompt = self.prompt_tokens.unwrap_or(0);
        TokenUsage {
            input_tokens: prompt.saturating_sub(cache_read.unwrap_or(0)),
            output_tokens: self.completion_tokens.unwrap_or(0),
            total_tokens: None,
            cache_read_tokens: cache_read,
            cache_write_tokens: None,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
        }
    }
}

#[derive(Debug)]
enum Block {
    Reasoning(String),
    Text(String),
    Tool {
        wire_index: u32,
        id: String,
        name: String,
        arguments: String,
    },
}

/// What happened with one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More events are expected.
    Continue,
    /// `[DONE]` arrived: the final chunks were emitted; stop reading.
    Done,
}

/// Stateful translator for one attempt; see the module docs.
#[derive(Debug, Default)]
pub struct Translator {
    blocks: Vec<Block>,
    reasoning_block: Option<usize>,
    text_block: Option<usize>,
    /// Wire tool-call index → position in `blocks`.
    tool_blocks: BTreeMap<u32, usize>,
    last_wire_index: Option<u32>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    events: usize,
}

fn idx(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// `malformed SSE payload: <first 120 chars>`.
pub fn malformed(payload: &str) -> LlmFailure {
    let head: String = payload.chars().take(120).collect();
    LlmFailure::new(
        codes::MALFORMED_RESPONSE,
        format!("malformed SSE payload: {head}"),
    )
}

impl Translator {
    /// A translator for one attempt.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many data events were seen (the `[DONE]` terminator included).
    pub fn events_seen(&self) -> usize {
        self.events
    }

    /// Handles one SSE `data:` payload. `Err` = the payload is not JSON (`MALFORMED_RESPONSE`);
    /// the caller ends the attempt with that failure.
    pub fn event(
        &mut self,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, LlmFailure> {
        self.events += 1;
        if data == "[DONE]" {
            self.done(out);
            return Ok(Progress::Done);
        }
        let chunk: WireChunk<'_> = serde_json::from_str(data).map_err(|_| malformed(data))?;
        if let Some(u) = &chunk.usage {
            self.usage = Some(u.to_usage());
        }
        for choice in chunk.choices.iter().flatten() {
            if let Some(delta) = &choice.delta {
                self.delta(delta, out);
            }
            if let Some(f) = &choice.finish_reason {
                self.finish_reason = Some(f.to_string());
            }
        }
        Ok(Progress::Continue)
    }

    fn delta(&mut self, delta: &WireDelta<'_>, out: &mut Vec<StreamChunk>) {
        if let Some(r) = delta.reasoning_content.as_deref().filter(|r| !r.is_empty()) {
            let i = match self.reasoning_block {
                Some(i) => i,
                None => {
                    let i = self.blocks.len();
                    self.blocks.push(Block::Reasoning(String::new()));
                    self.reasoning_block = Some(i);
                    out.push(StreamChunk::BlockStart {
                        index: idx(i),
                        block_type: BlockKind::Reasoning,
                    });
                    i
                }
            };
            if let Some(Block::Reasoning(s)) = self.blocks.get_mut(i) {
                s.push_str(r);
            }
            out.push(StreamChunk::ReasoningDelta {
                index: idx(i),
                text: r.to_owned(),
            });
        }
        if let Some(t) = delta.content.as_deref().filter(|t| !t.is_empty()) {
            let i = match self.text_block {
                Some(i) => i,
                None => {
                    let i = self.blocks.len();
                    self.blocks.push(Block::Text(String::new()));
                    self.text_block = Some(i);
                    out.push(StreamChunk::BlockStart {
                        index: idx(i),
                        block_type: BlockKind::Text,
                    });
                    i
                }
            };
            if let Some(Block::Text(s)) = self.blocks.get_mut(i) {
                s.push_str(t);
            }
            out.push(StreamChunk::TextDelta {
                index: idx(i),
                text: t.to_owned(),
            });
        }
        for call in delta.tool_calls.iter().flatten() {
            self.tool_fragment(call, out);
        }
    }

    fn tool_fragment(&mut self, call: &WireToolCall<'_>, out: &mut Vec<StreamChunk>) {
        let wire = call.index.or(self.last_wire_index).unwrap_or(0);
        self.last_wire_index = Some(wire);
        let pos = match self.tool_blocks.get(&wire) {
            Some(p) => *p,
            None => {
                let p = self.blocks.len();
                self.blocks.push(Block::Tool {
                    wire_index: wire,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                self.tool_blocks.insert(wire, p);
                out.push(StreamChunk::BlockStart {
                    index: idx(p),
                    block_type: BlockKind::ToolCall,
                });
                p
            }
        };
        let Some(Block::Tool {
            id,
            name,
            arguments,
            ..
        }) = self.blocks.get_mut(pos)
        else {
            return;
        };
        // id and name come on the first fragment; later empty (or repeated) values are ignored.
        if let Some(i) = call.id.as_deref().filter(|i| !i.is_empty())
            && id.is_empty()
        {
            i.clone_into(id);
        }
        let func = call.function.as_ref();
        if let Some(n) = func
            .and_then(|f| f.name.as_deref())
            .filter(|n| !n.is_empty())
            && name.is_empty()
        {
            n.clone_into(name);
        }
        let frag = func.and_then(|f| f.arguments.as_deref()).unwrap_or("");
        arguments.push_str(frag);
        out.push(StreamChunk::ToolCallDelta {
            index: idx(pos),
            id: id.clone(),
            name: if name.is_empty() {
                None
            } else {
                Some(name.clone())
            },
            arguments_delta: frag.to_owned(),
        });
    }

    fn done(&mut self, out: &mut Vec<StreamChunk>) {
        for (i, b) in self.blocks.iter().enumerate() {
            let block = match b {
                Block::Reasoning(s) => ContentBlock::reasoning(s.clone()),
                Block::Text(s) => ContentBlock::text(s.clone()),
                Block::Tool {
                    id,
                    name,
                    arguments,
                    ..
                } => ContentBlock::tool_call(id.clone(), name.clone(), arguments.clone()),
            };
            out.push(StreamChunk::BlockEnd {
                index: idx(i),
                block,
            });
        }
        if let Some(u) = self.usage {
            out.push(StreamChunk::Usage { usage: u });
        }
        let reason = match self.finish_reason.as_deref() {
            None | Some("stop") if self.blocks.is_empty() => FinishReason::error(LlmFailure::new(
                codes::EMPTY_RESPONSE,
                "model returned a completed response with no content",
            )),
            None | Some("stop") => FinishReason::Stop,
            Some("tool_calls") => FinishReason::ToolCalls,
            Some("length") => FinishReason::MaxTokens,
            Some(other) => {
                let code = match other {
                    "content_filter" => FailureCode::ContentFilter,
                    "insufficient_system_resource" | "aborted" => FailureCode::Server,
                    o => FailureCode::from(o.to_ascii_uppercase()),
                };
                FinishReason::error(LlmFailure::new(code, format!("model stopped: {other}")))
            }
        };
        out.push(StreamChunk::finish(reason));
    }

    /// The wire index of each tool-call block, in block order (diagnostics).
    pub fn tool_wire_indexes(&self) -> Vec<u32> {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Tool { wire_index, .. } => Some(*wire_index),
                _ => None,
            })
            .collect()
    }
}
