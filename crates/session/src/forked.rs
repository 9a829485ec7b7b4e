//! `dsh/forked`: the session was continued in another one (a conversation rewind forked it).
//!
//! A dsh-only record in the session's own log, after the last event of the branch that was
//! left: clients attached to the session (live, or subscribing later and replaying the log) learn
//! from it which session to follow. Like every `dsh/…` type it is written `ignorable: true`
//! (format §17): it is never model-visible, and the original harness, which does not know the
//! type, skips it when it reads the log.

use serde::{Deserialize, Serialize};

use crate::PluginEvent;

/// Why a session was continued elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForkReason {
    /// A conversation rewind (`/rewind`, `dsh rewind`).
    Rewind,
    /// A reason this reader does not know, verbatim.
    #[serde(untagged)]
    Other(String),
}

/// `dsh/forked {sessionId, reason, toTurn?, rewindId?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionForked {
    /// The session that continues this one.
    pub session_id: String,
    /// Why.
    pub reason: ForkReason,
    /// A rewind: the fork holds the turns before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_turn: Option<u64>,
    /// A rewind that restored files too: its record in the checkpoint store (undo names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewind_id: Option<String>,
}

impl PluginEvent for SessionForked {
    const TYPE: &'static str = "dsh/forked";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, NewEvent};

    #[test]
    fn a_forked_record_decodes_keeps_unknown_reasons_and_round_trips() {
        let line = r#"{"type":"dsh/forked","seq":7,"time":1,"ignorable":true,"data":{"sessionId":"session-b","reason":"rewind","toTurn":2,"rewindId":"r1"}}"#;
        let ev = Event::from_line(line, 7).expect("event");
        assert!(ev.ignorable() && !ev.event_kind().is_surface() && ev.core().is_none());
        let record = ev
            .plugin::<SessionForked>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(
            record,
            SessionForked {
                session_id: "session-b".into(),
                reason: ForkReason::Rewind,
                to_turn: Some(2),
                rewind_id: Some("r1".into()),
            }
        );
        let back = NewEvent::plugin(&record).expect("encode");
        assert_eq!(back.kind.as_str(), "dsh/forked");
        let odd = r#"{"type":"dsh/forked","seq":7,"time":1,"ignorable":true,"data":{"sessionId":"s","reason":"split"}}"#;
        let odd = Event::from_line(odd, 7)
            .expect("event")
            .plugin::<SessionForked>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(odd.reason, ForkReason::Other("split".into()));
        assert_eq!(odd.to_turn, None);
    }
}
