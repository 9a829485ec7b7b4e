//! The file diff a rewind would make, as a unified diff (`git diff` style): from the workspace
//! as it is now (`a/`) to what the restore writes (`b/`). Binary files and files too large to
//! diff are named, links show their targets, execute-bit changes show the modes, and the whole
//! text stops at a line budget with a count of what it left out.

use similar::TextDiff;

use crate::diff::ChangeKind;
use crate::error::Result;
use crate::rewind::Plan;
use crate::store::Store;
use crate::tree::{Manifest, Node};

/// Lines of diff shown by default before the rest is counted.
pub const DEFAULT_MAX_LINES: usize = 400;

/// Files larger than this (either side) are named, not diffed.
const MAX_DIFF_BYTES: u64 = 1 << 20;

/// One path of the preview.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePreview {
    /// Workspace-relative path (lossy for non-UTF-8 names).
    pub path: String,
    /// What the rewind does to it: `Added` re-creates, `Changed` restores, `Removed` deletes.
    pub kind: ChangeKind,
    /// A binary file (or one too large to diff): named, no lines.
    pub binary: bool,
    /// Lines added and removed by the rewind (0 for binary files).
    pub added: u64,
    /// See `added`.
    pub removed: u64,
}

/// The diff of a whole restore.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiffPreview {
    /// Every path, in order.
    pub files: Vec<FilePreview>,
    /// The unified diff, cut at the line budget.
    pub text: String,
    /// Lines of diff left out of `text`.
    pub omitted_lines: u64,
    /// Files whose diff is (wholly or partly) left out of `text`.
    pub omitted_files: u64,
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8000).any(|&b| b == 0) || std::str::from_utf8(bytes).is_err()
}

enum Side {
    None,
    Text(String),
    Binary,
    Link(String),
}

fn side(store: &Store, node: Option<&Node>) -> Result<Side> {
    Ok(match node {
        None => Side::None,
        Some(Node::Symlink { target }) => Side::Link(String::from_utf8_lossy(target).into_owned()),
        Some(Node::Skipped { .. }) => Side::Binary,
        Some(Node::File { size, .. }) if *size > MAX_DIFF_BYTES => Side::Binary,
        Some(Node::File { id, .. }) => {
            let bytes = store.read_blob(id)?;
            if is_binary(&bytes) {
                Side::Binary
            } else {
                Side::Text(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
    })
}

fn mode(node: Option<&Node>) -> Option<&'static str> {
    match node {
        Some(Node::File {
            executable: true, ..
        }) => Some("100755"),
        Some(Node::File { .. } | Node::Skipped { .. }) => Some("100644"),
        Some(Node::Symlink { .. }) => Some("120000"),
        None => None,
    }
}

/// The lines of one file's diff (without trailing newlines), and its +/- counts.
fn file_lines(
    path: &str,
    old: Option<&Node>,
    new: Option<&Node>,
    a: Side,
    b: Side,
) -> (Vec<String>, bool, u64, u64) {
    let mut out = vec![format!("diff --git a/{path} b/{path}")];
    match (mode(old), mode(new)) {
        (None, Some(m)) => out.push(format!("new file mode {m}")),
        (Some(m), None) => out.push(format!("deleted file mode {m}")),
        (Some(x), Some(y)) if x != y => {
            out.push(format!("old mode {x}"));
            out.push(format!("new mode {y}"));
        }
        _ => {}
    }
    let text = |s: Side| match s {
        Side::None => Some(String::new()),
        Side::Text(t) => Some(t),
        Side::Link(t) => Some(format!("{t}\n")),
        Side::Binary => None,
    };
    let (a_none, b_none) = (matches!(a, Side::None), matches!(b, Side::None));
    let (Some(a), Some(b)) = (text(a), text(b)) else {
        let an = if a_none {
            "/dev/null".to_owned()
        } else {
            format!("a/{path}")
        };
        let bn = if b_none {
            "/dev/null".to_owned()
        } else {
            format!("b/{path}")
        };
        out.push(format!("Binary files {an} and {bn} differ"));
        return (out, true, 0, 0);
    };
    if a == b {
        return (out, false, 0, 0);
    }
    let an = if a_none {
        "/dev/null".to_owned()
    } else {
        format!("a/{path}")
    };
    let bn = if b_none {
        "/dev/null".to_owned()
    } else {
        format!("b/{path}")
    };
    let diff = TextDiff::from_lines(&a, &b);
    let (mut added, mut removed) = (0, 0);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            match change.tag() {
                similar::ChangeTag::Insert => added += 1,
                similar::ChangeTag::Delete => removed += 1,
                similar::ChangeTag::Equal => {}
            }
        }
    }
    let unified = diff
        .unified_diff()
        .context_radius(3)
        .header(&an, &bn)
        .to_string();
    out.extend(unified.lines().map(str::to_owned));
    (out, false, added, removed)
}

/// The unified diff of `plan` against `current` (the snapshot it was planned on), cut after
/// `max_lines` lines.
pub fn diff_preview(
    store: &Store,
    plan: &Plan,
    current: &Manifest,
    max_lines: usize,
) -> Result<DiffPreview> {
    let mut out = DiffPreview::default();
    let mut shown = 0usize;
    for action in &plan.actions {
        let path = action.display();
        let old = current.entries.get(&action.path);
        let new = action.target.as_ref();
        let (lines, binary, added, removed) =
            file_lines(&path, old, new, side(store, old)?, side(store, new)?);
        out.files.push(FilePreview {
            path,
            kind: action.kind,
            binary,
            added,
            removed,
        });
        let room = max_lines.saturating_sub(shown);
        if room < lines.len() {
            out.omitted_files += 1;
            out.omitted_lines += (lines.len() - room) as u64;
        }
        for line in lines.into_iter().take(room) {
            out.text.push_str(&line);
            out.text.push('\n');
            shown += 1;
        }
    }
    if out.omitted_lines > 0 {
        out.text.push_str(&format!(
            "[… {} more line(s) of diff in {} file(s) not shown]\n",
            out.omitted_lines, out.omitted_files
        ));
    }
    Ok(out)
}

/// `+3 -1` style counts, or `binary`, for a one-line listing.
pub fn stat(f: &FilePreview) -> String {
    if f.binary {
        "binary".to_owned()
    } else {
        format!("+{} -{}", f.added, f.removed)
    }
}
