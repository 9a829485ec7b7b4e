//! Chat-completion chunks (as async-openai deserialises them into our own types) →
//! [`StreamChunk`]s. Written apart from `dsh-llm-deepseek`'s translator on purpose: the suite
//! compares the two.

use dsh_llm::{
    BlockKind, ContentBlock, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage, codes,
};
use serde::Deserialize;

/// One `chat.completion.chunk`, the members dsh reads.
#[derive(Debug, Deserialize)]
pub struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallDelta>,
}

#[derive(Debug, Deserialize)]
struct CallDelta {
    index: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<Function>,
}

#[derive(Debug, Deserialize)]
struct Function {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

enum Slot {
    Text(String),
    Reasoning(String),
    Call {
        id: String,
        name: String,
        args: String,
        wire: u32,
    },
}

/// The fold of one attempt.
#[derive(Default)]
pub struct Fold {
    slots: Vec<Slot>,
    usage: Option<TokenUsage>,
    finish: Option<String>,
}

impl Fold {
    fn slot_of(
        &mut self,
        pick: impl Fn(&Slot) -> bool,
        make: impl FnOnce() -> Slot,
        kind: BlockKind,
        out: &mut Vec<StreamChunk>,
    ) -> usize {
        if let Some(i) = self.slots.iter().position(&pick) {
            return i;
        }
        self.slots.push(make());
        let index = (self.slots.len() - 1) as u32;
        out.push(StreamChunk::BlockStart {
            index,
            block_type: kind,
        });
        index as usize
    }

    /// Folds one chunk.
    pub fn push(&mut self, chunk: Chunk, out: &mut Vec<StreamChunk>) {
        if let Some(u) = chunk.usage {
            let hit = u.prompt_cache_hit_tokens.unwrap_or(0).min(u.prompt_tokens);
            self.usage = Some(TokenUsage {
                input_tokens: u.prompt_tokens - hit,
                output_tokens: u.completion_tokens,
                total_tokens: u.total_tokens,
                cache_read_tokens: Some(hit),
                cache_write_tokens: None,
                reasoning_tokens: None,
            });
        }
        for c in chunk.choices {
            if let Some(r) = c.delta.reasoning_content.filter(|r| !r.is_empty()) {
                let i = self.slot_of(
                    |s| matches!(s, Slot::Reasoning(_)),
                    || Slot::Reasoning(String::new()),
                    BlockKind::Reasoning,
                    out,
                );
                if let Slot::Reasoning(t) = &mut self.slots[i] {
                    t.push_str(&r);
                }
                out.push(StreamChunk::ReasoningDelta {
                    index: i as u32,
                    text: r,
                });
            }
            if let Some(text) = c.delta.content.filter(|t| !t.is_empty()) {
                let i = self.slot_of(
                    |s| matches!(s, Slot::Text(_)),
                    || Slot::Text(String::new()),
                    BlockKind::Text,
                    out,
                );
                if let Slot::Text(t) = &mut self.slots[i] {
                    t.push_str(&text);
                }
                out.push(StreamChunk::TextDelta {
                    index: i as u32,
                    text,
                });
            }
            for call in c.delta.tool_calls {
                let wire = call.index;
                let i = self.slot_of(
                    |s| matches!(s, Slot::Call { wire: w, .. } if *w == wire),
                    || Slot::Call {
                        id: String::new(),
                        name: String::new(),
                        args: String::new(),
                        wire,
                    },
                    BlockKind::ToolCall,
                    out,
                );
                let (name, args) = call.function.map_or((None, String::new()), |f| {
                    (f.name, f.arguments.unwrap_or_default())
                });
                if let Slot::Call {
                    id,
                    name: n,
                    args: a,
                    ..
                } = &mut self.slots[i]
                {
                    if let Some(new) = call.id.filter(|x| !x.is_empty()) {
                        *id = new;
                    }
                    if let Some(new) = name.clone().filter(|x| !x.is_empty()) {
                        *n = new;
                    }
                    a.push_str(&args);
                    out.push(StreamChunk::ToolCallDelta {
                        index: i as u32,
                        id: id.clone(),
                        name,
                        arguments_delta: args,
                    });
                }
            }
            if c.finish_reason.is_some() {
                self.finish = c.finish_reason;
            }
        }
    }

    /// Whether a finish reason arrived (the library ends the stream the same way on `[DONE]`
    /// and on a cut connection; this tells them apart).
    pub fn has_finish(&self) -> bool {
        self.finish.is_some()
    }

    /// Closes the blocks and ends the attempt.
    pub fn end(self, out: &mut Vec<StreamChunk>) {
        let calls = self.slots.iter().any(|s| matches!(s, Slot::Call { .. }));
        let empty = self.slots.is_empty();
        for (i, s) in self.slots.into_iter().enumerate() {
            let block = match s {
                Slot::Text(t) => ContentBlock::text(t),
                Slot::Reasoning(t) => ContentBlock::reasoning(t),
                Slot::Call { id, name, args, .. } => ContentBlock::tool_call(id, name, args),
            };
            out.push(StreamChunk::BlockEnd {
                index: i as u32,
                block,
            });
        }
        let reason = match self.finish.as_deref() {
            Some("stop") if empty => FinishReason::error(LlmFailure::new(
                codes::EMPTY_RESPONSE,
                "the response had no content",
            )),
            Some("stop") => FinishReason::Stop,
            Some("tool_calls") => FinishReason::ToolCalls,
            Some("length") => FinishReason::MaxTokens,
            Some("content_filter") => FinishReason::error(LlmFailure::new(
                codes::CONTENT_FILTER,
                "stopped by the content filter",
            )),
            Some("insufficient_system_resource") => FinishReason::error(LlmFailure::new(
                codes::SERVER,
                "the provider ran out of capacity",
            )),
            Some(other) => FinishReason::error(LlmFailure::new(
                FailureCode::from(other.to_ascii_uppercase()),
                format!("unknown finish_reason `{other}`"),
            )),
            None if calls => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        if let Some(u) = self.usage {
            out.push(StreamChunk::Usage { usage: u });
        }
        out.push(StreamChunk::finish(reason));
    }
}
