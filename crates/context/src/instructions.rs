//! Instruction files (`AGENTS.md`, `CLAUDE.md` and their `.local.md` overlays): discovery in
//! order, de-duplication, size limits, and the texts of the baseline reminder and the
//! added / updated / removed notices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::project::ProjectPaths;

/// The `source.kind` of instruction messages.
pub const SOURCE_KIND: &str = "agent-instructions";

/// The guidance sentence of the baseline reminder.
pub const GUIDANCE: &str = "Instructions for this workspace follow, from the user's and the \
project's instruction files, broadest first; a more specific file takes precedence over a \
broader one. Follow them.";

fn default_max_bytes() -> usize {
    65536
}
fn default_max_source_bytes() -> u64 {
    1024 * 1024
}
fn default_markers() -> Vec<String> {
    vec![".git".into()]
}
fn default_candidates() -> Vec<String> {
    vec!["AGENTS.md".into(), "CLAUDE.md".into()]
}
fn default_local_candidates() -> Vec<String> {
    vec!["AGENTS.local.md".into(), "CLAUDE.local.md".into()]
}

/// How instruction files are found and bounded.
#[derive(Clone, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstructionsConfig {
    /// Budget of the baseline reminder's file contents, in bytes (default 65536).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// A file larger than this is skipped and reported (default 1 MiB).
    #[serde(default = "default_max_source_bytes")]
    pub max_source_bytes: u64,
    /// Names whose presence marks the project root (default `[".git"]`).
    #[serde(default = "default_markers")]
    pub project_root_markers: Vec<String>,
    /// Instruction file names per directory, in order (default `AGENTS.md`, `CLAUDE.md`).
    #[serde(default = "default_candidates")]
    pub instruction_file_candidates: Vec<String>,
    /// Overlays read after them (default `AGENTS.local.md`, `CLAUDE.local.md`).
    #[serde(default = "default_local_candidates")]
    pub local_instruction_file_candidates: Vec<String>,
}

impl Default for InstructionsConfig {
    fn default() -> Self {
        Self {
            max_bytes: default_max_bytes(),
            max_source_bytes: default_max_source_bytes(),
            project_root_markers: default_markers(),
            instruction_file_candidates: default_candidates(),
            local_instruction_file_candidates: default_local_candidates(),
        }
    }
}

impl InstructionsConfig {
    /// Whether `path`'s file name is an instruction file candidate or overlay.
    pub fn is_candidate(&self, path: &Path) -> bool {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        self.instruction_file_candidates
            .iter()
            .chain(&self.local_instruction_file_candidates)
            .any(|c| c == name)
    }
}

/// Whose file it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// `$DSH_HOME/AGENTS.md`.
    User,
    /// A file of the project (root to working directory, or one the agent touched).
    Project,
}

impl Scope {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// One loaded instruction file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionFile {
    /// Its path.
    pub path: PathBuf,
    /// Whose it is.
    pub scope: Scope,
    /// Its content, trimmed.
    pub content: String,
    /// SHA-256 of the raw bytes, lowercase hex.
    pub digest: String,
}

/// A file that exists but was not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedFile {
    /// Its path.
    pub path: PathBuf,
    /// Why.
    pub reason: SkipReason,
}

/// Why an instruction file was not loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    /// The file could not be read (the I/O error's text).
    #[error("cannot read: {0}")]
    Read(String),
    /// The file is larger than `max_source_bytes`.
    #[error("{size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The file holds only whitespace.
    #[error("empty")]
    Empty,
    /// An earlier file in the same directory has the same content.
    #[error("same content as an earlier file in this directory")]
    SameContent,
}

/// What [`discover`] found, in injection order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Loaded files, broadest first.
    pub files: Vec<InstructionFile>,
    /// Files skipped: duplicates, empty, too large, unreadable.
    pub skipped: Vec<SkippedFile>,
}

/// Reads one file under the limits: `Ok(None)` when it does not exist.
pub fn load_file(
    path: &Path,
    scope: Scope,
    config: &InstructionsConfig,
) -> Result<Option<InstructionFile>, SkipReason> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SkipReason::Read(e.to_string())),
    };
    if !meta.is_file() {
        return Ok(None);
    }
    if meta.len() > config.max_source_bytes {
        return Err(SkipReason::TooLarge {
            size: meta.len(),
            limit: config.max_source_bytes,
        });
    }
    let bytes = std::fs::read(path).map_err(|e| SkipReason::Read(e.to_string()))?;
    let digest = hex(&Sha256::digest(&bytes));
    let text = String::from_utf8(bytes).map_err(|_| SkipReason::NotUtf8)?;
    Ok(Some(InstructionFile {
        path: path.to_path_buf(),
        scope,
        content: text.trim().to_owned(),
        digest,
    }))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The instruction files for `paths`: `$DSH_HOME/AGENTS.md`, then each directory from the project
