//! Sandbox modes and network access.

use std::fmt;
use std::str::FromStr;

use dsh_kernel::schemars;
use serde::{Deserialize, Serialize};

/// How far a tool's effects may reach (the original's `SandboxMode`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No writes anywhere (except `/dev/null`).
    ReadOnly,
    /// Writes under the workspace root and the temp directories only.
    WorkspaceWrite,
    /// No confinement at all.
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, narrowest first.
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The spelling used on the command line, in config and in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Whether the mode confines anything (every mode but `danger-full-access`).
    pub fn is_restricted(self) -> bool {
        self != SandboxMode::DangerFullAccess
    }

    /// Whether `wider` is a widening of `self` (the escalations of upstream §3.1.5:
    /// `read-only → workspace-write | danger-full-access`, `workspace-write →
    /// danger-full-access`).
    pub fn can_escalate_to(self, wider: SandboxMode) -> bool {
        wider > self
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode or network spelling that is not one of the known ones.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} \"{given}\" (expected one of: {expected})")]
pub struct ParseModeError {
    /// What was being parsed (`sandbox mode`, `network access`).
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// The accepted spellings.
    pub expected: &'static str,
}

impl FromStr for SandboxMode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ParseModeError {
                what: "sandbox mode",
                given: s.to_owned(),
                expected: "read-only, workspace-write, danger-full-access",
            })
    }
}

/// Whether confined commands may use the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkAccess {
    /// Network allowed.
    On,
    /// No network (a private network namespace, or socket creation denied).
    Off,
}

impl NetworkAccess {
    /// The spelling used on the command line and in config.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkAccess::On => "on",
            NetworkAccess::Off => "off",
        }
    }
}

impl fmt::Display for NetworkAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NetworkAccess {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on" => Ok(NetworkAccess::On),
            "off" => Ok(NetworkAccess::Off),
            _ => Err(ParseModeError {
                what: "network access",
                given: s.to_owned(),
                expected: "on, off",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_unknown_ones_are_named() {
        for mode in SandboxMode::ALL {
            assert_eq!(mode.as_str().parse::<SandboxMode>().unwrap(), mode);
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
        }
        let err = "workspace".parse::<SandboxMode>().unwrap_err();
        assert!(err.to_string().contains("\"workspace\""), "{err}");
        assert_eq!("off".parse::<NetworkAccess>().unwrap(), NetworkAccess::Off);
        assert!("maybe".parse::<NetworkAccess>().is_err());
    }

    #[test]
    fn escalation_only_widens() {
        use SandboxMode::*;
        assert!(ReadOnly.can_escalate_to(WorkspaceWrite));
        assert!(ReadOnly.can_escalate_to(DangerFullAccess));
        assert!(WorkspaceWrite.can_escalate_to(DangerFullAccess));
        assert!(!WorkspaceWrite.can_escalate_to(ReadOnly));
        assert!(!DangerFullAccess.can_escalate_to(DangerFullAccess));
    }
}
