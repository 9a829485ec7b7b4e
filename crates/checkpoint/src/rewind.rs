//! Rewind of the files: which checkpoint to restore, which paths dsh changed since, which of
//! them someone else changed too (refused unless forced), and the restore itself, after a
//! backup snapshot of what it overwrites. Only paths dsh changed are touched: a file the user
//! edited that no turn from the target on touched keeps the user's edit.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diff::{Change, ChangeKind, changed_paths, diff, same_opt};
use crate::error::{CheckpointError, Result};
use crate::events::CheckpointTaken;
use crate::id::ObjectId;
use crate::store::{CheckpointKind, CheckpointRecord, RewindRecord, Store, now_ms, tmp_name};
use crate::tree::{Manifest, Node};

/// The checkpoints a session's log records for one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnCheckpoints {
    /// The turn.
    pub turn: u64,
    /// Before its first tool call.
    pub before: Option<ObjectId>,
    /// At its end.
    pub after: Option<ObjectId>,
}

/// The `dsh/checkpoint` records of `events` for `workspace`, by turn.
pub fn turn_checkpoints(
    events: &[Arc<dsh_session::Event>],
    workspace: &Path,
) -> BTreeMap<u64, TurnCheckpoints> {
    let mut out: BTreeMap<u64, TurnCheckpoints> = BTreeMap::new();
    for e in events {
        let Some(Ok(c)) = e.plugin::<CheckpointTaken>() else {
            continue;
        };
        if Path::new(&c.workspace) != workspace {
            continue;
        }
        let t = out.entry(c.turn).or_insert_with(|| TurnCheckpoints {
            turn: c.turn,
            ..Default::default()
        });
        match c.kind {
            CheckpointKind::Before => t.before = t.before.or(Some(c.checkpoint)),
            CheckpointKind::After => t.after = Some(c.checkpoint),
            CheckpointKind::Backup | CheckpointKind::Restored => {}
        }
    }
    out
}

/// One path a restore writes or deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// Workspace-relative path.
    pub path: Vec<u8>,
    /// What the restore does to the current workspace: `Added` re-creates, `Changed`
    /// overwrites, `Removed` deletes.
    pub kind: ChangeKind,
    /// What the path becomes (`None`: deleted).
    pub target: Option<Node>,
}

impl Action {
    /// The path for display.
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// A restore, ready to preview and apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The checkpoint restored.
    pub target: ObjectId,
    /// What changes on disk.
    pub actions: Vec<Action>,
    /// Paths of `actions` someone changed outside dsh since dsh last saw them.
    pub conflicts: Vec<Vec<u8>>,
    /// Paths dsh changed that are over the size limit on one side: left as they are.
    pub left_alone: Vec<Vec<u8>>,
}

fn plan_paths(
    target_id: ObjectId,
    target: &Manifest,
    current: &Manifest,
    paths: &BTreeSet<Vec<u8>>,
    outside: &BTreeSet<Vec<u8>>,
) -> Plan {
    let mut actions = Vec::new();
    let mut left_alone = Vec::new();
    for p in paths {
        let (t, c) = (target.entries.get(p), current.entries.get(p));
        if same_opt(t, c) {
            continue;
        }
        if matches!(t, Some(Node::Skipped { .. })) || matches!(c, Some(Node::Skipped { .. })) {
            left_alone.push(p.clone());
            continue;
        }
        let kind = match (t, c) {
            (Some(_), None) => ChangeKind::Added,
            (None, Some(_)) => ChangeKind::Removed,
            _ => ChangeKind::Changed,
        };
        actions.push(Action {
            path: p.clone(),
            kind,
            target: t.cloned(),
        });
    }
    let conflicts = actions
        .iter()
        .filter(|a| outside.contains(&a.path))
        .map(|a| a.path.clone())
        .collect();
    Plan {
        target: target_id,
        actions,
        conflicts,
        left_alone,
    }
}

