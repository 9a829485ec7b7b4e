//! Anthropic-shaped SSE replies and error replies.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{Reply, Split};
use crate::sse::split_chars;

/// Token usage as the Messages API reports it: `input_tokens` excludes cache reads and writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamUsage {
    /// `input_tokens` (uncached, not written to the cache).
    pub input_tokens: u64,
    /// `output_tokens`.
    pub output_tokens: u64,
    /// `cache_read_input_tokens`.
    pub cache_read_input_tokens: u64,
    /// `cache_creation_input_tokens`.
    pub cache_creation_input_tokens: u64,
}

impl StreamUsage {
    /// Input and output, no cache.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            ..Self::default()
        }
    }

    /// Sets `cache_read_input_tokens`.
    pub fn cache_read(mut self, tokens: u64) -> Self {
        self.cache_read_input_tokens = tokens;
        self
    }

    /// Sets `cache_creation_input_tokens`.
    pub fn cache_creation(mut self, tokens: u64) -> Self {
        self.cache_creation_input_tokens = tokens;
        self
    }

    fn to_json(self, output: u64) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": output,
        })
    }
}

#[derive(Clone, Debug)]
enum Block {
    Thinking {
        parts: Vec<String>,
        signature: Option<String>,
    },
    Redacted(String),
    Text(Vec<String>),
    ToolUse {
        id: String,
        name: String,
        parts: Vec<String>,
    },
}

/// A streamed Messages reply. Events are `event: <type>\ndata: <json>\n\n` with compact JSON;
/// the stop reason defaults to `tool_use` when there are tool calls, else `end_turn`.
#[derive(Clone, Debug)]
pub struct Message {
    id: String,
    model: String,
    blocks: Vec<Block>,
    usage: StreamUsage,
    stop_reason: Option<String>,
    chars_per_delta: usize,
    ping: bool,
    stop: bool,
    tool_calls: usize,
}

impl Default for Message {
    fn default() -> Self {
        Self::new()
    }
}

impl Message {
    /// An empty reply (model `deepseek-flash`, usage 10 in / 5 out).
    pub fn new() -> Self {
        Self {
            id: "msg_dsh_testkit".into(),
            model: "deepseek-flash".into(),
            blocks: Vec::new(),
            usage: StreamUsage::new(10, 5),
            stop_reason: None,
            chars_per_delta: 0,
            ping: true,
            stop: true,
            tool_calls: 0,
        }
    }

    /// The message id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The model named in `message_start`.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// A thinking block with its signature (sent as one `signature_delta`).
    pub fn thinking(mut self, text: &str, signature: &str) -> Self {
        self.blocks.push(Block::Thinking {
            parts: vec![text.to_owned()],
            signature: Some(signature.to_owned()),
        });
        self
    }

    /// A thinking block without a signature.
    pub fn unsigned_thinking(mut self, text: &str) -> Self {
        self.blocks.push(Block::Thinking {
            parts: vec![text.to_owned()],
            signature: None,
        });
        self
    }

    /// A `redacted_thinking` block with opaque `data`.
    pub fn redacted_thinking(mut self, data: &str) -> Self {
        self.blocks.push(Block::Redacted(data.to_owned()));
        self
    }

    /// A text block.
    pub fn text(mut self, text: &str) -> Self {
        self.blocks.push(Block::Text(vec![text.to_owned()]));
        self
    }

    /// A text block sent as these deltas.
    pub fn text_parts<S: Into<String>>(mut self, parts: impl IntoIterator<Item = S>) -> Self {
        self.blocks
            .push(Block::Text(parts.into_iter().map(Into::into).collect()));
        self
    }

