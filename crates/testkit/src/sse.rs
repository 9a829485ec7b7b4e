//! Builders for DeepSeek-shaped SSE streams (chat-completion chunks), from a high-level
//! description: reasoning, text, tool calls, usage, finish reason, `[DONE]`.
//!
//! The output follows `fixtures/deepseek/*.sse` to the byte when given the same ids and
//! fragments: compact JSON with DeepSeek's key order, `data: <json>\n\n` per event,
//! `: keep-alive\n\n` comments and a final `data: [DONE]\n\n`.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{KEEP_ALIVE, Reply, Split};

/// The terminator event.
pub const DONE_EVENT: &str = "data: [DONE]\n\n";

/// Frames one JSON payload as an SSE event: `data: <payload>\n\n`.
pub fn data_event(payload: &str) -> String {
    format!("data: {payload}\n\n")
}

/// Token usage reported on the finish chunk, DeepSeek style (prompt = cache hit + miss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// `prompt_tokens`: hit + miss.
    pub prompt_tokens: u64,
    /// `completion_tokens` (includes reasoning).
    pub completion_tokens: u64,
    /// `prompt_cache_hit_tokens` = `prompt_tokens_details.cached_tokens`.
    pub cache_hit_tokens: u64,
    /// `completion_tokens_details.reasoning_tokens`; the object is omitted when `None`.
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// `prompt_tokens` and `completion_tokens`, no cache hit, no reasoning detail.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            cache_hit_tokens: 0,
            reasoning_tokens: None,
        }
    }

    /// Sets the cache-hit tokens (clamped to `prompt_tokens`).
    pub fn cache_hit(mut self, tokens: u64) -> Self {
        self.cache_hit_tokens = tokens.min(self.prompt_tokens);
        self
    }

    /// Sets the reasoning tokens (adds `completion_tokens_details`).
    pub fn reasoning(mut self, tokens: u64) -> Self {
        self.reasoning_tokens = Some(tokens);
        self
    }

    /// The wire JSON object, keys in DeepSeek's order.
    pub fn to_json(&self) -> Value {
        let hit = self.cache_hit_tokens.min(self.prompt_tokens);
        let mut usage = serde_json::Map::new();
        usage.insert("prompt_tokens".into(), json!(self.prompt_tokens));
        usage.insert("completion_tokens".into(), json!(self.completion_tokens));
        usage.insert(
            "total_tokens".into(),
            json!(self.prompt_tokens + self.completion_tokens),
        );
        usage.insert(
            "prompt_tokens_details".into(),
            json!({"cached_tokens": hit}),
        );
        if let Some(reasoning) = self.reasoning_tokens {
            usage.insert(
                "completion_tokens_details".into(),
                json!({"reasoning_tokens": reasoning}),
            );
        }
        usage.insert("prompt_cache_hit_tokens".into(), json!(hit));
        usage.insert(
            "prompt_cache_miss_tokens".into(),
            json!(self.prompt_tokens - hit),
        );
        Value::Object(usage)
    }
}

/// Where the usage object goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsagePlacement {
    /// On the `finish_reason` chunk (what DeepSeek does).
    FinishChunk,
    /// On a trailing `"choices":[]` chunk after the finish chunk (proxy variant).
    TrailingEmptyChoices,
    /// On a trailing `"choices":null` chunk after the finish chunk (gateway variant).
    TrailingNullChoices,
}

/// Text of one part: either fragmented by `chars_per_delta` or explicit deltas kept as given.
#[derive(Clone, Debug)]
struct Pieces {
    items: Vec<String>,
    explicit: bool,
}

impl Pieces {
    fn whole(text: &str) -> Self {
        Self {
            items: vec![text.to_owned()],
            explicit: false,
        }
    }

    fn explicit<S: Into<String>>(items: impl IntoIterator<Item = S>) -> Self {
        Self {
            items: items.into_iter().map(Into::into).collect(),
            explicit: true,
        }
    }

    fn chars(&self) -> usize {
        self.items.iter().map(|s| s.chars().count()).sum()
    }
}

