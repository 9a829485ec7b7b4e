//! [`JsonlStore`]: plain JSONL session logs under a root directory (format §1).

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_kernel::schemars::{self, JsonSchema};
use dsh_session::codec::{DecodedLog, LoadError, check_generation, decode_jsonl, read_jsonl};
use dsh_session::{Event, SessionError, SessionHeader, SessionPersistence, SessionSummary};

use crate::error::StoreError;
use crate::naming::{encode_segment, generation_file, parse_generation, project_dir};

/// Read buffer of the streaming log reader.
const READ_BUFFER: usize = 256 << 10;

/// Default cap on the total size of one session's spill files (1 GiB).
pub const DEFAULT_SPILL_CAP_BYTES: u64 = 1 << 30;

/// The name of a session's artefact directory inside its session directory.
pub const SPILL_DIR: &str = "spill";

/// The format version this backend writes.
const VERSION: u64 = 4;

/// How new session logs are encoded (`compression` of the persistence config). An existing log
/// is always continued in its own encoding (format §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Plain JSONL (`session.v4.jsonl`).
    #[default]
    None,
    /// zstd frames, one per write batch (`session.v4.jsonl.zstd`, the original's default).
    Zstd,
}

/// A pending batch's buffer larger than this is released after it is written.
const BUFFER_KEEP: usize = 1 << 20;

/// A writer that counts the bytes it passed on.
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One session open for write in this process.
#[derive(Debug)]
pub(crate) struct Writer {
    pub(crate) dir: PathBuf,
    header: SessionHeader,
    /// The log is zstd frames (one per write batch).
    zstd: bool,
    /// zstd: the complete lines recovered from a torn final frame, written again as one frame
    /// after the truncation (as the original does).
    recovered: Vec<u8>,
    /// `None` until materialized (lazy: nothing on disk before the first flush).
    file: Option<File>,
    /// Held exclusive `flock` on `session.lock` (released when dropped).
    lock: Option<File>,
    /// Committed byte length of the file.
    len: u64,
    /// Serialized, not yet durable lines.
    buffer: Vec<u8>,
    /// Bytes written past the last `fdatasync` outside a batch (a streamed large line, or
    /// the file published by a write-through).
    unsynced: bool,
    /// The file was published by a write-through: neither its bytes nor its name in the
    /// directory are durable yet (the next durable flush syncs both).
    name_unsynced: bool,
    /// A torn tail to truncate away before the first append (deferred so that a log refused by
    /// admission is never modified).
    truncate_to: Option<u64>,
    /// v3 write open: the converted events, published with the header as `session.v4.jsonl` at
    /// the first flush (format §16.3), and the v3 file's (length, mtime) that must not change.
    successor: Option<(Vec<u8>, PathBuf, u64, Option<std::time::SystemTime>)>,
    /// zstd: the compression context of this writer's frames (one, not one per frame).
    encoder: crate::zstd::FrameEncoder,
    /// Closed: its last flush is done and its lock released (a caller that looked it up
    /// before the close gets `Closed`).
    closed: bool,
}

impl Writer {
    fn new(dir: PathBuf, header: SessionHeader, zstd: bool) -> Self {
        Writer {
            dir,
            header,
            zstd,
            recovered: Vec::new(),
            file: None,
            lock: None,
            len: 0,
            buffer: Vec::new(),
            unsynced: false,
            name_unsynced: false,
            truncate_to: None,
            successor: None,
            encoder: crate::zstd::FrameEncoder::default(),
            closed: false,
        }
    }
}

/// The JSONL persistence backend: `<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.v4.jsonl`.
#[derive(Debug)]
pub struct JsonlStore {
    root: PathBuf,
    /// The sessions open for write, each behind its own lock.
    pub(crate) open: crate::slots::Slots,
    pub(crate) spill_cap: u64,
    compression: Compression,
}

fn io(op: &'static str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::io(op, path, e)
}

/// The selected generation of a session directory.
#[derive(Debug, Clone)]
pub(crate) struct Selected {
    pub(crate) version: u64,
    pub(crate) path: PathBuf,
    /// A `.jsonl.zstd` generation (read-only in dsh).
    pub(crate) zstd: bool,
}

