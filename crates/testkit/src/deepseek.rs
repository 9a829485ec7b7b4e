//! DeepSeek HTTP error replies, byte-identical to `fixtures/deepseek/http-*.json`.
//!
//! Bodies are single-line JSON without a trailing newline, as the server sends them, in the
//! OpenAI envelope `{"error":{"message","type","param","code"}}`.

use crate::reply::Reply;

/// 401 body for a wrong key (captured; the key is masked as `****abcd`).
pub const HTTP_401_BODY: &str = r#"{"error":{"message":"Authentication Fails, Your api key: ****abcd is invalid","type":"authentication_error","param":null,"code":"invalid_request_error"}}"#;

/// 402 body (captured).
pub const HTTP_402_BODY: &str = r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#;

/// 429 body (synthesized: no public capture exists; classify by status, not by these strings).
pub const HTTP_429_BODY: &str = r#"{"error":{"message":"Rate Limit Reached","type":"rate_limit_error","param":null,"code":"rate_limit_error"}}"#;

/// 400 context-overflow body (message as captured).
pub const HTTP_400_CONTEXT_BODY: &str = r#"{"error":{"message":"This model's maximum context length is 1048576 tokens. However, you requested 1333908 tokens (1325716 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;

/// 400 body when an assistant turn's `reasoning_content` was not passed back (captured text).
pub const HTTP_400_REASONING_BODY: &str = r#"{"error":{"message":"The `reasoning_content` in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;

/// `GET /models` body.
pub const MODELS_BODY: &str = r#"{"object":"list","data":[{"id":"deepseek-flash","object":"model","owned_by":"deepseek"},{"id":"deepseek-v4-pro","object":"model","owned_by":"deepseek"}]}"#;

/// The trace id header value sent on every helper reply (DeepSeek sends `x-ds-trace-id`).
pub const TRACE_ID: &str = "dsh-testkit-trace";

/// An error body in DeepSeek's envelope: `{"error":{"message","type","param":null,"code"}}`.
pub fn error_body(message: &str, error_type: &str, code: &str) -> String {
    serde_json::json!({
        "error": {"message": message, "type": error_type, "param": null, "code": code}
    })
    .to_string()
}

/// A JSON error reply with DeepSeek's envelope and an `x-ds-trace-id` header.
pub fn error_reply(status: u16, message: &str, error_type: &str, code: &str) -> Reply {
    raw_error(status, error_body(message, error_type, code))
}

fn raw_error(status: u16, body: impl Into<bytes::Bytes>) -> Reply {
    Reply::json(status, body).header("x-ds-trace-id", TRACE_ID)
}

/// 401 with the captured "Authentication Fails" body.
pub fn unauthorized() -> Reply {
    raw_error(401, HTTP_401_BODY)
}

/// 402 with the captured "Insufficient Balance" body.
pub fn insufficient_balance() -> Reply {
    raw_error(402, HTTP_402_BODY)
}

/// 429 with the (synthesized) "Rate Limit Reached" body, plus `retry-after` when given
/// (delta-seconds such as `"2"` or an HTTP-date; sent verbatim, so invalid values can be tested).
pub fn rate_limited(retry_after: Option<&str>) -> Reply {
    let reply = raw_error(429, HTTP_429_BODY);
    match retry_after {
        Some(value) => reply.header("retry-after", value),
        None => reply,
    }
}

/// 400 with the captured context-overflow body.
pub fn context_exceeded() -> Reply {
    raw_error(400, HTTP_400_CONTEXT_BODY)
}

/// 400 with the captured "reasoning_content must be passed back" body.
pub fn reasoning_not_passed_back() -> Reply {
    raw_error(400, HTTP_400_REASONING_BODY)
}

/// 400 `invalid_request_error` with a custom message.
pub fn invalid_request(message: &str) -> Reply {
    error_reply(
        400,
        message,
        "invalid_request_error",
        "invalid_request_error",
    )
}

/// 500 "Server Error".
pub fn server_error() -> Reply {
    error_reply(500, "Server Error", "server_error", "server_error")
}

/// 503 "Server Overloaded".
pub fn overloaded() -> Reply {
    error_reply(503, "Server Overloaded", "server_error", "server_error")
}
