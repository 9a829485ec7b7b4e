//! Approval policies.

use std::fmt;
use std::str::FromStr;

use dsh_kernel::schemars;
use serde::{Deserialize, Serialize};

/// When the user is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Ask before every call that is not read-only (unless an allow-always rule covers it).
    Untrusted,
    /// The model may ask to run one call outside the sandbox (`sandbox_permissions` +
    /// `justification`); everything else runs sandboxed without asking.
    OnRequest,
    /// Run sandboxed; when the sandbox denied the call, ask to retry it unsandboxed.
    OnFailure,
    /// Never ask: what the sandbox does not allow is denied (the default of `dsh exec`).
    Never,
}

impl ApprovalPolicy {
    /// Every policy.
    pub const ALL: [ApprovalPolicy; 4] = [
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
        ApprovalPolicy::OnFailure,
        ApprovalPolicy::Never,
    ];

    /// The value of `approval/policy.policy` in the session log.
    pub fn wire_name(self) -> dsh_session::wire::ApprovalPolicyName {
        use dsh_session::wire::ApprovalPolicyName as N;
        match self {
            ApprovalPolicy::Untrusted => N::Untrusted,
            ApprovalPolicy::OnRequest => N::OnRequest,
            ApprovalPolicy::OnFailure => N::OnFailure,
            ApprovalPolicy::Never => N::Never,
        }
    }

    /// The policy a logged `approval/policy.policy` names (the original's `ask` is
    /// `on-request`); `None` for a value this build does not know.
    pub fn from_wire(name: &dsh_session::wire::ApprovalPolicyName) -> Option<Self> {
        use dsh_session::wire::ApprovalPolicyName as N;
        match name {
            N::Ask | N::OnRequest => Some(ApprovalPolicy::OnRequest),
            N::Untrusted => Some(ApprovalPolicy::Untrusted),
            N::OnFailure => Some(ApprovalPolicy::OnFailure),
            N::Never => Some(ApprovalPolicy::Never),
            N::Unknown(_) => None,
        }
    }

    /// The spelling on the command line and in config.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Untrusted => "untrusted",
            ApprovalPolicy::OnRequest => "on-request",
            ApprovalPolicy::OnFailure => "on-failure",
            ApprovalPolicy::Never => "never",
        }
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy spelling that is not one of the four.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown approval policy \"{0}\" (expected one of: untrusted, on-request, on-failure, never)"
)]
pub struct ParsePolicyError(pub String);

impl FromStr for ApprovalPolicy {
    type Err = ParsePolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ParsePolicyError(s.to_owned()))
    }
}
