//! Stateless admission checks of known event payloads (format §4.4–§4.6).

use serde_json::{Map, Value};

use crate::json::{as_positive, as_safe_u64};
use crate::stream::validate_stream;
use crate::vocab::*;

/// Which role an interpreted message slot must carry.
fn role_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        SYSTEM_MESSAGE => "system",
        DEVELOPER_MESSAGE => "developer",
        USER_MESSAGE => "user",
        ASSISTANT_MESSAGE => "assistant",
        TOOL_RESULT => "tool",
        _ => return None,
    })
}

/// The message value of a surface event (`data` for `user/message`, else `data.message`).
pub fn message_slot<'a>(kind: &str, data: &'a Value) -> Option<&'a Value> {
    if kind == USER_MESSAGE {
        Some(data)
    } else {
        data.get("message")
    }
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} must be an object"))
}

fn positive(m: &Map<String, Value>, key: &str) -> Result<u64, String> {
    m.get(key)
        .and_then(as_positive)
        .ok_or_else(|| format!("data.{key} must be a positive integer"))
}

/// Checks an interpreted message slot (§4.5).
pub fn check_message(msg: &Value, role: &str) -> Result<(), String> {
    let m = obj(msg, "message")?;
    if m.get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("message id must be a non-empty string".into());
    }
    if m.get("role").and_then(Value::as_str) != Some(role) {
        return Err(format!("message role must be \"{role}\""));
    }
    let source = m
        .get("source")
        .and_then(Value::as_object)
        .ok_or("message source must be an object")?;
    match source.get("kind").and_then(Value::as_str) {
        Some("plugin") => return Err("message source kind \"plugin\" is retired in v4".into()),
        Some(k) if !k.is_empty() => {}
        _ => return Err("message source kind must be a non-empty string".into()),
    }
    let content = m
        .get("content")
        .and_then(Value::as_array)
        .ok_or("message content must be an array")?;
    for (i, block) in content.iter().enumerate() {
        check_block(block, role == "developer").map_err(|e| format!("content[{i}]: {e}"))?;
    }
    Ok(())
}

fn check_block(block: &Value, developer: bool) -> Result<(), String> {
    let b = obj(block, "content block")?;
    let tag = b
        .get("type")
        .and_then(Value::as_str)
        .ok_or("content block type must be a string")?;
    let string = |k: &str| -> Result<(), String> {
        b.get(k)
            .and_then(Value::as_str)
            .map(|_| ())
            .ok_or_else(|| format!("{tag} block member \"{k}\" must be a string"))
    };
    match tag {
        "text" | "reasoning" => string("text"),
        "tool-call" => {
            string("id")?;
            string("name")?;
            string("arguments")
        }
        "image" | "file" => {
            obj(b.get("attachment").unwrap_or(&Value::Null), "attachment")?;
            if let Some(o) = b.get("offloaded")
                && o != &Value::Bool(true)
            {
                return Err("image offloaded must be true when present".into());
            }
            Ok(())
        }
        "tool-result" => Err("tool-result blocks are retired in v4".into()),
        "tool-addition" | "tool-removal" => {
            if !developer {
                return Err("tool-change blocks require developer role".into());
            }
            if b.get("toolName")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err("tool-change block needs a non-empty toolName".into());
            }
            if tag == "tool-addition" && b.contains_key("tool") {
                return Err("tool-addition must not carry an inline tool".into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn no_retired_blocks(blocks: Option<&Value>, what: &str) -> Result<(), String> {
    if let Some(Value::Array(items)) = blocks {
        for b in items {
            if matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool-result" | "tool-addition" | "tool-removal")
            ) {
                return Err(format!("{what} holds a retired or misplaced block"));
            }
        }
    }
    Ok(())
}

/// Stateless checks of one known event's payload. State-dependent rules (headerSeq, offload
/// targets, replacements, turn structure) are checked by the log.
pub fn check_payload(kind: &str, data: &Value) -> Result<(), String> {
    let m = obj(data, "data")?;
    if let Some(role) = role_of(kind) {
        let msg = message_slot(kind, data).ok_or("data.message is missing")?;
        check_message(msg, role)?;
        if kind != USER_MESSAGE {
            positive(m, "turn")?;
            positive(m, "step")?;
        }
    }
    match kind {
        TURN_START => {
            positive(m, "turn")?;
        }
        TURN_END => {
            positive(m, "turn")?;
            let reason = m
                .get("reason")
                .and_then(Value::as_object)
                .ok_or("turn/end reason must be an object")?;
            match reason.get("kind").and_then(Value::as_str) {
                Some(
                    "completed" | "aborted" | "blocked" | "error" | "max-tokens" | "interrupted"
                    | "forked",
                ) => {}
                other => return Err(format!("turn/end reason kind {other:?} is not known")),
            }
        }
        STEP_START | STEP_END => {
            positive(m, "turn")?;
            positive(m, "step")?;
        }
        SYSTEM_MESSAGE => {}
        TOOL_RESULT => {
            let msg = m
                .get("message")
                .and_then(Value::as_object)
                .ok_or("data.message missing")?;
            let call_id = msg
                .get("toolCallId")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let source_call = msg.pointer_source_call();
            if call_id.is_none() || call_id != source_call {
                return Err("tool/result message.toolCallId must be non-empty and equal message.source.callId".into());
            }
            if msg
                .get("source")
                .and_then(|s| s.get("kind"))
                .and_then(Value::as_str)
                != Some("tool")
            {
                return Err("tool/result source must be {kind:\"tool\", callId}".into());
            }
            let is_error = match msg.get("isError") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("tool/result message.isError must be a boolean".into()),
            };
            if m.contains_key("error") && !is_error {
                return Err("error requires message.isError === true".into());
            }
        }
        DEVELOPER_MESSAGE => {
            let additions = m
                .get("message")
                .and_then(|x| x.get("content"))
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-addition"))
                        .count()
                })
                .unwrap_or(0);
            let header_seq = m.get("headerSeq");
            if (additions > 0) != header_seq.is_some() {
                return Err(
                    "developer/message requires headerSeq exactly when tool additions are present"
                        .into(),
                );
            }
            if let Some(h) = header_seq
                && as_safe_u64(h).is_none()
            {
                return Err("developer/message headerSeq must be a non-negative integer".into());
            }
        }
        USER_MESSAGE => {}
        ASSISTANT_MESSAGE | ASSISTANT_ATTEMPT => {
            if kind == ASSISTANT_ATTEMPT {
                positive(m, "turn")?;
                positive(m, "step")?;
            }
            validate_stream(m.get("stream").ok_or("data.stream is missing")?)?;
            if let Some(i) = m.get("interrupted")
                && i != &Value::Bool(true)
            {
                return Err("interrupted must be true when present".into());
            }
        }
        TOOL_CALL => {
            positive(m, "turn")?;
            positive(m, "step")?;
            for k in ["callId", "name", "arguments"] {
                if m.get(k).and_then(Value::as_str).is_none() {
                    return Err(format!("tool/call {k} must be a string"));
                }
            }
        }
        REQUEST_HEADER => check_request_header(m)?,
        REQUEST_CONTEXT => {}
        INBOX_SPLICED => {
            match m.get("target").and_then(Value::as_str) {
                Some("next-turn" | "next-step") => {}
                _ => return Err("inbox splice target must be next-turn or next-step".into()),
            }
            as_safe_u64(m.get("start").unwrap_or(&Value::Null))
                .ok_or("inbox splice start must be a non-negative integer")?;
            let inserted = m
                .get("inserted")
                .and_then(Value::as_array)
                .ok_or("inbox splice inserted must be an array")?;
            for msg in inserted {
                check_message(msg, "user")?;
            }
        }
        END_SEED
            if !(m.is_empty()
                || (m.len() == 1 && m.get("inherited") == Some(&Value::Bool(true)))) =>
        {
            return Err("session/end-seed data must be {} or {\"inherited\":true}".into());
        }
        "session/title-llm-request" => {
            if let Some(Value::Array(msgs)) = m.get("messages") {
                for msg in msgs {
                    check_message(msg, "user")?;
                }
            }
        }
        "team/message/queued" => {
            no_retired_blocks(data.pointer("/message/content"), "team message")?
        }
        "compaction/summary" => {
            no_retired_blocks(m.get("summary"), "compaction summary")?;
            no_retired_blocks(m.get("rawOutput"), "compaction rawOutput")?;
        }
        "tool/ptc-dispatch" => no_retired_blocks(m.get("content"), "ptc dispatch content")?,
        _ => {}
    }
    Ok(())
}

