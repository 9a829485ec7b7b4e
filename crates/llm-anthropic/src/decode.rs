//! Messages API SSE events → [`StreamChunk`]s.
//!
//! `message_start` (usage) → `content_block_start` / `_delta` / `_stop` per block →
//! `message_delta` (stop reason, output usage) → `message_stop`. `ping` and unknown event types
//! are ignored; an `error` event ends the attempt with its mapped code.

use std::collections::HashMap;

use dsh_llm::{
    BlockKind, ContentBlock, FailureCode, FinishReason, LlmFailure, SseEvent, StreamChunk,
    StreamNote, TokenUsage, codes,
};
use dsh_llm_http::{Decoder, Progress, malformed};
use serde::Deserialize;
use serde_json::Value;

use crate::replay::{BlockState, ReplayState, Response, VERSION};

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: Delta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorBody,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(clippy::enum_variant_names)] // the wire names
enum Delta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize, Default)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

struct Open {
    index: u32,
    kind: BlockKind,
    id: String,
    name: String,
    text: String,
    signature: Option<String>,
    redacted: Option<String>,
    /// A tool input sent whole in `content_block_start` (not streamed).
    start_input: Option<String>,
}

/// The decoder of one attempt.
pub struct AnthropicDecoder {
    kind: &'static str,
    model: String,
    open: HashMap<u64, Open>,
    next_index: u32,
    blocks: Vec<BlockState>,
    tool_calls: usize,
    usage: WireUsage,
    stop_reason: Option<String>,
    events: usize,
    done: bool,
}

impl AnthropicDecoder {
    /// A decoder writing replay states of `kind` for `model` (the requested model, unless the
    /// stream names another in `message_start`).
    pub fn new(kind: &'static str, model: &str) -> Self {
        Self {
            kind,
            model: model.to_owned(),
            open: HashMap::new(),
            next_index: 0,
            blocks: Vec::new(),
            tool_calls: 0,
            usage: WireUsage::default(),
            stop_reason: None,
            events: 0,
            done: false,
        }
    }

    fn merge_usage(&mut self, u: WireUsage) {
        let m = &mut self.usage;
        m.input_tokens = u.input_tokens.or(m.input_tokens);
        m.output_tokens = u.output_tokens.or(m.output_tokens);
        m.cache_creation_input_tokens = u
            .cache_creation_input_tokens
            .or(m.cache_creation_input_tokens);
        m.cache_read_input_tokens = u.cache_read_input_tokens.or(m.cache_read_input_tokens);
    }

