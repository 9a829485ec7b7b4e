//! Reading stored log bytes (format §1.8, §1.9, §2, §4.1 steps 1–3): header and version check,
//! row decoding, torn-tail classification, and the v3→v4 conversion.
//!
//! The reader streams: it reads one line at a time from a [`BufRead`] (never the whole file),
//! parses lines in batches (on several threads for large logs) and stops at the first line it
//! refuses, so a refusal reads at most one line past the valid prefix, and never more than
//! [`MAX_LINE_BYTES`] of it.
//!
//! **Torn tails and corruption.** A torn tail is *at most the last line* of the file: an
//! incomplete final write, i.e. a last line that starts like an event row (`{`) and either
//! lacks its `\n` or holds JSON that stops before its end. It is dropped (a write open
//! truncates it before its first append). Anything else that does not decode is corruption: a
//! bad row followed by more lines, a complete last line that is malformed (not merely cut
//! short) or has a broken envelope (a duplicated or renumbered row), a line that does not start
//! like an object (`{` then `"` or `}`), a line longer than [`MAX_LINE_BYTES`]. The read is
//! then refused with a [`LoadError`] naming the file, the 1-based line, the byte offset of the
//! line and what was expected. Nothing is ever dropped silently beyond the last line; the
//! non-destructive recovery is `dsh_session_jsonl::JsonlStore::repair`.

use std::fmt;
use std::io::{BufRead, Read};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{AppendError, EventError, LogError, Rejection};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::json::as_safe_u64;
use crate::log::SessionLog;

/// The longest line the reader accepts (64 MiB): an event row is one line, and the largest
/// legitimate rows (a big tool result, an image, a long assistant stream) stay far below it. A
/// longer line is refused as corruption after reading at most this many bytes of it.
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// The longest header line the reader accepts (1 MiB; a header is a few hundred bytes).
pub const MAX_HEADER_BYTES: u64 = 1 << 20;

/// Lines are parsed in batches of about this many bytes (bounded memory, parallel parsing).
const BATCH_BYTES: usize = 512 << 10;

/// A decoded (and, for v3, converted) log, ready for [`crate::SessionLog::replay`].
#[derive(Debug, Clone)]
pub struct DecodedLog {
    /// The header (version 4 after conversion).
    pub header: SessionHeader,
    /// The committed events (v4 form).
    pub events: Vec<Event>,
    /// The generation read from storage (3 or 4).
    pub source_version: u64,
    /// Byte length of the committed prefix; anything after it is a torn tail that a write open
    /// truncates before its first append.
    pub committed_len: usize,
    /// Whether a torn tail was dropped.
    pub torn: bool,
    /// The file the log was read from, as named in errors.
    pub path: String,
    /// Byte offset of the line of each stored row, in file order (row `i` is line `i + 2`).
    pub row_offsets: Vec<u64>,
}

impl DecodedLog {
    /// Where the event with this seq is stored: `(1-based line, byte offset of the line)`.
    /// Exact for native v4 logs; for a v3 log only when the conversion inserted no event.
    pub fn locate(&self, seq: u64) -> Option<(u64, u64)> {
        if self.source_version != 4 && self.events.len() != self.row_offsets.len() {
            return None;
        }
        let offset = *self.row_offsets.get(usize::try_from(seq).ok()?)?;
        Some((seq + 2, offset))
    }

    /// Admits the rows ([`SessionLog::replay`]) and locates a refusal: a rejected row becomes
    /// [`LogError::Load`] naming the file, the row's line and byte offset
    /// ([`LoadProblem::Rejected`]); a refusal of the log as a whole (`isSeeded` without its
    /// marker) names the header, line 1; a converted v3 row whose line is unknown (the
    /// conversion inserted rows) stays [`LogError::Rejected`] with the path. Callers should use
    /// this rather than `replay` on the parts, so that every load error names the file and the
    /// line.
    pub fn replay(self) -> Result<SessionLog, LogError> {
        let path = self.path.clone();
        let exact = self.source_version == 4 || self.events.len() == self.row_offsets.len();
        let row_offsets = if exact {
            self.row_offsets.clone()
        } else {
            Vec::new()
        };
        let rows = self.events.len() as u64;
        match SessionLog::replay(self.header, self.events) {
            Ok(log) => Ok(log),
            Err(LogError::Rejected { error, .. }) => {
                let at = usize::try_from(error.seq)
                    .ok()
                    .and_then(|i| row_offsets.get(i).copied());
                let (line, offset) = match at {
                    Some(offset) => (error.seq + 2, offset),
                    // A rule of the whole log (isSeeded): the header's claim, line 1.
                    None if error.seq >= rows => (1, 0),
                    // A converted v3 row whose line is not known (rule 7 renumbered rows).
                    None => {
                        return Err(LogError::Rejected {
                            error,
                            path: Some(path),
                        });
                    }
                };
                Err(LogError::Load(Box::new(LoadError {
                    path,
                    line,
                    offset,
                    valid_events: error.seq,
                    valid_len: offset,
                    problem: LoadProblem::Rejected(error),
                })))
            }
            Err(other) => Err(other.at(&path)),
        }
    }
}