trait SourceCall {
    fn pointer_source_call(&self) -> Option<&str>;
}
impl SourceCall for Map<String, Value> {
    fn pointer_source_call(&self) -> Option<&str> {
        self.get("source")?.get("callId")?.as_str()
    }
}

fn check_request_header(m: &Map<String, Value>) -> Result<(), String> {
    let header = m
        .get("header")
        .and_then(Value::as_object)
        .ok_or("request/header header must be an object")?;
    if header.contains_key("system") {
        return Err("must omit header.system; use system/message".into());
    }
    let config = header
        .get("config")
        .and_then(Value::as_object)
        .ok_or("request/header config must be an object")?;
    for k in ["provider", "model"] {
        if config
            .get(k)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(format!(
                "request/header config.{k} must be a non-empty string"
            ));
        }
    }
    if let Some(e) = config.get("reasoningEffort")
        && e.as_str().is_none_or(str::is_empty)
    {
        return Err("request/header config.reasoningEffort must be non-empty".into());
    }
    if let Some(d) = header.get("adapterDefaults") {
        let d = d.as_object().ok_or("adapterDefaults must be an object")?;
        if d.is_empty() {
            return Err("adapterDefaults must not be {}".into());
        }
        for (k, v) in d {
            if v != &Value::Bool(true) || !config.contains_key(k) {
                return Err(format!(
                    "adapterDefaults.{k} must be true and its config value present"
                ));
            }
        }
    }
    if let Some(t) = header.get("tools") {
        let tools = t
            .as_array()
            .ok_or("request/header tools must be an array")?;
        if tools.is_empty() {
            return Err("request/header tools must be omitted when empty".into());
        }
        for tool in tools {
            let tool = tool.as_object().ok_or("tool schema must be an object")?;
            if tool.get("name").and_then(Value::as_str).is_none()
                || tool.get("description").and_then(Value::as_str).is_none()
                || !tool.get("parameters").is_some_and(Value::is_object)
            {
                return Err("tool schema must be {name, description, parameters}".into());
            }
            if let Some(d) = tool.get("deferLoading")
                && d != &Value::Bool(true)
            {
                return Err("tool deferLoading must be true when present".into());
            }
        }
    }
    match m.get("reason").and_then(Value::as_str) {
        Some("initial" | "resume" | "change" | "series") => {}
        other => return Err(format!("request/header reason {other:?} is not known")),
    }
    if let Some(s) = m.get("startsSeries")
        && s != &Value::Bool(true)
    {
        return Err("request/header startsSeries must be true when present".into());
    }
    Ok(())
}