/// root down to the working directory (base files in candidate order, then the overlays).
/// Within one directory a file whose trimmed content equals an earlier one is skipped; empty
/// files are skipped.
pub fn discover(paths: &ProjectPaths, config: &InstructionsConfig) -> Discovery {
    let mut out = Discovery::default();
    let mut seen_paths: Vec<PathBuf> = Vec::new();
    let mut visit =
        |out: &mut Discovery, path: PathBuf, scope: Scope, dir_contents: &mut Vec<String>| {
            let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
            if seen_paths.contains(&canonical) {
                return;
            }
            match load_file(&path, scope, config) {
                Ok(None) => {}
                Ok(Some(file)) => {
                    seen_paths.push(canonical);
                    if file.content.is_empty() {
                        out.skipped.push(SkippedFile {
                            path,
                            reason: SkipReason::Empty,
                        });
                    } else if dir_contents.contains(&file.content) {
                        out.skipped.push(SkippedFile {
                            path,
                            reason: SkipReason::SameContent,
                        });
                    } else {
                        dir_contents.push(file.content.clone());
                        out.files.push(file);
                    }
                }
                Err(reason) => out.skipped.push(SkippedFile { path, reason }),
            }
        };
    visit(
        &mut out,
        paths.dsh_home.join("AGENTS.md"),
        Scope::User,
        &mut Vec::new(),
    );
    for dir in paths.root_to_cwd() {
        let mut contents = Vec::new();
        for name in config
            .instruction_file_candidates
            .iter()
            .chain(&config.local_instruction_file_candidates)
        {
            visit(&mut out, dir.join(name), Scope::Project, &mut contents);
        }
    }
    out
}

/// The baseline reminder's files after the byte budget: the broadest files are dropped first,
/// then the most specific one is truncated. Returns the kept files (the last possibly cut) and
/// a notice when anything was dropped or cut.
pub fn apply_budget(
    files: &[InstructionFile],
    max_bytes: usize,
) -> (Vec<InstructionFile>, Option<String>) {
    let mut kept: Vec<InstructionFile> = files.to_vec();
    let mut dropped = Vec::new();
    while kept.len() > 1 && kept.iter().map(|f| f.content.len()).sum::<usize>() > max_bytes {
        dropped.push(kept.remove(0).path);
    }
    let mut cut = None;
    if let Some(last) = kept.last_mut()
        && last.content.len() > max_bytes
    {
        let mut at = max_bytes;
        while !last.content.is_char_boundary(at) {
            at -= 1;
        }
        last.content.truncate(at);
        cut = Some(last.path.clone());
    }
    if dropped.is_empty() && cut.is_none() {
        return (kept, None);
    }
    let mut notice = format!("Workspace instruction budget of {max_bytes} bytes exceeded.");
    for p in &dropped {
        notice.push_str(&format!("\nOmitted: {}", p.display()));
    }
    if let Some(p) = cut {
        notice.push_str(&format!("\nTruncated: {}", p.display()));
    }
    (kept, Some(notice))
}

/// What happened to one file since the model last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A file the model has not seen.
    Added(InstructionFile),
    /// A file whose content changed.
    Updated(InstructionFile),
    /// A file that is gone (or empty now).
    Removed {
        /// Its path.
        path: PathBuf,
        /// Whose it was.
        scope: Scope,
    },
}

impl Change {
    fn path(&self) -> &Path {
        match self {
            Change::Added(f) | Change::Updated(f) => &f.path,
            Change::Removed { path, .. } => path,
        }
    }
}

/// What the model has seen: path → (scope, digest), as the log's instruction messages say.
pub type Known = BTreeMap<PathBuf, (Scope, String)>;

/// Folds one logged instruction message's `changes` into `known`.
pub fn fold_source(known: &mut Known, source: &dsh_llm::MessageSource) {
    let Some(Value::Array(changes)) = source.extra.get("changes") else {
        return;
    };
    for c in changes {
        let (Some(action), Some(path)) = (
            c.get("action").and_then(Value::as_str),
            c.get("path").and_then(Value::as_str),
        ) else {
            continue;
        };
        let scope = match c.get("scope").and_then(Value::as_str) {
            Some("user") => Scope::User,
            _ => Scope::Project,
        };
        match action {
            "remove" => {
                known.remove(Path::new(path));
            }
            _ => {
                let digest = c.get("digest").and_then(Value::as_str).unwrap_or_default();
                known.insert(PathBuf::from(path), (scope, digest.to_owned()));
            }
        }
    }
}

/// The changes between what the model has seen and `current`.
pub fn diff(known: &Known, current: &[InstructionFile]) -> Vec<Change> {
    let mut out = Vec::new();
    for f in current {
        match known.get(&f.path) {
            None => out.push(Change::Added(f.clone())),
            Some((_, d)) if *d != f.digest => out.push(Change::Updated(f.clone())),
            Some(_) => {}
        }
    }
    for (path, (scope, _)) in known {
        if !current.iter().any(|f| &f.path == path) {
            out.push(Change::Removed {
                path: path.clone(),
                scope: *scope,
            });
        }
    }
    out
}