/// What is wrong with a stored log (the cause inside a [`LoadError`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadProblem {
    /// The file has no complete first line.
    #[error("empty or header-less session log")]
    NoHeader,
    /// The header line is longer than [`MAX_HEADER_BYTES`].
    #[error("corrupt session log: header line is longer than {limit} bytes")]
    HeaderTooLong {
        /// The limit.
        limit: u64,
    },
    /// The header line is not JSON.
    #[error("corrupt session log: header line is not valid JSON")]
    HeaderNotJson,
    /// The header line is JSON but not an object.
    #[error("corrupt session log: first line is not a JSON object")]
    HeaderNotObject,
    /// The header object breaks a rule of format §2.
    #[error("{0}")]
    Header(String),
    /// A generation dsh does not read (format §1.9); the text is the "newer"/"older" refusal.
    #[error("{text}")]
    UnsupportedVersion {
        /// The header's (or file name's) version.
        version: u64,
        /// The refusal text (without the path).
        text: String,
    },
    /// The header's version disagrees with the file name.
    #[error(
        "corrupt session log: header version {found} does not match the file generation v{file}"
    )]
    VersionMismatch {
        /// The header's version.
        found: u64,
        /// The file name's generation.
        file: u64,
    },
    /// A line longer than [`MAX_LINE_BYTES`].
    #[error(
        "corrupt session log: a line longer than {limit} bytes (the limit of one stored event); expected one event object per line"
    )]
    LineTooLong {
        /// The limit.
        limit: u64,
    },
    /// A line that does not start like a JSON object (`{` then `"` or `}`): not an event row,
    /// nor a torn write of one.
    #[error("corrupt session log: expected an event object starting with '{{', found {found}")]
    NotAnObject {
        /// What the line starts with.
        found: String,
    },
    /// A line that is not valid UTF-8.
    #[error(
        "corrupt session log: expected an event object (event seq {expected_seq}), found invalid UTF-8: {error}"
    )]
    NotUtf8 {
        /// The seq the row should have had.
        expected_seq: u64,
        /// Where the bytes are invalid.
        #[source]
        error: std::str::Utf8Error,
    },
    /// A line that is not a JSON object of envelope members (not JSON, or cut short).
    #[error("corrupt session log: expected an event object (event seq {expected_seq}): {error}")]
    NotJson {
        /// The seq the row should have had.
        expected_seq: u64,
        /// The parser's error.
        #[source]
        error: Arc<serde_json::Error>,
    },
    /// A JSON line whose envelope is broken (format §4.2), e.g. a wrong `seq`.
    #[error("corrupt session log: expected an event row with seq {expected_seq}: {error}")]
    Envelope {
        /// The seq the row should have had.
        expected_seq: u64,
        /// What is wrong.
        #[source]
        error: EventError,
    },
    /// A well-formed row that admission refuses (format §4.3–§4.7).
    #[error("session log rejected at {0}")]
    Rejected(#[source] AppendError),
    /// The log as a whole breaks a rule (e.g. `isSeeded` without its marker), or the v3
    /// conversion refused it.
    #[error("{detail}")]
    Log {
        /// The refusal.
        detail: String,
        /// Unsupported rather than corrupt.
        unsupported: bool,
    },
    /// A damaged zstd frame (format §1.8).
    #[error("corrupt session log: {0}")]
    Zstd(String),
    /// Reading the file failed.
    #[error("reading the session log failed: {0}")]
    Io(#[source] Arc<std::io::Error>),
}

impl LoadProblem {
    /// JSON that stops before its end: what an incomplete final write leaves.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, LoadProblem::NotJson { error, .. } if error.is_eof())
    }
}

/// Why a stored log cannot be read: the file, the 1-based line, the byte offset of that line's
/// start, what was wrong, and the valid prefix before it (what a repair keeps).
#[derive(Debug, Clone)]
pub struct LoadError {
    /// The file, as shown to the user.
    pub path: String,
    /// 1-based line number (1 is the header).
    pub line: u64,
    /// Byte offset of the start of that line.
    pub offset: u64,
    /// What was wrong.
    pub problem: LoadProblem,
    /// Valid event rows before the refused line.
    pub valid_events: u64,
    /// Byte length of the valid prefix (header plus those rows); `0` when the header is refused.
    pub valid_len: u64,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            // The §1.9 texts end with the path only.
            LoadProblem::UnsupportedVersion { text, .. } => write!(f, "{text} ({})", self.path),
            p => write!(
                f,
                "{p} ({}, line {}, byte offset {})",
                self.path, self.line, self.offset
            ),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.problem)
    }
}

