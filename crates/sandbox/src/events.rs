//! The sandbox's logged event (`session-format.md` §7.13).

use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};

use crate::mode::SandboxMode;

/// The `source` of a mode a parent agent passed on to its sub-agent.
pub const SOURCE_DELEGATION: &str = "delegation";

/// The `source` of a mode chosen for this session when it was opened (a client's per-session
/// setting, e.g. `sandbox` in `dsh serve`'s `POST /v1/sessions`), not the composition's
/// default.
pub const SOURCE_SESSION: &str = "session";

/// `sandbox/mode`: the session's sandbox mode from this point on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxModeEvent {
    /// The mode.
    pub mode: SandboxMode,
    /// [`SOURCE_DELEGATION`] when inherited from a parent agent, [`SOURCE_SESSION`] when chosen
    /// for the session; absent: the composition's configured mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl SandboxModeEvent {
    /// Whether the mode belongs to the session (delegated or chosen for it), so a later start
    /// of the session keeps it instead of logging the composition's configured mode.
    pub fn is_pinned(&self) -> bool {
        matches!(
            self.source.as_deref(),
            Some(SOURCE_DELEGATION | SOURCE_SESSION)
        )
    }
}

impl PluginEvent for SandboxModeEvent {
    const TYPE: &'static str = "sandbox/mode";
}