/// The restore of the workspace to its state before turn `to` (numbered from 1): the
/// `before` checkpoint of the first turn from `to` on that has one (turns without tool calls
/// change nothing). `None`: no turn from `to` on recorded a checkpoint, so there is nothing to
/// restore. `current` is a fresh snapshot of the workspace; `restored` is the workspace a
/// rewind of this session left after the last turn's end, if one did (see
/// [`last_restored`]): its changes are dsh's, not someone else's.
pub fn plan(
    store: &Store,
    turns: &BTreeMap<u64, TurnCheckpoints>,
    to: u64,
    current: &Manifest,
    restored: Option<ObjectId>,
) -> Result<Option<Plan>> {
    let later: Vec<&TurnCheckpoints> = turns
        .range(to..)
        .map(|(_, t)| t)
        .filter(|t| t.before.is_some())
        .collect();
    let Some(first) = later.first() else {
        return Ok(None);
    };
    let Some(target_id) = first.before else {
        return Ok(None);
    };
    let target = store.manifest(target_id)?;
    let mut loaded: BTreeMap<ObjectId, Manifest> = BTreeMap::new();
    loaded.insert(target_id, target.clone());
    let mut get = |id: ObjectId| -> Result<Manifest> {
        if let Some(m) = loaded.get(&id) {
            return Ok(m.clone());
        }
        let m = store.manifest(id)?;
        loaded.insert(id, m.clone());
        Ok(m)
    };
    let mut by_dsh = BTreeSet::new();
    let mut outside = BTreeSet::new();
    for (i, t) in later.iter().enumerate() {
        let Some(before) = t.before else { continue };
        let next_before = later.get(i + 1).and_then(|n| n.before);
        let b = get(before)?;
        match t.after {
            Some(after) => {
                let a = get(after)?;
                by_dsh.extend(changed_paths(&b, &a));
                // Between this turn's end and the next turn's start (or now): not dsh, except
                // a rewind's own changes after the last turn.
                match next_before {
                    Some(n) => outside.extend(changed_paths(&a, &get(n)?)),
                    None => {
                        let base = match restored {
                            Some(r) => get(r)?,
                            None => a,
                        };
                        outside.extend(changed_paths(&base, current));
                    }
                }
            }
            None => {
                // No end checkpoint (a crash): count everything up to the next start as dsh's.
                let next = match next_before {
                    Some(n) => get(n)?,
                    None => current.clone(),
                };
                by_dsh.extend(changed_paths(&b, &next));
            }
        }
    }
    Ok(Some(plan_paths(
        target_id, &target, current, &by_dsh, &outside,
    )))
}

/// The undo of rewind `r`: the paths it changed go back to its backup; those changed since
/// the rewind are conflicts.
pub fn plan_undo(store: &Store, r: &RewindRecord, current: &Manifest) -> Result<Plan> {
    let backup = store.manifest(r.backup)?;
    let result = store.manifest(r.result)?;
    let paths = changed_paths(&backup, &result);
    let outside = changed_paths(&result, current);
    Ok(plan_paths(r.backup, &backup, current, &paths, &outside))
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Files and links written.
    pub written: u64,
    /// Files and links deleted.
    pub deleted: u64,
    /// Paths that failed, with why.
    pub failed: Vec<(String, String)>,
}

/// A path inside the workspace: relative, no `..`, no empty or `.` parts, and no symlink among
/// its parent directories (so nothing outside the workspace is written through a link).
fn safe_path(root: &Path, rel: &[u8]) -> std::result::Result<PathBuf, RestoreError> {
    let mut p = root.to_path_buf();
    let parts: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == b"." || *part == b".." {
            return Err(RestoreError::NotInWorkspace);
        }
        p.push(OsStr::from_bytes(part));
        if i + 1 < parts.len()
            && let Ok(m) = std::fs::symlink_metadata(&p)
            && m.file_type().is_symlink()
        {
            return Err(RestoreError::ThroughLink(p));
        }
    }
    Ok(p)
}

fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn write_node(store: &Store, path: &Path, node: &Node) -> std::result::Result<(), RestoreError> {
    let parent = path.parent().ok_or(RestoreError::NoParent)?;
    std::fs::create_dir_all(parent).map_err(|e| RestoreError::Io("creating the directory", e))?;
    let tmp = parent.join(format!(".dsh-restore-{}", tmp_name()));
    let done = match node {
        Node::File { id, executable, .. } => {
            let bytes = store.read_blob(id).map_err(Box::new)?;
            let mode = match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_file() => m.permissions().mode() & 0o7777,
                _ => 0o644,
            };
            let mode = if *executable {
                mode | ((mode & 0o444) >> 2) | 0o100
            } else {
                mode & !0o111
            };
            std::fs::write(&tmp, &bytes)
                .and_then(|()| {
                    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
                })
                .map_err(|e| RestoreError::Io("writing", e))
        }
        Node::Symlink { target } => std::os::unix::fs::symlink(OsStr::from_bytes(target), &tmp)
            .map_err(|e| RestoreError::Io("linking", e)),
        Node::Skipped { .. } => return Err(RestoreError::NotStored),
    };
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // A directory in the way (a path that was a file in the checkpoint) must be empty.
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.is_dir()
        && let Err(e) = std::fs::remove_dir(path)
    {
        let _ = std::fs::remove_file(&tmp);
        return Err(RestoreError::Io("a directory is in the way", e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        RestoreError::Io("renaming into place", e)
    })
}

