//! Request body serialisation (`wire-protocol.md` §3–§5).
//!
//! Byte-deterministic: the same request gives the same bytes, keys in the fixed order
//! `model, messages, stream, stream_options, thinking, reasoning_effort, tools, temperature,
//! max_tokens, stop`, absent optional fields omitted (never `null`), and the messages of history
//! N+1 byte-extend those of history N (each message serialises independently of what follows).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use dsh_llm::attachments::{AttachmentLookup, file_placeholder, image_data_url, image_placeholder};
use dsh_llm::{
    ContentBlock, ImageRef, LlmFailure, LlmRequest, Message, Modality, ReasoningEffort, Role,
    ToolSpec, codes,
};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Serialisation switches that come from the adapter's configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BodyOptions {
    /// Send `"reasoning_content":""` on assistant messages without reasoning while thinking is
    /// enabled (`wire-protocol.md` §5, off by default).
    pub reasoning_placeholder: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(flatten)]
    tail: Tail<'a>,
}

/// The members of [`Body`] after `messages` (serialised on their own by [`body_extending`]).
#[derive(Serialize)]
struct Tail<'a> {
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    /// The `tools` array as written by [`tools_json`] (absent when no tools are offered).
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    max_tokens: u64,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionDecl<'a>,
}

#[derive(Serialize)]
struct WireFunctionDecl<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// A user or system message's `content`: a string, or parts when it carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// One user content part (`deepseek-wire.md` §3 rule 5).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

/// Where image bytes come from: the attachment store, read on routes whose model accepts
/// images (the catalog's `vision`, [`Modality::Image`]).
#[derive(Clone, Copy)]
pub struct Images<'a> {
    /// The attachment store lookup.
    pub lookup: &'a AttachmentLookup,
}

