//! Stateless admission checks of known event payloads (format §4.4–§4.6), on the typed payloads.
//! State-dependent rules (headerSeq, offload targets, replacements, turn structure) are checked
//! by the log.

use dsh_llm::{ContentBlock, Message, Role};
use serde_json::{Map, Value};

use crate::data::{CoreEvent, StreamRecords};
use crate::error::Rejection;
use crate::vocab::EventKind;

fn payload(msg: impl Into<String>) -> Rejection {
    Rejection::Payload(msg.into())
}

fn positive(what: &str, field: &str, n: u64) -> Result<(), Rejection> {
    if n == 0 {
        return Err(payload(format!(
            "{what} data.{field} must be a positive integer"
        )));
    }
    Ok(())
}

fn turn_step(what: &str, turn: u64, step: u64) -> Result<(), Rejection> {
    positive(what, "turn", turn)?;
    positive(what, "step", step)
}

/// Checks an interpreted message slot (§4.5): `what` names the slot in errors.
pub fn check_message(msg: &Message, role: Role, what: &str) -> Result<(), Rejection> {
    if msg.id.is_empty() {
        return Err(payload(format!(
            "{what}: message id must be a non-empty string"
        )));
    }
    if msg.role != role {
        return Err(payload(format!(
            "{what}: message role must be \"{}\", not \"{}\"",
            role.as_str(),
            msg.role.as_str()
        )));
    }
    match msg.source.kind.as_str() {
        "plugin" => {
            return Err(payload(format!(
                "{what}: message source kind \"plugin\" is retired in v4"
            )));
        }
        "" => {
            return Err(payload(format!(
                "{what}: message source kind must be a non-empty string"
            )));
        }
        _ => {}
    }
    for (i, block) in msg.content.iter().enumerate() {
        check_block(block, role == Role::Developer)
            .map_err(|e| payload(format!("{what}: content[{i}]: {e}")))?;
    }
    Ok(())
}

