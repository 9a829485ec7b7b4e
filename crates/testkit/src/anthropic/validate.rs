//! What a Messages endpoint checks ([`validate_request`]) and dsh's request rules for this
//! dialect ([`rule_violations`]).

use serde_json::{Map, Value};

use super::reply::{ErrorKind, error_reply};
use crate::reply::Reply;

/// Top-level keys in the order the original harness (and dsh) send them; the two extension
/// fields of the original come last.
pub const BODY_KEY_ORDER: &[&str] = &[
    "model",
    "stream",
    "messages",
    "max_tokens",
    "thinking",
    "output_config",
    "system",
    "temperature",
    "stop_sequences",
    "tools",
    "dsh_session_log",
    "dsh_plugin_packages",
];

fn bad(message: String) -> Reply {
    error_reply(ErrorKind::InvalidRequest, &message)
}

fn blocks_of(m: &Value) -> Vec<&Map<String, Value>> {
    match m.get("content") {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_object).collect(),
        _ => Vec::new(),
    }
}

fn block_type(b: &Map<String, Value>) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or("")
}

fn check_content(i: usize, m: &Value) -> Result<(), String> {
    match m.get("content") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(a)) => {
            if a.is_empty() {
                return Err(format!(
                    "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
                ));
            }
            for (j, b) in a.iter().enumerate() {
                let Some(b) = b.as_object() else {
                    return Err(format!(
                        "messages.{i}.content.{j}: Input should be an object"
                    ));
                };
                let t = block_type(b);
                let need: &[&str] = match t {
                    "text" => &["text"],
                    "thinking" => &["thinking"],
                    "redacted_thinking" => &["data"],
                    "tool_use" => &["id", "name", "input"],
                    "tool_result" => &["tool_use_id"],
                    "image" | "document" | "search_result" => &["source"],
                    "" => return Err(format!("messages.{i}.content.{j}.type: Field required")),
                    _ => &[],
                };
                for k in need {
                    if !b.contains_key(*k) {
                        return Err(format!("messages.{i}.content.{j}.{t}.{k}: Field required"));
                    }
                }
                if t == "text" && b.get("text").and_then(Value::as_str) == Some("") {
                    return Err(format!(
                        "messages.{i}: text content blocks must be non-empty"
                    ));
                }
                if t == "tool_use" && !b.get("input").is_some_and(Value::is_object) {
                    return Err(format!(
                        "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                    ));
                }
            }
            Ok(())
        }
        _ => Err(format!("messages.{i}.content: Field required")),
    }
}

/// Checks a Messages request body like the API would: `Err` holds the 400 reply, in
/// Anthropic's envelope. Any well-formed request passes: `system` as a string or text blocks,
/// `thinking` (`enabled`, `disabled`, `adaptive`), `tools`, `cache_control` (at most 4),
/// extension fields. Tool use must be answered: every `tool_use` id by a `tool_result` in the
/// next (user) message, and every `tool_result` must answer a `tool_use` of the message before.
/// With thinking enabled, an assistant turn that calls tools must begin with its (signed or
/// DeepSeek-unsigned) thinking block when it is the last assistant message (the reasoning of
/// the current tool loop must be passed back).
pub fn validate_request(body: &[u8]) -> Result<(), Reply> {
    check(body).map_err(bad)
}

