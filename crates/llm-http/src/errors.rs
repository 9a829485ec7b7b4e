//! HTTP failure mapping shared by the dialects. Both error envelopes carry `error.message` and
//! `error.type`: OpenAI's `{"error":{"message","type","code"}}` and Anthropic's
//! `{"type":"error","error":{"type","message"}}`.

use std::sync::LazyLock;
use std::time::SystemTime;

use dsh_llm::{FailureCode, LlmFailure, codes};
use regex::Regex;
use serde::Deserialize;

static QUOTA: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)insufficient[ _-]+(quota|balance|credit|credits)",
        r"|(quota|usage[ _-]+limit)[ _-]+(exceeded|exhausted|reached)",
        r"|exceed(ed|s)?[ _-]+((your|the)[ _-]+)?(current[ _-]+)?quota",
        r"|(balance|credits?)[ _-]+(exhausted|depleted)",
        r"|credit balance is too low",
        r"|billing_error",
        r"|out[ _-]+of[ _-]+(credits?|budget)",
    ))
    .ok()
});

static CONTEXT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)context[ _-](length|window)[ _-](exceeded|exceeds|overflow|limit[ _-]exceeded)",
        r"|(maximum|max)( allowed| supported)? context (length|window)",
        r"|prompt is too long",
        r"|(request|prompt|input|messages?) (is |are )?too (large|long) for (the|this)? ?(model('s)? )?context",
        r"|(input|prompt|request) (is )?too (long|large) for (this|the) model",
        r"|(input|prompt|request).*(exceeds|overflows|is larger than).*(the )?(model's )?context",
    ))
    .ok()
});

fn matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(text))
}

#[derive(Deserialize)]
struct Envelope {
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<serde_json::Value>,
    #[serde(default, rename = "type")]
    kind: Option<serde_json::Value>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

fn as_text(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// `Retry-After` as milliseconds: delta-seconds or an HTTP-date (minus `now`); kept only if > 0.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<u64> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = v.parse().ok()?;
        return secs.checked_mul(1000).filter(|ms| *ms > 0);
    }
    let when = httpdate::parse_http_date(v).ok()?;
    let ms = when.duration_since(now).ok()?.as_millis();
    u64::try_from(ms).ok().filter(|ms| *ms > 0)
}

/// The code of an error `type` as sent in a body (HTTP or an in-stream `error` event):
/// Anthropic's `overloaded_error`, `api_error`, `rate_limit_error`, ... `None` = not decisive.
pub fn code_of_type(kind: &str, message: &str) -> Option<FailureCode> {
    match kind {
        "authentication_error" | "permission_error" => Some(codes::AUTH),
        "billing_error" => Some(codes::QUOTA),
        "rate_limit_error" if matches(&QUOTA, message) => Some(codes::QUOTA),
        "rate_limit_error" => Some(codes::RATE_LIMIT),
        "overloaded_error" | "api_error" | "server_error" => Some(codes::SERVER),
        "request_too_large" => Some(codes::INVALID_REQUEST),
        "invalid_request_error" if matches(&CONTEXT, message) => {
            Some(codes::CONTEXT_WINDOW_EXCEEDED)
        }
        "invalid_request_error" if matches(&QUOTA, message) => Some(codes::QUOTA),
        "invalid_request_error" => Some(codes::INVALID_REQUEST),
        _ => None,
    }
}