fn check_block(block: &ContentBlock, developer: bool) -> Result<(), &'static str> {
    match block {
        ContentBlock::Image {
            offloaded: Some(false),
            ..
        } => Err("image offloaded must be true when present"),
        ContentBlock::ToolResult(_) => Err("tool-result blocks are retired in v4"),
        ContentBlock::ToolAddition { tool_name } | ContentBlock::ToolRemoval { tool_name } => {
            if !developer {
                return Err("tool-change blocks require developer role");
            }
            if tool_name.is_empty() {
                return Err("tool-change block needs a non-empty toolName");
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_stream(stream: &StreamRecords, what: &str) -> Result<(), Rejection> {
    match stream.packed() {
        Some(packed) => packed.validate().map_err(|e| e.to_string()),
        None => crate::stream::validate_stream_json(&stream.json()).map_err(|e| e.0),
    }
    .map_err(|e| payload(format!("{what} data.stream: {e}")))
}

/// Stateless checks of a typed core payload (format §4.5, §4.6). `json` is the payload's JSON
/// text (for the few rules on members the typed form does not carry); `canonical` caches whether
/// `json` is exactly the typed payload's serialisation (`None`: not known yet; computed at most
/// once, and left for the caller, which keeps the text only when it is not canonical).
pub fn check_core(
    core: &CoreEvent,
    json: &str,
    canonical: &mut Option<bool>,
) -> Result<(), Rejection> {
    let kind = core.kind();
    let what = kind.as_str();
    match core {
        CoreEvent::TurnStart(e) => positive(what, "turn", e.turn),
        CoreEvent::TurnEnd(e) => positive(what, "turn", e.turn),
        CoreEvent::StepStart(e) => turn_step(what, e.turn, e.step),
        CoreEvent::StepEnd(e) => turn_step(what, e.turn, e.step),
        CoreEvent::SystemMessage(e) => {
            check_message(&e.message, Role::System, what)?;
            turn_step(what, e.turn, e.step)
        }
        CoreEvent::DeveloperMessage(e) => {
            check_message(&e.message, Role::Developer, what)?;
            turn_step(what, e.turn, e.step)?;
            let additions = e
                .message
                .content
                .iter()
                .filter(|b| matches!(b, ContentBlock::ToolAddition { .. }))
                .count();
            if (additions > 0) != e.header_seq.is_some() {
                return Err(payload(format!(
                    "{what} requires headerSeq exactly when tool additions are present"
                )));
            }
            Ok(())
        }
        CoreEvent::UserMessage(e) => check_message(&e.0, Role::User, what),
        CoreEvent::AssistantMessage(e) => {
            check_message(&e.message, Role::Assistant, what)?;
            turn_step(what, e.turn, e.step)?;
            if e.interrupted == Some(false) {
                return Err(payload(format!(
                    "{what} interrupted must be true when present"
                )));
            }
            check_stream(&e.stream, what)
        }
        CoreEvent::AssistantAttempt(e) => {
            turn_step(what, e.turn, e.step)?;
            check_stream(&e.stream, what)
        }
        CoreEvent::ToolCallEvent(e) => turn_step(what, e.turn, e.step),
        CoreEvent::ToolResult(e) => {
            let msg = &e.message;
            check_message(msg, Role::Tool, what)?;
            turn_step(what, e.turn, e.step)?;
            let call_id = msg.tool_call_id.as_deref().filter(|s| !s.is_empty());
            let source_call = msg.source.extra.get("callId").and_then(Value::as_str);
            if call_id.is_none() || call_id != source_call {
                return Err(payload(format!(
                    "{what} message.toolCallId must be non-empty and equal message.source.callId"
                )));
            }
            if msg.source.kind != "tool" {
                return Err(payload(format!(
                    "{what} message.source must be {{kind:\"tool\", callId}}"
                )));
            }
            if e.error.is_some() && msg.is_error != Some(true) {
                return Err(payload(format!(
                    "{what} error requires message.isError === true"
                )));
            }
            Ok(())
        }
        CoreEvent::RequestHeader(h) => {
            // A canonical text says nothing the typed payload does not: check the typed form
            // (no second parse of the tool schemas). Any other spelling may carry members the
            // typed form drops (`header.system`), so it is checked as a JSON tree.
            if *canonical.get_or_insert_with(|| core.serialises_to(json)) {
                return check_request_header_typed(h);
            }
            let v: Value = serde_json::from_str(json)
                .map_err(|e| Rejection::Decode(std::sync::Arc::new(e)))?;
            check_request_header(v.as_object().unwrap_or(&Map::new()))
        }
        CoreEvent::RequestContext(_) => Ok(()),
        CoreEvent::InboxSpliced(e) => {
            for (i, m) in e.inserted.iter().enumerate() {
                check_message(m, Role::User, &format!("{what} inserted[{i}]"))?;
            }
            Ok(())
        }
        CoreEvent::EndSeed(_) => {
            let v: Value = serde_json::from_str(json)
                .map_err(|e| Rejection::Decode(std::sync::Arc::new(e)))?;
            let ok = v.as_object().is_some_and(|m| {
                m.is_empty() || (m.len() == 1 && m.get("inherited") == Some(&Value::Bool(true)))
            });
            if !ok {
                return Err(payload(format!(
                    "{what} data must be {{}} or {{\"inherited\":true}}"
                )));
            }
            Ok(())
        }
        CoreEvent::ImageOffload(e) => {
            if e.targets.is_empty() {
                return Err(Rejection::Surface(format!(
                    "{what} targets must be a non-empty array"
                )));
            }
            for t in &e.targets {
                if t.image_indexes.is_empty() {
                    return Err(Rejection::Surface(format!(
                        "{what} target {}: imageIndexes must be a non-empty array",
                        t.seq
                    )));
                }
                if t.image_indexes.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Rejection::Surface(format!(
                        "{what} target {}: imageIndexes must be strictly increasing",
                        t.seq
                    )));
                }
            }
            Ok(())
        }
    }
}

fn no_retired_blocks(blocks: Option<&Value>, what: &str) -> Result<(), Rejection> {
    if let Some(Value::Array(items)) = blocks {
        for b in items {
            if matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool-result" | "tool-addition" | "tool-removal")
            ) {
                return Err(payload(format!(
                    "{what} holds a retired or misplaced block"
                )));
            }
        }
    }
    Ok(())
}

/// Stateless checks of a known feature or opaque type's payload (format §4.5): an object, and
/// no retired blocks where messages are embedded.
pub fn check_feature(kind: &EventKind, json: &str) -> Result<(), Rejection> {
    if !json.trim_start().starts_with('{') {
        return Err(payload(format!("{kind} data must be an object")));
    }
    let parse = || -> Result<Value, Rejection> {
        serde_json::from_str(json).map_err(|e| Rejection::Decode(std::sync::Arc::new(e)))
    };
    match kind {
        EventKind::SessionTitleLlmRequest => {
            if let Some(Value::Array(msgs)) = parse()?.get("messages") {
                for (i, m) in msgs.iter().enumerate() {
                    let msg: Message = serde_json::from_value(m.clone())
                        .map_err(|e| Rejection::Decode(std::sync::Arc::new(e)))?;
                    check_message(&msg, Role::User, &format!("{kind} messages[{i}]"))?;
                }
            }
        }
        EventKind::TeamMessageQueued => {
            no_retired_blocks(parse()?.pointer("/message/content"), "team message")?
        }
        EventKind::CompactionSummary => {
            let v = parse()?;
            no_retired_blocks(v.get("summary"), "compaction summary")?;
            no_retired_blocks(v.get("rawOutput"), "compaction rawOutput")?;
        }
        EventKind::ToolPtcDispatch => {
            no_retired_blocks(parse()?.get("content"), "ptc dispatch content")?
        }
        _ => {}
    }
    Ok(())
}

