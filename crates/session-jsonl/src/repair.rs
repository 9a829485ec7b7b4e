//! Non-destructive recovery of a refused log: [`JsonlStore::plan_repair`] and
//! [`JsonlStore::repair`].
//!
//! A log refused as corrupt (a bad row before the last line, a garbage or overlong line, a row
//! that admission refuses) is not opened by dsh. A repair keeps the *valid prefix* — the header
//! and every row up to the last one that reads and admits — and **moves** everything after it,
//! byte for byte, to a side file next to the log (`session.v4.jsonl.corrupt-<epoch ms>`), then
//! truncates the log to the prefix. No byte is deleted: the side file plus the kept prefix are
//! the original file. After a repair, resuming the session appends the usual crash-repair
//! closers (format §15) if the kept prefix ends inside a turn.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use dsh_session::codec::LoadError;
use dsh_session::{LogError, now_ms};

use crate::JsonlStore;
use crate::error::StoreError;

/// Why a repair is (or was) needed.
#[derive(Debug, Clone)]
pub enum RepairCause {
    /// The log reads and admits; only its last line is torn (an incomplete final write). A
    /// repair moves that line aside instead of letting the next write open truncate it.
    TornTail,
    /// The log is refused: the located error (file, line, byte offset, cause), from reading a
    /// row or from admitting it ([`dsh_session::codec::LoadProblem::Rejected`]).
    Refused(Box<LoadError>),
}

/// What a repair keeps and moves: returned by [`JsonlStore::plan_repair`] (nothing done) and
/// [`JsonlStore::repair`] (done).
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The session.
    pub id: String,
    /// The log file.
    pub log: PathBuf,
    /// `None`: the log is healthy, nothing to do.
    pub cause: Option<RepairCause>,
    /// Events kept (the valid prefix, header not counted).
    pub kept_events: u64,
    /// Bytes kept (header and kept rows).
    pub kept_bytes: u64,
    /// Bytes moved to the side file.
    pub moved_bytes: u64,
    /// The side file (planned, or written by [`JsonlStore::repair`]); `None` when nothing moves.
    pub side_file: Option<PathBuf>,
    /// Whether the repair was carried out (`false` for a plan).
    pub applied: bool,
}

impl JsonlStore {
    /// Diagnoses a session without changing anything (no lock, no write): what
    /// [`repair`](Self::repair) would keep and move. Use it to ask for confirmation.
    pub fn plan_repair(&self, id: &str) -> Result<RepairReport, StoreError> {
        let (_, sel) = self.locate(id)?;
        refuse_unrepairable(id, &sel)?;
        let mut report = diagnose(id, &sel.path, sel.version)?;
        if report.moved_bytes > 0 {
            report.side_file = Some(side_file_name(&sel.path, now_ms()));
        }
        Ok(report)
    }

    /// Repairs a refused (or torn) log without destroying anything: takes the session's write
    /// lock (`Locked` if a writer holds it), keeps the valid prefix, copies every byte after it
    /// to `<log>.corrupt-<epoch ms>` (fsynced), then truncates the log to the prefix (fsynced).
    /// A healthy log is left untouched (`cause: None`, `applied: false`).
    ///
    /// Refused: zstd-compressed and v3 logs (never modified by dsh) and logs whose header is
    /// refused (nothing valid to keep), with [`StoreError::Unrepairable`] or
    /// [`StoreError::ZstdRepair`].
    pub fn repair(&self, id: &str) -> Result<RepairReport, StoreError> {
        let busy = self.open.reserve(id)?;
        let (dir, sel) = self.locate(id)?;
        refuse_unrepairable(id, &sel)?;
        let _lock = crate::store::take_lock(&dir, id)?;
        let mut report = diagnose(id, &sel.path, sel.version)?;
        if report.moved_bytes == 0 {
            return Ok(report);
        }
        let side = move_tail(
            &sel.path,
            &side_file_name(&sel.path, now_ms()),
            report.kept_bytes,
        )?;
        report.side_file = Some(side);
        report.applied = true;
        drop(busy);
        tracing::warn!(
            session = %id,
            kept_events = report.kept_events,
            moved_bytes = report.moved_bytes,
            side_file = ?report.side_file,
            "repaired a session log; the rest was moved aside"
        );
        Ok(report)
    }
}

