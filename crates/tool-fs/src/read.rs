//! The `read` tool: numbered lines of a UTF-8 text file, windowed and capped.
//!
//! The file is always streamed in 64 KiB chunks, so memory is bounded by the window (at most
//! 2000 lines of at most ~8 KB each) whatever the file size — a 10 MB single line costs one
//! chunk, not 10 MB.

use std::io::Read;
use std::path::{Path, PathBuf};

use dsh_tools::{Concurrency, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::args::{nonblank, opt_positive_int, parse};
use crate::backend::{FileBackend, backend_error, bounded, text_version};
use crate::paths::resolve_path;
use crate::paths::{codes, file_version, io_error};

/// Maximum (and default) lines per call.
pub const MAX_LINES: u64 = 2000;
/// Characters kept of one line.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of selected lines per call (each line's bytes plus one per separating newline).
pub const MAX_WINDOW_BYTES: usize = 51200;
/// Bytes sniffed for a NUL to call a file binary.
pub const BINARY_SNIFF: usize = 8192;

/// Bytes of a line kept while streaming: enough for 2000 chars of up to 4 bytes, plus slack to
/// know the line is longer.
const KEEP: usize = MAX_LINE_CHARS * 4 + 4;
const CHUNK: usize = 64 * 1024;

/// The JSON Schema of `read`'s arguments.
pub fn schema() -> Value {
    json!({"type":"object","properties":{
        "file_path":{"type":"string","description":"Absolute or relative to the working directory."},
        "offset":{"type":"number","description":"First line, 1-based (default 1)."},
        "limit":{"type":"number","description":"Lines (default and at most 2000)."}},
      "required":["file_path"]})
}

/// The description sent to the model.
pub const DESCRIPTION: &str = "Read a UTF-8 text file as numbered lines (`<n>: <text>`); the \
footer says whether the file ended or which offset continues. At most 2000 lines per call (page \
with offset/limit); lines over 2000 characters are cut. Read a file before you write or edit it.";

/// `read` is always parallel-safe.
pub fn concurrency() -> Concurrency {
    Concurrency::ParallelSafe
}

/// `read`'s arguments, as its schema names them.
#[derive(serde::Deserialize)]
struct ReadArgs {
    file_path: String,
    #[serde(default)]
    offset: Option<serde_json::Number>,
    #[serde(default)]
    limit: Option<serde_json::Number>,
}

fn window_args(ctx: &ToolContext, args: Value) -> Result<(PathBuf, u64, u64), ToolError> {
    let a: ReadArgs = parse(args)?;
    let path = resolve_path(ctx.cwd(), nonblank(&a.file_path, "file_path")?);
    let offset = opt_positive_int(a.offset.as_ref(), "offset")?.unwrap_or(1);
    let limit = opt_positive_int(a.limit.as_ref(), "limit")?.unwrap_or(MAX_LINES);
    if limit > MAX_LINES {
        return Err(ToolError::invalid_args(
            "limit must be less than or equal to 2000",
        ));
    }
    Ok((path, offset, limit))
}

/// Run `read` on the local file system.
pub async fn run(ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
    let (path, offset, limit) = window_args(&ctx, args)?;
    let cancel = ctx.cancel_token().clone();
    let task_path = path.clone();
    tokio::task::spawn_blocking(move || read_window(&task_path, offset, limit, &cancel))
        .await
        .map_err(|e| ToolError::failed(format!("read task failed: {e}")))?
}

/// Run `read` through `backend`: the whole text is fetched (the footer needs the total line
/// count and the version covers the whole text) and windowed here, so texts, limits and errors
/// are those of a local read.
pub async fn run_via(
    ctx: ToolContext,
    args: Value,
    backend: &dyn FileBackend,
) -> Result<ToolOutput, ToolError> {
    let (path, offset, limit) = window_args(&ctx, args)?;
    let text = bounded(&ctx, backend.read_text(&path))
        .await?
        .map_err(|e| backend_error(backend, "read", &path, &e))?;
    let bytes = text.as_bytes();
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return Err(not_text(&path, "binary file"));
    }
    let mut scan = Scan::new(offset, limit);
    for chunk in bytes.chunks(CHUNK) {
        scan.feed(chunk);
    }
    conclude(&path, offset, scan, text_version(&text))
}

/// Read lines `offset..offset+limit` of `path` and format the result.
pub fn read_window(
    path: &Path,
    offset: u64,
    limit: u64,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error("read", path, &e))?;
    if !meta.is_file() {
        return Err(ToolError::new(
            codes::FS_NOT_A_FILE,
            format!("cannot read \"{}\": not a regular file", path.display()),
        ));
    }
    let mut file = std::fs::File::open(path).map_err(|e| io_error("read", path, &e))?;
    let version = file
        .metadata()
        .map(|m| file_version(&m))
        .unwrap_or_else(|_| file_version(&meta));
    let mut scan = Scan::new(offset, limit);
    let mut buf = vec![0u8; CHUNK];
    let mut sniffed = 0usize;
    loop {
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("read", path, &e)),
        };
        let chunk = &buf[..n];
        if sniffed < BINARY_SNIFF {
            let look = (BINARY_SNIFF - sniffed).min(n);
            if chunk[..look].contains(&0) {
                return Err(not_text(path, "binary file"));
            }
            sniffed += look;
        }
        scan.feed(chunk);
        if scan.invalid_utf8 {
            return Err(not_text(path, "invalid UTF-8 text"));
        }
    }
    conclude(path, offset, scan, version)
}