fn check(body: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))?;
    let obj = v.as_object().ok_or("the body must be a JSON object")?;
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err("model: Field required".into());
    }
    if obj
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_none_or(|n| n == 0)
    {
        return Err("max_tokens: Field required (a positive integer)".into());
    }
    let messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    let thinking_on = match obj.get("thinking") {
        None => false,
        Some(t) => match t.get("type").and_then(Value::as_str) {
            Some("enabled") => true,
            Some("adaptive") => true,
            Some("disabled") => false,
            _ => {
                return Err(
                    "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'".into(),
                );
            }
        },
    };
    match obj.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(a))
            if a.iter()
                .all(|b| b.get("type").and_then(Value::as_str) == Some("text")) => {}
        Some(_) => {
            return Err("system: Input should be a valid string or a list of text blocks".into());
        }
    }
    if let Some(tools) = obj.get("tools") {
        let tools = tools
            .as_array()
            .ok_or("tools: Input should be a valid list")?;
        for (i, t) in tools.iter().enumerate() {
            if !t.get("name").is_some_and(Value::is_string) {
                return Err(format!("tools.{i}.name: Field required"));
            }
            let custom = t.get("type").is_none_or(|ty| ty == "custom");
            if custom && !t.get("input_schema").is_some_and(Value::is_object) {
                return Err(format!("tools.{i}.custom.input_schema: Field required"));
            }
        }
    }
    let mut breakpoints = 0;
    count_cache_control(&v, &mut breakpoints);
    if breakpoints > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    let last_assistant = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant"));
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "user" | "assistant" | "system") {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        check_content(i, m)?;
        let blocks = blocks_of(m);
        if role == "assistant" {
            let uses: Vec<&str> = blocks
                .iter()
                .filter(|b| block_type(b) == "tool_use")
                .filter_map(|b| b.get("id").and_then(Value::as_str))
                .collect();
            if !uses.is_empty() {
                let next = messages.get(i + 1);
                let answered: Vec<&str> = next
                    .map(blocks_of)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|b| block_type(b) == "tool_result")
                    .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
                    .collect();
                if let Some(missing) = uses.iter().find(|id| !answered.contains(id)) {
                    return Err(format!(
                        "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                        i + 1
                    ));
                }
                let first = blocks.first().map(|b| block_type(b));
                if thinking_on
                    && Some(i) == last_assistant
                    && !matches!(first, Some("thinking" | "redacted_thinking"))
                {
                    return Err(format!(
                        "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.",
                        first.unwrap_or("")
                    ));
                }
            }
        }
        if role == "user" {
            let results: Vec<&str> = blocks
                .iter()
                .filter(|b| block_type(b) == "tool_result")
                .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
                .collect();
            if !results.is_empty() {
                let prev_uses: Vec<&str> = i
                    .checked_sub(1)
                    .and_then(|p| messages.get(p))
                    .filter(|p| p.get("role").and_then(Value::as_str) == Some("assistant"))
                    .map(blocks_of)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|b| block_type(b) == "tool_use")
                    .filter_map(|b| b.get("id").and_then(Value::as_str))
                    .collect();
                if let Some(orphan) = results.iter().find(|id| !prev_uses.contains(id)) {
                    return Err(format!(
                        "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {orphan}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
            }
        }
    }
    Ok(())
}

fn count_cache_control(v: &Value, n: &mut usize) {
    match v {
        Value::Object(m) => {
            if m.contains_key("cache_control") {
                *n += 1;
            }
            m.values().for_each(|x| count_cache_control(x, n));
        }
        Value::Array(a) => a.iter().for_each(|x| count_cache_control(x, n)),
        _ => {}
    }
}

/// The value without any `cache_control` member (breakpoints move from request to request;
/// the content they mark does not).
pub fn strip_cache_control(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("cache_control");
            m.values_mut().for_each(strip_cache_control);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// dsh's rules for Messages bodies: keys in [`BODY_KEY_ORDER`], no `null` members, no empty
/// `tools`; and against `previous` (the previous request of the same conversation): the
/// messages extend it (byte for byte when neither body has breakpoints; with breakpoints, once
/// `cache_control` is removed) and every other member is unchanged. One line per violation.
pub fn rule_violations(body: &[u8], previous: Option<&[u8]>) -> Vec<String> {
    let mut out = Vec::new();
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return vec![format!("body is not JSON: {e}")],
    };
    let Some(obj) = value.as_object() else {
        return vec!["body is not a JSON object".into()];
    };
    let mut last = 0;
    for key in obj.keys() {
        match BODY_KEY_ORDER.iter().position(|k| k == key) {
            None => out.push(format!("unexpected top-level key `{key}`")),
            Some(at) if at < last => out.push(format!(
                "top-level key `{key}` out of order (expected {})",
                BODY_KEY_ORDER.join(", ")
            )),
            Some(at) => last = at,
        }
        if obj[key].is_null() {
            out.push(format!("top-level `{key}` is null (omit absent fields)"));
        }
    }
    if obj
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        out.push("empty `tools` array (omit it)".into());
    }
    if let Some(previous) = previous {
        out.extend(extension(body, previous));
    }
    out
}

