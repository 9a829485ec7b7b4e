//! Messages API request bodies: byte-deterministic, keys in the original's order
//! (`model, stream, messages, max_tokens, thinking, output_config?, system?, temperature?,
//! stop_sequences?, tools?`), same-role neighbours merged, thinking replayed with its signature.

use dsh_llm::attachments::{AttachmentLookup, file_placeholder, image_base64, image_placeholder};
use dsh_llm::{
    ContentBlock, ImageRef, LlmFailure, LlmRequest, Message, Modality, ReasoningEffort, Role, codes,
};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::ThinkingStyle;
use crate::replay::ReplayState;

/// What shapes a body besides the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyOptions {
    /// How efforts become `thinking`.
    pub thinking: ThinkingStyle,
    /// Place `cache_control` breakpoints.
    pub cache_breakpoints: bool,
    /// `replayState.response.kind` accepted for signatures.
    pub replay_kind: &'static str,
    /// Keep a thinking block whose signature is unknown (DeepSeek accepts it; Anthropic
    /// rejects it, so there it is dropped).
    pub unsigned_thinking: bool,
}

#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Option<CacheControl> = Some(CacheControl { kind: "ephemeral" });

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: std::borrow::Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ToolContent<'a>,
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
    },
}

/// A `tool_result`'s `content`: a string, or blocks when the result carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolContent<'a> {
    Text(String),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: String,
}

/// Where image bytes come from, on routes whose model accepts images.
#[derive(Clone, Copy)]
pub struct Images<'a> {
    /// The attachment store lookup.
    pub lookup: &'a AttachmentLookup,
    /// The provider name for refusals.
    pub label: &'a str,
}

impl Images<'_> {
    fn block<'a>(&self, image: &'a ImageRef) -> Result<Block<'a>, LlmFailure> {
        Ok(Block::Image {
            source: ImageSource {
                kind: "base64",
                media_type: &image.media_type,
                data: image_base64(self.lookup, image, self.label)?,
            },
        })
    }
}

/// The image of `block` when it is sent (not offloaded).
fn sent_image(block: &ContentBlock) -> Option<&ImageRef> {
    match block {
        ContentBlock::Image {
            attachment,
            offloaded,
        } if *offloaded != Some(true) => Some(attachment),
        _ => None,
    }
}

impl Block<'_> {
    /// Marks the block as a cache breakpoint; `false` for blocks that cannot carry one.
    fn mark(&mut self) -> bool {
        match self {
            Block::Text { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => {
                *cache_control = EPHEMERAL;
                true
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::Image { .. } => false,
        }
    }
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_tokens: Option<u64>,
}

#[derive(Serialize)]
struct OutputConfig<'a> {
    effort: &'a str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(String),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    defer_loading: Option<bool>,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    messages: Vec<WireMessage<'a>>,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

/// The text a user/tool/system block contributes (images and files as placeholders).
fn block_text(block: &ContentBlock) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    match block {
        ContentBlock::Text { text } => Some(Cow::Borrowed(text.as_str())),
        ContentBlock::File { attachment } => Some(Cow::Owned(file_placeholder(attachment))),
        ContentBlock::Image {
            attachment,
            offloaded,
        } => Some(Cow::Owned(image_placeholder(
            attachment,
            *offloaded == Some(true),
        ))),
        _ => None,
    }
}

/// A `tool_use` input: the raw argument string when it is a JSON object (bytes kept exactly),
/// else `{}`.
#[derive(Serialize)]
#[serde(untagged)]
enum Input<'a> {
    Raw(&'a RawValue),
    Empty(serde_json::Map<String, Value>),
}

fn tool_input(arguments: &str) -> Input<'_> {
    if arguments.trim_start().starts_with('{')
        && let Ok(raw) = serde_json::from_str::<&RawValue>(arguments)
    {
        return Input::Raw(raw);
    }
    Input::Empty(serde_json::Map::new())
}