impl LoadError {
    /// Whether the refusal is "unsupported" (a version or form dsh does not read) rather than
    /// "corrupt" (format §4.1).
    pub fn is_unsupported(&self) -> bool {
        match &self.problem {
            LoadProblem::UnsupportedVersion { .. } => true,
            LoadProblem::Rejected(e) => matches!(e.reason, Rejection::UnknownRequiredType(_)),
            LoadProblem::Log { unsupported, .. } => *unsupported,
            _ => false,
        }
    }

    /// Whether the refusal is about one row after a valid header (a repair can keep the rows
    /// before it).
    pub fn is_row_corruption(&self) -> bool {
        self.line > 1
            && matches!(
                self.problem,
                LoadProblem::LineTooLong { .. }
                    | LoadProblem::NotAnObject { .. }
                    | LoadProblem::NotUtf8 { .. }
                    | LoadProblem::NotJson { .. }
                    | LoadProblem::Envelope { .. }
                    | LoadProblem::Rejected(_)
            )
    }
}

impl From<LoadError> for LogError {
    fn from(e: LoadError) -> Self {
        LogError::Load(Box::new(e))
    }
}

/// The "newer" refusal (format §1.9).
pub fn newer_message(id: &str, version: u64, path: &str) -> String {
    format!("{} ({path})", newer_text(id, version))
}

/// The "older" refusal (format §1.9).
pub fn older_message(id: &str, version: u64, path: &str) -> String {
    format!("{} ({path})", older_text(id, version))
}

fn newer_text(id: &str, version: u64) -> String {
    format!(
        "session \"{id}\" uses log format v{version}, but dsh reads only v3 and v4: the log was written by a newer harness — upgrade dsh to open it"
    )
}

fn older_text(id: &str, version: u64) -> String {
    format!(
        "session \"{id}\" uses log format v{version}, older than the supported v3, and dsh ships no upgrade path for it; resume it once with the original harness (0.1.5 or later) to upgrade it"
    )
}

fn version_problem(id: &str, version: u64) -> Option<LoadProblem> {
    match version {
        3 | 4 => None,
        v if v > 4 => Some(LoadProblem::UnsupportedVersion {
            version: v,
            text: newer_text(id, v),
        }),
        v => Some(LoadProblem::UnsupportedVersion {
            version: v,
            text: older_text(id, v),
        }),
    }
}

/// Refuses a generation by number before reading it (file name selection, §1.4).
pub fn check_generation(id: &str, version: u64, path: &str) -> Result<(), LogError> {
    match version {
        3 | 4 => Ok(()),
        v if v > 4 => Err(LogError::Unsupported(newer_message(id, v, path))),
        v => Err(LogError::Unsupported(older_message(id, v, path))),
    }
}

/// Decodes a plain JSONL log held in memory. `expected_version` is the generation named by the
/// file (the header must agree); `path` names the file in refusals; `fallback_id` names the
/// session when the header has no string id. Same rules as [`read_jsonl`].
pub fn decode_jsonl(
    bytes: &[u8],
    expected_version: u64,
    path: &str,
    fallback_id: &str,
) -> Result<DecodedLog, LogError> {
    read_jsonl(bytes, expected_version, path, fallback_id).map_err(LogError::Load)
}

/// One line as read: its bytes (without `\n`) live in the batch arena.
struct RawLine {
    /// Byte offset of the line in the file.
    offset: u64,
    /// Range in the arena.
    start: usize,
    end: usize,
    /// Ended with `\n`.
    terminated: bool,
}

/// How reading one line ended.
enum Read1 {
    /// End of file before any byte.
    Eof,
    /// A line (terminated or not) was appended to the arena.
    Line(RawLine),
    /// The line does not start with `{` (nothing of it is consumed beyond its first byte).
    BadStart(String),
    /// The line is longer than the limit.
    TooLong,
}

/// Streams lines out of a reader, counting bytes.
struct Lines<R> {
    reader: R,
    pos: u64,
}