fn raw_messages(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Raw<'a> {
        #[serde(borrow)]
        messages: &'a serde_json::value::RawValue,
    }
    serde_json::from_slice::<Raw<'_>>(body)
        .ok()
        .map(|r| r.messages.get().to_owned())
}

fn extension(body: &[u8], previous: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let has_breakpoints = |b: &[u8]| {
        b.windows(b"\"cache_control\"".len())
            .any(|w| w == b"\"cache_control\"")
    };
    let (cur, prev) = if has_breakpoints(body) || has_breakpoints(previous) {
        let strip = |b: &[u8]| -> Option<String> {
            let mut v: Value = serde_json::from_slice(b).ok()?;
            strip_cache_control(&mut v);
            Some(v.get("messages")?.to_string())
        };
        (strip(body), strip(previous))
    } else {
        (raw_messages(body), raw_messages(previous))
    };
    let (Some(cur), Some(prev)) = (cur, prev) else {
        return vec!["cannot read `messages` of this or the previous request".into()];
    };
    let prev_open = prev.strip_suffix(']').unwrap_or(&prev);
    // The previous last message may have grown (same-role neighbours merge): compare up to it.
    let prev_open = prev_open
        .strip_suffix("]}")
        .filter(|p| !cur.starts_with(prev_open) && cur.starts_with(p))
        .unwrap_or(prev_open);
    if !cur.starts_with(prev_open) {
        let at = crate::validate::common_prefix_len(prev_open.as_bytes(), cur.as_bytes());
        out.push(format!(
            "messages do not extend the previous request (first difference at byte {at} of the messages array)"
        ));
    }
    let others = |b: &[u8]| -> Option<Value> {
        let mut v: Value = serde_json::from_slice(b).ok()?;
        let m = v.as_object_mut()?;
        m.remove("messages");
        m.remove("dsh_session_log");
        strip_cache_control(&mut v);
        Some(v)
    };
    if others(body) != others(previous) {
        out.push("fields other than `messages` changed from the previous request".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(messages: &str) -> Vec<u8> {
        format!(r#"{{"model":"deepseek-flash","stream":true,"messages":{messages},"max_tokens":100,"thinking":{{"type":"enabled"}}}}"#).into_bytes()
    }

    #[test]
    fn tool_loops_must_be_answered_and_reasoning_passed_back() {
        let ok = body(
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"a","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"}]}]"#,
        );
        assert!(validate_request(&ok).is_ok());
        let unanswered = body(
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"a","name":"x","input":{}}]},{"role":"user","content":"no"}]"#,
        );
        assert_eq!(
            validate_request(&unanswered).unwrap_err().status_code(),
            400
        );
        let no_thinking = body(
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"}]}]"#,
        );
        assert!(validate_request(&no_thinking).is_err());
        let orphan = body(
            r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"zz","content":"r"}]}]"#,
        );
        assert!(validate_request(&orphan).is_err());
        assert!(validate_request(b"{}").is_err());
    }

    #[test]
    fn extension_rules() {
        let a = body(r#"[{"role":"user","content":[{"type":"text","text":"hi"}]}]"#);
        let b = body(
            r#"[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"text","text":"yo"}]}]"#,
        );
        assert_eq!(rule_violations(&b, Some(&a)), Vec::<String>::new());
        let changed = body(r#"[{"role":"user","content":[{"type":"text","text":"HI"}]}]"#);
        assert_eq!(rule_violations(&changed, Some(&a)).len(), 1);
        let marked_a = body(
            r#"[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]"#,
        );
        let marked_b = body(
            r#"[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"text","text":"yo","cache_control":{"type":"ephemeral"}}]}]"#,
        );
        assert_eq!(
            rule_violations(&marked_b, Some(&marked_a)),
            Vec::<String>::new()
        );
        let disordered = br#"{"stream":true,"model":"m","messages":[],"max_tokens":1}"#;
        assert_eq!(rule_violations(disordered, None).len(), 1);
    }
}