/// The result of a finished scan: the window, or the not-text / offset errors.
fn conclude(
    path: &Path,
    offset: u64,
    mut scan: Scan,
    version: String,
) -> Result<ToolOutput, ToolError> {
    let total = scan.finish();
    if scan.invalid_utf8 {
        return Err(not_text(path, "invalid UTF-8 text"));
    }
    if offset > total && !(offset == 1 && total == 0) {
        return Err(ToolError::new(
            codes::FS_NOT_FOUND,
            format!(
                "offset {offset} is out of range for \"{}\" ({total} lines)",
                path.display()
            ),
        ));
    }
    Ok(format_output(path, offset, total, &scan, version))
}

fn not_text(path: &Path, what: &str) -> ToolError {
    ToolError::new(
        codes::FS_NOT_TEXT,
        format!("cannot read \"{}\": {what}", path.display()),
    )
}

fn format_output(path: &Path, offset: u64, total: u64, scan: &Scan, version: String) -> ToolOutput {
    let mut body = String::new();
    for (i, (n, text)) in scan.lines.iter().enumerate() {
        if i > 0 {
            body.push('\n');
        }
        body.push_str(&n.to_string());
        body.push_str(": ");
        body.push_str(text);
    }
    let first = offset;
    let last = offset + scan.lines.len() as u64 - 1;
    let footer = if scan.lines.is_empty() {
        format!("(End of file - total {total} lines)")
    } else if scan.capped {
        format!(
            "(Output capped. Showing lines {first}-{last}. Use offset={} to continue.)",
            last + 1
        )
    } else if last < total {
        format!(
            "(Showing lines {first}-{last} of {total}. Use offset={} to continue.)",
            last + 1
        )
    } else {
        format!("(End of file - total {total} lines)")
    };
    if !body.is_empty() {
        body.push_str("\n\n");
    }
    body.push_str(&footer);
    let text = format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n{body}\n</content>",
        path.display()
    );
    let lines: Vec<Value> = scan
        .lines
        .iter()
        .map(|(n, t)| json!({"number": n, "text": t}))
        .collect();
    ToolOutput::text(text).with_meta(json!({
        "path": path.to_string_lossy(),
        "offset": offset,
        "lines": lines,
        "totalLines": total,
        "version": version,
    }))
}

/// Streaming line scanner: counts every line, keeps only the window, validates UTF-8.
struct Scan {
    offset: u64,
    limit: u64,
    /// Number of the line being accumulated (1-based).
    line_no: u64,
    cur: Vec<u8>,
    cur_len: u64,
    cur_last: Option<u8>,
    lines: Vec<(u64, String)>,
    bytes: usize,
    capped: bool,
    carry: Vec<u8>,
    invalid_utf8: bool,
}

impl Scan {
    fn new(offset: u64, limit: u64) -> Self {
        Self {
            offset,
            limit,
            line_no: 1,
            cur: Vec::new(),
            cur_len: 0,
            cur_last: None,
            lines: Vec::new(),
            bytes: 0,
            capped: false,
            carry: Vec::new(),
            invalid_utf8: false,
        }
    }

    fn in_window(&self) -> bool {
        !self.capped && self.line_no >= self.offset && self.line_no - self.offset < self.limit
    }

    fn validate(&mut self, chunk: &[u8]) {
        let owned;
        let data: &[u8] = if self.carry.is_empty() {
            chunk
        } else {
            let mut v = std::mem::take(&mut self.carry);
            v.extend_from_slice(chunk);
            owned = v;
            &owned
        };
        if let Err(e) = std::str::from_utf8(data) {
            if e.error_len().is_some() {
                self.invalid_utf8 = true;
            } else {
                self.carry = data[e.valid_up_to()..].to_vec();
            }
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        self.validate(chunk);
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.push(&rest[..i]);
            self.end_line();
            rest = &rest[i + 1..];
        }
        self.push(rest);
    }

    fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.cur_len += bytes.len() as u64;
        self.cur_last = bytes.last().copied();
        if self.in_window() && self.cur.len() < KEEP {
            let take = (KEEP - self.cur.len()).min(bytes.len());
            self.cur.extend_from_slice(&bytes[..take]);
        }
    }

    fn end_line(&mut self) {
        if self.in_window() {
            let text = self.line_text();
            let add = text.len() + usize::from(!self.lines.is_empty());
            if self.bytes + add > MAX_WINDOW_BYTES {
                self.capped = true;
            } else {
                self.bytes += add;
                self.lines.push((self.line_no, text));
            }
        }
        self.line_no += 1;
        self.cur.clear();
        self.cur_len = 0;
        self.cur_last = None;
    }

    fn line_text(&self) -> String {
        let mut kept: &[u8] = &self.cur;
        let whole = self.cur_len as usize == kept.len();
        if whole && self.cur_last == Some(b'\r') {
            kept = &kept[..kept.len() - 1];
        }
        let valid = match std::str::from_utf8(kept) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&kept[..e.valid_up_to()]).unwrap_or(""),
        };
        match valid.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!(
                "{}... (line truncated to {MAX_LINE_CHARS} chars)",
                &valid[..cut]
            ),
            None if !whole => format!("{valid}... (line truncated to {MAX_LINE_CHARS} chars)"),
            None => valid.to_owned(),
        }
    }

    /// Close the last line (if unterminated) and return the total line count.
    fn finish(&mut self) -> u64 {
        if self.cur_len > 0 {
            self.end_line();
        }
        if !self.carry.is_empty() {
            self.invalid_utf8 = true;
        }
        self.line_no - 1
    }
}