/// A message to append: its text and its `source`.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    /// The text (one text block).
    pub text: String,
    /// The source.
    pub source: dsh_llm::MessageSource,
}

fn change_json(action: &str, scope: Scope, path: &Path, digest: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("action".into(), Value::from(action));
    m.insert("scope".into(), Value::from(scope.as_str()));
    m.insert("path".into(), Value::from(path.display().to_string()));
    if let Some(d) = digest {
        m.insert("digest".into(), Value::from(d));
    }
    Value::Object(m)
}

/// The baseline reminder for `files` (after [`apply_budget`]); `None` when there are none.
pub fn baseline(files: &[InstructionFile], max_bytes: usize) -> Option<Injection> {
    if files.is_empty() {
        return None;
    }
    let (kept, notice) = apply_budget(files, max_bytes);
    let mut text = format!("<system-reminder>\n{GUIDANCE}");
    for f in &kept {
        text.push_str(&format!(
            "\n\nInstructions from: {}\n{}",
            f.path.display(),
            f.content
        ));
    }
    if let Some(n) = notice {
        text.push_str("\n\n");
        text.push_str(&n);
    }
    text.push_str("\n</system-reminder>");
    // The digests of every file (dropped ones too): they are not re-announced as "added".
    let changes = files
        .iter()
        .map(|f| change_json("set", f.scope, &f.path, Some(&f.digest)))
        .collect();
    let source = dsh_llm::MessageSource::new(SOURCE_KIND)
        .with("form", Value::from("instructions"))
        .with("changes", Value::Array(changes))
        .with("baseline", Value::Bool(true));
    Some(Injection { text, source })
}

/// One notice message for `changes` (in order); `None` when there are none. Each file's content
/// is cut to `max_bytes`.
pub fn notice(changes: &[Change], max_bytes: usize) -> Option<Injection> {
    if changes.is_empty() {
        return None;
    }
    let mut text = String::from("<system-reminder>");
    let mut list = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        match c {
            Change::Added(f) | Change::Updated(f) => {
                let head = if matches!(c, Change::Added(_)) {
                    "Additional instructions from"
                } else {
                    "Updated instructions from"
                };
                let (kept, _) = apply_budget(std::slice::from_ref(f), max_bytes);
                let content = kept.first().map(|k| k.content.as_str()).unwrap_or_default();
                text.push_str(&format!("\n{head}: {}\n{content}", c.path().display()));
                let action = if matches!(c, Change::Added(_)) {
                    "set"
                } else {
                    "replace"
                };
                list.push(change_json(action, f.scope, &f.path, Some(&f.digest)));
            }
            Change::Removed { path, scope } => {
                text.push_str(&format!(
                    "\nInstructions removed: {} (its earlier instructions no longer apply)",
                    path.display()
                ));
                list.push(change_json("remove", *scope, path, None));
            }
        }
    }
    text.push_str("\n</system-reminder>");
    let source = dsh_llm::MessageSource::new(SOURCE_KIND)
        .with("form", Value::from("instructions"))
        .with("changes", Value::Array(list));
    Some(Injection { text, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> InstructionFile {
        InstructionFile {
            path: path.into(),
            scope: Scope::Project,
            content: content.into(),
            digest: hex(&Sha256::digest(content.as_bytes())),
        }
    }

    #[test]
    fn the_budget_drops_broad_files_then_truncates_the_nearest() {
        let files = [file("/a", "aaaa"), file("/b", "bbbb"), file("/c", "cccccc")];
        let (kept, notice) = apply_budget(&files, 8);
        assert_eq!(
            kept.iter()
                .map(|f| f.path.to_str().unwrap())
                .collect::<Vec<_>>(),
            ["/c"]
        );
        assert!(notice.unwrap().contains("Omitted: /a\nOmitted: /b"));
        let (kept, notice) = apply_budget(&files[2..], 4);
        assert_eq!(kept[0].content, "cccc");
        assert!(notice.unwrap().ends_with("Truncated: /c"));
        assert_eq!(apply_budget(&files, 100).1, None);
    }

    #[test]
    fn diff_and_fold_round_trip_through_the_source() {
        let a = file("/r/AGENTS.md", "one");
        let b = baseline(std::slice::from_ref(&a), 100).unwrap();
        let mut known = Known::new();
        fold_source(&mut known, &b.source);
        assert!(diff(&known, std::slice::from_ref(&a)).is_empty());
        let a2 = file("/r/AGENTS.md", "two");
        let n = notice(&diff(&known, std::slice::from_ref(&a2)), 100).unwrap();
        assert_eq!(
            n.text,
            "<system-reminder>\nUpdated instructions from: /r/AGENTS.md\ntwo\n</system-reminder>"
        );
        fold_source(&mut known, &n.source);
        let gone = notice(&diff(&known, &[]), 100).unwrap();
        assert!(gone.text.contains("Instructions removed: /r/AGENTS.md"));
        fold_source(&mut known, &gone.source);
        assert!(known.is_empty());
    }
}
