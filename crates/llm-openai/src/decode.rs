//! Chat-completions SSE chunks → [`StreamChunk`]s, whatever reasoning dialect the endpoint
//! speaks: `reasoning_content`, `reasoning`, or `reasoning_details` items.

use std::collections::BTreeMap;

use dsh_llm::{
    BlockKind, ContentBlock, FailureCode, FinishReason, LlmFailure, SseEvent, StreamChunk,
    StreamNote, TokenUsage, codes,
};
use dsh_llm_http::{Decoder, Progress, malformed};
use serde::Deserialize;
use serde_json::Value;

use crate::replay;

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    reasoning_details: Option<Vec<Value>>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Default)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
    #[serde(default)]
    completion_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

struct Open {
    index: u32,
    kind: BlockKind,
    id: String,
    name: String,
    text: String,
}

/// The decoder of one attempt.
pub struct OpenAiDecoder {
    blocks: Vec<Open>,
    reasoning: Option<usize>,
    text: Option<usize>,
    calls: BTreeMap<u64, usize>,
    details: Vec<Value>,
    usage: Option<TokenUsage>,
    finish: Option<String>,
    response_id: String,
    notes: Vec<StreamNote>,
    events: usize,
    done: bool,
}

impl Default for OpenAiDecoder {
    fn default() -> Self {
        Self::new()
    }
}

fn payload_error(e: &serde_json::Error) -> LlmFailure {
    let text = e.to_string();
    malformed(text.split(" at line ").next().unwrap_or(&text))
}

