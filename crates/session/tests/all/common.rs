//! Shared helpers: the fixture loader of `fixtures/upstream-sessions/README.md`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub fn fixtures_dir() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/upstream-sessions"
    ))
    .to_path_buf()
}

/// Placeholder substitution with one consistent mapping per scenario.
#[derive(Default)]
pub struct Subst {
    map: HashMap<String, String>,
    fresh: u64,
}

impl Subst {
    fn token(&mut self, name: &str) -> String {
        if name == "cwd" {
            return "/work/fixture-cwd".into();
        }
        if let Some(v) = self.map.get(name) {
            return v.clone();
        }
        let v = format!("x-{}", name.replace([':', '-'], "_"));
        self.map.insert(name.to_string(), v.clone());
        v
    }

    fn fresh(&mut self) -> String {
        self.fresh += 1;
        format!("fresh-{}", self.fresh)
    }

    fn string(&mut self, s: &str, key: Option<&str>, in_header: bool) -> String {
        if !in_header && key == Some("id") && (s == "{{messageId}}" || s == "{{sessionId}}") {
            return self.fresh();
        }
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("{{") {
            let Some(j) = rest[i..].find("}}") else { break };
            out.push_str(&rest[..i]);
            let name = &rest[i + 2..i + j];
            out.push_str(&self.token(name));
            rest = &rest[i + j + 2..];
        }
        out.push_str(rest);
        out
    }

    pub fn value(&mut self, v: &mut Value, key: Option<&str>, in_header: bool) {
        match v {
            Value::String(s) if s.contains("{{") => *s = self.string(s, key, in_header),
            Value::Array(a) => a.iter_mut().for_each(|x| self.value(x, None, in_header)),
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    self.value(x, Some(k.as_str()), in_header);
                }
            }
            _ => {}
        }
    }
}

fn stub_tool(name: &str) -> Value {
    json!({"name": name, "description": name, "parameters": {"type": "object", "properties": {}}})
}

/// Loads a fixture file into (header, rows with seq/time) as JSON values.
pub fn load_rows(file: &Path, subst: &mut Subst) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    let mut header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    subst.value(&mut header, None, true);
    let created = header["createdAt"].as_i64().unwrap();
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        let mut row: Value = serde_json::from_str(line).unwrap();
        if row["type"] == "request/header" {
            let tools = &mut row["data"]["header"]["tools"];
            match tools.clone() {
                Value::String(s) if s == "{{tools}}" => {
                    *tools = json!([stub_tool("bash"), stub_tool("read")])
                }
                Value::Array(names) if names.iter().all(Value::is_string) => {
                    *tools = Value::Array(
                        names
                            .iter()
                            .map(|n| stub_tool(n.as_str().unwrap()))
                            .collect(),
                    )
                }
                _ => {}
            }
        }
        subst.value(&mut row, None, false);
        let m = row.as_object_mut().unwrap();
        m.insert("seq".into(), json!(i));
        m.insert("time".into(), json!(created + i as i64));
        rows.push(row);
    }
    (header, rows)
}

/// Physical JSONL bytes of a loaded fixture.
pub fn fixture_bytes(file: &Path, subst: &mut Subst) -> Vec<u8> {
    let (header, rows) = load_rows(file, subst);
    let mut out = serde_json::to_vec(&header).unwrap();
    out.push(b'\n');
    for r in rows {
        out.extend(serde_json::to_vec(&r).unwrap());
        out.push(b'\n');
    }
    out
}

use dsh_session::{NewEvent, SessionHeader, SessionLog};

pub fn header(id: &str) -> SessionHeader {
    SessionHeader::new(id, 1_788_000_000_000, Some("/tmp/proj".into()))
}

pub fn new_log() -> SessionLog {
    SessionLog::new(header("session-test"))
}

pub fn msg(role: &str, id: &str, text: &str) -> Value {
    let source = match role {
        "system" => json!({"kind": "system-prompt"}),
        "assistant" => json!({"kind": "model", "provider": "p", "model": "m"}),
        "developer" => json!({"kind": "tool-registry"}),
        _ => json!({"kind": "user"}),
    };
    let content = if text.is_empty() {
        json!([])
    } else {
        json!([{"type": "text", "text": text}])
    };
    json!({"role": role, "content": content, "source": source, "id": id})
}

pub fn turn_start(turn: u64) -> NewEvent {
    NewEvent::new("turn/start", json!({"turn": turn}))
}
pub fn turn_end(turn: u64) -> NewEvent {
    NewEvent::new(
        "turn/end",
        json!({"turn": turn, "reason": {"kind": "completed"}}),
    )
}
pub fn step_start(turn: u64, step: u64) -> NewEvent {
    NewEvent::new("step/start", json!({"turn": turn, "step": step}))
}
pub fn step_end(turn: u64, step: u64) -> NewEvent {
    NewEvent::new("step/end", json!({"turn": turn, "step": step}))
}
pub fn system(turn: u64, step: u64, id: &str, text: &str) -> NewEvent {
    NewEvent::new(
        "system/message",
        json!({"turn": turn, "step": step, "message": msg("system", id, text)}),
    )
}
pub fn user(id: &str, text: &str) -> NewEvent {
    NewEvent::new("user/message", msg("user", id, text))
}
pub fn assistant(turn: u64, step: u64, id: &str, text: &str, calls: &[&str]) -> NewEvent {
    let mut m = msg("assistant", id, text);
    for c in calls {
        m["content"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"}));
    }
    NewEvent::new(
        "assistant/message",
        json!({"turn": turn, "step": step, "message": m, "stream": []}),
    )
}
pub fn tool_call(turn: u64, step: u64, call: &str) -> NewEvent {
    NewEvent::new(
        "tool/call",
        json!({"turn": turn, "step": step, "callId": call, "name": "bash", "arguments": "{}"}),
    )
}
pub fn tool_result(turn: u64, step: u64, id: &str, call: &str, text: &str) -> NewEvent {
    let m = json!({"role": "tool", "source": {"kind": "tool", "callId": call}, "toolCallId": call,
                   "content": [{"type": "text", "text": text}], "isError": false, "id": id});
    NewEvent::new(
        "tool/result",
        json!({"turn": turn, "step": step, "message": m}),
    )
}

/// Appends one complete turn `turn` with a tool call and a final answer.
pub fn full_turn(log: &mut SessionLog, turn: u64) {
    let t = turn;
    let c = format!("call-{t}");
    let first = log.is_empty();
    log.append(turn_start(t)).unwrap();
    log.append(step_start(t, 1)).unwrap();
    if first {
        log.append(system(t, 1, "sys", "you are dsh")).unwrap();
    }
    log.append(user(&format!("u{t}"), "do it")).unwrap();
    log.append(assistant(t, 1, &format!("a{t}"), "", &[&c]))
        .unwrap();
    let call = log.append(tool_call(t, 1, &c)).unwrap();
    log.append(tool_result(t, 1, &format!("r{t}"), &c, "ok").with_sources(vec![call.seq()]))
        .unwrap();
    log.append(step_end(t, 1)).unwrap();
    log.append(step_start(t, 2)).unwrap();
    log.append(assistant(t, 2, &format!("b{t}"), "done", &[]))
        .unwrap();
    log.append(step_end(t, 2)).unwrap();
    log.append(turn_end(t)).unwrap();
}

pub fn roles(log: &SessionLog) -> String {
    log.surface()
        .derive_nodes()
        .iter()
        .map(|n| format!("{}@{}", n.message.role.as_str(), n.seq))
        .collect::<Vec<_>>()
        .join(" ")
}