#[derive(Clone, Debug)]
enum Part {
    Reasoning(Pieces),
    Text(Pieces),
    ToolCall {
        id: String,
        name: String,
        arguments: Pieces,
    },
}

#[derive(Clone, Debug)]
enum UsageSpec {
    Auto,
    Given(Usage),
    Omitted,
}

/// A DeepSeek streaming completion, described at a high level and rendered to SSE bytes.
///
/// ```
/// use dsh_testkit::{Completion, Usage};
/// let bytes = Completion::new()
///     .reasoning("Need the file.")
///     .text("Reading it.")
///     .tool_call("read", r#"{"file_path": "src/main.rs"}"#)
///     .usage(Usage::new(306, 85).cache_hit(256).reasoning(31))
///     .chars_per_delta(4)
///     .to_bytes();
/// assert!(bytes.ends_with(b"data: [DONE]\n\n"));
/// ```
///
/// Parts are emitted in the order they are added (DeepSeek sends reasoning, then text, then tool
/// calls). Tool calls get wire indexes 0, 1, … in order of addition and ids `call_0N_<24 alnum>`
/// unless given.
#[derive(Clone, Debug)]
pub struct Completion {
    id: String,
    created: u64,
    model: String,
    fingerprint: String,
    thinking: Option<bool>,
    keep_alives: usize,
    parts: Vec<Part>,
    chars_per_delta: usize,
    usage: UsageSpec,
    placement: UsagePlacement,
    finish: Option<Option<String>>,
    done: bool,
}

impl Default for Completion {
    fn default() -> Self {
        Self::new()
    }
}

impl Completion {
    /// An empty completion: model `deepseek-flash`, fixed id/created/fingerprint, usage computed
    /// from the content, finish reason `stop` (or `tool_calls` when there are tool calls).
    pub fn new() -> Self {
        Self {
            id: "5e1f2b3c-0d4a-4b6e-9c7d-8a9b0c1d2e3f".into(),
            created: 1_780_222_301,
            model: "deepseek-flash".into(),
            fingerprint: "fp_8b330d02d0_prod0820_fp8_kvcache_20260402".into(),
            thinking: None,
            keep_alives: 0,
            parts: Vec::new(),
            chars_per_delta: 0,
            usage: UsageSpec::Auto,
            placement: UsagePlacement::FinishChunk,
            finish: None,
            done: true,
        }
    }

    /// A plain non-thinking text reply.
    pub fn text_reply(text: &str) -> Self {
        Self::new().text(text)
    }

    /// Sets the chunk `id` (a bare UUID on DeepSeek).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets `created` (Unix seconds).
    pub fn created(mut self, created: u64) -> Self {
        self.created = created;
        self
    }

    /// Sets `model`.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets `system_fingerprint`.
    pub fn fingerprint(mut self, fingerprint: impl Into<String>) -> Self {
        self.fingerprint = fingerprint.into();
        self
    }

    /// Forces thinking-mode delta shapes (`reasoning_content` fields) on or off. By default
    /// thinking is on exactly when some reasoning was added.
    pub fn thinking(mut self, thinking: bool) -> Self {
        self.thinking = Some(thinking);
        self
    }

    /// Prefixes the stream with `n` `: keep-alive` comments (a request waiting for capacity).
    pub fn keep_alives(mut self, n: usize) -> Self {
        self.keep_alives = n;
        self
    }

    /// Adds reasoning text, fragmented by [`Completion::chars_per_delta`].
    pub fn reasoning(mut self, text: &str) -> Self {
        self.parts.push(Part::Reasoning(Pieces::whole(text)));
        self
    }

    /// Adds reasoning as explicit deltas (one event each, never re-fragmented).
    pub fn reasoning_parts<S: Into<String>>(mut self, parts: impl IntoIterator<Item = S>) -> Self {
        self.parts.push(Part::Reasoning(Pieces::explicit(parts)));
        self
    }

    /// Adds answer text, fragmented by [`Completion::chars_per_delta`].
    pub fn text(mut self, text: &str) -> Self {
        self.parts.push(Part::Text(Pieces::whole(text)));
        self
    }