impl<R: BufRead> Lines<R> {
    fn read(
        &mut self,
        arena: &mut Vec<u8>,
        limit: u64,
        check_start: bool,
    ) -> std::io::Result<Read1> {
        let offset = self.pos;
        let (first, after) = match self.reader.fill_buf()? {
            [] => return Ok(Read1::Eof),
            [b, rest @ ..] => (*b, rest.iter().find(|c| !matches!(c, b' ' | b'\t' | b'\r'))),
        };
        if check_start {
            if first != b'{' {
                return Ok(Read1::BadStart(describe_start(first)));
            }
            // JSON grammar: an object's `{` is followed by a member name or `}`. Checking it
            // here refuses a garbage line without reading it.
            if let Some(&b) = after
                && !matches!(b, b'"' | b'}' | b'\n')
            {
                return Ok(Read1::BadStart(format!(
                    "'{{' followed by {}",
                    describe_start(b)
                )));
            }
        }
        let start = arena.len();
        let n = (&mut self.reader)
            .take(limit + 1)
            .read_until(b'\n', arena)? as u64;
        self.pos += n;
        let terminated = arena.last() == Some(&b'\n');
        if terminated {
            arena.pop();
        }
        if (arena.len() - start) as u64 > limit {
            return Ok(Read1::TooLong);
        }
        Ok(Read1::Line(RawLine {
            offset,
            start,
            end: arena.len(),
            terminated,
        }))
    }

    fn at_eof(&mut self) -> std::io::Result<bool> {
        Ok(self.reader.fill_buf()?.is_empty())
    }
}

fn describe_start(b: u8) -> String {
    match b {
        b'\n' => "an empty line".into(),
        b'\r' => "a carriage return".into(),
        0 => "a NUL byte".into(),
        0x21..=0x7e => format!("'{}'", b as char),
        _ => format!("byte 0x{b:02x}"),
    }
}

