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

/// An image a chat-completions body carries: a `data:` URL in a user message's
/// `image_url` part (`deepseek-wire.md` §3 rule 5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImagePart {
    /// Index of the message in `messages`.
    pub message: usize,
    /// Whether the message directly follows a `tool` message (a tool result's images).
    pub after_tool: bool,
    /// The media type of the URL.
    pub media_type: String,
    /// The decoded bytes (`None` when the URL is not valid base64 `data:`).
    pub bytes: Option<Vec<u8>>,
    /// The text parts of the same message, in order (labels such as
    /// `[images returned by tool call <id>]`).
    pub texts: Vec<String>,
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

    /// The images of a chat-completions body, in message order (empty when the body is not
    /// JSON or carries none).
    pub fn image_parts(&self) -> Vec<ImagePart> {
        use base64::Engine as _;
        let Ok(body) = self.body_json() else {
            return Vec::new();
        };
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let mut out = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let Some(parts) = m["content"].as_array() else {
                continue;
            };
            let texts: Vec<String> = parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str().map(str::to_owned))
                .collect();
            for p in parts.iter().filter(|p| p["type"] == "image_url") {
                let url = p["image_url"]["url"].as_str().unwrap_or("");
                let (media_type, data) = url
                    .strip_prefix("data:")
                    .and_then(|u| u.split_once(";base64,"))
                    .unwrap_or(("", ""));
                out.push(ImagePart {
                    message: i,
                    after_tool: i > 0 && messages[i - 1]["role"] == "tool",
                    media_type: media_type.to_owned(),
                    bytes: base64::engine::general_purpose::STANDARD.decode(data).ok(),
                    texts: texts.clone(),
                });
            }
        }
        out
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