/// What one body's messages are written with.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    thinking_enabled: bool,
    opts: BodyOptions,
    /// `Some` when the model accepts images.
    vision: Option<Images<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireMessage<'a> {
    Plain {
        role: &'static str,
        content: Content,
    },
    Assistant {
        role: &'static str,
        content: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        role: &'static str,
        tool_call_id: &'a str,
        content: String,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// The text a block contributes to a user/tool/system message (`session-format.md` §9.7).
fn push_block_text(out: &mut String, block: &ContentBlock) {
    match block {
        ContentBlock::Text { text } => out.push_str(text),
        ContentBlock::File { attachment } => out.push_str(&file_placeholder(attachment)),
        ContentBlock::Image {
            attachment,
            offloaded,
        } => out.push_str(&image_placeholder(attachment, *offloaded == Some(true))),
        _ => {}
    }
}

fn text_of(m: &Message) -> String {
    let mut s = String::new();
    for b in &m.content {
        push_block_text(&mut s, b);
    }
    s
}

fn tool_content(text: String) -> String {
    if text.is_empty() {
        "(no output)".to_owned()
    } else {
        text
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

fn image_part(images: Images<'_>, image: &ImageRef) -> Result<Part, LlmFailure> {
    Ok(Part::ImageUrl {
        image_url: ImageUrl {
            url: image_data_url(images.lookup, image, "DeepSeek")?,
        },
    })
}

/// A user message's content: the string of rule 2, or (images on an image route) its blocks
/// as parts, in order.
fn user_content(blocks: &[ContentBlock], cx: Ctx<'_>) -> Result<Content, LlmFailure> {
    let Some(images) = cx
        .vision
        .filter(|_| blocks.iter().any(|b| sent_image(b).is_some()))
    else {
        let mut s = String::new();
        for b in blocks {
            push_block_text(&mut s, b);
        }
        return Ok(Content::Text(s));
    };
    let mut parts = Vec::with_capacity(blocks.len());
    for b in blocks {
        if let Some(image) = sent_image(b) {
            parts.push(image_part(images, image)?);
            continue;
        }
        let mut text = String::new();
        push_block_text(&mut text, b);
        if !text.is_empty() {
            parts.push(Part::Text { text });
        }
    }
    Ok(Content::Parts(parts))
}

/// A tool result's message text, and (on an image route) its images as the parts the user
/// message after the run of tool messages carries: `[images returned by tool call <id>]`, then
/// the images. Chat completions cannot put images in a `tool` message.
fn tool_result(
    id: &str,
    blocks: &[ContentBlock],
    cx: Ctx<'_>,
    pending: &mut Vec<Part>,
) -> Result<String, LlmFailure> {
    let mut s = String::new();
    let images = cx
        .vision
        .filter(|_| blocks.iter().any(|b| sent_image(b).is_some()));
    let Some(images) = images else {
        for b in blocks {
            push_block_text(&mut s, b);
        }
        return Ok(tool_content(s));
    };
    pending.push(Part::Text {
        text: format!("[images returned by tool call {id}]"),
    });
    for b in blocks {
        match sent_image(b) {
            Some(image) => pending.push(image_part(images, image)?),
            None => push_block_text(&mut s, b),
        }
    }
    Ok(if s.is_empty() {
        "(see attached image)".to_owned()
    } else {
        s
    })
}

/// Appends the user message of the images the run of tool messages before it returned.
fn flush_images<'a>(pending: &mut Vec<Part>, out: &mut Vec<WireMessage<'a>>) {
    if !pending.is_empty() {
        out.push(WireMessage::Plain {
            role: "user",
            content: Content::Parts(std::mem::take(pending)),
        });
    }
}

/// The wire messages of `m`. Tool results' images wait in `pending` until the run of tool
/// messages ends (the server wants the tool messages right after the assistant's calls): they
/// go out as one user message before the next message that is not a tool message, or after
/// the last message of the body.
fn push_messages<'a>(
    m: &'a Message,
    cx: Ctx<'_>,
    pending: &mut Vec<Part>,
    out: &mut Vec<WireMessage<'a>>,
) -> Result<(), LlmFailure> {
    let thinking_enabled = cx.thinking_enabled;
    let opts = cx.opts;
    match m.role {
        Role::System => {
            flush_images(pending, out);
            out.push(WireMessage::Plain {
                role: "system",
                content: Content::Text(text_of(m)),
            });
        }
        Role::Developer => {} // No tool-update capability on this route: dropped (§9.7).
        Role::User => {
            let results: Vec<_> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult(r) => Some(r),
                    _ => None,
                })
                .collect();
            let content = user_content(&m.content, cx)?;
            let empty = matches!(&content, Content::Text(t) if t.is_empty());
            if results.is_empty() || !empty {
                flush_images(pending, out);
                out.push(WireMessage::Plain {
                    role: "user",
                    content,
                });
            }
            for r in results {
                let content = tool_result(&r.tool_call_id, &r.content, cx, pending)?;
                out.push(WireMessage::Tool {
                    role: "tool",
                    tool_call_id: &r.tool_call_id,
                    content,
                });
            }
        }
        Role::Assistant => {
            let mut content = String::new();
            let mut reasoning = String::new();
            let mut tool_calls = Vec::new();
            for b in &m.content {
                match b {
                    ContentBlock::Text { text } => content.push_str(text),
                    ContentBlock::Reasoning { text } => reasoning.push_str(text),
                    ContentBlock::ToolCall(c) => tool_calls.push(WireCall {
                        id: &c.id,
                        kind: "function",
                        function: WireCallFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    }),
                    _ => {}
                }
            }
            let reasoning_content = if !reasoning.is_empty() {
                Some(reasoning)
            } else if opts.reasoning_placeholder && thinking_enabled {
                Some(String::new())
            } else {
                None
            };
            flush_images(pending, out);
            out.push(WireMessage::Assistant {
                role: "assistant",
                content,
                reasoning_content,
                tool_calls,
            });
        }
        Role::Tool => {
            let id = m
                .tool_call_id
                .as_deref()
                .or_else(|| m.source.call_id())
                .unwrap_or("");
            let content = tool_result(id, &m.content, cx, pending)?;
            out.push(WireMessage::Tool {
                role: "tool",
                tool_call_id: id,
                content,
            });
        }
    }
    Ok(())
}

