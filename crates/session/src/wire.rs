//! Closed sets of the session format as enums: the wire string appears only here, at the edge.
//!
//! Every set keeps values it does not know (written by another harness or a newer one) in an
//! `Unknown` variant that serialises back to the same JSON, so a log round-trips byte for byte;
//! nothing is mapped to a default. The log reports unknown values it admitted
//! ([`crate::SessionLog::unknown_values`]).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$d:meta])* $v:ident => $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$d])* $v,)*
            /// A value this reader does not know, kept verbatim.
            Unknown(String),
        }

        impl $name {
            /// Every known value.
            pub const KNOWN: &'static [$name] = &[$($name::$v,)*];

            /// The value of a wire string (unknown strings are kept in `Unknown`).
            pub fn parse(s: &str) -> Self {
                match s {
                    $($s => $name::$v,)*
                    other => $name::Unknown(other.to_owned()),
                }
            }

            /// The wire string.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$v => $s,)*
                    $name::Unknown(s) => s,
                }
            }

            /// Whether the value is one of the known ones.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Ok($name::parse(&s))
            }
        }
    };
}

wire_enum! {
    /// `request/header.reason` (format §9.2).
    RequestReason {
        /// The first header of a session.
        Initial => "initial",
        /// The first header after a resume.
        Resume => "resume",
        /// The envelope changed.
        Change => "change",
        /// A new cache series starts with an unchanged envelope.
        Series => "series",
    }
}

/// `agent/inbox/spliced.target` (format §11): which pending list a splice edits (and which list a
/// sent message joins). The fold depends on it, so the set is strictly closed: a splice with
/// another target does not decode and its log is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// Follow-ups: claimed one at a time at turn boundaries (each message gets its own turn).
    NextTurn,
    /// Steer and inject: claimed as a whole at the next step (or the next turn's first step).
    NextStep,
}

impl Target {
    /// The wire name (`next-turn` / `next-step`).
    pub fn as_str(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }

