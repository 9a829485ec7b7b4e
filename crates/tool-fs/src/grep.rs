//! The `grep` tool: a regex search over file contents with ripgrep's crates, in process.
//!
//! Respects ignore files, skips hidden and binary files (like `rg`), groups matches by file and
//! sorts files by path so the output is deterministic (upstream's order is not).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dsh_tools::{ToolContext, ToolError, ToolOutput};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkState;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::args::{opt_nonblank, parse};
use crate::paths::{codes, display_path, resolve_path};

/// Matches listed inline.
pub const MAX_MATCHES: usize = 250;
/// Bytes of one matched line shown.
pub const MAX_LINE_BYTES: usize = 2000;
/// Total bytes of matched lines before the search is refused.
pub const MAX_RAW_BYTES: u64 = 20_000_000;
/// The tool's time budget.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The JSON Schema of `grep`'s arguments.
pub fn schema() -> Value {
    json!({"type":"object","properties":{
        "pattern":{"type":"string"},
        "path":{"type":"string","description":"File or directory (default: the working directory)."},
        "include":{"type":"string","description":"One glob, e.g. \"*.{ts,tsx}\"."}},
      "required":["pattern"]})
}

/// The description sent to the model.
pub const DESCRIPTION: &str = "Search file contents by regular expression (ripgrep syntax), \
respecting .gitignore, skipping hidden and binary files. Matches are grouped by file (sorted by \
path) as `Line <n>: <text>`; at most 250, more are saved to a file you can read or grep.";

/// One file's matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMatches {
    /// The file.
    pub path: PathBuf,
    /// `(line number, preview)` in file order.
    pub lines: Vec<(u64, String)>,
}

/// What a search found.
#[derive(Debug, Default)]
pub struct SearchOutcome {
    /// Files with matches, sorted by path.
    pub files: Vec<FileMatches>,
    /// Total matching lines.
    pub total: usize,
}

/// `grep`'s arguments, as its schema names them.
#[derive(serde::Deserialize)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    include: Option<String>,
}

/// Run `grep`.
pub async fn run(ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
    let a: GrepArgs = parse(args)?;
    if a.pattern.is_empty() {
        return Err(ToolError::invalid_args(
            "pattern must be a non-empty string",
        ));
    }
    let pattern = a.pattern;
    let root = match opt_nonblank(a.path.as_deref(), "path")? {
        Some(p) => resolve_path(ctx.cwd(), p),
        None => ctx.cwd().to_path_buf(),
    };
    let include = match a.include.as_deref() {
        None => None,
        Some(inc) if inc.trim().is_empty() => {
            return Err(ToolError::invalid_args(
                "include must be a non-empty glob when given",
            ));
        }
        Some(inc) => Some(check_include(inc)?),
    };
    let cancel = ctx.cancel_token().clone();
    let task_ctx = ctx.clone();
    tokio::task::spawn_blocking(move || {
        let outcome = search(&root, &pattern, include.as_deref(), &cancel)?;
        Ok(format(&task_ctx, &outcome))
    })
    .await
    .map_err(|e| ToolError::failed(format!("grep task failed: {e}")))?
}

/// `include`: one glob, not negated, no comma list outside braces.
fn check_include(include: &str) -> Result<String, ToolError> {
    let inc = include.trim();
    if inc.starts_with('!') {
        return Err(ToolError::invalid_args(
            "include must not start with \"!\": negated globs are not supported",
        ));
    }
    let mut depth = 0i32;
    for c in inc.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth <= 0 => {
                return Err(ToolError::invalid_args(
                    "include must be a single glob; use braces for alternatives, e.g. \"*.{ts,tsx}\"",
                ));
            }
            _ => {}
        }
    }
    Ok(inc.to_owned())
}

fn invalid(detail: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        codes::SEARCH_INVALID_PATTERN,
        format!("grep pattern rejected by ripgrep: {detail}"),
    )
}

/// Search `root` (file or directory) for `pattern`, optionally restricted to `include`.
pub fn search(
    root: &Path,
    pattern: &str,
    include: Option<&str>,
    cancel: &CancellationToken,
) -> Result<SearchOutcome, ToolError> {
    if let Err(e) = std::fs::metadata(root) {
        return Err(crate::paths::io_error("grep", root, &e));
    }
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(invalid)?;
    let mut builder = ignore::WalkBuilder::new(root);
    builder.follow_links(false).threads(
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .min(8),
    );
    if let Some(inc) = include {
        let mut ob = ignore::overrides::OverrideBuilder::new(root);
        ob.add(inc).map_err(invalid)?;
        builder.overrides(ob.build().map_err(invalid)?);
    }
    let results: Mutex<Vec<FileMatches>> = Mutex::new(Vec::new());
    let raw = AtomicU64::new(0);
    let overflow = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let shared = Shared {
        matcher: &matcher,
        results: &results,
        raw: &raw,
        overflow: &overflow,
        cancel,
    };
    builder.build_parallel().run(|| {
        let shared = shared.clone();
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let failure = &failure;
        Box::new(move |entry| {
            if shared.cancel.is_cancelled() || shared.overflow.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            shared.search_file(&mut searcher, entry.path(), failure)
        })
    });
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    if overflow.load(Ordering::Relaxed) {
        return Err(ToolError::new(
            codes::SEARCH_RAW_OUTPUT_OVERFLOW,
            format!(
                "grep output exceeded {MAX_RAW_BYTES} bytes; narrow pattern, path, or include and retry"
            ),
        ));
    }
    let mut files = results.into_inner();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let total = files.iter().map(|f| f.lines.len()).sum();
    if total == 0
        && let Some(msg) = failure.into_inner()
    {
        return Err(ToolError::new(codes::SEARCH_FAILED, msg));
    }
    Ok(SearchOutcome { files, total })
}