    fn token_usage(&self) -> TokenUsage {
        let u = self.usage;
        let input = u.input_tokens.unwrap_or(0);
        let output = u.output_tokens.unwrap_or(0);
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: Some(
                input
                    + output
                    + u.cache_read_input_tokens.unwrap_or(0)
                    + u.cache_creation_input_tokens.unwrap_or(0),
            ),
            cache_read_tokens: u.cache_read_input_tokens,
            cache_write_tokens: u.cache_creation_input_tokens,
            reasoning_tokens: None,
        }
    }

    fn start(
        &mut self,
        wire: u64,
        block: StartBlock,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), LlmFailure> {
        if self.open.contains_key(&wire) {
            return Err(malformed(&format!("content block {wire} started twice")));
        }
        let index = self.next_index;
        let mut open = Open {
            index,
            kind: BlockKind::Text,
            id: String::new(),
            name: String::new(),
            text: String::new(),
            signature: None,
            redacted: None,
            start_input: None,
        };
        match block {
            StartBlock::Text { text } => {
                out.push(StreamChunk::BlockStart {
                    index,
                    block_type: BlockKind::Text,
                });
                if !text.is_empty() {
                    out.push(StreamChunk::TextDelta {
                        index,
                        text: text.clone(),
                    });
                }
                open.text = text;
            }
            StartBlock::Thinking {
                thinking,
                signature,
            } => {
                open.kind = BlockKind::Reasoning;
                out.push(StreamChunk::BlockStart {
                    index,
                    block_type: BlockKind::Reasoning,
                });
                if !thinking.is_empty() {
                    out.push(StreamChunk::ReasoningDelta {
                        index,
                        text: thinking.clone(),
                    });
                }
                open.text = thinking;
                open.signature = signature.filter(|s| !s.is_empty());
            }
            StartBlock::RedactedThinking { data } => {
                open.kind = BlockKind::Reasoning;
                out.push(StreamChunk::BlockStart {
                    index,
                    block_type: BlockKind::Reasoning,
                });
                open.redacted = Some(data);
            }
            StartBlock::ToolUse { id, name, input } => {
                open.kind = BlockKind::ToolCall;
                out.push(StreamChunk::BlockStart {
                    index,
                    block_type: BlockKind::ToolCall,
                });
                out.push(StreamChunk::ToolCallDelta {
                    index,
                    id: id.clone(),
                    name: Some(name.clone()),
                    arguments_delta: String::new(),
                });
                open.start_input = input
                    .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                    .map(|v| v.to_string());
                open.id = id;
                open.name = name;
            }
            // A block type this build does not know: nothing is emitted for it.
            StartBlock::Unknown => return Ok(()),
        }
        self.next_index += 1;
        self.open.insert(wire, open);
        Ok(())
    }

    fn delta(
        &mut self,
        wire: u64,
        delta: Delta,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), LlmFailure> {
        let Some(open) = self.open.get_mut(&wire) else {
            // Deltas of an unknown block type are ignored with it.
            return match delta {
                Delta::Unknown => Ok(()),
                _ => Err(malformed(&format!(
                    "delta for content block {wire}, which is not open"
                ))),
            };
        };
        let index = open.index;
        match (delta, &open.kind) {
            (Delta::TextDelta { text }, BlockKind::Text) => {
                open.text.push_str(&text);
                out.push(StreamChunk::TextDelta { index, text });
            }
            (Delta::ThinkingDelta { thinking }, BlockKind::Reasoning) => {
                open.text.push_str(&thinking);
                out.push(StreamChunk::ReasoningDelta {
                    index,
                    text: thinking,
                });
            }
            (Delta::SignatureDelta { signature }, BlockKind::Reasoning) => {
                open.signature.get_or_insert_default().push_str(&signature);
            }
            (Delta::InputJsonDelta { partial_json }, BlockKind::ToolCall) => {
                if partial_json.is_empty() {
                    return Ok(());
                }
                open.text.push_str(&partial_json);
                out.push(StreamChunk::ToolCallDelta {
                    index,
                    id: open.id.clone(),
                    name: None,
                    arguments_delta: partial_json,
                });
            }
            (Delta::Unknown, _) => {}
            (_, kind) => {
                return Err(malformed(&format!(
                    "delta of the wrong type for {} block {wire}",
                    kind.as_str()
                )));
            }
        }
        Ok(())
    }

    fn stop(&mut self, wire: u64, out: &mut Vec<StreamChunk>) -> Result<(), LlmFailure> {
        let Some(mut open) = self.open.remove(&wire) else {
            return Ok(());
        };
        let index = open.index;
        let (block, state) = match open.kind {
            BlockKind::Text => (
                ContentBlock::Text { text: open.text },
                BlockState {
                    kind: "text".into(),
                    signature: None,
                    redacted: None,
                },
            ),
            BlockKind::Reasoning => (
                ContentBlock::Reasoning { text: open.text },
                BlockState {
                    kind: "reasoning".into(),
                    signature: open.signature,
                    redacted: open.redacted,
                },
            ),
            _ => {
                if open.text.is_empty() {
                    let whole = open.start_input.take().unwrap_or_else(|| "{}".to_owned());
                    out.push(StreamChunk::ToolCallDelta {
                        index,
                        id: open.id.clone(),
                        name: None,
                        arguments_delta: whole.clone(),
                    });
                    open.text = whole;
                }
                self.tool_calls += 1;
                (
                    ContentBlock::tool_call(open.id, open.name, open.text),
                    BlockState {
                        kind: "tool-call".into(),
                        signature: None,
                        redacted: None,
                    },
                )
            }
        };
        out.push(StreamChunk::BlockEnd { index, block });
        self.blocks.push(state);
        Ok(())
    }

    fn finish(&mut self, notes: Vec<StreamNote>, out: &mut Vec<StreamChunk>) {
        self.done = true;
        let reason = match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence" | "pause_turn") => FinishReason::Stop,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens") => FinishReason::MaxTokens,
            Some("refusal") => FinishReason::error(LlmFailure::new(
                codes::CONTENT_FILTER,
                "the model refused to answer (stop_reason refusal)",
            )),
            Some("model_context_window_exceeded") => FinishReason::error(LlmFailure::new(
                codes::CONTEXT_WINDOW_EXCEEDED,
                "the answer hit the model's context window",
            )),
            Some(other) => FinishReason::error(LlmFailure::new(
                FailureCode::from(other.to_ascii_uppercase()),
                format!("unknown stop_reason `{other}`"),
            )),
            None if self.tool_calls > 0 => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        let reason = if reason.is_success()
            && !matches!(reason, FinishReason::MaxTokens)
            && self.blocks.is_empty()
        {
            FinishReason::error(LlmFailure::new(
                codes::EMPTY_RESPONSE,
                "the Messages API returned a message without content",
            ))
        } else {
            reason
        };
        out.push(StreamChunk::Usage {
            usage: self.token_usage(),
        });
        let replay = ReplayState {
            response: Response {
                kind: self.kind.to_owned(),
                version: VERSION,
                model: self.model.clone(),
            },
            blocks: std::mem::take(&mut self.blocks),
        };
        out.push(StreamChunk::Finish {
            reason,
            replay_state: Some(replay.to_value()),
            notes,
        });
    }
}

