//! The v3 → v4 conversion (format §16.2), in memory. The v3 file is never modified.
//!
//! Implemented: rules 1–6, 8–9 (rule 8's isSeeded check and rule 11's validation run in
//! [`crate::SessionLog::replay`]). Rule 7 (inserting a `turn/end` before an interrupted turn's
//! successor) refuses the log instead of renumbering. Rule 10 (parent catalog completion from
//! child sessions) is not applied: it needs the other sessions of the root.

use serde_json::{Map, Value};

use crate::error::LogError;
use crate::event::Event;
use crate::header::SessionHeader;
use crate::json::as_safe_u64;
use crate::vocab::*;

fn unsupported(seq: u64, kind: &str, m: impl std::fmt::Display) -> LogError {
    LogError::Unsupported(format!(
        "v3 session log cannot be converted at event {seq} (\"{kind}\"): {m}"
    ))
}

/// Converts v3 events to v4 (rules 2–9).
pub fn v3_to_v4(_header: &SessionHeader, events: Vec<Event>) -> Result<Vec<Event>, LogError> {
    check_interrupted_turns(&events)?;
    let mut out = Vec::with_capacity(events.len());
    for mut ev in events {
        let seq = ev.seq();
        let kind = ev.kind().to_string();
        if kind == "tool/code-dispatch-start" || kind == "tool/code-dispatch" {
            if ev.ignorable() {
                ev.set_parts(Some(format!("plugin:{kind}")), None, None, None);
                out.push(ev);
                continue;
            }
            return Err(unsupported(seq, &kind, "retired event type"));
        }
        if !is_known_v3(&kind) {
            if ev.ignorable() {
                ev.set_parts(Some(format!("plugin:{kind}")), None, None, None);
                out.push(ev);
                continue;
            }
            return Err(LogError::Unsupported(format!(
                "v3 session log has unknown required event type \"{kind}\" at event {seq}"
            )));
        }
        let mut data = ev.data().clone();
        convert_data(&kind, &mut data, seq).map_err(|m| unsupported(seq, &kind, m))?;
        ev.set_parts(None, Some(data), None, None);
        out.push(ev);
    }
    Ok(out)
}

fn check_interrupted_turns(events: &[Event]) -> Result<(), LogError> {
    let mut open_turn = false;
    let mut open_step = false;
    let mut prev_next_turn_insert = false;
    for ev in events {
        match ev.kind() {
            TURN_START => {
                if open_turn && !open_step && prev_next_turn_insert {
                    return Err(LogError::Unsupported(format!(
                        "v3 session log needs an inserted turn/end before event {} (§16.2 rule 7), which dsh does not implement",
                        ev.seq()
                    )));
                }
                open_turn = true;
                open_step = false;
            }
            TURN_END => {
                open_turn = false;
                open_step = false;
            }
            STEP_START => open_step = true,
            STEP_END => open_step = false,
            _ => {}
        }
        prev_next_turn_insert = ev.kind() == INBOX_SPLICED
            && ev.data().get("target").and_then(Value::as_str) == Some("next-turn")
            && ev
                .data()
                .get("inserted")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
    }
    Ok(())
}