impl JsonlStore {
    /// A store rooted at `root` (created on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        JsonlStore {
            root: root.into(),
            open: crate::slots::Slots::default(),
            spill_cap: DEFAULT_SPILL_CAP_BYTES,
            compression: Compression::default(),
        }
    }

    /// Sets the encoding of new session logs (existing logs keep theirs).
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// The encoding of new session logs.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Sets the cap on the total size of one session's spill files (see [`Self::spill_cap`]).
    pub fn with_spill_cap(mut self, bytes: u64) -> Self {
        self.spill_cap = bytes;
        self
    }

    /// Flushes and releases every session open for write (shutdown). Failures are logged.
    pub fn close_all(&self) {
        for id in self.open.ids() {
            if let Err(e) = SessionPersistence::close(self, &id) {
                tracing::error!(session = %id, "closing failed: {e}");
            }
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory a session with this header lives in.
    pub fn session_dir(&self, header: &SessionHeader) -> PathBuf {
        self.root
            .join(project_dir(header.cwd.as_deref()))
            .join(encode_segment(&header.id))
    }

    /// Finds an existing session directory by id (any project directory).
    pub(crate) fn find_dir(&self, id: &str) -> Option<PathBuf> {
        let seg = encode_segment(id);
        let entries = fs::read_dir(&self.root).ok()?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path().join(&seg))
            .filter(|p| p.is_dir() && !matches!(select(p), Ok(None)))
            .collect();
        found.sort();
        found.into_iter().next()
    }

    pub(crate) fn locate(&self, id: &str) -> Result<(PathBuf, Selected), StoreError> {
        let dir = self
            .find_dir(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let sel = select(&dir)?.ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        check_generation(id, sel.version, &sel.path.display().to_string())?;
        Ok((dir, sel))
    }

    /// Reads a stored session (no lock, nothing written), with typed errors: a refusal of the
    /// file is [`StoreError::Load`] naming the file, line and byte offset. The same read as
    /// [`SessionPersistence::open_read`].
    pub fn load(&self, id: &str) -> Result<DecodedLog, StoreError> {
        let (_, sel) = self.locate(id)?;
        self.read_log(id, &sel)
    }

    /// The selected log file of a stored session.
    pub fn log_path(&self, id: &str) -> Result<PathBuf, StoreError> {
        Ok(self.locate(id)?.1.path)
    }

    /// Reads the selected generation. Plain logs are streamed line by line (never read whole);
    /// zstd logs are read into memory, then decoded frame by frame as they are parsed (whole
    /// frames) or decompressed whole (a torn tail, damage, no `c-zstd`).
    fn read_log(&self, id: &str, sel: &Selected) -> Result<DecodedLog, StoreError> {
        let shown = sel.path.display().to_string();
        if !sel.zstd {
            let file = File::open(&sel.path).map_err(|e| io("opening", &sel.path, e))?;
            let reader = BufReader::with_capacity(READ_BUFFER, file);
            return Ok(read_jsonl(reader, sel.version, &shown, id)?);
        }
        Ok(self.read_zstd(id, sel)?.0)
    }

    /// Reads a zstd log: the decoded log, the file length to keep (the start of a torn final
    /// frame, else the whole file) and the lines recovered from a torn frame.
    fn read_zstd(
        &self,
        id: &str,
        sel: &Selected,
    ) -> Result<(DecodedLog, u64, Vec<u8>), StoreError> {
        let shown = sel.path.display().to_string();
        let bytes = fs::read(&sel.path).map_err(|e| io("reading", &sel.path, e))?;
        // Whole frames (no torn tail): parse while decoding, one frame at a time. Any problem
        // is read again below, which names it exactly.
        #[cfg(feature = "c-zstd")]
        if let Some(Ok(decoded)) = crate::zstd::whole_frames_reader(&bytes)
            .map(|reader| read_jsonl(reader, sel.version, &shown, id))
        {
            return Ok((decoded, bytes.len() as u64, Vec::new()));
        }
        let frames = crate::zstd::decode_frames(&bytes).map_err(|source| StoreError::Zstd {
            path: sel.path.clone(),
            source,
        })?;
        let mut decoded = read_jsonl(&frames.plain[..], sel.version, &shown, id)?;
        let (keep, recovered) = match frames.torn {
            Some((at, lines)) => {
                decoded.torn = true;
                (at as u64, lines)
            }
            None => (bytes.len() as u64, Vec::new()),
        };
        Ok((decoded, keep, recovered))
    }
}

/// Selects the highest canonical generation of a session directory (format §1.4).
fn select(dir: &Path) -> Result<Option<Selected>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("listing", dir, e)),
    };
    let mut best: Option<(u64, PathBuf)> = None;
    let (mut plain, mut zstd) = (false, false);
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        let Some((n, z)) = name.to_str().and_then(parse_generation) else {
            continue;
        };
        // An empty file holds nothing, not even a header: a new session's file whose
        // publication a power loss cut before its first durable flush (a write-through
        // publishes without fsync). No session is there.
        if e.metadata().is_ok_and(|m| m.len() == 0) {
            continue;
        }
        if z {
            zstd = true
        } else {
            plain = true
        }
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, e.path()));
        }
    }
    let Some((version, path)) = best else {
        return Ok(None);
    };
    if plain && zstd {
        return Err(StoreError::MixedEncodings { path });
    }
    Ok(Some(Selected {
        version,
        path,
        zstd,
    }))
}