/// Why one path was not restored (reported with the path in [`Applied::failed`]).
#[derive(Debug, thiserror::Error)]
enum RestoreError {
    /// An empty, `.` or `..` part.
    #[error("not a workspace path")]
    NotInWorkspace,
    /// A parent directory is a symbolic link: writing would leave the workspace.
    #[error("{} is a symbolic link", .0.display())]
    ThroughLink(PathBuf),
    /// The path has no parent.
    #[error("no parent directory")]
    NoParent,
    /// The file was over the size limit when the checkpoint was taken.
    #[error("over the size limit: not stored")]
    NotStored,
    /// The store could not give the content.
    #[error(transparent)]
    Store(#[from] Box<CheckpointError>),
    /// A file-system step failed.
    #[error("{0}: {1}")]
    Io(&'static str, std::io::Error),
}

/// Applies `plan` to the workspace: deletions first (then the directories they leave empty
/// that the checkpoint does not have), then writes (files through a temporary file renamed
/// into place, with the checkpoint's execute bits; links re-created).
pub fn apply(store: &Store, plan: &Plan) -> Result<Applied> {
    let root = store.workspace();
    let target = store.manifest(plan.target)?;
    let mut out = Applied::default();
    let mut emptied: BTreeSet<PathBuf> = BTreeSet::new();
    for a in plan.actions.iter().filter(|a| a.target.is_none()) {
        let p = match safe_path(root, &a.path) {
            Ok(p) => p,
            Err(e) => {
                out.failed.push((a.display(), e.to_string()));
                continue;
            }
        };
        match remove_any(&p) {
            Ok(()) => {
                out.deleted += 1;
                let mut d = p.parent().map(Path::to_path_buf);
                while let Some(dir) = d {
                    if dir == root {
                        break;
                    }
                    emptied.insert(dir.clone());
                    d = dir.parent().map(Path::to_path_buf);
                }
            }
            Err(e) => out.failed.push((a.display(), e.to_string())),
        }
    }
    // Deepest first: a directory the checkpoint lacks goes once it is empty.
    let mut dirs: Vec<PathBuf> = emptied.into_iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let rel = d
            .strip_prefix(root)
            .map(|r| r.as_os_str().as_bytes().to_vec())
            .unwrap_or_default();
        if !target.dirs.contains(&rel) {
            let _ = std::fs::remove_dir(&d); // fails while not empty: kept
        }
    }
    for a in &plan.actions {
        let Some(node) = &a.target else { continue };
        let p = match safe_path(root, &a.path) {
            Ok(p) => p,
            Err(e) => {
                out.failed.push((a.display(), e.to_string()));
                continue;
            }
        };
        match write_node(store, &p, node) {
            Ok(()) => out.written += 1,
            Err(e) => out.failed.push((a.display(), e.to_string())),
        }
    }
    Ok(out)
}

/// Why a rewind did not run.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// Files the rewind would overwrite changed outside dsh; `--force` overwrites them (after
    /// the backup).
    #[error("{} file(s) changed outside dsh since the checkpoint: {}", .0.len(), .0.join(", "))]
    Conflicts(Vec<String>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] CheckpointError),
}

/// What [`run`] did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The rewind record (undo with [`undo_last`]).
    pub record: RewindRecord,
    /// What the restore did.
    pub applied: Applied,
}

/// Backs up the workspace, applies `plan`, snapshots the result and records the rewind.
/// `current` must be the snapshot `plan` was made against (`backup` is its id).
pub fn run(
    store: &Store,
    session: &str,
    to_turn: Option<u64>,
    undo_of: Option<String>,
    plan: &Plan,
    backup: ObjectId,
    force: bool,
) -> Result<Outcome, RewindError> {
    if !plan.conflicts.is_empty() && !force {
        return Err(RewindError::Conflicts(
            plan.conflicts
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
        ));
    }
    let files = |m: &Manifest| m.entries.len() as u64;
    let backup_files = files(&store.manifest(backup)?);
    store.record(&CheckpointRecord {
        id: backup,
        kind: CheckpointKind::Backup,
        session: session.to_owned(),
        turn: to_turn,
        created_ms: now_ms(),
        files: backup_files,
        new_bytes: 0,
    })?;
    let applied = apply(store, plan)?;
    let after = store.snapshot()?;
    store.record(&CheckpointRecord {
        id: after.id,
        kind: CheckpointKind::Restored,
        session: session.to_owned(),
        turn: to_turn,
        created_ms: now_ms(),
        files: files(&after.manifest),
        new_bytes: after.new_bytes,
    })?;
    let record = RewindRecord {
        id: format!("rw-{}-{}", now_ms(), tmp_name()),
        session: session.to_owned(),
        to_turn,
        undo_of,
        backup,
        result: after.id,
        forked_session: None,
        created_ms: now_ms(),
    };
    store.record_rewind(&record)?;
    Ok(Outcome { record, applied })
}

/// The workspace the latest rewind of `session` left, when that rewind came after the
/// session's latest turn-end checkpoint (the store's records are in time order).
pub fn last_restored(store: &Store, session: &str) -> Result<Option<ObjectId>> {
    Ok(store
        .records()?
        .into_iter()
        .rev()
        .find(|r| {
            r.session == session
                && matches!(r.kind, CheckpointKind::After | CheckpointKind::Restored)
        })
        .filter(|r| r.kind == CheckpointKind::Restored)
        .map(|r| r.id))
}

/// The latest rewind of `session` (any session: `None`) in this store.
pub fn last_rewind(store: &Store, session: Option<&str>) -> Result<Option<RewindRecord>> {
    Ok(store
        .rewinds()?
        .into_iter()
        .rev()
        .find(|r| session.is_none_or(|s| r.session == s)))
}

/// The changes between two checkpoints, for previews and `/rewind`'s list.
pub fn changes_between(store: &Store, old: ObjectId, new: &Manifest) -> Result<Vec<Change>> {
    Ok(diff(&store.manifest(old)?, new))
}