fn convert_data(kind: &str, data: &mut Value, seq: u64) -> Result<(), String> {
    match kind {
        USER_MESSAGE => convert_message(data, "user")?,
        SYSTEM_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT => {
            let role = match kind {
                SYSTEM_MESSAGE => "system",
                ASSISTANT_MESSAGE => "assistant",
                _ => "tool",
            };
            if let Some(m) = data.get_mut("message") {
                if kind == TOOL_RESULT {
                    lift_tool_result(m)?;
                }
                convert_message(m, role)?;
            }
            if kind != TOOL_RESULT
                && let Some(Value::Array(stream)) = data.get_mut("stream")
            {
                rename_stream_tags(stream);
            }
        }
        ASSISTANT_ATTEMPT => {
            if let Some(Value::Array(stream)) = data.get_mut("stream") {
                rename_stream_tags(stream);
            }
        }
        INBOX_SPLICED => {
            if let Some(Value::Array(items)) = data.get_mut("inserted") {
                for m in items {
                    convert_message(m, "user")?;
                }
            }
        }
        "session/title-llm-request" => {
            if let Some(Value::Array(items)) = data.get_mut("messages") {
                for m in items {
                    convert_message(m, "user")?;
                }
            }
        }
        "compaction/summary" => {
            for k in ["summary", "rawOutput"] {
                if let Some(Value::Array(blocks)) = data.get_mut(k) {
                    rename_tags(blocks);
                }
            }
        }
        "tool/ptc-dispatch" => {
            if let Some(Value::Array(blocks)) = data.get_mut("content") {
                rename_tags(blocks);
            }
        }
        "team/message/queued" => {
            if let Some(Value::Array(blocks)) = data.pointer_mut("/message/content") {
                rename_tags(blocks);
            }
        }
        REQUEST_HEADER => {
            if let Some(Value::Array(tools)) = data.pointer("/header/tools")
                && tools.iter().any(|t| t.get("deferLoading").is_some())
            {
                return Err("a v3 request tool owns deferLoading".into());
            }
        }
        "session-log-deepseek/delivery-accepted" => {
            let version = data
                .get("sessionFormatVersion")
                .and_then(as_safe_u64)
                .unwrap_or(0);
            if version == 4 {
                return Err("a v3 log holds a generation-4 delivery marker".into());
            }
            if version == 3 {
                let id_ok = data
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty());
                let through_ok = data
                    .get("throughSeq")
                    .and_then(as_safe_u64)
                    .is_some_and(|t| t < seq);
                if !id_ok || !through_ok {
                    return Err("a generation-3 delivery marker needs a sessionId and an earlier throughSeq".into());
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Rule 3: a user-role tool result with one `tool-result` wrapper becomes a tool-role message.
fn lift_tool_result(msg: &mut Value) -> Result<(), String> {
    let Some(m) = msg.as_object() else {
        return Ok(());
    };
    if m.get("role").and_then(Value::as_str) != Some("user") {
        return Ok(());
    }
    let id = m
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("tool result needs a non-empty id")?;
    let source = m
        .get("source")
        .and_then(Value::as_object)
        .ok_or("tool result needs a source")?;
    if source.get("kind").and_then(Value::as_str) != Some("tool") {
        return Err("tool result source must be {kind:\"tool\", callId}".into());
    }
    let call_id = source
        .get("callId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("tool result needs a callId")?;
    let content = m
        .get("content")
        .and_then(Value::as_array)
        .ok_or("tool result content must be an array")?;
    let [wrapper] = content.as_slice() else {
        return Err("tool result must hold exactly one tool-result block".into());
    };
    let w = wrapper
        .as_object()
        .ok_or("tool-result block must be an object")?;
    if w.get("type").and_then(Value::as_str) != Some("tool-result") {
        return Err("tool result must hold exactly one tool-result block".into());
    }
    if w.get("toolCallId").and_then(Value::as_str) != Some(call_id) {
        return Err("tool-result block toolCallId must equal source.callId".into());
    }
    let inner = w
        .get("content")
        .and_then(Value::as_array)
        .ok_or("tool-result block content must be an array")?;
    if inner
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("tool-result"))
    {
        return Err("nested tool-result block".into());
    }
    let is_error = match w.get("isError") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err("tool-result isError must be a boolean".into()),
    };
    let mut out = Map::new();
    out.insert("role".into(), "tool".into());
    out.insert("source".into(), Value::Object(source.clone()));
    out.insert("toolCallId".into(), call_id.into());
    out.insert("content".into(), Value::Array(inner.clone()));
    if let Some(e) = is_error {
        out.insert("isError".into(), e.into());
    }
    out.insert("id".into(), id.into());
    for (k, v) in w {
        if !matches!(k.as_str(), "type" | "toolCallId" | "content" | "isError") {
            out.insert(format!("plugin:result:{k}"), v.clone());
        }
    }
    for (k, v) in m {
        if !matches!(k.as_str(), "id" | "role" | "source" | "content") {
            out.insert(format!("plugin:message:{k}"), v.clone());
        }
    }
    *msg = Value::Object(out);
    Ok(())
}

/// Rules 4 and 5 on one message slot.
fn convert_message(msg: &mut Value, role: &str) -> Result<(), String> {
    let Some(m) = msg.as_object_mut() else {
        return Ok(());
    };
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| role.to_string());
    if let Some(Value::Object(source)) = m.get_mut("source")
        && source.get("kind").and_then(Value::as_str) == Some("plugin")
    {
        let plugin = source
            .get("plugin")
            .and_then(Value::as_str)
            .ok_or("a plugin source needs a string plugin")?
            .to_string();
        let kind = map_plugin_kind(&plugin, &role);
        let mut out = Map::new();
        for (k, v) in source.iter() {
            match k.as_str() {
                "kind" => {
                    out.insert("kind".into(), kind.clone().into());
                }
                "plugin" => {}
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        *source = out;
    }
    if let Some(Value::Array(blocks)) = m.get_mut("content") {
        rename_tags(blocks);
    }
    Ok(())
}

fn map_plugin_kind(plugin: &str, role: &str) -> String {
    const SAME: [&str; 26] = [
        "agent-instructions",
        "session-reference",
        "team-message",
        "goal",
        "skill-invocation",
        "skill-catalog",
        "coordinator",
        "subagent-report",
        "subagent-settled",
        "webhook",
        "agent-message",
        "model-selection",
        "plan-mode",
        "time-context",
        "tmux-context",
        "user-approval",
        "repeat-tool-reminder",
        "tool-cordis",
        "cordis-host-runner",
        "tool-goal",
        "tool-jobs",
        "hooks-codex",
        "hooks-claude-code",
        "schedule",
        "dsh-session-title-llm",
        "subagent-report",
    ];
    match plugin {
        "compact" => "compact-checkpoint".into(),
        "tools-code-mode" | "tools-ptc" => "ptc-mode".into(),
        "dsh-compaction-basic" => "compact-basic".into(),
        "@deepseek-ai/dsh-system-prompt" if role == "system" => "system-prompt".into(),
        "@deepseek-ai/dsh-system-prompt" => "runtime-context".into(),
        p if SAME.contains(&p) => p.into(),
        p => format!("plugin:{p}"),
    }
}

const V3_BLOCKS: [&str; 6] = [
    "text",
    "reasoning",
    "image",
    "file",
    "tool-call",
    "tool-result",
];

fn rename_tags(blocks: &mut [Value]) {
    for b in blocks {
        if let Some(Value::String(t)) = b.get_mut("type")
            && !V3_BLOCKS.contains(&t.as_str())
        {
            *t = format!("plugin:{t}");
        }
    }
}

fn rename_stream_tags(stream: &mut [Value]) {
    for rec in stream {
        if rec.get("type").and_then(Value::as_str) != Some("chunk") {
            continue;
        }
        let Some(chunk) = rec.get_mut("chunk") else {
            continue;
        };
        let field = match chunk.get("type").and_then(Value::as_str) {
            Some("block-start") => "/blockType",
            Some("block-end") => "/block/type",
            _ => continue,
        };
        if let Some(Value::String(t)) = chunk.pointer_mut(field)
            && !V3_BLOCKS.contains(&t.as_str())
        {
            *t = format!("plugin:{t}");
        }
    }
}