/// Reads a plain JSONL log from `reader`, line by line. `expected_version` is the generation
/// named by the file (the header must agree); `path` names the file in refusals;
/// `fallback_id` names the session when the header has no string id.
///
/// Applies the torn-tail rule of this module: at most the last line is dropped as torn; any
/// other undecodable line refuses the log with a [`LoadError`] naming its line and offset.
pub fn read_jsonl<R: BufRead>(
    reader: R,
    expected_version: u64,
    path: &str,
    fallback_id: &str,
) -> Result<DecodedLog, Box<LoadError>> {
    let mut lines = Lines { reader, pos: 0 };
    let err = |line: u64, offset: u64, problem: LoadProblem, events: u64, len: u64| {
        Box::new(LoadError {
            path: path.to_string(),
            line,
            offset,
            problem,
            valid_events: events,
            valid_len: len,
        })
    };
    let io_err = |e: std::io::Error, line: u64, offset: u64, events: u64, len: u64| {
        err(line, offset, LoadProblem::Io(Arc::new(e)), events, len)
    };

    // Line 1: the header.
    let mut arena = Vec::new();
    let header_line = lines
        .read(&mut arena, MAX_HEADER_BYTES, false)
        .map_err(|e| io_err(e, 1, 0, 0, 0))?;
    let header_fail = |p: LoadProblem| err(1, 0, p, 0, 0);
    let header_end = match header_line {
        Read1::Line(l) if l.terminated => l.end,
        Read1::TooLong => {
            return Err(header_fail(LoadProblem::HeaderTooLong {
                limit: MAX_HEADER_BYTES,
            }));
        }
        _ => return Err(header_fail(LoadProblem::NoHeader)),
    };
    let header_value: Value = serde_json::from_slice(&arena[..header_end])
        .map_err(|_| header_fail(LoadProblem::HeaderNotJson))?;
    let Some(hm) = header_value.as_object() else {
        return Err(header_fail(LoadProblem::HeaderNotObject));
    };
    // Version (and id) before any other validation: "upgrade", never "corrupt".
    let id = hm
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(fallback_id)
        .to_string();
    if let Some(v) = hm.get("version").and_then(as_safe_u64) {
        if let Some(p) = version_problem(&id, v) {
            return Err(header_fail(p));
        }
        if v != expected_version {
            return Err(header_fail(LoadProblem::VersionMismatch {
                found: v,
                file: expected_version,
            }));
        }
    }
    let mut header = SessionHeader::from_json(&header_value)
        .map_err(|m| header_fail(LoadProblem::Header(m.to_string())))?;
    drop(header_value);

    let mut committed_len = lines.pos;
    let mut events: Vec<Event> = Vec::new();
    let mut row_offsets: Vec<u64> = Vec::new();
    let mut torn = false;
    let mut batch: Vec<RawLine> = Vec::new();
    let mut last_tools = None;
    'read: loop {
        arena.clear();
        batch.clear();
        // Fill one batch; `stop` is a refusal found while reading (after the batch's lines).
        let mut stop: Option<(u64, u64, LoadProblem)> = None;
        let mut eof = false;
        while arena.len() < BATCH_BYTES {
            let line_no = events.len() as u64 + batch.len() as u64 + 2;
            let offset = lines.pos;
            let read = lines
                .read(&mut arena, MAX_LINE_BYTES, true)
                .map_err(|e| io_err(e, line_no, offset, events.len() as u64, committed_len))?;
            match read {
                Read1::Eof => {
                    eof = true;
                    break;
                }
                Read1::Line(l) => {
                    let last = !l.terminated;
                    batch.push(l);
                    if last {
                        eof = true;
                        break;
                    }
                }
                Read1::BadStart(found) => {
                    stop = Some((line_no, offset, LoadProblem::NotAnObject { found }));
                    break;
                }
                Read1::TooLong => {
                    stop = Some((
                        line_no,
                        offset,
                        LoadProblem::LineTooLong {
                            limit: MAX_LINE_BYTES,
                        },
                    ));
                    break;
                }
            }
        }
        if !eof && stop.is_none() {
            eof = lines.at_eof().map_err(|e| {
                io_err(
                    e,
                    events.len() as u64 + batch.len() as u64 + 2,
                    lines.pos,
                    events.len() as u64,
                    committed_len,
                )
            })?;
        }
        let first_seq = events.len() as u64;
        let parsed = parse_batch(&arena, &batch, first_seq);
        let count = batch.len();
        for (i, (raw, result)) in batch.iter().zip(parsed).enumerate() {
            let last_in_file = i + 1 == count && eof && stop.is_none();
            let seq = first_seq + i as u64;
            if !raw.terminated {
                // The last line without its '\n': an incomplete final write.
                torn = true;
                break 'read;
            }
            match result {
                Ok(mut ev) => {
                    ev.share_header_tools(&mut last_tools);
                    events.push(ev);
                    row_offsets.push(raw.offset);
                    committed_len = raw.offset + (raw.end - raw.start) as u64 + 1;
                }
                Err(p) if last_in_file && p.is_incomplete() => {
                    // A complete last line whose JSON stops early: an incomplete final write.
                    torn = true;
                    break 'read;
                }
                Err(problem) => {
                    return Err(err(seq + 2, raw.offset, problem, seq, committed_len));
                }
            }
        }
        if let Some((line, offset, problem)) = stop {
            return Err(err(
                line,
                offset,
                problem,
                events.len() as u64,
                committed_len,
            ));
        }
        if eof {
            break;
        }
    }

    let source_version = header.version;
    if source_version == 3 {
        let n = events.len() as u64;
        events = crate::migrate::v3_to_v4(&header, events).map_err(|e| {
            let unsupported = e.is_unsupported();
            err(
                1,
                0,
                LoadProblem::Log {
                    detail: e.to_string(),
                    unsupported,
                },
                n,
                committed_len,
            )
        })?;
        header.version = 4;
    }
    Ok(DecodedLog {
        header,
        events,
        source_version,
        committed_len: usize::try_from(committed_len).unwrap_or(usize::MAX),
        torn,
        path: path.to_string(),
        row_offsets,
    })
}

/// Decodes one stored row (envelope and typed payload, parsed once by
/// [`Event::from_line`]) expected to have `seq`.
fn parse_row(line: &[u8], seq: u64) -> Result<Event, LoadProblem> {
    let text = std::str::from_utf8(line).map_err(|error| LoadProblem::NotUtf8 {
        expected_seq: seq,
        error,
    })?;
    Event::from_line(text, seq).map_err(|error| match error {
        EventError::Malformed(error) => LoadProblem::NotJson {
            expected_seq: seq,
            error,
        },
        error => LoadProblem::Envelope {
            expected_seq: seq,
            error,
        },
    })
}

/// Below this many bytes a batch is parsed on the calling thread (a thread costs more).
const PARALLEL_BATCH_BYTES: usize = 64 << 10;

