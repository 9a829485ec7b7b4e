//! The session-log records of checkpoints (`dsh/checkpoint`) and of a conversation rewind
//! (`dsh/rewind`, the first event a forked branch gets after its seed).

use dsh_session::data::PluginEvent;
use serde::{Deserialize, Serialize};

use crate::id::ObjectId;
use crate::store::CheckpointKind;

/// `dsh/checkpoint`: a snapshot of the workspace was taken for this turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointTaken {
    /// The turn.
    pub turn: u64,
    /// `before` (the turn's first tool call) or `after` (its end).
    pub kind: CheckpointKind,
    /// The root tree in the project's store.
    pub checkpoint: ObjectId,
    /// The workspace snapshotted (canonical path).
    pub workspace: String,
    /// Files and links in it.
    pub files: u64,
    /// Files over the size limit (recorded, content not kept), at most 20 listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl PluginEvent for CheckpointTaken {
    const TYPE: &'static str = "dsh/checkpoint";
}

/// `dsh/rewind`: this session is a rewind of another to the state before one of its turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rewound {
    /// The session rewound.
    pub from_session: String,
    /// Turns from this one on were dropped.
    pub to_turn: u64,
    /// The rewind record (in the checkpoint store) when files were restored too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewind: Option<String>,
}

impl PluginEvent for Rewound {
    const TYPE: &'static str = "dsh/rewind";
}

/// A line for `dsh sessions show` and similar transcripts.
pub fn describe(e: &dsh_session::Event) -> Option<String> {
    if let Some(Ok(c)) = e.plugin::<CheckpointTaken>() {
        return Some(format!(
            "checkpoint {} of turn {}: {} ({} files)",
            c.kind.as_str(),
            c.turn,
            c.checkpoint.short(),
            c.files
        ));
    }
    if let Some(Ok(r)) = e.plugin::<Rewound>() {
        return Some(format!(
            "rewound from {} to before turn {}",
            r.from_session, r.to_turn
        ));
    }
    forked(e)
}

/// The line of a `dsh/forked` record (the session continues in a rewind's fork).
pub fn forked(e: &dsh_session::Event) -> Option<String> {
    let f = e.plugin::<dsh_session::forked::SessionForked>()?.ok()?;
    let to = f
        .to_turn
        .map(|t| format!(" (rewound to before turn {t})"))
        .unwrap_or_default();
    Some(format!("── continued in {}{to} ──", f.session_id))
}