pub(crate) fn take_lock(dir: &Path, id: &str) -> Result<File, StoreError> {
    let path = dir.join("session.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io("opening the lock", &path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Locked(id.to_string())),
        Err(std::fs::TryLockError::Error(e)) => Err(io("locking", &path, e)),
    }
}

pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes `bytes` to a temporary file in `dir` and links it to `name` without overwriting
/// (format §1.6). A failed link means another writer won: `Locked`. `durable`: the file is
/// fsynced before the link and the directory after it; without, both are left to the caller's
/// next durable flush (a write-through only promises what survives the process).
fn publish(
    dir: &Path,
    name: &str,
    parts: &[&[u8]],
    id: &str,
    durable: bool,
) -> Result<File, StoreError> {
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        dsh_session::now_ms()
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io("creating", &tmp, e))?;
        for bytes in parts {
            f.write_all(bytes).map_err(|e| io("writing", &tmp, e))?;
        }
        if durable {
            f.sync_all().map_err(|e| io("syncing", &tmp, e))?;
        }
        let target = dir.join(name);
        match fs::hard_link(&tmp, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::Locked(id.to_string()));
            }
            Err(e) => return Err(io("publishing", &target, e)),
        }
        if durable {
            sync_dir(dir);
        }
        OpenOptions::new()
            .append(true)
            .open(&target)
            .map_err(|e| io("opening", &target, e))
    })();
    let _ = fs::remove_file(&tmp);
    result
}

impl Writer {
    /// The file name this writer publishes and appends to.
    fn file_name(&self) -> String {
        let plain = generation_file(VERSION);
        if self.zstd {
            format!("{plain}.zstd")
        } else {
            plain
        }
    }

