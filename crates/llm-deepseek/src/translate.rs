//! Translation of DeepSeek chat-completion chunks into [`StreamChunk`]s (`deepseek-wire.md` §6–§8).
//!
//! Pure and synchronous: feed each SSE `data:` payload to [`Translator::event`]; it appends the
//! chunks to emit. Block indexes are assigned in first-seen order across reasoning, text and tool
//! calls; `finish_reason` and usage are held until `[DONE]`, which emits every `block-end`, then
//! `usage`, then `finish`. A tool call's arguments are streamed, not kept: its `block-end` leaves
//! them [`ToolArguments::streamed`] for the loop's assembler, which holds the one copy (a
//! `write` of a whole file streams megabytes).
//!
//! One bad field does not sink an answer: a usage count that is not a token count (negative,
//! fractional, beyond `u64`) is dropped with a warning, unpaired UTF-16 surrogate escapes are
//! replaced with U+FFFD, and a tool call without an id gets a deterministic synthetic one. Each
//! repair is logged (`tracing::warn`) and recorded as a [`StreamNote`] on the finish chunk. A
//! payload that really is malformed fails with a message naming the field, not the payload.

use std::borrow::Cow;
use std::collections::BTreeMap;

use dsh_llm::{
    BlockKind, ContentBlock, FailureCode, FinishReason, LlmFailure, StreamChunk, StreamNote,
    TokenUsage, ToolArguments,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct WireChunk<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    choices: Option<Vec<WireChoice<'a>>>,
    /// Parsed leniently (field by field), see [`Translator::usage`].
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
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

#[derive(Debug)]
enum Block {
    Reasoning(String),
    Text(String),
    /// A tool call: its arguments are not kept here, only streamed (the block-end leaves them
    /// "as streamed" for the loop's assembler, which holds the one copy).
    Tool {
        wire_index: u32,
        id: String,
        name: String,
    },
}

/// What happened with one payload (`Done`: `[DONE]` arrived, the final chunks were emitted).
pub use dsh_llm_http::Progress;

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
    /// A usage object (possibly with dropped fields) was received.
    usage_seen: bool,
    /// The response id (`id` of the chunks), for synthetic tool-call ids.
    response_id: Option<String>,
    notes: Vec<StreamNote>,
    events: usize,
}

fn idx(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// A `MALFORMED_RESPONSE` failure with `what` (which names the problem, not the payload).
pub use dsh_llm_http::malformed;

/// The JSON type name of a value, for error messages.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Finds the first member of a chunk whose JSON type the translator cannot take, as
/// `(path, found, expected)`. Only called on the error path.
fn bad_field(chunk: &Value) -> Option<(String, &'static str, &'static str)> {
    let Value::Object(top) = chunk else {
        return Some(("(chunk)".into(), kind_of(chunk), "an object"));
    };
    let string = |v: &Value| v.is_string() || v.is_null();
    if let Some(v) = top.get("id").filter(|v| !string(v)) {
        return Some(("id".into(), kind_of(v), "a string"));
    }
    let choices = match top.get("choices") {
        None | Some(Value::Null) => return None,
        Some(Value::Array(c)) => c,
        Some(v) => return Some(("choices".into(), kind_of(v), "an array")),
    };
    for (i, choice) in choices.iter().enumerate() {
        let Value::Object(choice) = choice else {
            return Some((format!("choices[{i}]"), kind_of(choice), "an object"));
        };
        if let Some(v) = choice.get("finish_reason").filter(|v| !string(v)) {
            return Some((
                format!("choices[{i}].finish_reason"),
                kind_of(v),
                "a string",
            ));
        }
        let delta = match choice.get("delta") {
            None | Some(Value::Null) => continue,
            Some(Value::Object(d)) => d,
            Some(v) => return Some((format!("choices[{i}].delta"), kind_of(v), "an object")),
        };
        for key in ["content", "reasoning_content"] {
            if let Some(v) = delta.get(key).filter(|v| !string(v)) {
                return Some((format!("choices[{i}].delta.{key}"), kind_of(v), "a string"));
            }
        }
        let calls = match delta.get("tool_calls") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(c)) => c,
            Some(v) => {
                return Some((
                    format!("choices[{i}].delta.tool_calls"),
                    kind_of(v),
                    "an array",
                ));
            }
        };
        for (j, call) in calls.iter().enumerate() {
            let at = format!("choices[{i}].delta.tool_calls[{j}]");
            let Value::Object(call) = call else {
                return Some((at, kind_of(call), "an object"));
            };
            if let Some(v) = call
                .get("index")
                .filter(|v| !v.is_null() && v.as_u64().is_none_or(|n| u32::try_from(n).is_err()))
            {
                return Some((format!("{at}.index"), kind_of(v), "a call index (u32)"));
            }
            if let Some(v) = call.get("id").filter(|v| !string(v)) {
                return Some((format!("{at}.id"), kind_of(v), "a string"));
            }
            let func = match call.get("function") {
                None | Some(Value::Null) => continue,
                Some(Value::Object(f)) => f,
                Some(v) => return Some((format!("{at}.function"), kind_of(v), "an object")),
            };
            for key in ["name", "arguments"] {
                if let Some(v) = func.get(key).filter(|v| !string(v)) {
                    return Some((format!("{at}.function.{key}"), kind_of(v), "a string"));
                }
            }
        }
    }
    None
}

