//! Request checks, so adapter bugs fail offline.
//!
//! Two kinds:
//! - [`validate_request`]: what DeepSeek itself rejects (400/422 with the real texts where they are
//!   known), served by [`crate::MockServer::validate_requests`].
//! - [`dsh_rule_violations`]: dsh's own rules, which DeepSeek accepts but tests must fail on
//!   (`content: null`, key order, requests that do not byte-extend the previous one).

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::deepseek;
use crate::reply::Reply;

/// Model ids the mock accepts.
pub const KNOWN_MODELS: &[&str] = &["deepseek-flash", "deepseek-v4-pro"];

/// `reasoning_effort` values DeepSeek accepts (including compatibility aliases).
pub const KNOWN_EFFORTS: &[&str] = &[
    "none", "low", "high", "max", "minimal", "medium", "xhigh", "ultra",
];

/// Top-level request keys in the order dsh sends them (wire-protocol.md §3).
pub const REQUEST_KEY_ORDER: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "thinking",
    "reasoning_effort",
    "tools",
    "temperature",
    "max_tokens",
    "stop",
];

const TOOL_CALLS_NOT_ANSWERED: &str = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (insufficient tool messages following tool_calls message)";
const TOOL_WITHOUT_CALL: &str =
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'";

fn bad_request(message: &str) -> Reply {
    deepseek::invalid_request(message)
}

fn unprocessable(message: &str) -> Reply {
    deepseek::error_reply(
        422,
        message,
        "invalid_request_error",
        "invalid_request_error",
    )
}

/// Checks a chat-completions request body the way DeepSeek would; `Err` holds the error reply
/// (400, or 422 for bodies that do not deserialize). Texts are DeepSeek's where captured; the
/// `tool_choice` and `stream_options` texts are synthesized.
pub fn validate_request(body: &[u8]) -> Result<(), Reply> {
    let value: Value = serde_json::from_slice(body).map_err(|err| {
        unprocessable(&format!(
            "Failed to deserialize the JSON body into the target type: {err}"
        ))
    })?;
    let Some(obj) = value.as_object() else {
        return Err(unprocessable(
            "Failed to deserialize the JSON body into the target type: expected a JSON object",
        ));
    };
    match obj.get("model").and_then(Value::as_str) {
        Some(model) if KNOWN_MODELS.contains(&model) => {}
        Some(model) => {
            return Err(bad_request(&format!(
                "The supported API model names are {}, but you passed {model}.",
                KNOWN_MODELS.join(", ")
            )));
        }
        None => {
            return Err(unprocessable(
                "Failed to deserialize the JSON body into the target type: missing field `model`",
            ));
        }
    }
    let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
        return Err(unprocessable(
            "Failed to deserialize the JSON body into the target type: missing field `messages`",
        ));
    };
    if let Some(effort) = obj.get("reasoning_effort") {
        let effort = effort.as_str().unwrap_or("<non-string>");
        if !KNOWN_EFFORTS.contains(&effort) {
            return Err(unprocessable(&format!(
                "Failed to deserialize the JSON body into the target type: reasoning_effort: \
                 unknown variant `{effort}`, expected one of {}",
                KNOWN_EFFORTS
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    if obj.contains_key("stream_options") && obj.get("stream") != Some(&Value::Bool(true)) {
        return Err(bad_request(
            "stream_options should be set only when stream is true",
        ));
    }
    let thinking = obj
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        != Some("disabled");
    if thinking
        && let Some(choice) = obj.get("tool_choice")
        && !matches!(choice.as_str(), Some("auto" | "none"))
    {
        return Err(bad_request(
            "tool_choice other than 'auto' or 'none' is not supported in thinking mode",
        ));
    }
    check_messages(messages, thinking).map_err(|rule| bad_request(&rule.to_string()))
}

/// A message-order rule DeepSeek enforces; the message is DeepSeek's own wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum MessageRule {
    /// A `tool` message that answers no pending call.
    #[error("{}", TOOL_WITHOUT_CALL)]
    ToolWithoutCall,
    /// Tool calls not all answered before the next message.
    #[error("{}", TOOL_CALLS_NOT_ANSWERED)]
    CallsNotAnswered,
    /// A thinking-mode tool-call turn without `reasoning_content`.
    #[error("The `reasoning_content` in the thinking mode must be passed back to the API.")]
    ReasoningNotPassedBack,
}

fn check_messages(messages: &[Value], thinking: bool) -> Result<(), MessageRule> {
    // Ids of the last assistant message's tool calls still waiting for a `tool` message.
    let mut pending: Vec<String> = Vec::new();
    let mut in_tool_results = false;
    for message in messages {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            if !in_tool_results {
                return Err(MessageRule::ToolWithoutCall);
            }
            let id = message
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            match pending.iter().position(|p| p == id) {
                Some(at) => {
                    pending.remove(at);
                }
                None => return Err(MessageRule::ToolWithoutCall),
            }
            continue;
        }
        if !pending.is_empty() {
            return Err(MessageRule::CallsNotAnswered);
        }
        in_tool_results = false;
        if role == "assistant"
            && let Some(calls) = message.get("tool_calls").and_then(Value::as_array)
            && !calls.is_empty()
        {
            if thinking && message.get("reasoning_content").is_none() {
                return Err(MessageRule::ReasoningNotPassedBack);
            }
            pending = calls
                .iter()
                .map(|c| c.get("id").and_then(Value::as_str).unwrap_or("").to_owned())
                .collect();
            in_tool_results = true;
        }
    }
    if !pending.is_empty() {
        return Err(MessageRule::CallsNotAnswered);
    }
    Ok(())
}

#[derive(Deserialize)]
struct RawMessages<'a> {
    #[serde(borrow)]
    messages: &'a RawValue,
}

/// dsh's request rules (wire-protocol.md §3 and §14) that DeepSeek does not enforce. Returns one
/// line per violation (empty = fine). `previous` is the body of the previous request of the same
/// session: this one's `messages` must byte-extend it, and everything else must be equal.
pub fn dsh_rule_violations(body: &[u8], previous: Option<&[u8]>) -> Vec<String> {
    let mut out = Vec::new();
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(err) => return vec![format!("body is not JSON: {err}")],
    };
    let Some(obj) = value.as_object() else {
        return vec!["body is not a JSON object".to_owned()];
    };
    let mut last = 0;
    for key in obj.keys() {
        match REQUEST_KEY_ORDER.iter().position(|k| k == key) {
            None => out.push(format!("unexpected top-level key `{key}`")),
            Some(at) if at < last => out.push(format!(
                "top-level key `{key}` out of order (expected {})",
                REQUEST_KEY_ORDER.join(", ")
            )),
            Some(at) => last = at,
        }
    }
    for (key, v) in obj {
        if v.is_null() {
            out.push(format!("top-level `{key}` is null (omit absent fields)"));
        }
    }
    if obj
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        out.push("empty `tools` array (omit it)".to_owned());
    }
    if let Some(messages) = obj.get("messages").and_then(Value::as_array) {
        for (i, m) in messages.iter().enumerate() {
            if m.get("role").and_then(Value::as_str) != Some("assistant") {
                continue;
            }
            if m.get("content").is_none_or(Value::is_null) {
                out.push(format!(
                    "messages[{i}]: assistant `content` is null or missing (send \"\")"
                ));
            }
            if let Some(map) = m.as_object() {
                let order = [
                    "role",
                    "content",
                    "reasoning_content",
                    "reasoning",
                    "reasoning_details",
                    "tool_calls",
                ];
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                let expected: Vec<&str> = order
                    .iter()
                    .copied()
                    .filter(|k| map.contains_key(*k))
                    .collect();
                if keys != expected {
                    out.push(format!(
                        "messages[{i}]: assistant keys {keys:?}, expected order {order:?}"
                    ));
                }
            }
        }
    }
    if let Some(previous) = previous {
        out.extend(extension_violations(body, previous));
    }
    out
}

