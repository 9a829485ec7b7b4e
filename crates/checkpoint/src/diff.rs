//! Differences between two snapshots.

use std::collections::BTreeSet;

use crate::tree::{Manifest, Node};

/// How a path differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    /// Present only in the newer snapshot.
    Added,
    /// Present in both, different content, mode or link target.
    Changed,
    /// Present only in the older snapshot.
    Removed,
}

impl ChangeKind {
    /// `A`, `M`, `D` (as `git status --short`).
    pub fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Changed => 'M',
            ChangeKind::Removed => 'D',
        }
    }
}

/// One differing path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Change {
    /// Workspace-relative path.
    pub path: Vec<u8>,
    /// How.
    pub kind: ChangeKind,
}

impl Change {
    /// The path for display (lossy for non-UTF-8 names).
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// What changed from `old` to `new`.
pub fn diff(old: &Manifest, new: &Manifest) -> Vec<Change> {
    let mut out = Vec::new();
    for (p, n) in &new.entries {
        match old.entries.get(p) {
            None => out.push(Change {
                path: p.clone(),
                kind: ChangeKind::Added,
            }),
            Some(o) if !o.same(n) => out.push(Change {
                path: p.clone(),
                kind: ChangeKind::Changed,
            }),
            Some(_) => {}
        }
    }
    for p in old.entries.keys() {
        if !new.entries.contains_key(p) {
            out.push(Change {
                path: p.clone(),
                kind: ChangeKind::Removed,
            });
        }
    }
    out.sort();
    out
}

/// The paths of `diff(old, new)`.
pub(crate) fn changed_paths(old: &Manifest, new: &Manifest) -> BTreeSet<Vec<u8>> {
    diff(old, new).into_iter().map(|c| c.path).collect()
}

/// Counts of a change list: (added, changed, removed).
pub fn counts(changes: &[Change]) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for ch in changes {
        match ch.kind {
            ChangeKind::Added => c.0 += 1,
            ChangeKind::Changed => c.1 += 1,
            ChangeKind::Removed => c.2 += 1,
        }
    }
    c
}

pub(crate) fn same_opt(a: Option<&Node>, b: Option<&Node>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.same(y),
        _ => false,
    }
}