/// The failure for a payload the typed parse refused: names the bad field when it can.
fn refusal(data: &str, err: &serde_json::Error) -> LlmFailure {
    match serde_json::from_str::<Value>(data) {
        Err(e) => malformed(&format!("not JSON ({e})")),
        Ok(v) => match bad_field(&v) {
            Some((path, found, expected)) => {
                malformed(&format!("`{path}` is {found}, expected {expected}"))
            }
            None => malformed(&err.to_string()),
        },
    }
}

/// Replaces `\uXXXX` escapes of unpaired UTF-16 surrogates in JSON text with `\ufffd`, so the
/// text parses and the log stays valid JSON. `None` when nothing needed replacing (no copy).
pub fn repair_surrogates(json: &str) -> Option<(String, u64)> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    }
    let b = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut count = 0u64;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2; // any other escape, `\\` included
            continue;
        }
        let Some(unit) = hex4(&b[i + 2..]) else {
            i += 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit)
            && b.get(i + 6) == Some(&b'\\')
            && b.get(i + 7) == Some(&b'u')
            && hex4(&b[(i + 8).min(b.len())..]).is_some_and(|lo| (0xDC00..0xE000).contains(&lo));
        if paired {
            i += 12;
        } else if (0xD800..0xE000).contains(&unit) {
            let o = out.get_or_insert_with(|| String::with_capacity(json.len()));
            o.push_str(&json[copied..i]);
            o.push_str("\\ufffd");
            count += 1;
            i += 6;
            copied = i;
        } else {
            i += 6;
        }
    }
    out.map(|mut o| {
        o.push_str(&json[copied..]);
        (o, count)
    })
}

/// At most 64 bytes of a JSON value's text, for notes and warnings.
fn short(v: &Value) -> String {
    let mut s = v.to_string();
    s.truncate(s.floor_char_boundary(64));
    s
}

/// A token count, or `None` (with the reason) for anything else.
fn count(v: &Value) -> Result<Option<u64>, ()> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                return Ok(Some(u));
            }
            // Integral floats within the exact range (`12.0`) are counts too.
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&f) => {
                    Ok(Some(f as u64))
                }
                _ => Err(()),
            }
        }
        _ => Err(()),
    }
}

