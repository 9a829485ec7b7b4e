//! The sandbox's logged event (`session-format.md` §7.13).

use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};

use crate::mode::SandboxMode;

/// `sandbox/mode`: the session's sandbox mode from this point on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxModeEvent {
    /// The mode.
    pub mode: SandboxMode,
    /// `delegation` when inherited from a parent agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl PluginEvent for SandboxModeEvent {
    const TYPE: &'static str = "sandbox/mode";
}