/// The images still waiting after `kept` (the trailing run of tool messages, whose user
/// message an extended body writes after the messages that follow, or at the end).
fn pending_after(kept: &[Arc<Message>], cx: Ctx<'_>) -> Result<Vec<Part>, LlmFailure> {
    let mut pending = Vec::new();
    if cx.vision.is_none() {
        return Ok(pending);
    }
    let mut start = kept.len();
    while start > 0 {
        let m = &kept[start - 1];
        let results = m
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolResult(_)));
        match m.role {
            Role::Tool | Role::Developer => start -= 1,
            Role::User if results => {
                start -= 1;
                if !text_of(m).is_empty() || m.content.iter().any(|b| sent_image(b).is_some()) {
                    break;
                }
            }
            _ => break,
        }
    }
    let mut scratch = Vec::new();
    for m in &kept[start..] {
        push_messages(m, cx, &mut pending, &mut scratch)?;
    }
    Ok(pending)
}

fn context<'a>(req: &LlmRequest, opts: BodyOptions, images: Images<'a>) -> Ctx<'a> {
    Ctx {
        thinking_enabled: thinking_enabled(req) == Some(true),
        opts,
        vision: req
            .call
            .model
            .input_modalities
            .contains(&Modality::Image)
            .then_some(images),
    }
}

/// The wire `tools` array of `tools` (compact JSON, the bytes the body carries), `None` when
/// there are none. Written once per tool list: an extended body reuses it while the request
/// offers an equal list (see [`BodyCache`]).
fn tools_json(tools: &[ToolSpec]) -> Result<Option<Box<RawValue>>, LlmFailure> {
    if tools.is_empty() {
        return Ok(None);
    }
    let wire: Vec<WireTool<'_>> = tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            function: WireFunctionDecl {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        })
        .collect();
    let text = serde_json::to_string(&wire).map_err(serialise_failure)?;
    RawValue::from_string(text)
        .map(Some)
        .map_err(serialise_failure)
}

/// The members after `messages`, the same for a fresh and an extended body.
fn tail<'a>(req: &'a LlmRequest, thinking: Option<bool>, tools: Option<&'a RawValue>) -> Tail<'a> {
    Tail {
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        thinking: thinking.map(|on| Thinking {
            kind: if on { "enabled" } else { "disabled" },
        }),
        reasoning_effort: if thinking == Some(true) {
            req.call.effort.as_ref().and_then(wire_effort)
        } else {
            None
        },
        tools,
        temperature: req.call.temperature,
        max_tokens: req.call.max_tokens,
        stop: &req.call.stop,
    }
}

/// Whether a request enables thinking: an effort other than `off`, and not a title call.
pub fn thinking_enabled(req: &LlmRequest) -> Option<bool> {
    if req.call.purpose.as_deref() == Some("session-title") {
        return Some(false);
    }
    req.call.effort.as_ref().map(|e| *e != ReasoningEffort::Off)
}

/// The `reasoning_effort` wire value of an effort that enables thinking.
fn wire_effort(effort: &ReasoningEffort) -> Option<&str> {
    match effort {
        ReasoningEffort::Off => None,
        ReasoningEffort::Low | ReasoningEffort::High | ReasoningEffort::Max => {
            Some(effort.as_str())
        }
        // Only reachable through a catalog or a listener that admitted it: sent verbatim.
        ReasoningEffort::Other(s) => Some(s),
    }
}

