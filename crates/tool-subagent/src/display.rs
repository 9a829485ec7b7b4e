//! How the sub-agent tools' calls look to a person: kind `agent`, the task label or the agent
//! addressed, and once a delegation ended the child's facts (id, provider, how it ended,
//! requests, tokens) and the head of its answer.

use dsh_tools::display::{output_head, truncate_chars};
use dsh_tools::{DisplayInput, ToolDisplay, ToolKind};
use serde::Deserialize;
use serde_json::Value;

/// Lines of the child's answer a card keeps.
pub const ANSWER_LINES: usize = 3;
/// Characters of a message shown.
const MESSAGE_CHARS: usize = 200;

#[derive(Default, Deserialize)]
#[serde(default)]
struct Shown {
    description: Option<String>,
    agent_id: Option<String>,
    message: Option<String>,
    scope: Option<String>,
}

/// The display of a `subagent` / `subagent_fork` call (`call.name` is the title).
pub fn delegate_display(call: &DisplayInput<'_>) -> ToolDisplay {
    let args: Shown = call.parse().unwrap_or_default();
    let mut d = ToolDisplay::new(ToolKind::Agent, call.name);
    d.subject = args.description;
    let Some(r) = call.succeeded() else {
        return d;
    };
    let text_of = |key: &str| call.meta_field(key).and_then(Value::as_str);
    if let Some(child) = text_of("childSessionId") {
        d = d.with_field("child", child);
    }
    if let Some(job) = text_of("jobId") {
        d = d.with_field("job", job);
    }
    if let Some(p) = text_of("provider") {
        d = d.with_field("provider", p);
    }
    if let Some(s) = text_of("stopReason") {
        d = d.with_field("stop", s);
    }
    if let Some(n) = call.meta_field("requests").and_then(Value::as_u64) {
        d = d.with_field("requests", n.to_string());
    }
    if let Some(u) = call.meta_field("usage") {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let input = n("inputTokens") + n("cacheReadTokens");
        d = d.with_field("tokens", format!("{input} in / {} out", n("outputTokens")));
    }
    d.with_output(output_head(r.text.trim(), ANSWER_LINES))
}

/// The display of `send_message`, `interrupt_agent` and `list_agents` (`call.name` is the
/// title): the agent addressed, the message.
pub fn control_display(call: &DisplayInput<'_>) -> ToolDisplay {
    let args: Shown = call.parse().unwrap_or_default();
    let mut d = ToolDisplay::new(ToolKind::Agent, call.name);
    d.subject = args.agent_id.or(args.scope);
    if let Some(m) = args.message {
        d = d.with_field(
            "message",
            truncate_chars(&m.replace('\n', " "), MESSAGE_CHARS),
        );
    }
    if let Some(r) = call.succeeded() {
        d = d.with_output(output_head(r.text.trim(), ANSWER_LINES));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::DisplayResult;
    use serde_json::json;

    #[test]
    fn a_finished_child_shows_its_facts_and_the_head_of_its_answer() {
        let args = r#"{"description":"Count files","prompt":"…"}"#;
        let meta = json!({
            "childSessionId": "session-kid",
            "provider": "spawn",
            "stopReason": "completed",
            "requests": 2,
            "usage": {"inputTokens": 20, "outputTokens": 7, "cacheReadTokens": 100}
        });
        let call = DisplayInput::new("subagent", args);
        let running = delegate_display(&call);
        assert_eq!(running.kind, ToolKind::Agent);
        assert_eq!(running.title, "subagent");
        assert_eq!(running.subject.as_deref(), Some("Count files"));
        assert!(running.fields.is_empty());
        let d = delegate_display(
            &call.with_result(DisplayResult::ok("one\ntwo\nthree\nfour").with_meta(Some(&meta))),
        );
        let fields: Vec<(String, String)> = d
            .fields
            .iter()
            .map(|f| (f.label.clone(), f.value.clone()))
            .collect();
        assert_eq!(
            fields,
            [
                ("child", "session-kid"),
                ("provider", "spawn"),
                ("stop", "completed"),
                ("requests", "2"),
                ("tokens", "120 in / 7 out")
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        let out = d.output.unwrap();
        assert_eq!(out.text, "one\ntwo\nthree");
        assert!(out.truncated);
    }

    #[test]
    fn a_message_shows_whom_it_is_for() {
        let d = control_display(&DisplayInput::new(
            "send_message",
            r#"{"agent_id":"kid-1","message":"also\nthe docs"}"#,
        ));
        assert_eq!(d.kind, ToolKind::Agent);
        assert_eq!(d.subject.as_deref(), Some("kid-1"));
        assert_eq!(d.fields[0].value, "also the docs");
    }
}