    /// Adds answer text as explicit deltas (one event each, never re-fragmented).
    pub fn text_parts<S: Into<String>>(mut self, parts: impl IntoIterator<Item = S>) -> Self {
        self.parts.push(Part::Text(Pieces::explicit(parts)));
        self
    }

    /// Adds a tool call with a generated id (`call_0N_<24 alnum>`, deterministic). `arguments`
    /// is the raw JSON string, sent verbatim (it may be invalid JSON on purpose).
    pub fn tool_call(self, name: &str, arguments: &str) -> Self {
        let index = self.tool_call_count();
        let id = tool_call_id(index, name);
        self.tool_call_with_id(&id, name, arguments)
    }

    /// Adds a tool call with an explicit id; `arguments` fragmented by
    /// [`Completion::chars_per_delta`] after the empty first fragment.
    pub fn tool_call_with_id(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.parts.push(Part::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: Pieces::whole(arguments),
        });
        self
    }

    /// Adds a tool call whose argument fragments are explicit (one event each after the first
    /// fragment, which always carries id, type, name and `"arguments":""`).
    pub fn tool_call_parts<S: Into<String>>(
        mut self,
        id: &str,
        name: &str,
        fragments: impl IntoIterator<Item = S>,
    ) -> Self {
        self.parts.push(Part::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: Pieces::explicit(fragments),
        });
        self
    }

    /// Splits reasoning, text and arguments added with the non-`_parts` methods into deltas of at
    /// most `n` characters (0 = one delta per part, the default).
    pub fn chars_per_delta(mut self, n: usize) -> Self {
        self.chars_per_delta = n;
        self
    }

    /// Sets the usage reported at the end.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = UsageSpec::Given(usage);
        self
    }

    /// Reports no usage at all (`"usage":null` everywhere).
    pub fn no_usage(mut self) -> Self {
        self.usage = UsageSpec::Omitted;
        self
    }

    /// Where the usage goes (default: on the finish chunk).
    pub fn usage_placement(mut self, placement: UsagePlacement) -> Self {
        self.placement = placement;
        self
    }

    /// Sets the wire `finish_reason` (`stop`, `tool_calls`, `length`, `content_filter`,
    /// `insufficient_system_resource`, … any string).
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(Some(reason.to_owned()));
        self
    }

    /// Sends no finish chunk at all (the stream goes from the last delta to `[DONE]`).
    pub fn no_finish(mut self) -> Self {
        self.finish = Some(None);
        self
    }

    /// Leaves out the final `data: [DONE]\n\n` (a truncated stream).
    pub fn no_done(mut self) -> Self {
        self.done = false;
        self
    }

    fn tool_call_count(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::ToolCall { .. }))
            .count()
    }

    fn is_thinking(&self) -> bool {
        self.thinking
            .unwrap_or_else(|| self.parts.iter().any(|p| matches!(p, Part::Reasoning(_))))
    }

    fn chunk(&self, delta: Value, finish: Option<&str>, usage: Option<Value>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": usage,
        })
    }

    fn usage_chunk(&self, choices: Value, usage: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
            "usage": usage,
        })
    }

    fn fragments(&self, pieces: &Pieces) -> Vec<String> {
        if pieces.explicit {
            pieces.items.clone()
        } else {
            pieces
                .items
                .iter()
                .flat_map(|p| split_chars(p, self.chars_per_delta))
                .collect()
        }
    }

    fn auto_usage(&self) -> Usage {
        let mut reasoning_chars = 0;
        let mut other_chars = 0;
        for part in &self.parts {
            match part {
                Part::Reasoning(p) => reasoning_chars += p.chars(),
                Part::Text(p) => other_chars += p.chars(),
                Part::ToolCall { arguments, .. } => other_chars += arguments.chars(),
            }
        }
        let reasoning = reasoning_chars.div_ceil(4) as u64;
        let completion = reasoning + (other_chars.div_ceil(4) as u64).max(1);
        let usage = Usage::new(12, completion);
        if self.is_thinking() {
            usage.reasoning(reasoning)
        } else {
            usage
        }
    }

    /// The `data:` payloads in order (JSON chunks, then `[DONE]` unless left out). Keep-alive
    /// comments are not included.
    pub fn payloads(&self) -> Vec<String> {
        let thinking = self.is_thinking();
        let mut out = Vec::new();
        let first = if thinking {
            json!({"role": "assistant", "content": null, "reasoning_content": ""})
        } else {
            json!({"role": "assistant", "content": ""})
        };
        out.push(self.chunk(first, None, None).to_string());
        let mut tool_index = 0usize;
        for part in &self.parts {
            match part {
                Part::Reasoning(parts) => {
                    for piece in self.fragments(parts) {
                        let delta = json!({"content": null, "reasoning_content": piece});
                        out.push(self.chunk(delta, None, None).to_string());
                    }
                }
                Part::Text(parts) => {
                    for piece in self.fragments(parts) {
                        let delta = if thinking {
                            json!({"content": piece, "reasoning_content": null})
                        } else {
                            json!({"content": piece})
                        };
                        out.push(self.chunk(delta, None, None).to_string());
                    }
                }
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    let head = json!({"tool_calls": [{
                        "index": tool_index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}
                    }]});
                    out.push(self.chunk(head, None, None).to_string());
                    for piece in self.fragments(arguments) {
                        let delta = json!({"tool_calls": [{
                            "index": tool_index, "function": {"arguments": piece}
                        }]});
                        out.push(self.chunk(delta, None, None).to_string());
                    }
                    tool_index += 1;
                }
            }
        }
        let usage = match self.usage {
            UsageSpec::Auto => Some(self.auto_usage().to_json()),
            UsageSpec::Given(usage) => Some(usage.to_json()),
            UsageSpec::Omitted => None,
        };
        let finish = match &self.finish {
            Some(reason) => reason.clone(),
            None if tool_index > 0 => Some("tool_calls".to_owned()),
            None => Some("stop".to_owned()),
        };
        if let Some(reason) = finish {
            let delta = if thinking {
                json!({"content": "", "reasoning_content": null})
            } else {
                json!({"content": ""})
            };
            let on_finish = match self.placement {
                UsagePlacement::FinishChunk => usage.clone(),
                _ => None,
            };
            out.push(self.chunk(delta, Some(&reason), on_finish).to_string());
        }
        if let Some(usage) = usage {
            match self.placement {
                UsagePlacement::FinishChunk => {}
                UsagePlacement::TrailingEmptyChoices => {
                    out.push(self.usage_chunk(json!([]), usage).to_string());
                }
                UsagePlacement::TrailingNullChoices => {
                    out.push(self.usage_chunk(Value::Null, usage).to_string());
                }
            }
        }
        if self.done {
            out.push("[DONE]".to_owned());
        }
        out
    }

    /// The whole SSE byte stream.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::new();
        for _ in 0..self.keep_alives {
            out.extend_from_slice(KEEP_ALIVE);
        }
        for payload in self.payloads() {
            out.extend_from_slice(data_event(&payload).as_bytes());
        }
        Bytes::from(out)
    }

    /// A `200` SSE [`Reply`] sending the stream in one write.
    pub fn reply(&self) -> Reply {
        Reply::sse().bytes(self.to_bytes())
    }

    /// A `200` SSE [`Reply`] sending the stream split as `split` says.
    pub fn reply_split(&self, split: &Split) -> Reply {
        Reply::sse().split(self.to_bytes(), split)
    }
}

/// Splits `text` into pieces of at most `n` characters (0 = the whole text as one piece; an
/// empty text gives no piece).
pub fn split_chars(text: &str, n: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    if n == 0 {
        return vec![text.to_owned()];
    }
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// A deterministic DeepSeek-style tool-call id: `call_0N_` + 24 alphanumerics.
pub fn tool_call_id(index: usize, name: &str) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut state: u64 = 0xcbf2_9ce4_8422_2325 ^ (index as u64);
    for b in name.bytes() {
        state = (state ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut suffix = String::with_capacity(24);
    for _ in 0..24 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pick = (state >> 33) as usize % ALNUM.len();
        suffix.push(char::from(ALNUM[pick]));
    }
    format!("call_{index:02}_{suffix}")
}