    /// The bytes of the pending batch as stored: plain lines, or zstd frames (the recovered
    /// lines of a torn frame as one frame, then the batch as one frame).
    /// (A function of the fields it reads, so the writer's file stays borrowable beside it.)
    fn encoded_batch<'a>(
        zstd: bool,
        encoder: &mut crate::zstd::FrameEncoder,
        recovered: &[u8],
        buffer: &'a [u8],
    ) -> std::borrow::Cow<'a, [u8]> {
        if !zstd {
            return std::borrow::Cow::Borrowed(buffer);
        }
        let mut out = Vec::new();
        if !recovered.is_empty() {
            encoder.encode(recovered, &mut out);
        }
        if !buffer.is_empty() {
            encoder.encode(buffer, &mut out);
        }
        std::borrow::Cow::Owned(out)
    }

    /// Appends the pending batch to the published file (`sync`: then `fdatasync`). A failed
    /// write truncates back to the committed length; the buffer stays for a retry.
    fn append_batch(&mut self, sync: bool) -> Result<(), StoreError> {
        if self.buffer.is_empty() && self.recovered.is_empty() {
            if sync && self.unsynced {
                if let Some(file) = self.file.as_ref() {
                    let path = self.dir.join(self.file_name());
                    file.sync_data().map_err(|e| io("appending to", &path, e))?;
                }
                self.unsynced = false;
            }
            return Ok(());
        }
        let path = self.dir.join(self.file_name());
        let batch =
            Self::encoded_batch(self.zstd, &mut self.encoder, &self.recovered, &self.buffer);
        let Some(file) = self.file.as_ref() else {
            return Ok(());
        };
        let mut f = file;
        let written = f
            .write_all(&batch)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            let _ = file.set_len(self.len);
            return Err(io(if sync { "appending to" } else { "writing" }, &path, e));
        }
        let n = batch.len() as u64;
        drop(batch);
        self.len += n;
        self.unsynced = !sync;
        self.release_buffer();
        self.recovered.clear();
        Ok(())
    }

    /// Empties the written batch's buffer; a large one's memory goes back (it does not stay
    /// resident for the rest of the session).
    fn release_buffer(&mut self) {
        if self.buffer.capacity() > BUFFER_KEEP {
            self.buffer = Vec::new();
        } else {
            self.buffer.clear();
        }
    }

    /// Whether a large line can go straight to the published file (nothing deferred to the
    /// first flush: no torn tail to cut, no v3 successor to publish).
    fn can_stream(&self) -> bool {
        self.file.is_some() && self.truncate_to.is_none() && self.successor.is_none()
    }

    /// Writes one large event straight through (after the pending batch), serialising it into
    /// the file or, for zstd, into its own frame's compressor: its line is never held whole.
    /// On failure the file is cut back and the event is buffered instead, so the next write
    /// reports the error and nothing is skipped.
    fn append_large(&mut self, event: &Event) -> Result<(), StoreError> {
        self.append_batch(false)?;
        let path = self.dir.join(self.file_name());
        let Some(file) = self.file.as_ref() else {
            return Ok(());
        };
        let line = |w: &mut dyn Write| -> std::io::Result<()> {
            event.write_json_line(&mut *w)?;
            w.write_all(b"\n")
        };
        let written = if self.zstd {
            let mut frame = Vec::new();
            crate::zstd::encode_frame_with(line, &mut frame)
                .and_then(|()| (&*file).write_all(&frame))
                .map(|()| frame.len() as u64)
        } else {
            let mut out = std::io::BufWriter::with_capacity(
                64 * 1024,
                Counted {
                    inner: file,
                    bytes: 0,
                },
            );
            line(&mut out)
                .and_then(|()| out.flush())
                .map(|()| out.get_ref().bytes)
        };
        match written {
            Ok(n) => {
                self.len += n;
                self.unsynced = true;
                Ok(())
            }
            Err(e) => {
                let _ = file.set_len(self.len);
                tracing::warn!(path = %path.display(), error = %e, "streaming a large event failed; it stays buffered");
                self.buffer_event(event);
                Ok(())
            }
        }
    }

    /// Serialises `event` into the pending batch.
    fn buffer_event(&mut self, event: &Event) {
        // Writing into a `Vec` cannot fail.
        let _ = event.write_json_line(&mut self.buffer);
        self.buffer.push(b'\n');
    }

    /// Writes the buffer to the published file without syncing (process-crash safe). Before the
    /// file exists, it is published without syncing too (a new session's first write-through
    /// is on the way to its first request: two fsyncs there cost more than the rest of the
    /// start); a v3 successor or a torn tail to cut runs the full durable flush instead.
    fn write_through(&mut self) -> Result<(), StoreError> {
        if self.write_through_syncs() {
            return self.flush();
        }
        if self.file.is_none() {
            return self.publish(false);
        }
        self.append_batch(false)
    }

    /// Whether a write-through must run the durable flush: a torn tail to cut or a v3
    /// successor to publish (both sync).
    fn write_through_syncs(&self) -> bool {
        self.truncate_to.is_some() || self.successor.is_some()
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if self.file.is_none() {
            return self.publish(true);
        }
        let path = self.dir.join(self.file_name());
        if let (Some(len), Some(file)) = (self.truncate_to, self.file.as_mut()) {
            file.set_len(len)
                .and_then(|()| file.sync_all())
                .map_err(|e| io("truncating the torn tail of", &path, e))?;
            tracing::warn!(session = %self.header.id, path = %path.display(), "dropped a torn tail");
            self.truncate_to = None;
        }
        self.append_batch(true)?;
        if self.name_unsynced {
            // The bytes are durable (`append_batch` synced them); now the name.
            sync_dir(&self.dir);
            self.name_unsynced = false;
        }
        Ok(())
    }

    /// Creates the session's file with the header and the pending batch (and a v3 successor's
    /// events). `durable`: synced, file and name; else the next durable flush syncs them.
    fn publish(&mut self, durable: bool) -> Result<(), StoreError> {
        fs::create_dir_all(&self.dir).map_err(|e| io("creating", &self.dir, e))?;
        if self.lock.is_none() {
            self.lock = Some(take_lock(&self.dir, &self.header.id)?);
        }
        let mut plain = self.header.to_json_line().into_bytes();
        plain.push(b'\n');
        let header_len = plain.len();
        if let Some((events, v3, len, mtime)) = &self.successor {
            let meta = fs::metadata(v3).map_err(|e| io("inspecting", v3, e))?;
            if meta.len() != *len || meta.modified().ok() != *mtime {
                return Err(StoreError::SourceChanged { path: v3.clone() });
            }
            plain.extend_from_slice(events);
            let check = decode_jsonl(&plain, VERSION, "v4 successor", &self.header.id)?;
            if check.torn {
                return Err(StoreError::SuccessorUnverified { path: v3.clone() });
            }
            // The successor's events and the batch are one frame: joined (a one-off).
            plain.extend_from_slice(&self.buffer);
        }
        let batch: &[u8] = if self.successor.is_some() {
            &[]
        } else {
            &self.buffer
        };
        let name = self.file_name();
        // The pending batch is written from its own buffer, never copied behind the header
        // (a first turn with a long answer is a megabyte).
        let (file, written) = if self.zstd {
            // Frame 1 is exactly the header line; the rest is the first batch's frames, all
            // with the writer's kept context (one context initialised, not one per frame).
            let mut framed = Vec::new();
            self.encoder.encode(&plain[..header_len], &mut framed);
            for rest in [&plain[header_len..], batch] {
                if !rest.is_empty() {
                    self.encoder.encode(rest, &mut framed);
                }
            }
            let file = publish(&self.dir, &name, &[&framed], &self.header.id, durable)?;
            (file, framed.len())
        } else {
            let file = publish(&self.dir, &name, &[&plain, batch], &self.header.id, durable)?;
            (file, plain.len() + batch.len())
        };
        self.len = written as u64;
        self.file = Some(file);
        self.unsynced = !durable;
        self.name_unsynced = !durable;
        self.release_buffer();
        self.successor = None;
        Ok(())
    }
}