/// Parses a batch of lines, on up to 4 threads for large batches (a full batch is one:
/// [`BATCH_BYTES`] holds about a thousand typical rows).
fn parse_batch(arena: &[u8], lines: &[RawLine], first_seq: u64) -> Vec<Result<Event, LoadProblem>> {
    let parse = |i: usize, l: &RawLine| parse_row(&arena[l.start..l.end], first_seq + i as u64);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if threads < 2 || lines.len() < 2 || arena.len() < PARALLEL_BATCH_BYTES {
        return lines.iter().enumerate().map(|(i, l)| parse(i, l)).collect();
    }
    // Parts of about equal bytes (rows range from 80 bytes to kilobytes), in order.
    let bytes = arena.len();
    let mut cuts: Vec<usize> = (1..threads)
        .map(|k| lines.partition_point(|l| l.start < bytes * k / threads))
        .collect();
    cuts.dedup();
    let mut parts = Vec::with_capacity(threads);
    let mut from = 0;
    for cut in cuts.into_iter().chain([lines.len()]) {
        if cut > from {
            parts.push((from, &lines[from..cut]));
            from = cut;
        }
    }
    let part = |at: usize, part: &[RawLine]| -> Vec<Result<Event, LoadProblem>> {
        part.iter()
            .enumerate()
            .map(|(i, l)| parse(at + i, l))
            .collect()
    };
    std::thread::scope(|scope| {
        let mut parts = parts.into_iter();
        let first = parts.next();
        // The other parts on helper threads, the first on this one.
        let handles: Vec<_> = parts
            .map(|(at, p)| (p.len(), scope.spawn(move || part(at, p))))
            .collect();
        let mut out = first.map_or_else(Vec::new, |(at, p)| part(at, p));
        for (n, h) in handles {
            out.extend(h.join().unwrap_or_else(|_| {
                vec![
                    Err(LoadProblem::Log {
                        detail: "corrupt session log: a parser thread panicked".to_string(),
                        unsupported: false,
                    });
                    n
                ]
            }));
        }
        out
    })
}