/// Serialises the request body. Fails (before any I/O) for values JSON cannot carry, and on an
/// image route for an image whose bytes `images` cannot give (`UNSUPPORTED_CONTENT`).
///
/// Images: on a model that accepts them, a user message's images are `image_url` parts with
/// `data:` URLs (its text blocks as `text` parts around them); a tool result's images follow
/// the run of tool messages as one user message (`[images returned by tool call <id>]` and the
/// images), its tool message keeping the text (`(see attached image)` when it has none).
/// Offloaded images, and every image on a text-only model, are the §9.7 placeholder text.
pub fn body(
    req: &LlmRequest,
    opts: BodyOptions,
    images: Images<'_>,
) -> Result<Vec<u8>, LlmFailure> {
    body_with_capacity(req, opts, images, 0)
}

/// [`body`] into a buffer of `capacity` bytes: with the size of the previous request as the
/// hint (requests only grow within a session), the body is written without reallocating, so a
/// large history costs one copy of its bytes, not the doubling growth's up to two.
pub fn body_with_capacity(
    req: &LlmRequest,
    opts: BodyOptions,
    images: Images<'_>,
    capacity: usize,
) -> Result<Vec<u8>, LlmFailure> {
    if req.call.temperature.is_some_and(|t| !t.is_finite()) {
        return Err(LlmFailure::new(
            codes::INVALID_REQUEST,
            "temperature must be a finite number",
        ));
    }
    let thinking = thinking_enabled(req);
    let cx = context(req, opts, images);
    let mut messages = Vec::with_capacity(req.messages.len() + 2);
    let mut pending = Vec::new();
    for m in &req.messages {
        push_messages(m, cx, &mut pending, &mut messages)?;
    }
    flush_images(&mut pending, &mut messages);
    let tools = tools_json(&req.tools)?;
    let body = Body {
        model: &req.call.model.id,
        messages,
        tail: tail(req, thinking, tools.as_deref()),
    };
    let mut out = Vec::with_capacity(capacity.max(128));
    serde_json::to_writer(&mut out, &body).map_err(|e| {
        LlmFailure::new(
            codes::INVALID_REQUEST,
            format!("cannot serialise request: {e}"),
        )
    })?;
    Ok(out)
}

/// The previous request body and the messages it was written from, so the next request of an
/// append-only series writes only its new messages: step N+1 costs its new bytes, not the whole
/// history again. Messages are matched by identity (`Arc::ptr_eq`; the cache holds them, so an
/// address cannot be reused while cached) under the same model, thinking switch and options.
#[derive(Default)]
pub struct BodyCache {
    key: Option<CacheKey>,
    messages: Vec<Arc<Message>>,
    /// `ends[i]`: the body offset right after the wire messages of `messages[..=i]`.
    ends: Vec<usize>,
    /// `counts[i]`: the wire messages written for `messages[..=i]`.
    counts: Vec<usize>,
    /// The body offset right after `"messages":[`.
    start: usize,
    /// The last body (shared with the request that sent it).
    body: Bytes,
    /// The tool list of the last body and its wire `tools` array: the next body reuses the
    /// array while its request offers an equal list (a pointer comparison per schema, the
    /// schemas being shared), instead of serialising every schema again.
    tools: Option<(Vec<ToolSpec>, Option<Box<RawValue>>)>,
}

/// The spare room an extended body keeps for the next step's new messages.
const SLACK: usize = 16 * 1024;

#[derive(Clone, Debug, PartialEq)]
struct CacheKey {
    model: String,
    thinking: Option<bool>,
    opts: BodyOptions,
    vision: bool,
}

fn serialise_failure(e: impl std::fmt::Display) -> LlmFailure {
    LlmFailure::new(
        codes::INVALID_REQUEST,
        format!("cannot serialise request: {e}"),
    )
}