impl JsonlStore {
    fn create_inner(&self, header: &SessionHeader) -> Result<(), StoreError> {
        let dir = self.session_dir(header);
        let zstd = self.compression == Compression::Zstd;
        let writer = Writer::new(dir, header.clone(), zstd);
        self.open
            .create(&header.id, writer, || self.find_dir(&header.id).is_some())
    }

    /// Reads the selected generation for a write open: the log, the kept length of a zstd
    /// log and the bytes its tail repair recovered.
    pub(crate) fn read_selected(
        &self,
        id: &str,
        sel: &Selected,
    ) -> Result<crate::prefetch::Read, StoreError> {
        if sel.zstd {
            let (d, keep, rec) = self.read_zstd(id, sel)?;
            Ok((d, Some(keep), rec))
        } else {
            Ok((self.read_log(id, sel)?, None, Vec::new()))
        }
    }

    fn open_write_inner(&self, id: &str) -> Result<DecodedLog, StoreError> {
        // A second write open inside this process: refused without touching the disk. The
        // log is read with only this session's entry held (busy).
        let reservation = self.open.reserve(id)?;
        let (dir, sel) = self.locate(id)?;
        let lock = take_lock(&dir, id)?;
        // Select again under the lock: a concurrent writer may have published meanwhile.
        let sel = select(&dir)?.unwrap_or(sel);
        // Writes continue in the selected encoding (format §1.4).
        let (decoded, zstd_keep, recovered) = match crate::prefetch::take(&self.root, id, &sel) {
            Some(read) => read,
            None => self.read_selected(id, &sel)?,
        };
        let mut w = Writer::new(dir, decoded.header.clone(), sel.zstd);
        w.lock = Some(lock);
        if let (Some(keep), VERSION) = (zstd_keep, decoded.source_version) {
            let file = OpenOptions::new()
                .append(true)
                .open(&sel.path)
                .map_err(|e| io("opening", &sel.path, e))?;
            w.len = keep;
            w.truncate_to = decoded.torn.then_some(keep);
            w.recovered = recovered;
            w.file = Some(file);
        } else if decoded.source_version == VERSION {
            let file = OpenOptions::new()
                .append(true)
                .open(&sel.path)
                .map_err(|e| io("opening", &sel.path, e))?;
            w.len = decoded.committed_len as u64;
            w.truncate_to = decoded.torn.then_some(w.len);
            w.file = Some(file);
        } else {
            // v3: the v4 successor is published at the first flush; the v3 file stays as it is.
            let meta = fs::metadata(&sel.path).map_err(|e| io("inspecting", &sel.path, e))?;
            let mut events = Vec::new();
            for e in &decoded.events {
                events.extend_from_slice(e.to_json_line().as_bytes());
                events.push(b'\n');
            }
            w.successor = Some((events, sel.path.clone(), meta.len(), meta.modified().ok()));
        }
        reservation.fill(w);
        Ok(decoded)
    }