    /// A `tool_use` block; `input` (raw JSON text) is streamed as `input_json_delta`s.
    pub fn tool_use(mut self, id: &str, name: &str, input: &str) -> Self {
        self.tool_calls += 1;
        self.blocks.push(Block::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            parts: vec![input.to_owned()],
        });
        self
    }

    /// A `tool_use` block with a generated id `toolu_<n>_<name>`.
    pub fn tool_call(self, name: &str, input: &str) -> Self {
        let id = format!("toolu_{}_{name}", self.tool_calls);
        self.tool_use(&id, name, input)
    }

    /// A `tool_use` block whose input arrives as exactly these fragments.
    pub fn tool_use_parts<S: Into<String>>(
        mut self,
        id: &str,
        name: &str,
        parts: impl IntoIterator<Item = S>,
    ) -> Self {
        self.tool_calls += 1;
        self.blocks.push(Block::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            parts: parts.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// Splits every text, thinking and input into deltas of `n` characters (0 = one delta).
    pub fn chars_per_delta(mut self, n: usize) -> Self {
        self.chars_per_delta = n;
        self
    }

    /// The usage (in `message_start`, and cumulatively in `message_delta`).
    pub fn usage(mut self, usage: StreamUsage) -> Self {
        self.usage = usage;
        self
    }

    /// The stop reason (`end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `refusal`, ...).
    pub fn stop_reason(mut self, reason: &str) -> Self {
        self.stop_reason = Some(reason.to_owned());
        self
    }

    /// Leaves out the `ping` event after `message_start`.
    pub fn no_ping(mut self) -> Self {
        self.ping = false;
        self
    }

    /// Leaves out `message_delta` and `message_stop`: a truncated stream.
    pub fn truncated(mut self) -> Self {
        self.stop = false;
        self
    }

    fn split(&self, parts: &[String]) -> Vec<String> {
        if self.chars_per_delta == 0 {
            return parts.to_vec();
        }
        parts
            .iter()
            .flat_map(|p| split_chars(p, self.chars_per_delta))
            .collect()
    }

    /// The events as `(type, payload)`.
    pub fn events(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        let mut ev = |v: Value| {
            let t = v["type"].as_str().unwrap_or_default().to_owned();
            out.push((t, v));
        };
        ev(json!({"type":"message_start","message":{
            "id": self.id, "type":"message", "role":"assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": self.usage.to_json(1),
        }}));
        if self.ping {
            ev(json!({"type":"ping"}));
        }
        for (index, block) in self.blocks.iter().enumerate() {
            match block {
                Block::Thinking { parts, signature } => {
                    ev(json!({"type":"content_block_start","index":index,
                        "content_block":{"type":"thinking","thinking":"","signature":""}}));
                    for p in self.split(parts) {
                        ev(json!({"type":"content_block_delta","index":index,
                            "delta":{"type":"thinking_delta","thinking":p}}));
                    }
                    if let Some(s) = signature {
                        ev(json!({"type":"content_block_delta","index":index,
                            "delta":{"type":"signature_delta","signature":s}}));
                    }
                }
                Block::Redacted(data) => {
                    ev(json!({"type":"content_block_start","index":index,
                        "content_block":{"type":"redacted_thinking","data":data}}));
                }
                Block::Text(parts) => {
                    ev(json!({"type":"content_block_start","index":index,
                        "content_block":{"type":"text","text":""}}));
                    for p in self.split(parts) {
                        ev(json!({"type":"content_block_delta","index":index,
                            "delta":{"type":"text_delta","text":p}}));
                    }
                }
                Block::ToolUse { id, name, parts } => {
                    ev(json!({"type":"content_block_start","index":index,
                        "content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}));
                    for p in self.split(parts) {
                        ev(json!({"type":"content_block_delta","index":index,
                            "delta":{"type":"input_json_delta","partial_json":p}}));
                    }
                }
            }
            ev(json!({"type":"content_block_stop","index":index}));
        }
        if self.stop {
            let reason = self.stop_reason.clone().unwrap_or_else(|| {
                if self.tool_calls > 0 {
                    "tool_use"
                } else {
                    "end_turn"
                }
                .to_owned()
            });
            ev(json!({"type":"message_delta",
                "delta":{"stop_reason":reason,"stop_sequence":null},
                "usage": self.usage.to_json(self.usage.output_tokens)}));
            ev(json!({"type":"message_stop"}));
        }
        out
    }

    /// The SSE bytes.
    pub fn to_bytes(&self) -> Bytes {
        let mut s = String::new();
        for (t, v) in self.events() {
            s.push_str("event: ");
            s.push_str(&t);
            s.push_str("\ndata: ");
            s.push_str(&v.to_string());
            s.push_str("\n\n");
        }
        Bytes::from(s)
    }

    /// A reply writing one event per write.
    pub fn reply(&self) -> Reply {
        sse().split_events(self.to_bytes())
    }

    /// A reply with the bytes split as `split` says.
    pub fn reply_split(&self, split: &Split) -> Reply {
        sse().split(self.to_bytes(), split)
    }
}

fn sse() -> Reply {
    Reply::status(200)
        .header("content-type", crate::reply::SSE_CONTENT_TYPE)
        .header("cache-control", "no-cache")
        .header("request-id", "req_dsh_testkit")
}

/// An Anthropic error `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 400 `invalid_request_error`.
    InvalidRequest,
    /// 401 `authentication_error`.
    Authentication,
    /// 403 `permission_error`.
    Permission,
    /// 404 `not_found_error`.
    NotFound,
    /// 413 `request_too_large`.
    RequestTooLarge,
    /// 429 `rate_limit_error`.
    RateLimit,
    /// 500 `api_error`.
    Api,
    /// 529 `overloaded_error`.
    Overloaded,
}

impl ErrorKind {
    /// The wire `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request_error",
            ErrorKind::Authentication => "authentication_error",
            ErrorKind::Permission => "permission_error",
            ErrorKind::NotFound => "not_found_error",
            ErrorKind::RequestTooLarge => "request_too_large",
            ErrorKind::RateLimit => "rate_limit_error",
            ErrorKind::Api => "api_error",
            ErrorKind::Overloaded => "overloaded_error",
        }
    }

    /// The HTTP status Anthropic sends it with.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::InvalidRequest => 400,
            ErrorKind::Authentication => 401,
            ErrorKind::Permission => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::RequestTooLarge => 413,
            ErrorKind::RateLimit => 429,
            ErrorKind::Api => 500,
            ErrorKind::Overloaded => 529,
        }
    }
}