/// A deterministic tool-call id for call `ordinal` of the response `response_id`.
fn synthetic_id(response_id: Option<&str>, ordinal: usize) -> String {
    let rid: String = response_id
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(36)
        .collect();
    if rid.is_empty() {
        format!("call_synth_{ordinal}")
    } else {
        format!("call_synth_{ordinal}_{rid}")
    }
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

    /// Whether a complete finish was received: a finish reason and a usage object. A stream
    /// that then ends without `[DONE]` is complete (see [`Translator::end_without_done`]).
    pub fn is_complete(&self) -> bool {
        self.finish_reason.is_some() && self.usage_seen
    }

    /// Handles one SSE `data:` payload. `Err` = the payload cannot be read
    /// (`MALFORMED_RESPONSE`, naming the bad field); the caller ends the attempt with it.
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
        let repaired = if data.contains("\\ud") || data.contains("\\uD") {
            repair_surrogates(data)
        } else {
            None
        };
        let data = match repaired {
            Some((fixed, n)) => {
                tracing::warn!(
                    count = n,
                    "DeepSeek chunk had unpaired UTF-16 surrogates; replaced with U+FFFD"
                );
                self.note_surrogates(n);
                Cow::Owned(fixed)
            }
            None => Cow::Borrowed(data),
        };
        let chunk: WireChunk<'_> = match serde_json::from_str(&data) {
            Ok(c) => c,
            Err(e) => return Err(refusal(&data, &e)),
        };
        if self.response_id.is_none()
            && let Some(id) = chunk.id.as_deref().filter(|i| !i.is_empty())
        {
            self.response_id = Some(id.to_owned());
        }
        if let Some(u) = chunk.usage {
            self.usage(u);
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

    fn note_surrogates(&mut self, n: u64) {
        for note in &mut self.notes {
            if let StreamNote::SurrogatesReplaced { count } = note {
                *count += n;
                return;
            }
        }
        self.notes.push(StreamNote::SurrogatesReplaced { count: n });
    }

    /// Reads a usage object field by field (`deepseek-wire.md` §8: input excludes cached tokens;
    /// cache reads from `cached_tokens`, else `prompt_cache_hit_tokens`). A field that is not a
    /// token count is dropped with a warning and a note; the rest is kept.
    fn usage(&mut self, raw: &RawValue) {
        let v: Value = match serde_json::from_str(raw.get()) {
            Ok(v) => v,
            Err(_) => return, // unreachable: `raw` was parsed as JSON
        };
        let obj = match &v {
            Value::Null => return,
            Value::Object(o) => o,
            other => {
                self.drop_field("usage", other);
                return;
            }
        };
        self.usage_seen = true;
        let mut field = |path: &str, v: Option<&Value>| -> Option<u64> {
            let v = v?;
            match count(v) {
                Ok(n) => n,
                Err(()) => {
                    self.drop_field(path, v);
                    None
                }
            }
        };
        let prompt = field("usage.prompt_tokens", obj.get("prompt_tokens"));
        let completion = field("usage.completion_tokens", obj.get("completion_tokens"));
        let cached = field(
            "usage.prompt_tokens_details.cached_tokens",
            obj.get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        );
        let hit = field(
            "usage.prompt_cache_hit_tokens",
            obj.get("prompt_cache_hit_tokens"),
        );
        let reasoning = field(
            "usage.completion_tokens_details.reasoning_tokens",
            obj.get("completion_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        );
        let cache_read = cached.or(hit);
        self.usage = Some(TokenUsage {
            input_tokens: prompt.unwrap_or(0).saturating_sub(cache_read.unwrap_or(0)),
            output_tokens: completion.unwrap_or(0),
            total_tokens: None,
            cache_read_tokens: cache_read,
            cache_write_tokens: None,
            reasoning_tokens: reasoning,
        });
    }

    fn drop_field(&mut self, field: &str, value: &Value) {
        let value = short(value);
        tracing::warn!(field, %value, "DeepSeek usage field is not a token count; dropped");
        self.notes.push(StreamNote::UsageFieldDropped {
            field: field.to_owned(),
            value,
        });
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
                // The id comes on the first fragment; without one (or with one an earlier call
                // of this response has), a stable synthetic id is assigned now (every delta and
                // the log carry it; a later id is ignored).
                // An id already used by an earlier call of this response is no id either.
                let taken = |i: &str| {
                    self.blocks
                        .iter()
                        .any(|b| matches!(b, Block::Tool { id, .. } if id == i))
                };
                let id = match call.id.as_deref().filter(|i| !i.is_empty() && !taken(i)) {
                    Some(i) => i.to_owned(),
                    None => {
                        let id = synthetic_id(self.response_id.as_deref(), self.tool_blocks.len());
                        tracing::warn!(%id, wire_index = wire, "DeepSeek tool call without an id; synthesised one");
                        self.notes.push(StreamNote::SynthesizedToolCallId {
                            index: idx(p),
                            id: id.clone(),
                        });
                        id
                    }
                };
                self.blocks.push(Block::Tool {
                    wire_index: wire,
                    id,
                    name: String::new(),
                });
                self.tool_blocks.insert(wire, p);
                out.push(StreamChunk::BlockStart {
                    index: idx(p),
                    block_type: BlockKind::ToolCall,
                });
                p
            }
        };
        let Some(Block::Tool { id, name, .. }) = self.blocks.get_mut(pos) else {
            return;
        };
        // The name comes on the first fragment; later empty (or repeated) values are ignored.
        let func = call.function.as_ref();
        if let Some(n) = func
            .and_then(|f| f.name.as_deref())
            .filter(|n| !n.is_empty())
            && name.is_empty()
        {
            n.clone_into(name);
        }
        let frag = func.and_then(|f| f.arguments.as_deref()).unwrap_or("");
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

    /// Ends a stream that closed cleanly without `[DONE]` after a complete finish (see
    /// [`Translator::is_complete`]): emits the final chunks as `[DONE]` would, with a
    /// [`StreamNote::MissingDone`] note.
    pub fn end_without_done(&mut self, out: &mut Vec<StreamChunk>) {
        tracing::warn!(
            "DeepSeek stream ended without [DONE] after a complete finish; accepted as complete"
        );
        self.notes.push(StreamNote::MissingDone);
        self.done(out);
    }

    fn done(&mut self, out: &mut Vec<StreamChunk>) {
        let empty = self.blocks.is_empty();
        // The accumulated strings move into the block-ends (no copy of large arguments).
        for (i, b) in self.blocks.iter_mut().enumerate() {
            let block = match b {
                Block::Reasoning(s) => ContentBlock::reasoning(std::mem::take(s)),
                Block::Text(s) => ContentBlock::text(std::mem::take(s)),
                Block::Tool { id, name, .. } => {
                    ContentBlock::tool_call(id.clone(), name.clone(), ToolArguments::streamed())
                }
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
            None | Some("stop") if empty => FinishReason::error(LlmFailure::new(
                FailureCode::EmptyResponse,
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
        out.push(StreamChunk::Finish {
            reason,
            replay_state: None,
            notes: std::mem::take(&mut self.notes),
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surrogate_repair_replaces_only_unpaired_escapes() {
        assert_eq!(repair_surrogates(r#"{"a":"x"}"#), None);
        assert_eq!(repair_surrogates(r#""\ud83d\ude00""#), None, "a valid pair");
        assert_eq!(
            repair_surrogates(r#""\\ud800""#),
            None,
            "an escaped backslash"
        );
        assert_eq!(
            repair_surrogates(r#""a\ud800b""#),
            Some((r#""a\ufffdb""#.to_owned(), 1))
        );
        assert_eq!(
            repair_surrogates(r#""\udc00\uD800\ud800\udc00""#),
            Some((r#""\ufffd\ufffd\ud800\udc00""#.to_owned(), 2))
        );
        assert_eq!(
            repair_surrogates(r#""\ud800"#),
            Some((r#""\ufffd"#.to_owned(), 1)),
            "at the very end"
        );
        let (fixed, _) = repair_surrogates(r#"{"t":"\ud800 é"}"#).unwrap();
        let v: Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["t"], "\u{fffd} é");
    }

    #[test]
    fn counts_accept_integers_and_integral_floats_only() {
        use serde_json::json;
        assert_eq!(count(&json!(5)), Ok(Some(5)));
        assert_eq!(count(&json!(12.0)), Ok(Some(12)));
        assert_eq!(count(&Value::Null), Ok(None));
        for bad in [
            json!(-1),
            json!(1.5),
            json!(1e30),
            json!(1e308),
            json!("7"),
            json!([]),
        ] {
            assert_eq!(count(&bad), Err(()), "{bad}");
        }
        let big: Value = serde_json::from_str("18446744073709551617").unwrap();
        assert_eq!(count(&big), Err(()));
    }

    #[test]
    fn synthetic_ids_are_stable_and_sanitised() {
        assert_eq!(synthetic_id(None, 0), "call_synth_0");
        assert_eq!(
            synthetic_id(Some("5e1f2b3c-0d4a"), 2),
            "call_synth_2_5e1f2b3c-0d4a"
        );
        assert_eq!(synthetic_id(Some("a b\"c"), 1), "call_synth_1_abc");
    }
}