    fn list_inner(&self) -> Vec<SessionSummary> {
        let mut out = Vec::new();
        let Ok(projects) = fs::read_dir(&self.root) else {
            return out;
        };
        for project in projects.filter_map(Result::ok) {
            let Ok(sessions) = fs::read_dir(project.path()) else {
                continue;
            };
            for s in sessions.filter_map(Result::ok) {
                match summarize(&s.path()) {
                    Ok(Some(summary)) => out.push(summary),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(dir = %s.path().display(), "unreadable session: {e}"),
                }
            }
        }
        out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        out
    }

    /// A write-through that runs here and now when it is quick: the store's lock is free and
    /// the write needs no fsync (a buffered `write(2)` of the pending batch, or a new file's
    /// unsynced publication). `None` when it is not (the lock is held, by a durable flush
    /// perhaps; a torn tail to cut or a v3 successor to publish, which sync): the caller runs
    /// [`SessionPersistence::write_through`] on a blocking thread instead. Lets an async
    /// caller skip a thread hop for the common case, which is most often an empty buffer.
    pub fn try_write_through(&self, id: &str) -> Option<Result<(), SessionError>> {
        let Some(writer) = self.open.try_get(id)? else {
            return Some(Err(SessionError::Closed(id.to_string())));
        };
        let mut w = writer.try_lock()?;
        if w.closed {
            return Some(Err(SessionError::Closed(id.to_string())));
        }
        if w.write_through_syncs() {
            return None;
        }
        Some(w.write_through().map_err(SessionError::from))
    }

    fn with_writer<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Writer) -> Result<T, StoreError>,
    ) -> Result<T, SessionError> {
        let closed = || SessionError::Closed(id.to_string());
        let writer = self.open.get(id).ok_or_else(closed)?;
        let mut w = writer.lock();
        if w.closed {
            return Err(closed());
        }
        Ok(f(&mut w)?)
    }
}

impl SessionPersistence for JsonlStore {
    fn create(&self, header: &SessionHeader) -> Result<(), SessionError> {
        Ok(self.create_inner(header)?)
    }

    fn open_write(&self, id: &str) -> Result<DecodedLog, SessionError> {
        Ok(self.open_write_inner(id)?)
    }

    fn open_read(&self, id: &str) -> Result<DecodedLog, SessionError> {
        Ok(self.load(id)?)
    }

    fn exists(&self, id: &str) -> bool {
        self.open.is_open(id) || self.find_dir(id).is_some()
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        Ok(self.list_inner())
    }

    fn export_raw(&self, id: &str) -> Result<Vec<u8>, SessionError> {
        let (_, sel) = self.locate(id)?;
        let bytes = fs::read(&sel.path).map_err(|e| io("reading", &sel.path, e))?;
        if !sel.zstd {
            return Ok(bytes);
        }
        let frames = crate::zstd::decode_frames(&bytes).map_err(|source| StoreError::Zstd {
            path: sel.path.clone(),
            source,
        })?;
        Ok(frames.plain)
    }

    fn append(&self, id: &str, events: &[Arc<Event>]) -> Result<(), SessionError> {
        self.with_writer(id, |w| {
            for e in events {
                if e.is_large() && w.can_stream() {
                    w.append_large(e)?;
                } else {
                    w.buffer_event(e);
                }
            }
            Ok(())
        })
    }

    fn flush(&self, id: &str) -> Result<(), SessionError> {
        self.with_writer(id, Writer::flush)
    }

    fn write_through(&self, id: &str) -> Result<(), SessionError> {
        self.with_writer(id, Writer::write_through)
    }

