//! What the `dsh rewind` command and `/rewind` share: the workspace and turns a log records,
//! the restore each turn offers, the fork boundary of a conversation rewind, and previews.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_session::data::UserMessage;
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, Event};

use crate::diff::{ChangeKind, counts};
use crate::error::Result;
use crate::events::CheckpointTaken;
use crate::rewind::{Plan, last_restored, plan, turn_checkpoints};
use crate::store::{Snapshot, Store};

/// The workspace of the log's latest checkpoint.
pub fn workspace_of(events: &[Arc<Event>]) -> Option<PathBuf> {
    events
        .iter()
        .rev()
        .find_map(|e| match e.plugin::<CheckpointTaken>() {
            Some(Ok(c)) => Some(PathBuf::from(c.workspace)),
            _ => None,
        })
}

/// The user's prompt of each turn (the first user message of the turn).
pub fn turn_prompts(events: &[Arc<Event>]) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let mut turn = None;
    for e in events {
        match e.core() {
            Some(CoreEvent::TurnStart(t)) => turn = Some(t.turn),
            Some(CoreEvent::TurnEnd(_)) => turn = None,
            Some(CoreEvent::UserMessage(UserMessage(m)))
                if SourceKind::of(m) == SourceKind::User =>
            {
                if let Some(t) = turn {
                    out.entry(t).or_insert_with(|| m.text());
                }
            }
            _ => {}
        }
    }
    out
}

/// The seq of the `turn/end` of turn `to - 1`: the last event a conversation rewind to
/// before turn `to` keeps. `None` for `to < 2` or an unknown turn.
pub fn fork_boundary(events: &[Arc<Event>], to: u64) -> Option<u64> {
    if to < 2 {
        return None;
    }
    events.iter().find_map(|e| match e.core() {
        Some(CoreEvent::TurnEnd(t)) if t.turn == to - 1 => Some(e.seq()),
        _ => None,
    })
}

/// The number of the last turn in the log.
pub fn last_turn(events: &[Arc<Event>]) -> u64 {
    events
        .iter()
        .filter_map(|e| match e.core() {
            Some(CoreEvent::TurnStart(t)) => Some(t.turn),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// One turn as `/rewind` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnInfo {
    /// The turn.
    pub turn: u64,
    /// Its prompt (first line).
    pub prompt: String,
    /// (re-created, restored, deleted) files a rewind to before it would touch, when it has
    /// checkpoints.
    pub restore: Option<(usize, usize, usize)>,
}

/// A fresh snapshot of the workspace, and the restore of the state before turn `to`.
pub fn prepare(
    store: &Store,
    session: &str,
    events: &[Arc<Event>],
    to: u64,
) -> Result<(Snapshot, Option<Plan>)> {
    let current = store.snapshot()?;
    let turns = turn_checkpoints(events, store.workspace());
    let restored = last_restored(store, session)?;
    let p = plan(store, &turns, to, &current.manifest, restored)?;
    Ok((current, p))
}

/// Every turn of the log with the restore a rewind to before it would make.
pub fn list_turns(store: &Store, session: &str, events: &[Arc<Event>]) -> Result<Vec<TurnInfo>> {
    let current = store.snapshot()?;
    let turns = turn_checkpoints(events, store.workspace());
    let restored = last_restored(store, session)?;
    let prompts = turn_prompts(events);
    let mut out = Vec::new();
    for turn in 1..=last_turn(events) {
        let restore = plan(store, &turns, turn, &current.manifest, restored)?.map(|p| {
            let mut a = (0, 0, 0);
            for x in &p.actions {
                match x.kind {
                    ChangeKind::Added => a.0 += 1,
                    ChangeKind::Changed => a.1 += 1,
                    ChangeKind::Removed => a.2 += 1,
                }
            }
            a
        });
        let prompt = prompts
            .get(&turn)
            .and_then(|p| p.lines().next())
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        out.push(TurnInfo {
            turn,
            prompt,
            restore,
        });
    }
    Ok(out)
}

/// The preview of a restore: one line per path (`restore`, `re-create`, `delete`), then the
/// conflicts and the files left alone.
pub fn preview(p: &Plan) -> String {
    let mut out = String::new();
    for a in &p.actions {
        let what = match a.kind {
            ChangeKind::Added => "re-create",
            ChangeKind::Changed => "restore  ",
            ChangeKind::Removed => "delete   ",
        };
        out.push_str(&format!("  {what} {}\n", a.display()));
    }
    for c in &p.conflicts {
        out.push_str(&format!(
            "  ! changed outside dsh since the checkpoint: {}\n",
            String::from_utf8_lossy(c)
        ));
    }
    for c in &p.left_alone {
        out.push_str(&format!(
            "  left alone (over the size limit): {}\n",
            String::from_utf8_lossy(c)
        ));
    }
    out
}

/// `+a ~c -r` for a change count triple.
pub fn summary((a, c, r): (usize, usize, usize)) -> String {
    format!("{a} re-created, {c} restored, {r} deleted")
}

/// (added, changed, removed) of a change list.
pub fn count(changes: &[crate::diff::Change]) -> (usize, usize, usize) {
    counts(changes)
}