/// `{"type":"error","error":{"type":…,"message":…}}`.
pub fn error_body(kind: ErrorKind, message: &str) -> String {
    json!({"type":"error","error":{"type":kind.as_str(),"message":message}}).to_string()
}

/// A JSON error reply with the kind's status and a `request-id` header.
pub fn error_reply(kind: ErrorKind, message: &str) -> Reply {
    Reply::json(kind.status(), error_body(kind, message)).header("request-id", "req_dsh_testkit")
}

/// 401 `invalid x-api-key`.
pub fn unauthorized() -> Reply {
    error_reply(ErrorKind::Authentication, "invalid x-api-key")
}

/// 429 with `retry-after` when given (sent verbatim).
pub fn rate_limited(retry_after: Option<&str>) -> Reply {
    let r = error_reply(
        ErrorKind::RateLimit,
        "Number of request tokens has exceeded your per-minute rate limit",
    );
    match retry_after {
        Some(v) => r.header("retry-after", v),
        None => r,
    }
}

/// 400 `prompt is too long`.
pub fn context_exceeded() -> Reply {
    error_reply(
        ErrorKind::InvalidRequest,
        "prompt is too long: 1333908 tokens > 1000000 maximum",
    )
}

/// 529 `Overloaded`.
pub fn overloaded() -> Reply {
    error_reply(ErrorKind::Overloaded, "Overloaded")
}

/// 500 `Internal server error`.
pub fn server_error() -> Reply {
    error_reply(ErrorKind::Api, "Internal server error")
}

/// A 200 stream that starts a message and then sends an `error` event (how the API reports
/// failures after the head, e.g. `overloaded_error`).
pub fn stream_error(kind: ErrorKind, message: &str) -> Reply {
    let start = Message::new().no_ping().truncated();
    let mut bytes = start.to_bytes().to_vec();
    bytes.extend_from_slice(
        format!("event: error\ndata: {}\n\n", error_body(kind, message)).as_bytes(),
    );
    sse().split_events(bytes)
}