    fn close(&self, id: &str) -> Result<(), SessionError> {
        // The entry stays busy until the lock is released: an open of the session waits for
        // this close instead of finding the lock still taken.
        let Some((busy, writer)) = self.open.begin_close(id) else {
            return Ok(());
        };
        let mut w = writer.lock();
        w.closed = true;
        // Only pending appends are written, and a file a write-through published is made
        // durable: closing a refused or untouched session changes nothing on disk (no
        // torn-tail truncation, no v3 successor, no header-only file).
        let result = if w.buffer.is_empty() && !w.name_unsynced {
            Ok(())
        } else {
            w.flush()
        };
        w.file = None;
        w.lock = None; // releases the flock (before the entry settles)
        drop(w);
        drop(busy);
        Ok(result?)
    }

    fn artifact_dir(&self, id: &str) -> Result<Option<PathBuf>, SessionError> {
        Ok(Some(self.spill_dir(id)?))
    }

    fn artifact_cap(&self) -> Option<u64> {
        Some(self.spill_cap)
    }

    fn artifact_usage(&self, id: &str) -> Result<u64, SessionError> {
        Ok(self.spill_usage(id)?)
    }
}

/// Reads only the header line of a session directory's selected generation (at most
/// [`dsh_session::codec::MAX_HEADER_BYTES`]).
fn summarize(dir: &Path) -> Result<Option<SessionSummary>, StoreError> {
    let Some(sel) = select(dir)? else {
        return Ok(None);
    };
    let file = File::open(&sel.path).map_err(|e| io("opening", &sel.path, e))?;
    let mut first = Vec::new();
    let mut reader = BufReader::new(file).take(dsh_session::codec::MAX_HEADER_BYTES);
    // The plain lines after the header that are scanned for a title (titles are written with
    // the first request).
    let mut rest = Vec::new();
    if sel.zstd {
        // The header line is the first frame (compressed, it is smaller than the line): read
        // 256 KiB, and up to the header limit only when the frame is longer.
        let mut raw = Vec::new();
        (&mut reader)
            .take(256 << 10)
            .read_to_end(&mut raw)
            .map_err(|e| io("reading", &sel.path, e))?;
        if crate::zstd::first_frame(&raw).ok().flatten().is_none() {
            reader
                .read_to_end(&mut raw)
                .map_err(|e| io("reading", &sel.path, e))?;
        }
        let plain =
            crate::zstd::decode_prefix(&raw, TITLE_WINDOW).map_err(|source| StoreError::Zstd {
                path: sel.path.clone(),
                source,
            })?;
        let cut = plain
            .iter()
            .position(|b| *b == b'\n')
            .map_or(plain.len(), |i| i + 1);
        first = plain[..cut].to_vec();
        rest = plain[cut..].to_vec();
    } else {
        std::io::BufRead::read_until(&mut reader, b'\n', &mut first)
            .map_err(|e| io("reading", &sel.path, e))?;
        (&mut reader.into_inner())
            .take(TITLE_WINDOW as u64)
            .read_to_end(&mut rest)
            .map_err(|e| io("reading", &sel.path, e))?;
    }
    let title = latest_title(&rest);
    if first.last() == Some(&b'\n') {
        first.pop();
    }
    let v: serde_json::Value = serde_json::from_slice(&first).map_err(|_| LoadError {
        path: sel.path.display().to_string(),
        line: 1,
        offset: 0,
        problem: dsh_session::codec::LoadProblem::HeaderNotJson,
        valid_events: 0,
        valid_len: 0,
    })?;
    let s = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    Ok(Some(SessionSummary {
        id: s("id").unwrap_or_default(),
        created_at: v
            .get("createdAt")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0),
        cwd: s("cwd"),
        parent_session: s("parentSession"),
        version: sel.version,
        path: sel.path,
        title,
    }))
}

/// Bytes of a log (after its header) scanned for a title by listings.
const TITLE_WINDOW: usize = 64 << 10;

/// The latest `session/title` among the complete lines of `bytes`.
fn latest_title(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().rposition(|b| *b == b'\n')?;
    let mut title = None;
    for line in bytes[..end].split(|b| *b == b'\n') {
        if !line.starts_with(b"{\"type\":\"session/title\"") {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(t) = v["data"]["title"].as_str() {
            title = Some(t.to_owned());
        }
    }
    title
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
