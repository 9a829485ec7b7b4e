//! The audit events of hook runs, as the original writes them (`session-format.md` §7.13):
//! `hook/invoked {turn, point, dialect, matcher?, handlerId}` before a handler runs and
//! `hook/result {turn, point, handlerId, decision, exitCode?, stderrSummary?, durationMs}` after.
//! Written only inside an open turn; neither is model-visible.

use serde::{Deserialize, Serialize};

use dsh_session::{Event, PluginEvent};

/// `hook/invoked`: a handler is about to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookInvoked {
    /// The open turn.
    pub turn: u64,
    /// The hook point (`PreToolUse`, `Stop`, …).
    pub point: String,
    /// `claude-code` or `codex`.
    pub dialect: String,
    /// The group's matcher as written, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// `<dialect>:<Point>:<n>`.
    pub handler_id: String,
}

impl PluginEvent for HookInvoked {
    const TYPE: &'static str = "hook/invoked";
}

/// What a handler's run decided, as `hook/result.decision` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultDecision {
    /// Deny / block (exit 2, `decision: block`, `permissionDecision: deny`).
    Block,
    /// Ask the user.
    Ask,
    /// Allow / approve.
    Allow,
    /// The run said nothing that decides (or was ignored: see `stderrSummary`).
    Pass,
    /// `continue: false` (parsed, not honoured, as upstream).
    Stop,
}

/// `hook/result`: how a handler's run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookResult {
    /// The open turn.
    pub turn: u64,
    /// The hook point.
    pub point: String,
    /// `<dialect>:<Point>:<n>`.
    pub handler_id: String,
    /// What it decided.
    pub decision: ResultDecision,
    /// Its exit code (absent when it timed out, was killed or never started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Its stderr (at most 500 characters and `…`), or why the run was ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_summary: Option<String>,
    /// Wall time of the run.
    pub duration_ms: u64,
}

impl PluginEvent for HookResult {
    const TYPE: &'static str = "hook/result";
}

/// The `dsh sessions show` line of a `hook/invoked` or `hook/result` event.
pub fn describe(event: &Event) -> Option<String> {
    match event.kind() {
        HookInvoked::TYPE => {
            let i = event.plugin::<HookInvoked>()?.ok()?;
            let matcher = i
                .matcher
                .map(|m| format!(" (matcher {m})"))
                .unwrap_or_default();
            Some(format!("hook {} invoked{matcher}", i.handler_id))
        }
        HookResult::TYPE => {
            let r = event.plugin::<HookResult>()?.ok()?;
            let decision = match r.decision {
                ResultDecision::Block => "block",
                ResultDecision::Ask => "ask",
                ResultDecision::Allow => "allow",
                ResultDecision::Pass => "pass",
                ResultDecision::Stop => "stop",
            };
            let exit = r
                .exit_code
                .map(|c| format!(", exit {c}"))
                .unwrap_or_default();
            let why = r
                .stderr_summary
                .filter(|s| !s.is_empty())
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            Some(format!(
                "hook {} result: {decision}{exit}, {} ms{why}",
                r.handler_id, r.duration_ms
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::NewEvent;

    #[test]
    fn the_original_shapes_round_trip() {
        let line = r#"{"type":"hook/result","seq":7,"time":1,"data":{"turn":1,"point":"PreToolUse","handlerId":"claude-code:PreToolUse:1","decision":"block","exitCode":2,"stderrSummary":"no rm","durationMs":12}}"#;
        let e = Event::from_line(line, 7).unwrap();
        let r = e.plugin::<HookResult>().unwrap().unwrap();
        assert_eq!(r.decision, ResultDecision::Block);
        assert_eq!(
            describe(&e).unwrap(),
            "hook claude-code:PreToolUse:1 result: block, exit 2, 12 ms: no rm"
        );
        let n = NewEvent::plugin(&HookInvoked {
            turn: 1,
            point: "Stop".into(),
            dialect: "codex".into(),
            matcher: None,
            handler_id: "codex:Stop:1".into(),
        })
        .unwrap();
        assert_eq!(n.kind.as_str(), "hook/invoked");
    }
}
