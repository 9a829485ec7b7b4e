//! Session settings a client chooses: reasoning effort, sandbox mode, approval policy.
//!
//! These mirror the engine's own types (the DeepSeek effort ids, the sandbox seam's modes, the
//! approval plugin's policies) in the CLI's spelling; the in-process host converts them. They
//! are the protocol's copies so a client needs no engine crate.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Reasoning effort (`--effort`): `off`, `low`, `high`, `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Effort {
    /// No reasoning.
    Off,
    /// Low.
    Low,
    /// High.
    High,
    /// Maximum.
    Max,
}

impl Effort {
    /// Every effort, lowest first.
    pub const ALL: [Effort; 4] = [Effort::Off, Effort::Low, Effort::High, Effort::Max];

    /// The CLI / wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Off => "off",
            Effort::Low => "low",
            Effort::High => "high",
            Effort::Max => "max",
        }
    }

    /// Parses the CLI spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// Where tool effects may reach (`--sandbox`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Nothing may be written.
    ReadOnly,
    /// Writes under the working directory and `/tmp` only (the default).
    WorkspaceWrite,
    /// No confinement.
    DangerFullAccess,
}

impl SandboxMode {
    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// When the user is asked before a tool runs (`--ask-for-approval`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Anything not known to be safe is asked about.
    Untrusted,
    /// The model asks for escalations itself.
    OnRequest,
    /// Asked when a confined call fails.
    OnFailure,
    /// Nobody is asked (the default for headless runs).
    Never,
}

impl ApprovalPolicy {
    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Untrusted => "untrusted",
            ApprovalPolicy::OnRequest => "on-request",
            ApprovalPolicy::OnFailure => "on-failure",
            ApprovalPolicy::Never => "never",
        }
    }
}

/// The settings of a session as a client sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSettings {
    /// The provider route (`deepseek`, `anthropic`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The model id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// The sandbox mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// The approval policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// The model's context window in tokens, as the host knows it (reported by the host; a
    /// client never chooses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Whether the host has prices for the model, so usage carries a cost (reported by the
    /// host; a client never chooses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priced: Option<bool>,
}
