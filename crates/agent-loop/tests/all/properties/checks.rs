//! Rebuilding requests from the log, and the per-request invariants.

use super::*;

/// A request as comparable JSON: route settings, tools and messages.
pub(super) fn request_json(r: &LlmRequest) -> (Value, Vec<String>) {
    let settings = json!({
        "provider": r.call.provider,
        "model": r.call.model.id,
        "effort": r.call.effort,
        "maxTokens": r.call.max_tokens,
        "temperature": r.call.temperature,
        "stop": r.call.stop,
        "tools": serde_json::to_value(&r.tools).unwrap(),
    });
    let messages = r
        .messages
        .iter()
        .map(|m| serde_json::to_string(m.as_ref()).unwrap())
        .collect();
    (settings, messages)
}

/// The request rebuilt from a log prefix alone: the latest header's settings and tools, and the
/// derived history without developer messages.
pub(super) fn rebuilt(log: &SessionLog) -> (Value, Vec<String>) {
    let header: RequestHeader = log
        .latest_request_header()
        .expect("a request without a header")
        .data_as()
        .unwrap();
    let c = &header.header.config;
    let tools: Vec<Value> = header
        .header
        .tools
        .unwrap_or_default()
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters.as_ref()}))
        .collect();
    let settings = json!({
        "provider": c.provider,
        "model": c.model,
        "effort": c.reasoning_effort,
        "maxTokens": c.max_tokens.unwrap(),
        "temperature": c.temperature,
        "stop": c.stop.clone().unwrap_or_default(),
        "tools": tools,
    });
    let messages = log
        .derive_messages()
        .iter()
        .filter(|m| m.role != Role::Developer)
        .map(|m| serde_json::to_string(&**m).unwrap())
        .collect();
    (settings, messages)
}

/// Every tool call of an assistant message is answered by exactly one later tool message.
pub(crate) fn calls_answered(messages: &[String]) -> Result<(), String> {
    let values: Vec<Value> = messages
        .iter()
        .map(|m| serde_json::from_str(m).unwrap())
        .collect();
    for (i, m) in values.iter().enumerate() {
        if m["role"] != "assistant" {
            continue;
        }
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] != "tool-call" {
                continue;
            }
            let answers = values[i + 1..]
                .iter()
                .filter(|r| r["role"] == "tool" && r["toolCallId"] == block["id"])
                .count();
            if answers != 1 {
                return Err(format!("call {} has {answers} results", block["id"]));
            }
        }
    }
    Ok(())
}

pub(super) fn tool_names(header: &Value) -> Vec<String> {
    header["header"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `session-format.md` §9.4, checked independently: a `developer/message` follows a header with
/// reason `resume` or `change` iff a baseline existed and the tool names differ; additions (in
/// current order) then removals (in baseline order); `headerSeq` only with additions. No other
/// developer messages.
pub(super) fn developer_rule(events: &[Arc<Event>]) -> Result<(), String> {
    let mut baseline: Option<Value> = None;
    let mut expected_dev = 0;
    for (i, e) in events.iter().enumerate() {
        if e.kind() != "request/header" {
            continue;
        }
        let h = e.data().clone();
        let reason = h["reason"].as_str().unwrap_or_default().to_owned();
        let next = events
            .get(i + 1)
            .filter(|n| n.kind() == "developer/message");
        let mut want: Vec<Value> = Vec::new();
        if let Some(b) = &baseline
            && (reason == "resume" || reason == "change")
        {
            let (prev, cur) = (tool_names(b), tool_names(&h));
            for n in cur.iter().filter(|n| !prev.contains(n)) {
                want.push(json!({"type": "tool-addition", "toolName": n}));
            }
            for n in prev.iter().filter(|n| !cur.contains(n)) {
                want.push(json!({"type": "tool-removal", "toolName": n}));
            }
        }
        match (next, want.is_empty()) {
            (None, true) => {}
            (Some(d), false) => {
                expected_dev += 1;
                let d = d.data();
                if d["message"]["content"] != Value::Array(want.clone()) {
                    return Err(format!("header {}: {} != {want:?}", e.seq(), d["message"]));
                }
                let additions = want.iter().any(|w| w["type"] == "tool-addition");
                let seq = d.get("headerSeq").and_then(Value::as_u64);
                if seq != additions.then_some(e.seq()) {
                    return Err(format!("header {}: headerSeq {seq:?}", e.seq()));
                }
            }
            (got, _) => {
                return Err(format!(
                    "header {} ({reason}): developer message {:?}, expected {want:?}",
                    e.seq(),
                    got.map(|d| d.data().clone())
                ));
            }
        }
        baseline = Some(h);
    }
    let total = events
        .iter()
        .filter(|e| e.kind() == "developer/message")
        .count();
    if total != expected_dev {
        return Err(format!(
            "{total} developer messages, {expected_dev} expected"
        ));
    }
    Ok(())
}

/// Positions (event indices) of the committed outcome of every request, in request order: each
/// adapter call is followed by exactly one `assistant/message` or `assistant/attempt`.
pub(super) fn request_positions(events: &[Arc<Event>]) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.kind(), "assistant/message" | "assistant/attempt"))
        .map(|(i, _)| i)
        .collect()
}