fn payload_error(e: &serde_json::Error) -> LlmFailure {
    // serde's message names the field and the expected type, never the payload itself.
    let text = e.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    malformed(what)
}

impl Decoder for AnthropicDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, LlmFailure> {
        if self.done {
            return Ok(Progress::Done);
        }
        self.events += 1;
        let ev: Event = serde_json::from_str(&event.data).map_err(|e| payload_error(&e))?;
        match ev {
            Event::MessageStart { message } => {
                if let Some(m) = message.model.filter(|m| !m.is_empty()) {
                    self.model = m;
                }
                if let Some(u) = message.usage {
                    self.merge_usage(u);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block, out)?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            Event::ContentBlockStop { index } => self.stop(index, out)?,
            Event::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(u) = usage {
                    self.merge_usage(u);
                }
            }
            Event::MessageStop => {
                if let Some(open) = self.open.values().next() {
                    return Err(malformed(&format!(
                        "message_stop while content block {} is open",
                        open.index
                    )));
                }
                self.finish(Vec::new(), out);
                return Ok(Progress::Done);
            }
            Event::Ping | Event::Unknown => {}
            Event::Error { error } => {
                let code = dsh_llm_http::errors::code_of_type(&error.kind, &error.message)
                    .unwrap_or(codes::SERVER);
                let message = if error.message.is_empty() {
                    format!("stream error `{}`", error.kind)
                } else {
                    error.message
                };
                return Err(LlmFailure::new(code, message));
            }
        }
        Ok(Progress::Continue)
    }

    fn end_without_done(&mut self, out: &mut Vec<StreamChunk>) -> bool {
        if self.done || self.stop_reason.is_none() || !self.open.is_empty() {
            return false;
        }
        self.finish(vec![StreamNote::MissingDone], out);
        true
    }

    fn events_seen(&self) -> usize {
        self.events
    }
}
