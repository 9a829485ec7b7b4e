//! What the server saw: every request, raw, with timings and how its response ended.

use std::time::Instant;

use bytes::Bytes;

/// How the response to a recorded request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The response is still being sent (or has not started).
    Pending,
    /// Every scripted byte was handed to the connection and the body ended cleanly.
    Completed,
    /// The script reset the connection (before or after the head).
    Reset,
    /// The response was dropped unfinished: the client went away or the server shut down
    /// (a stalled script ends this way).
    Dropped,
}

/// One request as received, with its timings.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// 0-based arrival order across all requests this server received.
    pub index: usize,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Request path without the query, e.g. `/chat/completions`.
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
    /// Headers in arrival order; names lowercase, values as raw bytes.
    pub headers: Vec<(String, Bytes)>,
    /// The request body, byte for byte.
    pub body: Bytes,
    /// When the request head reached the handler.
    pub arrived_at: Instant,
    /// When the response body ended (last scripted frame handed to hyper), reset, or was dropped.
    /// `None` while the response is still in flight.
    pub finished_at: Option<Instant>,
    /// How the response ended.
    pub outcome: Outcome,
    /// The status of the response (0 until the reply is chosen).
    pub status: u16,
    /// Longest common byte prefix of this body with an earlier chat request's body (the last 8
    /// are compared): a stand-in for DeepSeek's prefix cache. Divide by ~4 for tokens, e.g.
    /// `Usage::new(..).cache_hit(req.cached_prefix_bytes as u64 / 4)` in a responder.
    pub cached_prefix_bytes: usize,
    /// Whether the request got a scripted response (`false` for 404s and for the
    /// "no scripted response left" 500).
    pub scripted: bool,
}

impl RecordedRequest {
    /// The first header value with this name (case-insensitive), if it is valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The body as UTF-8 text (lossy: invalid sequences become U+FFFD).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn body_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// Whether this is a `POST` to one of the chat-completions paths.
    pub fn is_chat(&self) -> bool {
        self.method == "POST" && crate::server::CHAT_PATHS.contains(&self.path.as_str())
    }

    /// The bearer token from `authorization: Bearer <token>`, if present.
    pub fn bearer(&self) -> Option<&str> {
        self.header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
    }
}