/// Classifies an HTTP error response of provider `label` (first match wins, DeepSeek's order of
/// `deepseek-wire.md` §10). The message is `error.message`, else
/// `<label> API error (HTTP <status>)`. 401/403 → `AUTH`; 413 → `CONTEXT_WINDOW_EXCEEDED` with
/// context wording, else `INVALID_REQUEST`; 402 or quota wording (any status) → `QUOTA`; 429 →
/// `RATE_LIMIT`; 400 with context wording → `CONTEXT_WINDOW_EXCEEDED`; other 4xx →
/// `INVALID_REQUEST`; 5xx (Anthropic's 529 included) → `SERVER`; anything else `HTTP_<status>`.
pub fn classify(
    label: &str,
    status: u16,
    body: &[u8],
    retry_after: Option<&str>,
    request_id: Option<String>,
    now: SystemTime,
) -> LlmFailure {
    let parsed = serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|e| e.error);
    let message = parsed
        .as_ref()
        .and_then(|e| as_text(e.message.as_ref()))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| format!("{label} API error (HTTP {status})"));
    let wording = match &parsed {
        Some(e) => format!(
            "{} {} {}",
            as_text(e.code.as_ref()).unwrap_or_default(),
            as_text(e.kind.as_ref()).unwrap_or_default(),
            message
        ),
        None => message.clone(),
    };
    let context = matches(&CONTEXT, &wording);
    let code = if status == 401 || status == 403 {
        codes::AUTH
    } else if status == 413 && context {
        codes::CONTEXT_WINDOW_EXCEEDED
    } else if status == 413 {
        codes::INVALID_REQUEST
    } else if status == 402 || matches(&QUOTA, &wording) {
        codes::QUOTA
    } else if status == 429 {
        codes::RATE_LIMIT
    } else if status == 400 && context {
        codes::CONTEXT_WINDOW_EXCEEDED
    } else if status >= 500 {
        codes::SERVER
    } else if status >= 400 {
        codes::INVALID_REQUEST
    } else {
        FailureCode::from(format!("HTTP_{status}"))
    };
    LlmFailure::new(code, message)
        .with_status(status)
        .with_retry_after_ms(retry_after.and_then(|v| parse_retry_after(v, now)))
        .with_request_id(request_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("2", now), Some(2000));
        assert_eq!(parse_retry_after("0", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(&later, now), Some(30_000));
    }

    #[test]
    fn both_envelopes() {
        let now = SystemTime::now();
        let c = |status, body: &str| classify("X", status, body.as_bytes(), None, None, now).code;
        let anth = |t: &str, m: &str| {
            format!(r#"{{"type":"error","error":{{"type":"{t}","message":"{m}"}}}}"#)
        };
        assert_eq!(
            c(401, &anth("authentication_error", "invalid x-api-key")),
            "AUTH"
        );
        assert_eq!(
            c(
                400,
                &anth(
                    "invalid_request_error",
                    "prompt is too long: 210000 tokens > 200000 maximum"
                )
            ),
            "CONTEXT_WINDOW_EXCEEDED"
        );
        assert_eq!(
            c(
                400,
                &anth(
                    "invalid_request_error",
                    "Your credit balance is too low to access the Anthropic API."
                )
            ),
            "QUOTA"
        );
        assert_eq!(c(529, &anth("overloaded_error", "Overloaded")), "SERVER");
        assert_eq!(c(429, &anth("rate_limit_error", "slow down")), "RATE_LIMIT");
        assert_eq!(c(402, "x"), "QUOTA");
        assert_eq!(c(404, ""), "INVALID_REQUEST");
        assert_eq!(c(302, ""), "HTTP_302");
        let f = classify("Acme", 503, b"", Some("3"), Some("r".into()), now);
        assert_eq!(f.message, "Acme API error (HTTP 503)");
        assert_eq!(f.provider_retry_after_ms, Some(3000));
        assert_eq!(code_of_type("overloaded_error", ""), Some(codes::SERVER));
        assert_eq!(code_of_type("weird", ""), None);
    }

    #[test]
    fn deepseek_classification_order() {
        let now = SystemTime::now();
        let c = |status, body: &str| {
            classify("DeepSeek", status, body.as_bytes(), None, None, now).code
        };
        let env = |m: &str| format!(r#"{{"error":{{"message":"{m}","type":"x","code":"y"}}}}"#);
        assert_eq!(c(401, ""), "AUTH");
        assert_eq!(c(403, &env("insufficient balance")), "AUTH");
        assert_eq!(c(413, &env("insufficient balance")), "INVALID_REQUEST");
        assert_eq!(
            c(413, &env("prompt is too long")),
            "CONTEXT_WINDOW_EXCEEDED"
        );
        assert_eq!(c(429, &env("You exceeded your current quota")), "QUOTA");
        assert_eq!(c(429, &env("Rate Limit Reached")), "RATE_LIMIT");
        assert_eq!(c(402, "not json"), "QUOTA");
        for m in [
            "maximum context length is 1048576 tokens",
            "prompt is too long for this model",
            "context_length_exceeded",
            "context length exceeded",
        ] {
            assert_eq!(c(400, &env(m)), "CONTEXT_WINDOW_EXCEEDED", "{m}");
        }
        assert_eq!(c(400, &env("bad field")), "INVALID_REQUEST");
        assert_eq!(c(422, &env("Failed to deserialize")), "INVALID_REQUEST");
        assert_eq!(c(500, "Server Error"), "SERVER");
        let f = classify("DeepSeek", 503, b"", Some("3"), Some("rid".into()), now);
        assert_eq!(f.message, "DeepSeek API error (HTTP 503)");
        assert_eq!(
            (f.status, f.provider_retry_after_ms, f.request_id.as_deref()),
            (Some(503), Some(3000), Some("rid"))
        );
    }

    #[test]
    fn retry_after_edge_cases() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(7000));
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(parse_retry_after("1.5", now), None);
        assert_eq!(parse_retry_after("99999999999999999999999", now), None);
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past, now), None);
        assert_eq!(parse_retry_after(&httpdate::fmt_http_date(now), now), None);
    }
}