fn extension_violations(body: &[u8], previous: &[u8]) -> Vec<String> {
    let (Ok(cur), Ok(prev)) = (
        serde_json::from_slice::<RawMessages<'_>>(body),
        serde_json::from_slice::<RawMessages<'_>>(previous),
    ) else {
        return vec!["cannot read `messages` of this or the previous request".to_owned()];
    };
    let mut out = Vec::new();
    let prev_raw = prev.messages.get();
    let cur_raw = cur.messages.get();
    let prev_open = prev_raw.strip_suffix(']').unwrap_or(prev_raw);
    if !cur_raw.starts_with(prev_open) {
        let at = common_prefix_len(prev_open.as_bytes(), cur_raw.as_bytes());
        out.push(format!(
            "messages do not byte-extend the previous request (first difference at byte {at} of \
             the messages array)"
        ));
    }
    // Everything but `messages` and `tools` must be byte-identical; `tools` may only gain
    // entries at its end (a late tool, announced by a developer message): the tools declared
    // before keep their places, so the cached prefix holds up to the new ones.
    let split = |v: &[u8]| -> Option<(Value, Vec<Value>)> {
        let mut v: Value = serde_json::from_slice(v).ok()?;
        let obj = v.as_object_mut()?;
        obj.remove("messages");
        let tools = match obj.remove("tools") {
            Some(Value::Array(t)) => t,
            _ => Vec::new(),
        };
        Some((v, tools))
    };
    match (split(body), split(previous)) {
        (Some((cur, cur_tools)), Some((prev, prev_tools))) => {
            if cur != prev {
                out.push(
                    "fields other than `messages` and `tools` changed from the previous request"
                        .to_owned(),
                );
            }
            if !cur_tools.starts_with(&prev_tools) {
                let names = |t: &[Value]| -> Vec<String> {
                    t.iter()
                        .map(|t| {
                            t.pointer("/function/name")
                                .or_else(|| t.get("name"))
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                                .to_owned()
                        })
                        .collect()
                };
                out.push(format!(
                    "`tools` do not extend the previous request's (a tool changed, went away or \
                     was not appended at the end): before {:?}, now {:?}",
                    names(&prev_tools),
                    names(&cur_tools)
                ));
            }
        }
        _ => out.push("cannot read this or the previous request".to_owned()),
    }
    out
}

/// Length of the longest common byte prefix of `a` and `b`.
pub fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    // Block-wise slice equality (memcmp) first: request bodies can be megabytes.
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}
