//! The session header (format §2): line 1 of every log.

use serde_json::{Map, Value};

use crate::json::{as_safe_i64, as_safe_u64};

/// Why a header line is refused (format §2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Line 1 is not a JSON object.
    #[error("corrupt session log: first line is not a JSON object")]
    NotObject,
    /// Line 1 is not `{"type":"session", ...}`.
    #[error("corrupt session log: first line is not a session header")]
    NotSessionHeader,
    /// The retired `sandboxMode` / `approvalPolicy` baseline fields.
    #[error("session header uses retired policy baseline fields")]
    RetiredPolicyFields,
    /// A member outside the header.
    #[error("session header has unknown member \"{0}\"")]
    UnknownMember(String),
    /// No numeric `version`.
    #[error("session header lacks a numeric version")]
    MissingVersion,
    /// No non-empty string `id`.
    #[error("session header lacks a string id")]
    MissingId,
    /// `createdAt` not a non-negative safe integer.
    #[error("session header createdAt must be a non-negative safe integer")]
    BadCreatedAt,
    /// An optional string member of another type.
    #[error("session header {0} must be a string")]
    NotString(&'static str),
    /// A relative `cwd`.
    #[error("session header cwd \"{0}\" is not an absolute path")]
    RelativeCwd(String),
    /// An `origin` other than `subagent`.
    #[error("session header origin \"{0}\" is not \"subagent\"")]
    BadOrigin(String),
    /// `isSeeded` not a boolean.
    #[error("session header isSeeded must be a boolean")]
    BadIsSeeded,
    /// `delegationDepth` not a non-negative safe integer.
    #[error("session header delegationDepth must be a non-negative safe integer")]
    BadDelegationDepth,
}

/// The format version dsh writes.
pub const WRITE_VERSION: u64 = 4;

/// The parsed header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    /// Format version (`4` written; `3` read and migrated).
    pub version: u64,
    /// The session id.
    pub id: String,
    /// Creation time, epoch ms.
    pub created_at: i64,
    /// Absolute working directory.
    pub cwd: Option<String>,
    /// Parent session id (subagent or fork child).
    pub parent_session: Option<String>,
    /// `true` iff the log starts with an inherited prefix (§12).
    pub is_seeded: bool,
    /// `Some("subagent")` for subagent children (presentation only).
    pub origin: Option<String>,
    /// 0 at top level, parent + 1 for a child.
    pub delegation_depth: u64,
    /// Composition preset id.
    pub agent_preset: Option<String>,
}

impl SessionHeader {
    /// A v4 header for a new top-level session.
    pub fn new(id: impl Into<String>, created_at: i64, cwd: Option<String>) -> Self {
        SessionHeader {
            version: WRITE_VERSION,
            id: id.into(),
            created_at,
            cwd,
            parent_session: None,
            is_seeded: false,
            origin: None,
            delegation_depth: 0,
            agent_preset: None,
        }
    }

    /// Serializes in writer key order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), "session".into());
        m.insert("version".into(), self.version.into());
        m.insert("id".into(), self.id.clone().into());
        m.insert("createdAt".into(), self.created_at.into());
        if let Some(cwd) = &self.cwd {
            m.insert("cwd".into(), cwd.clone().into());
        }
        if let Some(p) = &self.parent_session {
            m.insert("parentSession".into(), p.clone().into());
        }
        m.insert("isSeeded".into(), self.is_seeded.into());
        if let Some(o) = &self.origin {
            m.insert("origin".into(), o.clone().into());
        }
        m.insert("delegationDepth".into(), self.delegation_depth.into());
        if let Some(a) = &self.agent_preset {
            m.insert("agentPreset".into(), a.clone().into());
        }
        Value::Object(m)
    }

    /// The header as one JSON line (no `\n`).
    pub fn to_json_line(&self) -> String {
        self.to_json().to_string()
    }

    /// Validates the structure of a parsed header object whose version was already accepted.
    pub fn from_json(value: &Value) -> Result<Self, HeaderError> {
        let m = value.as_object().ok_or(HeaderError::NotObject)?;
        if m.get("type").and_then(Value::as_str) != Some("session") {
            return Err(HeaderError::NotSessionHeader);
        }
        if m.contains_key("sandboxMode") || m.contains_key("approvalPolicy") {
            return Err(HeaderError::RetiredPolicyFields);
        }
        for key in m.keys() {
            if !matches!(
                key.as_str(),
                "type"
                    | "version"
                    | "id"
                    | "createdAt"
                    | "cwd"
                    | "parentSession"
                    | "isSeeded"
                    | "origin"
                    | "delegationDepth"
                    | "agentPreset"
            ) {
                return Err(HeaderError::UnknownMember(key.clone()));
            }
        }
        let version = m
            .get("version")
            .and_then(as_safe_u64)
            .ok_or(HeaderError::MissingVersion)?;
        let id = m
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(HeaderError::MissingId)?
            .to_string();
        let created_at = m
            .get("createdAt")
            .and_then(as_safe_i64)
            .filter(|t| *t >= 0)
            .ok_or(HeaderError::BadCreatedAt)?;
        let opt_str = |k: &'static str| -> Result<Option<String>, HeaderError> {
            match m.get(k) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(HeaderError::NotString(k)),
            }
        };
        let cwd = opt_str("cwd")?;
        if let Some(c) = &cwd
            && !(c.starts_with('/') || c.starts_with('\\') || c.get(1..3) == Some(":\\"))
        {
            return Err(HeaderError::RelativeCwd(c.clone()));
        }
        let parent_session = opt_str("parentSession")?;
        let origin = opt_str("origin")?;
        if let Some(o) = &origin
            && o != "subagent"
        {
            return Err(HeaderError::BadOrigin(o.clone()));
        }
        let agent_preset = opt_str("agentPreset")?;
        let is_seeded = m
            .get("isSeeded")
            .and_then(Value::as_bool)
            .ok_or(HeaderError::BadIsSeeded)?;
        let delegation_depth = m
            .get("delegationDepth")
            .and_then(as_safe_u64)
            .ok_or(HeaderError::BadDelegationDepth)?;
        Ok(SessionHeader {
            version,
            id,
            created_at,
            cwd,
            parent_session,
            is_seeded,
            origin,
            delegation_depth,
            agent_preset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_writer_order() {
        let line = r#"{"type":"session","version":4,"id":"session-2","createdAt":1789000001000,"cwd":"/home/u/proj","parentSession":"session-1","isSeeded":false,"origin":"subagent","delegationDepth":1}"#;
        let v: Value = serde_json::from_str(line).unwrap();
        let h = SessionHeader::from_json(&v).unwrap();
        assert_eq!(h.to_json_line(), line);
    }

    #[test]
    fn refuses_retired_and_unknown_members() {
        let v: Value = serde_json::from_str(r#"{"type":"session","version":4,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0,"sandboxMode":"x"}"#).unwrap();
        assert_eq!(
            SessionHeader::from_json(&v).unwrap_err(),
            HeaderError::RetiredPolicyFields
        );
        let v: Value = serde_json::from_str(r#"{"type":"session","version":4,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0,"seedLength":3}"#).unwrap();
        assert_eq!(
            SessionHeader::from_json(&v).unwrap_err(),
            HeaderError::UnknownMember("seedLength".into())
        );
        let v: Value = serde_json::from_str(r#"{"type":"session","version":4,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0,"cwd":"rel"}"#).unwrap();
        assert_eq!(
            SessionHeader::from_json(&v).unwrap_err(),
            HeaderError::RelativeCwd("rel".into())
        );
    }
}