fn push(messages: &mut Vec<WireMessage<'_>>, role: &'static str) {
    if messages.last().is_none_or(|m| m.role != role) {
        messages.push(WireMessage {
            role,
            content: Vec::new(),
        });
    }
}

fn assistant_blocks<'a>(
    m: &'a Message,
    model: &str,
    options: &BodyOptions,
    out: &mut Vec<Block<'a>>,
) {
    let replay = m
        .source
        .replay_state()
        .and_then(|v| ReplayState::valid_for(v, options.replay_kind, model, &m.content));
    for (i, b) in m.content.iter().enumerate() {
        match b {
            ContentBlock::Reasoning { text } => {
                let slot = replay.as_ref().and_then(|r| r.blocks.get(i));
                if let Some(data) = slot.and_then(|s| s.redacted.clone()) {
                    out.push(Block::RedactedThinking { data });
                    continue;
                }
                let signature = slot.and_then(|s| s.signature.clone());
                if signature.is_some() || options.unsigned_thinking {
                    out.push(Block::Thinking {
                        thinking: text,
                        signature,
                    });
                }
            }
            ContentBlock::Text { text } if !text.is_empty() => out.push(Block::Text {
                text: std::borrow::Cow::Borrowed(text),
                cache_control: None,
            }),
            ContentBlock::ToolCall(c) => out.push(Block::ToolUse {
                id: &c.id,
                name: &c.name,
                input: tool_input(&c.arguments),
                cache_control: None,
            }),
            _ => {}
        }
    }
}

/// Writes the body of one attempt. When the model accepts images ([`Modality::Image`]), user
/// and tool-result images are sent as `image` blocks with a base64 source read through
/// `images`; on text-only models, and for offloaded images, the §9.7 placeholder text.
pub fn body(
    req: &LlmRequest,
    options: &BodyOptions,
    images: Images<'_>,
) -> Result<Vec<u8>, LlmFailure> {
    let vision = req.call.model.input_modalities.contains(&Modality::Image);
    let model = req.call.model.id.as_str();
    let mut system_parts: Vec<&Message> = Vec::new();
    let mut messages: Vec<WireMessage<'_>> = Vec::new();
    let mut head = true;
    for m in &req.messages {
        let m: &Message = m;
        match m.role {
            Role::System if head => system_parts.push(m),
            Role::System => {
                // A changed prompt later in history (routes with `systemPromptUpdate`).
                push(&mut messages, "system");
                if let Some(last) = messages.last_mut() {
                    last.content
                        .extend(
                            m.content
                                .iter()
                                .filter_map(block_text)
                                .map(|text| Block::Text {
                                    text,
                                    cache_control: None,
                                }),
                        );
                }
            }
            Role::Developer => {}
            Role::User => {
                head = false;
                push(&mut messages, "user");
                if let Some(last) = messages.last_mut() {
                    for b in &m.content {
                        if let (true, Some(image)) = (vision, sent_image(b)) {
                            last.content.push(images.block(image)?);
                        } else if let Some(text) = block_text(b).filter(|t| !t.is_empty()) {
                            last.content.push(Block::Text {
                                text,
                                cache_control: None,
                            });
                        }
                    }
                }
            }
            Role::Tool => {
                head = false;
                let Some(id) = m.tool_call_id.as_deref() else {
                    return Err(LlmFailure::new(
                        codes::INVALID_REQUEST,
                        format!("tool message `{}` has no toolCallId", m.id),
                    ));
                };
                let mut text = String::new();
                let mut pictures = Vec::new();
                for b in &m.content {
                    if let (true, Some(image)) = (vision, sent_image(b)) {
                        pictures.push(images.block(image)?);
                    } else if let Some(t) = block_text(b) {
                        text.push_str(&t);
                    }
                }
                if text.is_empty() {
                    text.push_str("(no output)");
                }
                let content = if pictures.is_empty() {
                    ToolContent::Text(text)
                } else {
                    let mut blocks = vec![Block::Text {
                        text: std::borrow::Cow::Owned(text),
                        cache_control: None,
                    }];
                    blocks.extend(pictures);
                    ToolContent::Blocks(blocks)
                };
                push(&mut messages, "user");
                if let Some(last) = messages.last_mut() {
                    last.content.push(Block::ToolResult {
                        tool_use_id: id,
                        content,
                        is_error: m.is_error.unwrap_or(false),
                        cache_control: None,
                    });
                }
            }
            Role::Assistant => {
                head = false;
                let mut blocks = Vec::new();
                assistant_blocks(m, model, options, &mut blocks);
                if !blocks.is_empty() {
                    push(&mut messages, "assistant");
                    if let Some(last) = messages.last_mut() {
                        last.content.extend(blocks);
                    }
                }
            }
        }
    }
    messages.retain(|m| !m.content.is_empty());
    let system_text = || {
        let mut s = String::new();
        for (i, m) in system_parts.iter().enumerate() {
            if i > 0 {
                s.push_str("\n\n");
            }
            for b in &m.content {
                if let Some(t) = block_text(b) {
                    s.push_str(&t);
                }
            }
        }
        s
    };
    let system = if system_parts.is_empty() {
        None
    } else if options.cache_breakpoints {
        Some(System::Blocks(vec![Block::Text {
            text: std::borrow::Cow::Owned(system_text()),
            cache_control: EPHEMERAL,
        }]))
    } else {
        Some(System::Text(system_text()))
    };
    if options.cache_breakpoints {
        place_breakpoints(&mut messages);
    }
    let (thinking, output_config) = thinking(req, options.thinking);
    let body = Body {
        model,
        stream: true,
        messages,
        max_tokens: req.call.max_tokens,
        thinking,
        output_config,
        system,
        temperature: req.call.temperature,
        stop_sequences: &req.call.stop,
        tools: req
            .tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
                defer_loading: t.defer_loading.filter(|d| *d),
            })
            .collect(),
    };
    serde_json::to_vec(&body).map_err(|e| {
        LlmFailure::new(
            codes::INVALID_REQUEST,
            format!("cannot serialise the request: {e}"),
        )
    })
}