#[derive(Clone)]
struct Shared<'a> {
    matcher: &'a RegexMatcher,
    results: &'a Mutex<Vec<FileMatches>>,
    raw: &'a AtomicU64,
    overflow: &'a AtomicBool,
    cancel: &'a CancellationToken,
}

impl Shared<'_> {
    fn search_file(
        &self,
        searcher: &mut Searcher,
        path: &Path,
        failure: &Mutex<Option<String>>,
    ) -> WalkState {
        let mut sink = FileSink {
            lines: Vec::new(),
            binary: false,
            raw: self.raw,
            overflow: self.overflow,
            cancel: self.cancel,
        };
        if let Err(e) = searcher.search_path(self.matcher, path, &mut sink) {
            tracing::debug!(path = %path.display(), error = %e, "grep: file skipped");
            failure
                .lock()
                .get_or_insert_with(|| format!("{}: {e}", path.display()));
            return WalkState::Continue;
        }
        if sink.binary || sink.lines.is_empty() {
            return WalkState::Continue;
        }
        self.results.lock().push(FileMatches {
            path: path.to_path_buf(),
            lines: sink.lines,
        });
        if self.overflow.load(Ordering::Relaxed) {
            WalkState::Quit
        } else {
            WalkState::Continue
        }
    }
}

struct FileSink<'a> {
    lines: Vec<(u64, String)>,
    binary: bool,
    raw: &'a AtomicU64,
    overflow: &'a AtomicBool,
    cancel: &'a CancellationToken,
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let bytes = mat.bytes();
        let total = self.raw.fetch_add(bytes.len() as u64, Ordering::Relaxed) + bytes.len() as u64;
        if total > MAX_RAW_BYTES {
            self.overflow.store(true, Ordering::Relaxed);
            return Ok(false);
        }
        self.lines
            .push((mat.line_number().unwrap_or(0), preview(bytes)));
        Ok(!self.cancel.is_cancelled())
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A matched line as shown: terminator stripped, at most 2000 bytes on a UTF-8 boundary.
pub fn preview(line: &[u8]) -> String {
    let mut line = line.strip_suffix(b"\n").unwrap_or(line);
    line = line.strip_suffix(b"\r").unwrap_or(line);
    match std::str::from_utf8(line) {
        Ok(s) if s.len() <= MAX_LINE_BYTES => s.to_owned(),
        Ok(s) => {
            let mut cut = MAX_LINE_BYTES;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{} (line truncated)", &s[..cut])
        }
        Err(_) => "(line is not valid UTF-8)".to_owned(),
    }
}

fn render(ctx: &ToolContext, files: &[FileMatches], limit: usize) -> String {
    let mut out = String::new();
    let mut left = limit;
    for f in files {
        if left == 0 {
            break;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&display_path(ctx.cwd(), &f.path));
        for (n, text) in f.lines.iter().take(left) {
            out.push_str(&format!("\nLine {n}: {text}"));
            left -= 1;
        }
    }
    out
}

fn noun(n: usize) -> &'static str {
    if n == 1 { "match" } else { "matches" }
}

fn format(ctx: &ToolContext, outcome: &SearchOutcome) -> ToolOutput {
    let total = outcome.total;
    let meta =
        json!({"matches": total, "files": outcome.files.len(), "truncated": total > MAX_MATCHES});
    if total == 0 {
        return ToolOutput::text("No matches found").with_meta(meta);
    }
    if total <= MAX_MATCHES {
        let body = render(ctx, &outcome.files, total);
        return ToolOutput::text(format!("Found {total} {}\n\n{body}", noun(total)))
            .with_meta(meta);
    }
    let body = render(ctx, &outcome.files, MAX_MATCHES);
    let full = format!(
        "Found {total} {}\n\n{}\n",
        noun(total),
        render(ctx, &outcome.files, total)
    );
    let footer = match save(ctx, &full) {
        Ok(path) => format!(
            "(Full grep result stored at: {}. Use read with offset/limit, or grep this path to search within it.)",
            path.display()
        ),
        Err(e) => {
            tracing::warn!(error = %e, "grep: could not save the full result");
            "(The complete result could not be saved; narrow pattern, path, or include to see more.)"
                .to_owned()
        }
    };
    ToolOutput::text(format!(
        "Found {MAX_MATCHES} of {total} matches\n\n{body}\n\n{footer}"
    ))
    .with_meta(meta)
}

fn save(ctx: &ToolContext, text: &str) -> std::io::Result<PathBuf> {
    ctx.check_scratch_room(text.len() as u64)?;
    let (mut file, path) = ctx.create_spill_file("grep", "txt")?;
    file.write_all(text.as_bytes())?;
    file.flush()?;
    Ok(path)
}
