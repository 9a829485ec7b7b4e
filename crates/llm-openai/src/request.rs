//! Chat-completions request bodies: byte-deterministic, keys in dsh's order (`model, messages,
//! stream, stream_options?, reasoning?, reasoning_effort?, tools?, temperature?, max_tokens |
//! max_completion_tokens, stop?`), `content` never null, raw tool arguments, reasoning passed
//! back in the row's dialect.

use std::borrow::Cow;

use dsh_llm::attachments::{AttachmentLookup, file_placeholder, image_data_url, image_placeholder};
use dsh_llm::{
    ContentBlock, LlmFailure, LlmRequest, Message, Modality, ReasoningEffort, Role, codes,
};
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

/// `content`: a string, or parts when the message carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    content: Content<'a>,
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

fn text_of(m: &Message) -> Cow<'_, str> {
    if let [ContentBlock::Text { text }] = m.content.as_slice() {
        return Cow::Borrowed(text);
    }
    let mut s = String::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text } => s.push_str(text),
            ContentBlock::File { attachment } => s.push_str(&file_placeholder(attachment)),
            ContentBlock::Image {
                attachment,
                offloaded,
            } => s.push_str(&image_placeholder(attachment, *offloaded == Some(true))),
            _ => {}
        }
    }
    Cow::Owned(s)
}

/// Whether `m` holds an image that is sent (not offloaded).
fn has_image(m: &Message) -> bool {
    m.content
        .iter()
        .any(|b| matches!(b, ContentBlock::Image { offloaded, .. } if *offloaded != Some(true)))
}

/// The blocks of `m` as parts, images as `data:` URLs; with `images_only`, only the images.
fn parts<'a>(
    m: &'a Message,
    images: &Images<'_>,
    images_only: bool,
    out: &mut Vec<Part<'a>>,
) -> Result<(), LlmFailure> {
    for b in &m.content {
        let part = match b {
            ContentBlock::Image {
                attachment,
                offloaded,
            } if *offloaded != Some(true) => Part::ImageUrl {
                image_url: ImageUrl {
                    url: image_data_url(images.lookup, attachment, images.label)?,
                },
            },
            _ if images_only => continue,
            ContentBlock::Text { text } if !text.is_empty() => Part::Text {
                text: Cow::Borrowed(text),
            },
            ContentBlock::File { attachment } => Part::Text {
                text: Cow::Owned(file_placeholder(attachment)),
            },
            ContentBlock::Image { attachment, .. } => Part::Text {
                text: Cow::Owned(image_placeholder(attachment, true)),
            },
            _ => continue,
        };
        out.push(part);
    }
    Ok(())
}

/// The text of a tool message whose images travel in a following user message.
fn text_without_images(m: &Message) -> String {
    let mut s = String::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text } => s.push_str(text),
            ContentBlock::File { attachment } => s.push_str(&file_placeholder(attachment)),
            ContentBlock::Image {
                offloaded: Some(true),
                attachment,
            } => s.push_str(&image_placeholder(attachment, true)),
            _ => {}
        }
    }
    s
}

/// Where image bytes come from, on routes whose model accepts images.
#[derive(Clone, Copy)]
pub struct Images<'a> {
    /// The attachment store lookup.
    pub lookup: &'a AttachmentLookup,
    /// The provider name for refusals.
    pub label: &'a str,
}

fn message<'a>(role: &'static str, content: Cow<'a, str>) -> WireMessage<'a> {
    WireMessage {
        role,
        tool_call_id: None,
        content: Content::Text(content),
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

/// Writes the body of one attempt. When the model accepts images ([`Modality::Image`]), a
/// user message's images are sent as `image_url` parts (`data:` URLs read through `images`);
/// a tool result's images follow the run of tool messages as one user message (tool messages
/// carry text only). On text-only models, and for offloaded images, the §9.7 placeholder text.
pub fn body(
    req: &LlmRequest,
    options: &BodyOptions,
    images: Images<'_>,
) -> Result<Vec<u8>, LlmFailure> {
    let vision = req.call.model.input_modalities.contains(&Modality::Image);
    let mut messages = Vec::with_capacity(req.messages.len());
    // Tool results' images, sent after the run of tool messages they belong to.
    let mut pending: Vec<Part<'_>> = Vec::new();
    for m in &req.messages {
        let m: &Message = m;
        if m.role != Role::Tool && !pending.is_empty() {
            let mut w = message("user", Cow::Borrowed(""));
            w.content = Content::Parts(std::mem::take(&mut pending));
            messages.push(w);
        }
        match m.role {
            Role::System => messages.push(message("system", text_of(m))),
            Role::User if vision && has_image(m) => {
                let mut p = Vec::new();
                parts(m, &images, false, &mut p)?;
                let mut w = message("user", Cow::Borrowed(""));
                w.content = Content::Parts(p);
                messages.push(w);
            }
            Role::User => messages.push(message("user", text_of(m))),
            Role::Developer => {}
            Role::Assistant => messages.push(assistant(m, options.pass_back)),
            Role::Tool if vision && has_image(m) => {
                let Some(id) = m.tool_call_id.as_deref() else {
                    return Err(LlmFailure::new(
                        codes::INVALID_REQUEST,
                        format!("tool message `{}` has no toolCallId", m.id),
                    ));
                };
                let text = text_without_images(m);
                let mut w = message(
                    "tool",
                    Cow::Owned(if text.is_empty() {
                        "(no output)".to_owned()
                    } else {
                        text
                    }),
                );
                w.tool_call_id = Some(id);
                messages.push(w);
                pending.push(Part::Text {
                    text: Cow::Owned(format!("[images returned by tool call {id}]")),
                });
                parts(m, &images, true, &mut pending)?;
            }
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
    if !pending.is_empty() {
        let mut w = message("user", Cow::Borrowed(""));
        w.content = Content::Parts(pending);
        messages.push(w);
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
