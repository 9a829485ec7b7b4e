//! Framing: newline-delimited JSON-RPC 2.0 (protocol §1.2). A bounded line splitter (a client
//! that never sends a newline cannot make the server buffer without limit) and the
//! classification of one line into request, notification, response or invalid frame.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id, echoed unchanged: a string or a number (the Python client sends UUID strings,
/// the TypeScript one `req_<hex>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// A numeric id, kept as written.
    Number(serde_json::Number),
    /// A string id.
    String(String),
}

/// JSON-RPC error codes the server answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// `-32700`: the line is not JSON.
    ParseError,
    /// `-32600`: JSON, but not a request object.
    InvalidRequest,
    /// `-32603`: a handler failed (upstream answers every handler failure, unknown methods and
    /// bad parameters included, with this code; the clients treat all codes alike).
    Internal,
}

impl ErrorCode {
    /// The wire code.
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::Internal => -32603,
        }
    }
}

/// One classified line.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// Blank line: skipped.
    Blank,
    /// `id` + `method`.
    Request {
        /// The id to echo.
        id: RequestId,
        /// Method name.
        method: String,
        /// Params; absent or non-object params read as `{}`.
        params: Value,
    },
    /// `method` without `id`.
    Notification {
        /// Method name.
        method: String,
    },
    /// `id` without `method`: a response (the server sends no requests, so it is dropped).
    Response,
    /// Not a frame: answered with an error whose id is `id` when one could be read.
    Invalid {
        /// The id, when the object carried a usable one.
        id: Option<RequestId>,
        /// Which error.
        code: ErrorCode,
        /// What is wrong, for the client.
        message: String,
    },
}

/// Classifies one line (without its `\n`; a trailing `\r` and surrounding whitespace are
/// trimmed).
pub fn parse_line(line: &[u8]) -> Incoming {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Incoming::Blank;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: None,
                code: ErrorCode::ParseError,
                message: format!("parse error: the line is not JSON ({e})"),
            };
        }
    };
    let Value::Object(mut obj) = value else {
        return Incoming::Invalid {
            id: None,
            code: ErrorCode::InvalidRequest,
            message: "invalid request: a frame must be a JSON object".into(),
        };
    };
    let id = match obj.remove("id") {
        None | Some(Value::Null) => None,
        Some(v) => match serde_json::from_value::<RequestId>(v) {
            Ok(id) => Some(id),
            Err(_) => {
                return Incoming::Invalid {
                    id: None,
                    code: ErrorCode::InvalidRequest,
                    message: "invalid request: `id` must be a string or a number".into(),
                };
            }
        },
    };
    let method = match obj.remove("method") {
        None => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => {
            return Incoming::Invalid {
                id,
                code: ErrorCode::InvalidRequest,
                message: "invalid request: `method` must be a string".into(),
            };
        }
    };
    let params = match obj.remove("params") {
        Some(p @ Value::Object(_)) => p,
        _ => Value::Object(Default::default()),
    };
    match (id, method) {
        (Some(id), Some(method)) => Incoming::Request { id, method, params },
        (None, Some(method)) => Incoming::Notification { method },
        (Some(_), None) => Incoming::Response,
        (None, None) => Incoming::Invalid {
            id: None,
            code: ErrorCode::InvalidRequest,
            message: "invalid request: a frame needs `method` or `id`".into(),
        },
    }
}

/// What [`LineSplitter::push`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its `\n`.
    Complete(Vec<u8>),
    /// A line longer than the limit: its bytes were dropped up to the next `\n`.
    TooLong,
}

/// Splits a byte stream into `\n`-terminated lines, holding at most `max` bytes of a line.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    buf: Vec<u8>,
    /// Dropping the rest of an over-long line.
    skipping: bool,
}

impl LineSplitter {
    /// A splitter that refuses lines over `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            buf: Vec::new(),
            skipping: false,
        }
    }

    /// Feeds `bytes` and appends every line they complete to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Line>) {
        while !bytes.is_empty() {
            let nl = bytes.iter().position(|b| *b == b'\n');
            let (part, rest, done) = match nl {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            if !self.skipping {
                if self.buf.len() + part.len() > self.max {
                    self.buf = Vec::new();
                    self.skipping = true;
                    out.push(Line::TooLong);
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            if done {
                if self.skipping {
                    self.skipping = false;
                } else {
                    out.push(Line::Complete(std::mem::take(&mut self.buf)));
                }
            }
            bytes = rest;
        }
    }

    /// The unterminated tail at end of input, if any (a last line without `\n` still counts).
    pub fn finish(&mut self) -> Option<Line> {
        if self.skipping {
            self.skipping = false;
            return None;
        }
        if self.buf.is_empty() {
            return None;
        }
        Some(Line::Complete(std::mem::take(&mut self.buf)))
    }

    /// Bytes currently held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// A success response line.
pub fn response(id: &RequestId, result: &Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error response line (`id` null when the request's id could not be read).
pub fn error_response(id: Option<&RequestId>, code: ErrorCode, message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code.code(), "message": message},
    })
    .to_string()
}

/// A notification line whose `params` are already-serialised JSON.
pub fn notification_raw(method: &str, params: &str) -> String {
    let mut s = String::with_capacity(params.len() + method.len() + 40);
    s.push_str(r#"{"jsonrpc":"2.0","method":"#);
    s.push_str(&Value::String(method.to_owned()).to_string());
    s.push_str(r#","params":"#);
    s.push_str(params);
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn classifies_frames() {
        assert_eq!(parse_line(b"  \r"), Incoming::Blank);
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","id":"a","method":"shutdown"}"#),
            Incoming::Request {
                id: RequestId::String("a".into()),
                method: "shutdown".into(),
                params: serde_json::json!({}),
            }
        );
        assert_eq!(
            parse_line(br#"{"id":7,"method":"m","params":[1]}"#),
            Incoming::Request {
                id: RequestId::Number(7.into()),
                method: "m".into(),
                params: serde_json::json!({}),
            }
        );
        assert_eq!(
            parse_line(br#"{"method":"n"}"#),
            Incoming::Notification { method: "n".into() }
        );
        assert_eq!(parse_line(br#"{"id":1,"result":{}}"#), Incoming::Response);
        assert!(matches!(
            parse_line(b"{oops"),
            Incoming::Invalid {
                code: ErrorCode::ParseError,
                ..
            }
        ));
        assert!(matches!(
            parse_line(b"[1]"),
            Incoming::Invalid {
                code: ErrorCode::InvalidRequest,
                ..
            }
        ));
        assert!(matches!(
            parse_line(br#"{"id":{},"method":"m"}"#),
            Incoming::Invalid { id: None, .. }
        ));
    }

    #[test]
    fn an_over_long_line_is_dropped_and_the_next_one_kept() {
        let mut s = LineSplitter::new(4);
        let mut out = Vec::new();
        s.push(b"abcdefgh", &mut out);
        assert_eq!(s.buffered(), 0);
        s.push(b"ij\nok\n", &mut out);
        assert_eq!(out, vec![Line::TooLong, Line::Complete(b"ok".to_vec())]);
    }

    #[test]
    fn notification_raw_is_json() {
        let line = notification_raw("session.status", r#"{"status":"idle"}"#);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["method"], "session.status");
        assert_eq!(v["params"]["status"], "idle");
    }
}