fn refuse_unrepairable(id: &str, sel: &crate::store::Selected) -> Result<(), StoreError> {
    if sel.zstd {
        return Err(StoreError::ZstdRepair {
            id: id.to_string(),
            path: sel.path.clone(),
        });
    }
    if sel.version != 4 {
        return Err(StoreError::Unrepairable {
            id: id.to_string(),
            reason: format!(
                "{} is a v{} generation, which dsh never modifies",
                sel.path.display(),
                sel.version
            ),
        });
    }
    Ok(())
}

/// Reads and admits the log; returns what a repair would keep and move. After a refused row,
/// the prefix before it is read and admitted again, so that what a repair keeps always opens
/// (the earliest refusal found is the reported cause).
fn diagnose(id: &str, path: &Path, version: u64) -> Result<RepairReport, StoreError> {
    let total = fs::metadata(path)
        .map_err(|e| StoreError::io("inspecting", path, e))?
        .len();
    let shown = path.display().to_string();
    let unrepairable = |reason: String| StoreError::Unrepairable {
        id: id.to_string(),
        reason,
    };
    let mut limit = total;
    let mut cause: Option<RepairCause> = None;
    let (kept_events, kept_bytes) = loop {
        let file = File::open(path).map_err(|e| StoreError::io("opening", path, e))?;
        let reader = BufReader::with_capacity(256 << 10, file.take(limit));
        let refused = match dsh_session::codec::read_jsonl(reader, version, &shown, id) {
            Err(e) if e.is_row_corruption() => e,
            Err(e) => return Err(unrepairable(e.to_string())),
            Ok(decoded) => {
                let (events, len, torn) = (
                    decoded.events.len() as u64,
                    decoded.committed_len as u64,
                    decoded.torn,
                );
                match decoded.replay() {
                    Ok(_) => {
                        if torn && cause.is_none() {
                            cause = Some(RepairCause::TornTail);
                        }
                        break (events, len);
                    }
                    Err(LogError::Load(e)) if e.is_row_corruption() => e,
                    Err(e) => return Err(unrepairable(e.to_string())),
                }
            }
        };
        if refused.valid_len >= limit {
            return Err(unrepairable(refused.to_string()));
        }
        limit = refused.valid_len;
        cause = Some(RepairCause::Refused(refused));
    };
    let moved_bytes = total.saturating_sub(kept_bytes);
    Ok(RepairReport {
        id: id.to_string(),
        log: path.to_path_buf(),
        cause: if moved_bytes > 0 { cause } else { None },
        kept_events,
        kept_bytes,
        moved_bytes,
        side_file: None,
        applied: false,
    })
}

/// `<log>.corrupt-<epoch ms>` (not a generation name, so readers ignore it).
fn side_file_name(log: &Path, ms: i64) -> PathBuf {
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    log.with_file_name(format!("{name}.corrupt-{ms}"))
}

/// Copies `log[keep..]` to a new side file (fsynced, with its directory), then truncates the log
/// to `keep` (fsynced). The side file is created exclusively; an existing name gets a suffix.
/// Returns the side file's path.
fn move_tail(log: &Path, side: &Path, keep: u64) -> Result<PathBuf, StoreError> {
    let mut src = File::open(log).map_err(|e| StoreError::io("opening", log, e))?;
    src.seek(SeekFrom::Start(keep))
        .map_err(|e| StoreError::io("reading", log, e))?;
    let mut target = side.to_path_buf();
    let mut n = 1;
    let mut out = loop {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
        {
            Ok(f) => break f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => {
                target = PathBuf::from(format!("{}-{n}", side.display()));
                n += 1;
            }
            Err(e) => return Err(StoreError::io("creating", &target, e)),
        }
    };
    std::io::copy(&mut src, &mut out).map_err(|e| StoreError::io("copying to", &target, e))?;
    out.sync_all()
        .map_err(|e| StoreError::io("syncing", &target, e))?;
    if let Some(dir) = log.parent() {
        crate::store::sync_dir(dir);
    }
    let f = OpenOptions::new()
        .write(true)
        .open(log)
        .map_err(|e| StoreError::io("opening", log, e))?;
    f.set_len(keep)
        .and_then(|()| f.sync_all())
        .map_err(|e| StoreError::io("truncating", log, e))?;
    Ok(target)
}