/// Serializes a whole log (header line + one line per event), as the writer does.
pub fn encode_jsonl(header: &SessionHeader, events: &[std::sync::Arc<Event>]) -> Vec<u8> {
    let mut out = header.to_json_line().into_bytes();
    out.push(b'\n');
    for e in events {
        out.extend_from_slice(e.to_json_line().as_bytes());
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = r#"{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}"#;

    fn row(i: u64) -> String {
        format!("{{\"type\":\"dsh/x\",\"data\":{{}},\"ignorable\":true,\"seq\":{i},\"time\":0}}")
    }

    fn log(n: u64) -> String {
        let mut b = format!("{H}\n");
        for i in 0..n {
            b.push_str(&row(i));
            b.push('\n');
        }
        b
    }

    fn read(b: &str) -> Result<DecodedLog, Box<LoadError>> {
        read_jsonl(b.as_bytes(), 4, "/p/session.v4.jsonl", "s1")
    }

    #[test]
    fn refuses_newer_and_older_by_version_first() {
        let bytes = br#"{"type":"session","version":5,"id":"s1","whatever":true}
"#;
        let e = decode_jsonl(bytes, 5, "/x/session.v5.jsonl", "s1").unwrap_err();
        assert!(
            matches!(&e, LogError::Load(l) if matches!(l.problem, LoadProblem::UnsupportedVersion { version: 5, .. })),
            "{e}"
        );
        assert!(e.is_unsupported());
        let shown = e.to_string();
        assert!(
            shown.contains("newer harness") && shown.ends_with("(/x/session.v5.jsonl)"),
            "{shown}"
        );
        let bytes = br#"{"type":"session","version":2,"id":"s1"}
"#;
        let e = decode_jsonl(bytes, 2, "/p", "s1").unwrap_err();
        assert!(e.is_unsupported());
        assert!(e.to_string().contains("older than the supported v3"), "{e}");
        let e = read_jsonl(&bytes[..], 2, "/p", "s1").unwrap_err();
        assert!(matches!(
            e.problem,
            LoadProblem::UnsupportedVersion { version: 2, .. }
        ));
        assert!(e.is_unsupported());
    }

    #[test]
    fn header_errors() {
        let problem = |b: &[u8]| read_jsonl(b, 4, "p", "s").unwrap_err().problem;
        assert!(matches!(problem(b""), LoadProblem::NoHeader));
        assert!(matches!(problem(b"{x\n"), LoadProblem::HeaderNotJson));
        assert!(matches!(problem(b"[1]\n"), LoadProblem::HeaderNotObject));
        let e = decode_jsonl(b"", 4, "p", "s").unwrap_err();
        assert!(e.to_string().starts_with("empty or header-less"), "{e}");
        assert!(!e.is_unsupported());
        let wrong = format!("{}\n", H.replace("\"version\":4", "\"version\":3"));
        let e = read(&wrong).unwrap_err();
        assert!(matches!(
            e.problem,
            LoadProblem::VersionMismatch { found: 3, file: 4 }
        ));
        assert_eq!((e.line, e.offset), (1, 0));
    }

    #[test]
    fn a_huge_header_line_is_refused_after_a_bounded_read() {
        let mut b = String::from("{\"type\":\"session\",\"id\":\"");
        b.push_str(&"x".repeat(MAX_HEADER_BYTES as usize + 10));
        let e = read(&b).unwrap_err();
        assert!(
            matches!(e.problem, LoadProblem::HeaderTooLong { .. }),
            "{e}"
        );
    }

    #[test]
    fn equal_header_tool_lists_are_shared() {
        let header = |seq: u64, desc: &str| {
            format!(
                r#"{{"type":"request/header","data":{{"header":{{"config":{{"provider":"p","model":"m"}},"tools":[{{"name":"t","description":"{desc}","parameters":{{"type":"object"}}}}]}},"reason":"initial"}},"seq":{seq},"time":1}}"#
            )
        };
        let b = format!(
            "{H}\n{}\n{}\n{}\n",
            header(0, "a"),
            header(1, "a"),
            header(2, "b")
        );
        let d = decode_jsonl(b.as_bytes(), 4, "p", "s").unwrap();
        let tools: Vec<_> = d
            .events
            .iter()
            .map(|e| match e.core() {
                Some(crate::CoreEvent::RequestHeader(h)) => h.header.tools.clone().unwrap(),
                other => panic!("not a header: {other:?}"),
            })
            .collect();
        assert!(
            Arc::ptr_eq(&tools[0], &tools[1]),
            "equal lists share one copy"
        );
        assert!(!Arc::ptr_eq(&tools[1], &tools[2]));
        assert_eq!(tools[2][0].description, "b");
    }

    #[test]
    fn torn_and_corrupt_rows() {
        let row0 = r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":1}"#;
        let end = r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}},"seq":2,"time":1}"#;
        // missing newline on the last line: torn
        let b = format!("{H}\n{row0}\n{{\"type\":\"turn/e");
        let d = decode_jsonl(b.as_bytes(), 4, "p", "s").unwrap();
        assert!(d.torn);
        assert_eq!(d.events.len(), 1);
        assert_eq!(d.committed_len, H.len() + 1 + row0.len() + 1);
        // a complete last row whose JSON stops early, nothing after: torn
        let b = format!("{H}\n{row0}\n{{\"type\":\"turn/e\n");
        assert!(decode_jsonl(b.as_bytes(), 4, "p", "s").unwrap().torn);
        // a complete last row that is malformed (not cut short): corrupt
        let b = format!("{H}\n{row0}\n{{\"type\" \"x\"}}\n");
        let e = read(&b).unwrap_err();
        assert!(matches!(e.problem, LoadProblem::NotJson { .. }), "{e}");
        assert!(!e.problem.is_incomplete());
        // broken row followed by a turn/end: corrupt
        let b = format!("{H}\n{row0}\nnot json\n{end}\n");
        let e = read(&b).unwrap_err();
        assert!(matches!(e.problem, LoadProblem::NotAnObject { .. }), "{e}");
        assert_eq!((e.line, e.valid_events), (3, 1));
    }

    /// Issue 12 item 2: a bad row with valid rows after it is corruption even when no later
    /// `turn/end` exists (it used to be "torn", silently dropping every later row).
    #[test]
    fn a_bad_row_before_the_last_line_is_corruption_naming_line_and_offset() {
        for n in [10u64, 3000] {
            let mut b = log(n);
            let bad_seq = n - 3;
            let start = b.find(&format!("\"seq\":{bad_seq},")).unwrap();
            let line_start = b[..start].rfind('\n').unwrap() + 1;
            b.replace_range(start..start + 6, "\"seq\":9");
            let e = read(&b).unwrap_err();
            assert!(
                matches!(e.problem, LoadProblem::Envelope { expected_seq, .. } if expected_seq == bad_seq),
                "{e}"
            );
            assert_eq!(e.line, bad_seq + 2);
            assert_eq!(e.offset, line_start as u64);
            assert_eq!(e.valid_events, bad_seq);
            assert_eq!(e.valid_len, line_start as u64);
            assert_eq!(e.path, "/p/session.v4.jsonl");
            let shown = e.to_string();
            assert!(
                shown.contains("/p/session.v4.jsonl")
                    && shown.contains(&format!("line {}", bad_seq + 2)),
                "{shown}"
            );
        }
    }

    /// Batches of at least [`PARALLEL_BATCH_BYTES`] are split over threads by bytes: every row
    /// comes back, in file order, across several batches, with rows of very different sizes.
    #[test]
    fn parallel_parsing_keeps_every_row_in_order() {
        let mut b = format!("{H}\n");
        let pad = "x".repeat(4000);
        for i in 0..20_000u64 {
            if i % 7 == 0 {
                b.push_str(&format!(
                    "{{\"type\":\"dsh/x\",\"data\":{{\"pad\":\"{pad}\"}},\"ignorable\":true,\"seq\":{i},\"time\":0}}"
                ));
            } else {
                b.push_str(&row(i));
            }
            b.push('\n');
        }
        assert!(b.len() > 4 * BATCH_BYTES);
        let d = read(&b).unwrap();
        assert_eq!(d.events.len(), 20_000);
        assert!(
            d.events
                .iter()
                .enumerate()
                .all(|(i, e)| e.seq() == i as u64)
        );
        assert_eq!(d.committed_len, b.len());
    }

    #[test]
    fn garbage_lines_are_refused_at_their_first_byte() {
        let mut b = log(2);
        b.push_str("garbage\n");
        b.push_str(&row(2));
        b.push('\n');
        let e = read(&b).unwrap_err();
        assert!(matches!(&e.problem, LoadProblem::NotAnObject { found } if found == "'g'"));
        // '{' must open a member name or close the object
        let mut b = log(2);
        b.push_str("{xyz}\n");
        let e = read(&b).unwrap_err();
        assert!(
            matches!(&e.problem, LoadProblem::NotAnObject { found } if found == "'{' followed by 'x'"),
            "{e}"
        );
        assert_eq!(e.line, 4);
        // a garbage last line is not a torn write either (a write starts with '{')
        let mut b = log(2);
        b.push_str("\u{0}\u{0}\u{0}");
        let e = read(&b).unwrap_err();
        assert!(matches!(&e.problem, LoadProblem::NotAnObject { found } if found == "a NUL byte"));
        // an empty line in the middle
        let b = format!("{H}\n{}\n\n{}\n", row(0), row(1));
        let e = read(&b).unwrap_err();
        assert!(
            matches!(&e.problem, LoadProblem::NotAnObject { found } if found == "an empty line")
        );
        assert_eq!((e.line, e.valid_events), (3, 1));
    }

    /// Issue 12 items 2 and 8: a huge garbage line after a valid header is refused, not
    /// "repaired" to the header, and reading stops after at most `MAX_LINE_BYTES` of it.
    #[test]
    fn an_overlong_line_is_refused_not_dropped() {
        struct Endless {
            served: u64,
        }
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                buf.fill(b'x');
                if self.served == 0 {
                    buf[..2].copy_from_slice(b"{\"");
                }
                self.served += buf.len() as u64;
                Ok(buf.len())
            }
        }
        let head = format!("{H}\n{}\n", row(0));
        let reader = std::io::BufReader::new(head.as_bytes().chain(Endless { served: 0 }));
        let e = read_jsonl(reader, 4, "p", "s").unwrap_err();
        assert!(matches!(e.problem, LoadProblem::LineTooLong { .. }), "{e}");
        assert_eq!((e.line, e.valid_events), (3, 1));
        assert_eq!(e.valid_len, head.len() as u64);
    }

    /// A duplicated (or renumbered) complete last row is not an incomplete write: refused, so
    /// that two rows merged by a lost `\n` are never dropped as one "torn" line.
    #[test]
    fn a_duplicated_or_merged_last_line_is_refused() {
        let mut b = log(5);
        b.push_str(&row(4));
        b.push('\n');
        let e = read(&b).unwrap_err();
        assert!(
            matches!(
                e.problem,
                LoadProblem::Envelope {
                    expected_seq: 5,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!((e.line, e.valid_events), (7, 5));
        let mut merged = log(5);
        let cut = merged.len() - row(4).len() - 2;
        merged.replace_range(cut..=cut, " ");
        let e = read(&merged).unwrap_err();
        assert!(
            matches!(e.problem, LoadProblem::NotJson { .. }) && !e.problem.is_incomplete(),
            "{e}"
        );
        assert_eq!(e.line, 5);
    }

    #[test]
    fn large_logs_parse_in_parallel_and_locate_rows() {
        let b = log(5000);
        let d = read(&b).unwrap();
        assert_eq!(d.events.len(), 5000);
        assert!(!d.torn);
        assert_eq!(d.committed_len, b.len());
        let (line, offset) = d.locate(4000).unwrap();
        assert_eq!(line, 4002);
        assert!(b[offset as usize..].starts_with(&row(4000)));
        // across batch boundaries: a bad row deep in the file
        let mut bad = b.clone();
        let at = bad.find("\"seq\":4500,").unwrap();
        bad.replace_range(at..at + 1, "!");
        let e = read(&bad).unwrap_err();
        assert_eq!(e.line, 4502);
        assert!(
            matches!(
                e.problem,
                LoadProblem::NotJson {
                    expected_seq: 4500,
                    ..
                }
            ),
            "{e}"
        );
    }
}
