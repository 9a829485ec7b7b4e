//! Chat-completions request bodies: byte-deterministic, keys in dsh's order (`model, messages,
//! stream, stream_options?, reasoning?, reasoning_effort?, tools?, temperature?, max_tokens |
//! max_completion_tokens, stop?`), `content` never null, raw tool arguments, reasoning passed
//! back in the row's dialect.

use std::borrow::Cow;

use dsh_llm::{ContentBlock, LlmFailure, LlmRequest, Message, ReasoningEffort, Role, codes};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::{EffortParam, MaxTokensParam, ReasoningPassBack};
use crate::replay;

/// What shapes a body besides the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyOptions {
    /// Which member carries reasoning back.
    pub pass_back: ReasoningPassBack,
    /// How efforts reach the wire.
    pub effort: EffortParam,
    /// Which member caps the output.
    pub max_tokens: MaxTokensParam,
    /// `stream_options.include_usage`.
    pub stream_usage: bool,
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    content: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_details: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireCall<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ReasoningParam<'a> {
    Effort { effort: &'a str },
    Enabled { enabled: bool },
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<ReasoningParam<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
}

fn short_hash(attachment_id: &str) -> &str {
    attachment_id.get(7..15).unwrap_or(attachment_id)
}

fn text_of(m: &Message) -> Cow<'_, str> {
    if let [ContentBlock::Text { text }] = m.content.as_slice() {
        return Cow::Borrowed(text);
    }
    let mut s = String::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text } => s.push_str(text),
            ContentBlock::File { attachment } => s.push_str(&format!(
                "[File \"{}\" ({} bytes, sha256:{}) was uploaded, but the current execution environment cannot access a readable path. Report that limitation if its contents are needed; do not claim to have read it.]",
                attachment.name,
                attachment.bytes,
                short_hash(&attachment.attachment_id)
            )),
            ContentBlock::Image { attachment, .. } => s.push_str(&format!(
                "[image omitted because this route sends text only; attachment sha256:{}]",
                short_hash(&attachment.attachment_id)
            )),
            _ => {}
        }
    }
    Cow::Owned(s)
}

fn message<'a>(role: &'static str, content: Cow<'a, str>) -> WireMessage<'a> {
    WireMessage {
        role,
        tool_call_id: None,
        content,
        reasoning_content: None,
        reasoning: None,
        reasoning_details: None,
        tool_calls: Vec::new(),
    }
}

fn assistant<'a>(m: &'a Message, pass_back: ReasoningPassBack) -> WireMessage<'a> {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text: t } => text.push_str(t),
            ContentBlock::Reasoning { text: t } => reasoning.push_str(t),
            ContentBlock::ToolCall(c) => calls.push(WireCall {
                id: &c.id,
                kind: "function",
                function: WireFunction {
                    name: &c.name,
                    arguments: &c.arguments,
                },
            }),
            _ => {}
        }
    }
    let mut w = message("assistant", Cow::Owned(text));
    w.tool_calls = calls;
    match pass_back {
        ReasoningPassBack::ReasoningContent if !reasoning.is_empty() => {
            w.reasoning_content = Some(reasoning);
        }
        ReasoningPassBack::Reasoning if !reasoning.is_empty() => w.reasoning = Some(reasoning),
        ReasoningPassBack::ReasoningDetails => {
            w.reasoning_details = m
                .source
                .replay_state()
                .and_then(replay::reasoning_details)
                .and_then(|v| serde_json::value::to_raw_value(v).ok());
        }
        _ => {}
    }
    w
}

fn effort_wire(e: &ReasoningEffort) -> Option<&str> {
    match e {
        ReasoningEffort::Off => None,
        other => Some(other.as_str()),
    }
}

/// Writes the body of one attempt.
pub fn body(req: &LlmRequest, options: &BodyOptions) -> Result<Vec<u8>, LlmFailure> {
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        let m: &Message = m;
        match m.role {
            Role::System => messages.push(message("system", text_of(m))),
            Role::User => messages.push(message("user", text_of(m))),
            Role::Developer => {}
            Role::Assistant => messages.push(assistant(m, options.pass_back)),
            Role::Tool => {
                let Some(id) = m.tool_call_id.as_deref() else {
                    return Err(LlmFailure::new(
                        codes::INVALID_REQUEST,
                        format!("tool message `{}` has no toolCallId", m.id),
                    ));
                };
                let text = text_of(m);
                let mut w = message(
                    "tool",
                    if text.is_empty() {
                        Cow::Borrowed("(no output)")
                    } else {
                        text
                    },
                );
                w.tool_call_id = Some(id);
                messages.push(w);
            }
        }
    }
    let effort = req.call.effort.as_ref();
    let (reasoning, reasoning_effort) = match (options.effort, effort) {
        (EffortParam::None, _) | (_, None) => (None, None),
        (EffortParam::ReasoningEffort, Some(e)) => (None, effort_wire(e)),
        (EffortParam::Reasoning, Some(e)) => match effort_wire(e) {
            Some(effort) => (Some(ReasoningParam::Effort { effort }), None),
            None => (Some(ReasoningParam::Enabled { enabled: false }), None),
        },
    };
    let (max_tokens, max_completion_tokens) = match options.max_tokens {
        MaxTokensParam::MaxTokens => (Some(req.call.max_tokens), None),
        MaxTokensParam::MaxCompletionTokens => (None, Some(req.call.max_tokens)),
    };
    let body = Body {
        model: &req.call.model.id,
        messages,
        stream: true,
        stream_options: options.stream_usage.then_some(StreamOptions {
            include_usage: true,
        }),
        reasoning,
        reasoning_effort,
        tools: req
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireToolFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        temperature: req.call.temperature,
        max_tokens,
        max_completion_tokens,
        stop: &req.call.stop,
    };
    serde_json::to_vec(&body).map_err(|e| {
        LlmFailure::new(
            codes::INVALID_REQUEST,
            format!("cannot serialise the request: {e}"),
        )
    })
}
