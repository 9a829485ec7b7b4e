//! `@` file mentions: typing `@` and part of a path offers the project's files (gitignore-aware,
//! through `ignore`), fuzzily matched; Tab or Enter puts `@path ` in the composer.
//!
//! As the original's TUI did, a mention is text only: the prompt carries `@src/main.rs` and the
//! model reads the file with its `read` tool when it needs it. Nothing is inlined, so the
//! prompt stays small and the file is read at its current content, through the same tool (and
//! sandbox) as any other read.

use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Files listed at most (a huge tree stops here; the matches come from what was listed).
pub const MAX_FILES: usize = 50_000;
/// Matches shown.
pub const SHOWN: usize = 8;

/// The project's files, relative to its directory, listed once in the background.
#[derive(Debug, Default)]
pub struct FileIndex {
    files: OnceLock<Vec<String>>,
}

impl FileIndex {
    /// An index of `paths` (tests, or a list made elsewhere).
    pub fn from_paths(paths: Vec<String>) -> Arc<Self> {
        let index = FileIndex::default();
        let _ = index.files.set(paths);
        Arc::new(index)
    }

    /// Lists the files under `root` on a background thread: `.gitignore`, `.ignore` and git's
    /// excludes are honoured (also outside a git repository), hidden files are skipped.
    pub fn spawn(root: &Path) -> Arc<Self> {
        let index = Arc::new(FileIndex::default());
        let fill = index.clone();
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            let _ = fill.files.set(list(&root));
        });
        index
    }

    /// The files, once listed.
    pub fn files(&self) -> Option<&[String]> {
        self.files.get().map(Vec::as_slice)
    }

    /// The best matches of `query` (its characters in order, case-insensitive): paths that
    /// contain it whole first, then those whose file name matches, then shorter paths.
    pub fn matches(&self, query: &str) -> Option<Vec<String>> {
        let files = self.files()?;
        let q = query.to_lowercase();
        let mut found: Vec<(u8, usize, &String)> = files
            .iter()
            .filter(|f| crate::app::fuzzy(&q, f))
            .map(|f| {
                let lower = f.to_lowercase();
                let name = lower.rsplit('/').next().unwrap_or(&lower);
                let rank = if name.contains(&q) {
                    0
                } else if lower.contains(&q) {
                    1
                } else if crate::app::fuzzy(&q, name) {
                    2
                } else {
                    3
                };
                (rank, f.len(), f)
            })
            .collect();
        found.sort();
        Some(
            found
                .into_iter()
                .take(SHOWN)
                .map(|(_, _, f)| f.clone())
                .collect(),
        )
    }
}

fn list(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let walk = ignore::WalkBuilder::new(root)
        .hidden(true)
        .require_git(false)
        .build();
    for entry in walk.flatten() {
        if out.len() >= MAX_FILES {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Ok(rel) = entry.path().strip_prefix(root) {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// The `@` token the cursor is at the end of: `(query without @, chars to delete)`. A mention
/// starts the text or follows whitespace; it has no whitespace in it.
pub fn token_at(line: &str, col: usize) -> Option<(String, usize)> {
    let before: Vec<char> = line.chars().take(col).collect();
    let start = before
        .iter()
        .rposition(|c| c.is_whitespace())
        .map_or(0, |i| i + 1);
    let token: String = before[start..].iter().collect();
    let query = token.strip_prefix('@')?;
    Some((query.to_owned(), token.chars().count()))
}