/// [`check_request_header`] on the typed payload of a canonical text: the same rules, where the
/// types do not already guarantee them.
fn check_request_header_typed(h: &crate::data::RequestHeader) -> Result<(), Rejection> {
    let config = &h.header.config;
    for (k, v) in [("provider", &config.provider), ("model", &config.model)] {
        if v.is_empty() {
            return Err(payload(format!(
                "request/header config.{k} must be a non-empty string"
            )));
        }
    }
    if config
        .reasoning_effort
        .as_ref()
        .is_some_and(|e| e.as_str().is_empty())
    {
        return Err(payload(
            "request/header config.reasoningEffort must be non-empty",
        ));
    }
    if let Some(d) = &h.header.adapter_defaults {
        let d = d
            .as_object()
            .ok_or_else(|| payload("request/header adapterDefaults must be an object"))?;
        if d.is_empty() {
            return Err(payload("request/header adapterDefaults must not be {}"));
        }
        for (k, v) in d {
            let present = match k.as_str() {
                "provider" | "model" => true,
                "reasoningEffort" => config.reasoning_effort.is_some(),
                "temperature" => config.temperature.is_some(),
                "maxTokens" => config.max_tokens.is_some(),
                "stop" => config.stop.is_some(),
                _ => false,
            };
            if v != &Value::Bool(true) || !present {
                return Err(payload(format!(
                    "request/header adapterDefaults.{k} must be true and its config value present"
                )));
            }
        }
    }
    if let Some(tools) = &h.header.tools {
        if tools.is_empty() {
            return Err(payload("request/header tools must be omitted when empty"));
        }
        for (i, tool) in tools.iter().enumerate() {
            if !tool.parameters.is_object() {
                return Err(payload(format!(
                    "request/header tools[{i}] must be {{name, description, parameters}}"
                )));
            }
            if tool.defer_loading == Some(false) {
                return Err(payload(format!(
                    "request/header tools[{i}].deferLoading must be true when present"
                )));
            }
        }
    }
    if h.starts_series == Some(false) {
        return Err(payload(
            "request/header startsSeries must be true when present",
        ));
    }
    Ok(())
}

fn check_request_header(m: &Map<String, Value>) -> Result<(), Rejection> {
    let header = m
        .get("header")
        .and_then(Value::as_object)
        .ok_or_else(|| payload("request/header header must be an object"))?;
    if header.contains_key("system") {
        return Err(payload(
            "request/header must omit header.system; use system/message",
        ));
    }
    let config = header
        .get("config")
        .and_then(Value::as_object)
        .ok_or_else(|| payload("request/header config must be an object"))?;
    for k in ["provider", "model"] {
        if config
            .get(k)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(payload(format!(
                "request/header config.{k} must be a non-empty string"
            )));
        }
    }
    if let Some(e) = config.get("reasoningEffort")
        && e.as_str().is_none_or(str::is_empty)
    {
        return Err(payload(
            "request/header config.reasoningEffort must be non-empty",
        ));
    }
    if let Some(d) = header.get("adapterDefaults") {
        let d = d
            .as_object()
            .ok_or_else(|| payload("request/header adapterDefaults must be an object"))?;
        if d.is_empty() {
            return Err(payload("request/header adapterDefaults must not be {}"));
        }
        for (k, v) in d {
            if v != &Value::Bool(true) || !config.contains_key(k) {
                return Err(payload(format!(
                    "request/header adapterDefaults.{k} must be true and its config value present"
                )));
            }
        }
    }
    if let Some(t) = header.get("tools") {
        let tools = t
            .as_array()
            .ok_or_else(|| payload("request/header tools must be an array"))?;
        if tools.is_empty() {
            return Err(payload("request/header tools must be omitted when empty"));
        }
        for (i, tool) in tools.iter().enumerate() {
            let tool = tool
                .as_object()
                .ok_or_else(|| payload(format!("request/header tools[{i}] must be an object")))?;
            if tool.get("name").and_then(Value::as_str).is_none()
                || tool.get("description").and_then(Value::as_str).is_none()
                || !tool.get("parameters").is_some_and(Value::is_object)
            {
                return Err(payload(format!(
                    "request/header tools[{i}] must be {{name, description, parameters}}"
                )));
            }
            if let Some(d) = tool.get("deferLoading")
                && d != &Value::Bool(true)
            {
                return Err(payload(format!(
                    "request/header tools[{i}].deferLoading must be true when present"
                )));
            }
        }
    }
    if let Some(s) = m.get("startsSeries")
        && s != &Value::Bool(true)
    {
        return Err(payload(
            "request/header startsSeries must be true when present",
        ));
    }
    Ok(())
}
