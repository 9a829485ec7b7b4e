//! Request body serialisation (`wire-protocol.md` §3–§5).
//!
//! Byte-deterministic: the same request gives the same bytes, keys in the fixed order
//! `model, messages, stream, stream_options, thinking, reasoning_effort, tools, temperature,
//! max_tokens, stop`, absent optional fields omitted (never `null`), and the messages of history
//! N+1 byte-extend those of history N (each message serialises independently of what follows).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use dsh_llm::attachments::{file_placeholder, image_placeholder};
use dsh_llm::{ContentBlock, LlmFailure, LlmRequest, Message, ReasoningEffort, Role, codes};
use serde::Serialize;
use serde_json::Value;

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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
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

#[derive(Serialize)]
#[serde(untagged)]
enum WireMessage<'a> {
    Plain {
        role: &'static str,
        content: String,
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

fn push_messages<'a>(
    m: &'a Message,
    thinking_enabled: bool,
    opts: BodyOptions,
    out: &mut Vec<WireMessage<'a>>,
) {
    match m.role {
        Role::System => out.push(WireMessage::Plain {
            role: "system",
            content: text_of(m),
        }),
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
            let text = text_of(m);
            if results.is_empty() || !text.is_empty() {
                out.push(WireMessage::Plain {
                    role: "user",
                    content: text,
                });
            }
            for r in results {
                let mut s = String::new();
                for b in &r.content {
                    push_block_text(&mut s, b);
                }
                out.push(WireMessage::Tool {
                    role: "tool",
                    tool_call_id: &r.tool_call_id,
                    content: tool_content(s),
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
            out.push(WireMessage::Tool {
                role: "tool",
                tool_call_id: id,
                content: tool_content(text_of(m)),
            });
        }
    }
}

/// The members after `messages`, the same for a fresh and an extended body.
fn tail(req: &LlmRequest, thinking: Option<bool>) -> Tail<'_> {
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
        tools: req
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunctionDecl {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
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

/// Serialises the request body. Fails (before any I/O) only for values JSON cannot carry.
pub fn body(req: &LlmRequest, opts: BodyOptions) -> Result<Vec<u8>, LlmFailure> {
    body_with_capacity(req, opts, 0)
}

/// [`body`] into a buffer of `capacity` bytes: with the size of the previous request as the
/// hint (requests only grow within a session), the body is written without reallocating, so a
/// large history costs one copy of its bytes, not the doubling growth's up to two.
pub fn body_with_capacity(
    req: &LlmRequest,
    opts: BodyOptions,
    capacity: usize,
) -> Result<Vec<u8>, LlmFailure> {
    if req.call.temperature.is_some_and(|t| !t.is_finite()) {
        return Err(LlmFailure::new(
            codes::INVALID_REQUEST,
            "temperature must be a finite number",
        ));
    }
    let thinking = thinking_enabled(req);
    let mut messages = Vec::with_capacity(req.messages.len() + 2);
    for m in &req.messages {
        push_messages(m, thinking == Some(true), opts, &mut messages);
    }
    let body = Body {
        model: &req.call.model.id,
        messages,
        tail: tail(req, thinking),
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
}

/// The spare room an extended body keeps for the next step's new messages.
const SLACK: usize = 16 * 1024;

#[derive(Clone, Debug, PartialEq)]
struct CacheKey {
    model: String,
    thinking: Option<bool>,
    opts: BodyOptions,
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
    cache: &mut BodyCache,
    capacity: usize,
) -> Result<Bytes, LlmFailure> {
    let taken = std::mem::take(cache);
    let result = extend(req, opts, taken, capacity);
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
    let key = CacheKey {
        model: req.call.model.id.clone(),
        thinking,
        opts,
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
    for m in &req.messages[kept..] {
        wire.clear();
        push_messages(m, thinking == Some(true), opts, &mut wire);
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
    drop(wire);
    let tail = serde_json::to_vec(&tail(req, thinking)).map_err(serialise_failure)?;
    buf.put_u8(b']');
    buf.put_u8(b',');
    // `{"stream":...}` without its `{`: the members continue the body's object.
    buf.put_slice(tail.get(1..).unwrap_or_default());
    let body = buf.freeze();
    cache.body = body.clone();
    cache.key = Some(key);
    Ok((body, cache))
}
