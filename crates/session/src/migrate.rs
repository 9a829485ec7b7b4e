//! The v3 → v4 conversion (format §16.2), in memory. The v3 file is never modified.
//!
//! Implemented: rules 1–9 (rule 8's isSeeded check and rule 11's validation run in
//! [`crate::SessionLog::replay`]). Rule 10 (parent catalog completion from child sessions) is not
//! applied: it needs the other sessions of the root.

use serde_json::{Map, Value};

use crate::error::LogError;
use crate::event::{Event, SurfaceOp};
use crate::header::SessionHeader;
use crate::json::as_safe_u64;
use crate::vocab::*;

/// A v3 form the conversion cannot carry (format §16.2): what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct ConvertError(String);

impl From<&str> for ConvertError {
    fn from(s: &str) -> Self {
        ConvertError(s.to_owned())
    }
}

impl From<String> for ConvertError {
    fn from(s: String) -> Self {
        ConvertError(s)
    }
}

fn unsupported(seq: u64, kind: &str, m: impl std::fmt::Display) -> LogError {
    LogError::Unsupported(format!(
        "v3 session log cannot be converted at event {seq} (\"{kind}\"): {m}"
    ))
}

/// Converts v3 events to v4 (rules 2–9).
pub fn v3_to_v4(_header: &SessionHeader, events: Vec<Event>) -> Result<Vec<Event>, LogError> {
    let events = insert_interrupted_turn_ends(events);
    let mut out = Vec::with_capacity(events.len());
    for mut ev in events {
        let seq = ev.seq();
        let kind = ev.kind().to_string();
        if RETIRED_CODE_DISPATCH.contains(&kind.as_str()) {
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

/// Rule 7: before a `turn/start {t+1}` that directly follows a non-empty next-turn insertion
/// while turn t is open without an open step, insert `turn/end {t, interrupted}` (with that
/// `turn/start`'s time), renumber densely and remap the same-log seq references.
fn insert_interrupted_turn_ends(events: Vec<Event>) -> Vec<Event> {
    let mut inserts: Vec<(usize, u64, i64)> = Vec::new(); // (index, turn, time)
    let mut open_turn: Option<u64> = None;
    let mut open_step = false;
    let mut prev_insert = false;
    for (i, ev) in events.iter().enumerate() {
        match ev.kind() {
            TURN_START => {
                if let Some(t) = open_turn
                    && !open_step
                    && prev_insert
                {
                    inserts.push((i, t, ev.time()));
                }
                open_turn = ev.data().get("turn").and_then(as_safe_u64);
                open_step = false;
            }
            TURN_END => {
                open_turn = None;
                open_step = false;
            }
            STEP_START => open_step = true,
            STEP_END => open_step = false,
            _ => {}
        }
        prev_insert = ev.kind() == INBOX_SPLICED
            && ev.data().get("target").and_then(Value::as_str) == Some("next-turn")
            && ev
                .data()
                .get("inserted")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
    }
    if inserts.is_empty() {
        return events;
    }
    // old seq -> new seq
    let shift = |old: u64| -> u64 {
        old + inserts.iter().filter(|(i, ..)| (*i as u64) <= old).count() as u64
    };
    let mut out = Vec::with_capacity(events.len() + inserts.len());
    let mut next = inserts.iter().peekable();
    for (i, mut ev) in events.into_iter().enumerate() {
        while let Some((at, turn, time)) = next.peek().copied() {
            if *at != i {
                break;
            }
            let data = serde_json::json!({"turn": turn, "reason": {"kind": "interrupted"}});
            out.push(Event::from_parts(
                TURN_END,
                out.len() as u64,
                *time,
                data,
                None,
                None,
                false,
            ));
            next.next();
        }
        ev.set_seq(shift(ev.seq()));
        let op = ev.surface_op().map(|op| match op {
            SurfaceOp::Replace { start_seq, end_seq } => SurfaceOp::Replace {
                start_seq: shift(start_seq),
                end_seq: shift(end_seq),
            },
            other => other,
        });
        let sources = ev
            .source_event_seqs()
            .map(|s| s.iter().map(|x| shift(*x)).collect::<Vec<_>>());
        let mut data = ev.data().clone();
        remap_data(ev.kind(), &mut data, &shift);
        ev.set_parts(None, Some(data), Some(op), Some(sources));
        out.push(ev);
    }
    out
}

fn remap_data(kind: &str, data: &mut Value, shift: &dyn Fn(u64) -> u64) {
    let kind = EventKind::parse(kind);
    let fix = |v: &mut Value| {
        if let Some(n) = as_safe_u64(v) {
            *v = Value::from(shift(n));
        }
    };
    let fix_all = |v: Option<&mut Value>| {
        if let Some(Value::Array(a)) = v {
            a.iter_mut().for_each(|x| {
                if let Some(n) = as_safe_u64(x) {
                    *x = Value::from(shift(n));
                }
            });
        }
    };
    match kind {
        EventKind::CommandDone => {
            if let Some(v) = data.get_mut("sourceEventSeq") {
                fix(v);
            }
        }
        EventKind::SessionTitle | EventKind::SessionTitleLlmRequest => {
            fix_all(data.get_mut("messageSeqs"))
        }
        EventKind::CompactionSummary | EventKind::CompactionPrune => {
            for k in ["/shadowedRange/start", "/shadowedRange/end"] {
                if let Some(v) = data.pointer_mut(k) {
                    fix(v);
                }
            }
            fix_all(data.get_mut("shadowedSeqs"));
        }
        EventKind::ImageOffload => {
            if let Some(Value::Array(targets)) = data.get_mut("targets") {
                for t in targets {
                    if let Some(v) = t.get_mut("seq") {
                        fix(v);
                    }
                }
            }
        }
        _ => {}
    }
}

fn convert_data(kind: &str, data: &mut Value, seq: u64) -> Result<(), ConvertError> {
    let kind = EventKind::parse(kind);
    match kind {
        EventKind::UserMessage => convert_message(data, "user")?,
        EventKind::SystemMessage | EventKind::AssistantMessage | EventKind::ToolResult => {
            let role = match kind {
                EventKind::SystemMessage => "system",
                EventKind::AssistantMessage => "assistant",
                _ => "tool",
            };
            if let Some(m) = data.get_mut("message") {
                if kind == EventKind::ToolResult {
                    lift_tool_result(m)?;
                }
                convert_message(m, role)?;
            }
            if kind != EventKind::ToolResult
                && let Some(Value::Array(stream)) = data.get_mut("stream")
            {
                rename_stream_tags(stream);
            }
        }
        EventKind::AssistantAttempt => {
            if let Some(Value::Array(stream)) = data.get_mut("stream") {
                rename_stream_tags(stream);
            }
        }
        EventKind::InboxSpliced => {
            if let Some(Value::Array(items)) = data.get_mut("inserted") {
                for m in items {
                    convert_message(m, "user")?;
                }
            }
        }
        EventKind::SessionTitleLlmRequest => {
            if let Some(Value::Array(items)) = data.get_mut("messages") {
                for m in items {
                    convert_message(m, "user")?;
                }
            }
        }
        EventKind::CompactionSummary => {
            for k in ["summary", "rawOutput"] {
                if let Some(Value::Array(blocks)) = data.get_mut(k) {
                    rename_tags(blocks);
                }
            }
        }
        EventKind::ToolPtcDispatch => {
            if let Some(Value::Array(blocks)) = data.get_mut("content") {
                rename_tags(blocks);
            }
        }
        EventKind::TeamMessageQueued => {
            if let Some(Value::Array(blocks)) = data.pointer_mut("/message/content") {
                rename_tags(blocks);
            }
        }
        EventKind::RequestHeader => {
            if let Some(Value::Array(tools)) = data.pointer("/header/tools")
                && tools.iter().any(|t| t.get("deferLoading").is_some())
            {
                return Err("a v3 request tool owns deferLoading".into());
            }
        }
        EventKind::SessionLogDeepseekDeliveryAccepted => {
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
fn lift_tool_result(msg: &mut Value) -> Result<(), ConvertError> {
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
fn convert_message(msg: &mut Value, role: &str) -> Result<(), ConvertError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, seq: u64, data: Value) -> Event {
        Event::from_parts(kind, seq, 100 + seq as i64, data, None, None, false)
    }

    #[test]
    fn rule_7_inserts_a_turn_end_and_remaps_references() {
        let user = json!({"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"role":"user","id":"m1"});
        let mut title = ev(
            "session/title",
            5,
            json!({"title":"t","messageSeqs":[4],"source":{"kind":"fallback"}}),
        );
        title.set_parts(None, None, None, None);
        let mut u = ev("user/message", 4, user.clone());
        u.set_parts(None, None, Some(Some(SurfaceOp::Append)), None);
        let events = vec![
            ev("turn/start", 0, json!({"turn": 1})),
            ev(
                "agent/inbox/spliced",
                1,
                json!({"target":"next-turn","start":0,"inserted":[user]}),
            ),
            ev("turn/start", 2, json!({"turn": 2})),
            ev("step/start", 3, json!({"turn": 2, "step": 1})),
            u,
            title,
        ];
        let header = SessionHeader::new("s", 1, None);
        let out = v3_to_v4(&header, events).unwrap();
        let kinds: Vec<_> = out.iter().map(|e| e.kind().to_string()).collect();
        assert_eq!(
            kinds,
            [
                "turn/start",
                "agent/inbox/spliced",
                "turn/end",
                "turn/start",
                "step/start",
                "user/message",
                "session/title"
            ]
        );
        assert_eq!(
            out[2].data(),
            &json!({"turn": 1, "reason": {"kind": "interrupted"}})
        );
        assert_eq!(out[2].time(), out[3].time());
        for (i, e) in out.iter().enumerate() {
            assert_eq!(e.seq(), i as u64);
        }
        assert_eq!(out[6].data()["messageSeqs"], json!([5]));
    }
}