/// Breakpoints on the last block of the last message (this request's end: the next step reads
/// it) and of the user message before the last assistant turn (the previous request's end: this
/// step reads it). With the system breakpoint that is three of Anthropic's four. A resumed
/// session rebuilds the same body, so its breakpoints land on the same blocks and hit.
fn place_breakpoints(messages: &mut [WireMessage<'_>]) {
    let n = messages.len();
    if n == 0 {
        return;
    }
    let mark_last = |m: &mut WireMessage<'_>| {
        for b in m.content.iter_mut().rev() {
            if b.mark() {
                return;
            }
        }
    };
    mark_last(&mut messages[n - 1]);
    if let Some(prev) = messages[..n - 1].iter().rposition(|m| m.role == "user")
        && prev + 1 < n - 1
    {
        mark_last(&mut messages[prev]);
    }
}

fn thinking(
    req: &LlmRequest,
    style: ThinkingStyle,
) -> (Option<Thinking>, Option<OutputConfig<'_>>) {
    let effort = req.call.effort.as_ref();
    match style {
        ThinkingStyle::Effort => match effort {
            None => (None, None),
            Some(ReasoningEffort::Off) => (
                Some(Thinking {
                    kind: "disabled",
                    budget_tokens: None,
                }),
                None,
            ),
            Some(e) => (
                Some(Thinking {
                    kind: "enabled",
                    budget_tokens: None,
                }),
                Some(OutputConfig { effort: e.as_str() }),
            ),
        },
        ThinkingStyle::Budget => {
            let budget = match effort {
                None | Some(ReasoningEffort::Off) => return (None, None),
                Some(ReasoningEffort::Low) => 4096,
                Some(ReasoningEffort::Max) => 32_768,
                Some(_) => 16_384,
            };
            let cap = req.call.max_tokens.saturating_sub(1).max(1024);
            (
                Some(Thinking {
                    kind: "enabled",
                    budget_tokens: Some(u64::min(budget, cap)),
                }),
                None,
            )
        }
    }
}