    /// The target of a wire name.
    pub fn parse(s: &str) -> Option<Target> {
        match s {
            "next-turn" => Some(Target::NextTurn),
            "next-step" => Some(Target::NextStep),
            _ => None,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

wire_enum! {
    /// `job/settled.status` (0.2.1): how a background job ended.
    JobStatus {
        /// The producer reported success.
        Completed => "completed",
        /// Killed (by `job_kill`, a cancel or teardown).
        Killed => "killed",
        /// The producer failed, or broke its contract.
        Failed => "failed",
    }
}

wire_enum! {
    /// `job/settled.cause` (0.2.1): who settled the job.
    JobCause {
        /// The job's producer reported its outcome.
        Producer => "producer",
        /// A kill request.
        Kill => "kill",
        /// The owner went away (session close, shutdown).
        Teardown => "teardown",
    }
}

wire_enum! {
    /// `permission/preset.preset` (format §7.13; 0.2.1 writes `danger-full-access` headless).
    PermissionPresetName {
        /// Read-only sandbox, approvals on request.
        ReadOnly => "read-only",
        /// Workspace-write sandbox.
        WorkspaceWrite => "workspace-write",
        /// No preset matches the knobs (the original's derived name).
        Custom => "custom",
        /// No sandbox, no approvals.
        DangerFullAccess => "danger-full-access",
    }
}

wire_enum! {
    /// `approval/policy.policy` (format §7.13): the original writes `ask` and `never`; dsh's
    /// finer policies (Codex's names) are its own values, kept by the original as unknown.
    ApprovalPolicyName {
        /// The original's "ask the user".
        Ask => "ask",
        /// Ask before anything not known safe.
        Untrusted => "untrusted",
        /// The model asks when it needs to.
        OnRequest => "on-request",
        /// Ask when a sandboxed command failed.
        OnFailure => "on-failure",
        /// Never ask.
        Never => "never",
    }
}

wire_enum! {
    /// `agent/inbox/spliced.outcome` (format §11).
    InboxOutcome {
        /// Removals discarded by cancellation.
        Canceled => "canceled",
    }
}

wire_enum! {
    /// `message.source.kind` (format §6.4). The set is open by design (plugins add `plugin:<name>`
    /// kinds); the kinds the core interprets or writes are named, every other one is `Unknown`.
    SourceKind {
        /// A human prompt.
        User => "user",
        /// An assistant message.
        Model => "model",
        /// A tool result.
        Tool => "tool",
        /// A system prompt node.
        SystemPrompt => "system-prompt",
        /// A runtime-context snapshot.
        RuntimeContext => "runtime-context",
        /// A compaction checkpoint.
        CompactCheckpoint => "compact-checkpoint",
        /// A developer tool-registry update.
        ToolRegistry => "tool-registry",
        /// A background child finished.
        SubagentSettled => "subagent-settled",
        /// AGENTS.md reminders.
        AgentInstructions => "agent-instructions",
        /// Goal rounds.
        Goal => "goal",
        /// A route change notice.
        ModelSelection => "model-selection",
        /// The title plugin's auxiliary request.
        SessionTitleLlm => "dsh-session-title-llm",
        /// Retired in v4 (refused by admission).
        Plugin => "plugin",
    }
}

impl SourceKind {
    /// The kind of a message's source.
    pub fn of(message: &dsh_llm::Message) -> Self {
        SourceKind::parse(&message.source.kind)
    }
}

/// The cause of an aborted turn (`turn/end.reason.reason`, format §7.1).
#[derive(Debug, Clone, PartialEq)]
pub enum AbortCause {
    /// The user cancelled.
    User,
    /// The parent agent cancelled.
    Parent,
    /// A hook cancelled, with its reason (`dsh/<cause>` for dsh-only causes).
    Hook {
        /// The hook's reason.
        reason: String,
    },
    /// The agent was disposed.
    Disposed,
    /// Imported old logs only.
    Legacy,
    /// A cause this reader does not know: the whole object, kept verbatim.
    Unknown(Map<String, Value>),
}

/// Why a turn ended (`turn/end.reason`, format §7.1). A closed union; a kind written by another
/// harness is kept in `Unknown` (the whole object) and reported, never mapped to a default.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEndReason {
    /// The last step produced no tool calls and nothing is owed.
    Completed,
    /// Cancellation.
    Aborted {
        /// The cause.
        reason: AbortCause,
    },
    /// The pre-step hook rejected the turn.
    Blocked,
    /// Unrecoverable failure.
    Error {
        /// The failure (non-LLM errors flattened to code `UNKNOWN`).
        error: dsh_llm::LlmFailure,
    },
    /// Some step of this turn hit the output cap.
    MaxTokens,
    /// Crash repair only.
    Interrupted,
    /// Fork seed closers only.
    Forked,
    /// A kind this reader does not know: the whole object, kept verbatim.
    Unknown(Map<String, Value>),
}

impl TurnEndReason {
    /// The wire `kind`.
    pub fn kind(&self) -> &str {
        match self {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Aborted { .. } => "aborted",
            TurnEndReason::Blocked => "blocked",
            TurnEndReason::Error { .. } => "error",
            TurnEndReason::MaxTokens => "max-tokens",
            TurnEndReason::Interrupted => "interrupted",
            TurnEndReason::Forked => "forked",
            TurnEndReason::Unknown(m) => m.get("kind").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Whether the reason (and its abort cause) is known to this reader.
    pub fn is_known(&self) -> bool {
        match self {
            TurnEndReason::Unknown(_) => false,
            TurnEndReason::Aborted { reason } => !matches!(reason, AbortCause::Unknown(_)),
            _ => true,
        }
    }
}

impl AbortCause {
    /// The wire `kind`.
    pub fn kind(&self) -> &str {
        match self {
            AbortCause::User => "user",
            AbortCause::Parent => "parent",
            AbortCause::Hook { .. } => "hook",
            AbortCause::Disposed => "disposed",
            AbortCause::Legacy => "legacy",
            AbortCause::Unknown(m) => m.get("kind").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

/// Takes the string `kind` of a tagged object; the object must have one.
fn tagged<E: serde::de::Error>(map: &Map<String, Value>, what: &str) -> Result<String, E> {
    match map.get("kind") {
        Some(Value::String(k)) => Ok(k.clone()),
        _ => Err(E::custom(format!("{what} must have a string \"kind\""))),
    }
}

fn only_kind<E: serde::de::Error>(map: &Map<String, Value>, what: &str) -> Result<(), E> {
    match map.len() {
        1 => Ok(()),
        _ => Err(E::custom(format!("{what} has unknown members"))),
    }
}

impl Serialize for AbortCause {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if let AbortCause::Unknown(m) = self {
            return m.serialize(s);
        }
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("kind", self.kind())?;
        if let AbortCause::Hook { reason } = self {
            map.serialize_entry("reason", reason)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AbortCause {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(d)?;
        let kind = tagged::<D::Error>(&map, "abort cause")?;
        Ok(match kind.as_str() {
            "hook" => {
                let reason = match map.get("reason") {
                    Some(Value::String(r)) if map.len() == 2 => r.clone(),
                    _ => {
                        return Err(D::Error::custom(
                            "abort cause hook needs exactly a string reason",
                        ));
                    }
                };
                AbortCause::Hook { reason }
            }
            "user" | "parent" | "disposed" | "legacy" => {
                only_kind::<D::Error>(&map, "abort cause")?;
                match kind.as_str() {
                    "user" => AbortCause::User,
                    "parent" => AbortCause::Parent,
                    "disposed" => AbortCause::Disposed,
                    _ => AbortCause::Legacy,
                }
            }
            _ => AbortCause::Unknown(map),
        })
    }
}

impl Serialize for TurnEndReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if let TurnEndReason::Unknown(m) = self {
            return m.serialize(s);
        }
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("kind", self.kind())?;
        match self {
            TurnEndReason::Aborted { reason } => map.serialize_entry("reason", reason)?,
            TurnEndReason::Error { error } => map.serialize_entry("error", error)?,
            _ => {}
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for TurnEndReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(d)?;
        let kind = tagged::<D::Error>(&map, "turn/end reason")?;
        let member = |map: &mut Map<String, Value>, key: &str| match map.remove(key) {
            Some(v) if map.len() == 1 => Ok(v),
            _ => Err(D::Error::custom(format!(
                "turn/end reason {kind} needs exactly the member \"{key}\""
            ))),
        };
        Ok(match kind.as_str() {
            "aborted" => {
                let v = member(&mut map, "reason")?;
                TurnEndReason::Aborted {
                    reason: serde_json::from_value(v).map_err(D::Error::custom)?,
                }
            }
            "error" => {
                let v = member(&mut map, "error")?;
                TurnEndReason::Error {
                    error: serde_json::from_value(v).map_err(D::Error::custom)?,
                }
            }
            "completed" | "blocked" | "max-tokens" | "interrupted" | "forked" => {
                only_kind::<D::Error>(&map, "turn/end reason")?;
                match kind.as_str() {
                    "completed" => TurnEndReason::Completed,
                    "blocked" => TurnEndReason::Blocked,
                    "max-tokens" => TurnEndReason::MaxTokens,
                    "interrupted" => TurnEndReason::Interrupted,
                    _ => TurnEndReason::Forked,
                }
            }
            _ => TurnEndReason::Unknown(map),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug>(
        json: &str,
    ) -> T {
        let v: T = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), json, "same bytes back");
        v
    }

    #[test]
    fn string_sets_round_trip_known_and_unknown() {
        for r in RequestReason::KNOWN {
            let json = format!("\"{}\"", r.as_str());
            assert_eq!(&round_trip::<RequestReason>(&json), r);
        }
        assert_eq!(
            round_trip::<RequestReason>("\"initial\""),
            RequestReason::Initial
        );
        let u = round_trip::<RequestReason>("\"rebase\"");
        assert_eq!(u, RequestReason::Unknown("rebase".into()));
        assert!(!u.is_known());
        assert_eq!(round_trip::<Target>("\"next-step\""), Target::NextStep);
        assert_eq!(round_trip::<Target>("\"next-turn\""), Target::NextTurn);
        assert_eq!(Target::parse("next-step"), Some(Target::NextStep));
        assert_eq!(Target::parse("later"), None);
        assert!(serde_json::from_str::<Target>("\"later\"").is_err());
        assert_eq!(
            round_trip::<InboxOutcome>("\"canceled\""),
            InboxOutcome::Canceled
        );
        assert_eq!(
            round_trip::<InboxOutcome>("\"expired\""),
            InboxOutcome::Unknown("expired".into())
        );
        for k in SourceKind::KNOWN {
            assert_eq!(&SourceKind::parse(k.as_str()), k);
        }
        assert_eq!(
            round_trip::<SourceKind>("\"tool-registry\""),
            SourceKind::ToolRegistry
        );
        assert_eq!(
            round_trip::<SourceKind>("\"plugin:x\""),
            SourceKind::Unknown("plugin:x".into())
        );
    }

    #[test]
    fn turn_end_reasons_round_trip() {
        for json in [
            r#"{"kind":"completed"}"#,
            r#"{"kind":"blocked"}"#,
            r#"{"kind":"max-tokens"}"#,
            r#"{"kind":"interrupted"}"#,
            r#"{"kind":"forked"}"#,
            r#"{"kind":"aborted","reason":{"kind":"user"}}"#,
            r#"{"kind":"aborted","reason":{"kind":"parent"}}"#,
            r#"{"kind":"aborted","reason":{"kind":"disposed"}}"#,
            r#"{"kind":"aborted","reason":{"kind":"legacy"}}"#,
            r#"{"kind":"aborted","reason":{"kind":"hook","reason":"deepseek-account/signed-out"}}"#,
            r#"{"kind":"error","error":{"message":"m","code":"AUTH","status":401}}"#,
        ] {
            let r = round_trip::<TurnEndReason>(json);
            assert!(r.is_known(), "{json}");
        }
        assert_eq!(
            round_trip::<TurnEndReason>(r#"{"kind":"completed"}"#),
            TurnEndReason::Completed
        );
        assert!(matches!(
            round_trip::<TurnEndReason>(r#"{"kind":"aborted","reason":{"kind":"hook","reason":"x"}}"#),
            TurnEndReason::Aborted { reason: AbortCause::Hook { reason } } if reason == "x"
        ));
    }

    #[test]
    fn unknown_turn_end_reasons_are_kept_verbatim() {
        let r = round_trip::<TurnEndReason>(r#"{"kind":"paused","until":17,"note":"x"}"#);
        assert!(matches!(&r, TurnEndReason::Unknown(m) if m.len() == 3));
        assert_eq!(r.kind(), "paused");
        assert!(!r.is_known());
        let r =
            round_trip::<TurnEndReason>(r#"{"kind":"aborted","reason":{"kind":"timeout","ms":5}}"#);
        assert!(
            matches!(&r, TurnEndReason::Aborted { reason: AbortCause::Unknown(m) } if m["ms"] == 5)
        );
        assert!(!r.is_known());
    }

    #[test]
    fn malformed_known_reasons_are_refused() {
        for bad in [
            r#"{"kind":"completed","extra":1}"#,
            r#"{"kind":"aborted"}"#,
            r#"{"kind":"error","error":{"code":"X"}}"#,
            r#"{"kind":3}"#,
            r#"{"reason":{"kind":"user"}}"#,
            r#"{"kind":"aborted","reason":{"kind":"hook"}}"#,
        ] {
            assert!(serde_json::from_str::<TurnEndReason>(bad).is_err(), "{bad}");
        }
    }
}