/// [`body`], extending the previous body of `cache` where the request extends its messages.
/// The bytes are those [`body`] gives; `capacity` sizes a body written from scratch.
pub fn body_extending(
    req: &LlmRequest,
    opts: BodyOptions,
    images: Images<'_>,
    cache: &mut BodyCache,
    capacity: usize,
) -> Result<Bytes, LlmFailure> {
    let taken = std::mem::take(cache);
    let result = extend(req, opts, images, taken, capacity);
    match result {
        Ok((bytes, next)) => {
            *cache = next;
            Ok(bytes)
        }
        Err(e) => Err(e),
    }
}

fn extend(
    req: &LlmRequest,
    opts: BodyOptions,
    images: Images<'_>,
    mut cache: BodyCache,
    capacity: usize,
) -> Result<(Bytes, BodyCache), LlmFailure> {
    if req.call.temperature.is_some_and(|t| !t.is_finite()) {
        return Err(LlmFailure::new(
            codes::INVALID_REQUEST,
            "temperature must be a finite number",
        ));
    }
    let thinking = thinking_enabled(req);
    let cx = context(req, opts, images);
    let key = CacheKey {
        model: req.call.model.id.clone(),
        thinking,
        opts,
        vision: cx.vision.is_some(),
    };
    let kept = if cache.key.as_ref() == Some(&key) {
        cache
            .messages
            .iter()
            .zip(&req.messages)
            .take_while(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    } else {
        0
    };
    let mut buf = if kept > 0 {
        let end = cache.ends[kept - 1];
        let mut buf = match std::mem::take(&mut cache.body).try_into_mut() {
            Ok(b) => b,
            // Still shared (a request in flight): copy the kept prefix.
            Err(shared) => BytesMut::from(&shared[..end]),
        };
        buf.truncate(end);
        buf
    } else {
        let mut buf = BytesMut::with_capacity(capacity.max(128));
        buf.put_slice(b"{\"model\":");
        serde_json::to_writer((&mut buf).writer(), &req.call.model.id)
            .map_err(serialise_failure)?;
        buf.put_slice(b",\"messages\":[");
        cache.start = buf.len();
        buf
    };
    cache.messages.truncate(kept);
    cache.ends.truncate(kept);
    cache.counts.truncate(kept);
    let mut count = cache.counts.last().copied().unwrap_or(0);
    // An extended body grows in place while its spare room lasts; then by a sixteenth.
    if kept > 0 && buf.capacity() - buf.len() < SLACK {
        buf.reserve(buf.len() / 16 + SLACK);
    }
    let mut wire = Vec::new();
    let mut pending = pending_after(&cache.messages, cx)?;
    for m in &req.messages[kept..] {
        wire.clear();
        push_messages(m, cx, &mut pending, &mut wire)?;
        for w in &wire {
            if count > 0 {
                buf.put_u8(b',');
            }
            serde_json::to_writer((&mut buf).writer(), w).map_err(serialise_failure)?;
            count += 1;
        }
        cache.messages.push(m.clone());
        cache.ends.push(buf.len());
        cache.counts.push(count);
    }
    // The images of a trailing run of tool messages: after the last recorded end, so the next
    // body of the series writes them again after whatever follows the run.
    wire.clear();
    flush_images(&mut pending, &mut wire);
    for w in &wire {
        if count > 0 {
            buf.put_u8(b',');
        }
        serde_json::to_writer((&mut buf).writer(), w).map_err(serialise_failure)?;
    }
    drop(wire);
    let tools = match cache.tools.take() {
        Some((specs, json)) if specs == req.tools => (specs, json),
        _ => (req.tools.clone(), tools_json(&req.tools)?),
    };
    let tail =
        serde_json::to_vec(&tail(req, thinking, tools.1.as_deref())).map_err(serialise_failure)?;
    cache.tools = Some(tools);
    buf.put_u8(b']');
    buf.put_u8(b',');
    // `{"stream":...}` without its `{`: the members continue the body's object.
    buf.put_slice(tail.get(1..).unwrap_or_default());
    let body = buf.freeze();
    cache.body = body.clone();
    cache.key = Some(key);
    Ok((body, cache))
}
