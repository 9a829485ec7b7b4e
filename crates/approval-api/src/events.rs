//! The audit events (`session-format.md` §7.13).

use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};

/// `approval/asked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAsked {
    /// The question's id.
    pub id: String,
    /// The tool.
    pub tool_name: String,
    /// The tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Why approval was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PluginEvent for ApprovalAsked {
    const TYPE: &'static str = "approval/asked";
}

/// The format's outcomes of `approval/decided`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedOutcome {
    /// Allowed (once, or always: see `always`).
    AllowedOnce,
    /// The user said no.
    Rejected,
    /// Dismissed.
    Cancelled,
    /// No answerer.
    Unavailable,
}

/// `approval/decided` (`always` and `reason` are dsh additions the original's readers keep as
/// unknown members).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    /// The question's id.
    pub id: String,
    /// The outcome.
    pub outcome: DecidedOutcome,
    /// An allow-always answer (a rule was stored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always: bool,
    /// The user's reason for a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PluginEvent for ApprovalDecided {
    const TYPE: &'static str = "approval/decided";
}

/// The `source` of an `approval/policy` a parent agent pinned in its sub-agent (always
/// `never`).
pub const POLICY_SOURCE_DELEGATION: &str = "delegation";

/// The `source` of an `approval/policy` chosen for this session when it was opened (a client's
/// per-session setting, e.g. `approvalPolicy` in `dsh serve`'s `POST /v1/sessions`), not the
/// composition's default.
pub const POLICY_SOURCE_SESSION: &str = "session";

/// Whether a logged `approval/policy` belongs to the session (delegated or chosen for it), so
/// a later start of the session keeps it instead of logging the configured policy.
pub fn policy_is_pinned(event: &dsh_session::feature::ApprovalPolicyEvent) -> bool {
    matches!(
        event.source.as_deref(),
        Some(POLICY_SOURCE_DELEGATION | POLICY_SOURCE_SESSION)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_forms_are_the_formats() {
        let asked = ApprovalAsked {
            id: "q1".into(),
            tool_name: "bash".into(),
            call_id: Some("c1".into()),
            reason: None,
        };
        assert_eq!(
            serde_json::to_string(&asked).unwrap(),
            r#"{"id":"q1","toolName":"bash","callId":"c1"}"#
        );
        let decided = ApprovalDecided {
            id: "q1".into(),
            outcome: DecidedOutcome::AllowedOnce,
            always: true,
            reason: None,
        };
        assert_eq!(
            serde_json::to_string(&decided).unwrap(),
            r#"{"id":"q1","outcome":"allowed-once","always":true}"#
        );
        assert_eq!(ApprovalAsked::TYPE, "approval/asked");
        assert_eq!(ApprovalDecided::TYPE, "approval/decided");
    }
}