/// Adds a `reasoning_details` item: consecutive text/summary items of the same `index` and
/// `type` are one item, their text concatenated (the stream splits them like any delta).
fn merge_detail(details: &mut Vec<Value>, item: Value) {
    let key = |v: &Value| (v.get("type").cloned(), v.get("index").cloned());
    if let Some(last) = details.last_mut()
        && key(last) == key(&item)
    {
        for field in ["text", "summary", "data"] {
            if let Some(Value::String(add)) = item.get(field)
                && let Some(Value::String(have)) = last.get_mut(field)
            {
                have.push_str(add);
            }
        }
        if let (Some(obj), Some(new)) = (last.as_object_mut(), item.as_object()) {
            for (k, v) in new {
                if !matches!(k.as_str(), "text" | "summary" | "data") && !v.is_null() {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        return;
    }
    details.push(item);
}

fn detail_text(item: &Value) -> Option<&str> {
    match item.get("type").and_then(Value::as_str) {
        Some("reasoning.text") => item.get("text").and_then(Value::as_str),
        Some("reasoning.summary") => item.get("summary").and_then(Value::as_str),
        _ => None,
    }
}

impl OpenAiDecoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self {
            blocks: Vec::new(),
            reasoning: None,
            text: None,
            calls: BTreeMap::new(),
            details: Vec::new(),
            usage: None,
            finish: None,
            response_id: String::new(),
            notes: Vec::new(),
            events: 0,
            done: false,
        }
    }

    fn open(&mut self, kind: BlockKind, out: &mut Vec<StreamChunk>) -> usize {
        let index = self.blocks.len() as u32;
        out.push(StreamChunk::BlockStart {
            index,
            block_type: kind.clone(),
        });
        self.blocks.push(Open {
            index,
            kind,
            id: String::new(),
            name: String::new(),
            text: String::new(),
        });
        self.blocks.len() - 1
    }

    fn reasoning_delta(&mut self, text: &str, out: &mut Vec<StreamChunk>) {
        if text.is_empty() {
            return;
        }
        let slot = match self.reasoning {
            Some(s) => s,
            None => {
                let s = self.open(BlockKind::Reasoning, out);
                self.reasoning = Some(s);
                s
            }
        };
        let b = &mut self.blocks[slot];
        b.text.push_str(text);
        out.push(StreamChunk::ReasoningDelta {
            index: b.index,
            text: text.to_owned(),
        });
    }

    fn delta(&mut self, d: Delta, out: &mut Vec<StreamChunk>) {
        // One dialect per stream in practice; all three are read.
        if let Some(r) = d.reasoning_content.as_deref() {
            self.reasoning_delta(r, out);
        } else if let Some(r) = d.reasoning.as_deref() {
            self.reasoning_delta(r, out);
        } else if let Some(items) = d.reasoning_details {
            for item in items {
                if let Some(t) = detail_text(&item) {
                    let t = t.to_owned();
                    self.reasoning_delta(&t, out);
                }
                merge_detail(&mut self.details, item);
            }
        }
        if let Some(t) = d.content.filter(|t| !t.is_empty()) {
            let slot = match self.text {
                Some(s) => s,
                None => {
                    let s = self.open(BlockKind::Text, out);
                    self.text = Some(s);
                    s
                }
            };
            let b = &mut self.blocks[slot];
            b.text.push_str(&t);
            out.push(StreamChunk::TextDelta {
                index: b.index,
                text: t,
            });
        }
        for (n, call) in d.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let wire = call.index.unwrap_or(n as u64);
            let slot = match self.calls.get(&wire) {
                Some(s) => *s,
                None => {
                    let s = self.open(BlockKind::ToolCall, out);
                    self.calls.insert(wire, s);
                    let id = call
                        .id
                        .clone()
                        .filter(|i| !i.is_empty())
                        .unwrap_or_else(|| {
                            let id = format!("call_synth_{wire}_{}", self.response_id);
                            self.notes.push(StreamNote::SynthesizedToolCallId {
                                index: self.blocks[s].index,
                                id: id.clone(),
                            });
                            id
                        });
                    self.blocks[s].id = id;
                    s
                }
            };
            let (name, args) = match call.function {
                Some(f) => (f.name, f.arguments.unwrap_or_default()),
                None => (None, String::new()),
            };
            let b = &mut self.blocks[slot];
            if let Some(n) = name.as_ref().filter(|n| !n.is_empty()) {
                b.name.clone_from(n);
            }
            b.text.push_str(&args);
            out.push(StreamChunk::ToolCallDelta {
                index: b.index,
                id: b.id.clone(),
                name,
                arguments_delta: args,
            });
        }
    }

    fn finish(&mut self, notes_extra: Option<StreamNote>, out: &mut Vec<StreamChunk>) {
        self.done = true;
        for b in std::mem::take(&mut self.blocks) {
            let block = match b.kind {
                BlockKind::Reasoning => ContentBlock::Reasoning { text: b.text },
                BlockKind::ToolCall => ContentBlock::tool_call(b.id, b.name, b.text),
                _ => ContentBlock::Text { text: b.text },
            };
            out.push(StreamChunk::BlockEnd {
                index: b.index,
                block,
            });
        }
        let any_call = !self.calls.is_empty();
        let reason = match self.finish.as_deref() {
            Some("stop") | Some("end_turn") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            Some("length") => FinishReason::MaxTokens,
            Some("content_filter") => FinishReason::error(LlmFailure::new(
                codes::CONTENT_FILTER,
                "the answer was stopped by the content filter",
            )),
            Some("insufficient_system_resource") => FinishReason::error(LlmFailure::new(
                codes::SERVER,
                "the provider ran out of capacity mid-answer",
            )),
            Some(other) => FinishReason::error(LlmFailure::new(
                FailureCode::from(other.to_ascii_uppercase()),
                format!("unknown finish_reason `{other}`"),
            )),
            None if any_call => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        let empty = self.reasoning.is_none() && self.text.is_none() && !any_call;
        let reason = if empty && !matches!(reason, FinishReason::MaxTokens) && reason.is_success() {
            FinishReason::error(LlmFailure::new(
                codes::EMPTY_RESPONSE,
                "the endpoint completed the answer without any content",
            ))
        } else {
            reason
        };
        if let Some(u) = self.usage {
            out.push(StreamChunk::Usage { usage: u });
        }
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(notes_extra);
        let replay_state = (!self.details.is_empty())
            .then(|| replay::with_details(std::mem::take(&mut self.details)));
        out.push(StreamChunk::Finish {
            reason,
            replay_state,
            notes,
        });
    }
}

fn usage_of(u: WireUsage) -> TokenUsage {
    let prompt = u.prompt_tokens.unwrap_or(0);
    let hit = u
        .prompt_cache_hit_tokens
        .or_else(|| {
            u.prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
        })
        .unwrap_or(0)
        .min(prompt);
    TokenUsage {
        input_tokens: prompt - hit,
        output_tokens: u.completion_tokens.unwrap_or(0),
        total_tokens: u.total_tokens,
        cache_read_tokens: Some(hit),
        cache_write_tokens: None,
        reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    }
}

impl Decoder for OpenAiDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, LlmFailure> {
        if self.done {
            return Ok(Progress::Done);
        }
        if event.data.trim() == "[DONE]" {
            self.finish(None, out);
            return Ok(Progress::Done);
        }
        self.events += 1;
        let chunk: Chunk = serde_json::from_str(&event.data).map_err(|e| payload_error(&e))?;
        if let Some(e) = chunk.error {
            let message = e.message.unwrap_or_else(|| "stream error".to_owned());
            let kind = e.kind.unwrap_or_default();
            let code = dsh_llm_http::errors::code_of_type(&kind, &message)
                .or_else(|| {
                    e.code
                        .as_ref()
                        .and_then(Value::as_str)
                        .and_then(|c| dsh_llm_http::errors::code_of_type(c, &message))
                })
                .unwrap_or(codes::SERVER);
            return Err(LlmFailure::new(code, message));
        }
        if self.response_id.is_empty()
            && let Some(id) = chunk.id
        {
            self.response_id = id;
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(usage_of(u));
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(d) = choice.delta {
                self.delta(d, out);
            }
            if choice.finish_reason.is_some() {
                self.finish = choice.finish_reason;
            }
        }
        Ok(Progress::Continue)
    }

    fn end_without_done(&mut self, out: &mut Vec<StreamChunk>) -> bool {
        if self.done || self.finish.is_none() {
            return false;
        }
        self.finish(Some(StreamNote::MissingDone), out);
        true
    }

    fn events_seen(&self) -> usize {
        self.events
    }
}
