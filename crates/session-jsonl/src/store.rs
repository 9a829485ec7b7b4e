//! [`JsonlStore`]: plain JSONL session logs under a root directory (format §1).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_session::codec::{DecodedLog, check_generation, decode_jsonl};
use dsh_session::{
    Event, LogError, SessionError, SessionHeader, SessionPersistence, SessionSummary,
};
use parking_lot::Mutex;

use crate::naming::{encode_segment, generation_file, parse_generation, project_dir};

/// The format version this backend writes.
const VERSION: u64 = 4;

/// One session open for write in this process.
#[derive(Debug)]
struct Writer {
    dir: PathBuf,
    header: SessionHeader,
    /// `None` until materialized (lazy: nothing on disk before the first flush).
    file: Option<File>,
    /// Held exclusive `flock` on `session.lock` (released when dropped).
    lock: Option<File>,
    /// Committed byte length of the file.
    len: u64,
    /// Serialized, not yet durable lines.
    buffer: Vec<u8>,
    /// A torn tail to truncate away before the first append (deferred so that a log refused by
    /// admission is never modified).
    truncate_to: Option<u64>,
    /// v3 write open: the converted events, published with the header as `session.v4.jsonl` at
    /// the first flush (format §16.3), and the v3 file's (length, mtime) that must not change.
    successor: Option<(Vec<u8>, PathBuf, u64, Option<std::time::SystemTime>)>,
}

impl Writer {
    fn new(dir: PathBuf, header: SessionHeader) -> Self {
        Writer {
            dir,
            header,
            file: None,
            lock: None,
            len: 0,
            buffer: Vec::new(),
            truncate_to: None,
            successor: None,
        }
    }
}

/// The JSONL persistence backend: `<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.v4.jsonl`.
#[derive(Debug)]
pub struct JsonlStore {
    root: PathBuf,
    open: Mutex<HashMap<String, Writer>>,
}

fn io(path: &Path, e: std::io::Error) -> SessionError {
    SessionError::Io(format!("{}: {e}", path.display()))
}

/// The selected generation of a session directory.
#[derive(Debug, Clone)]
struct Selected {
    version: u64,
    path: PathBuf,
    /// A `.jsonl.zstd` generation (read-only in dsh).
    zstd: bool,
}

impl JsonlStore {
    /// A store rooted at `root` (created on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        JsonlStore {
            root: root.into(),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Flushes and releases every session open for write (shutdown). Failures are logged.
    pub fn close_all(&self) {
        let ids: Vec<String> = self.open.lock().keys().cloned().collect();
        for id in ids {
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
    fn find_dir(&self, id: &str) -> Option<PathBuf> {
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

    fn locate(&self, id: &str) -> Result<(PathBuf, Selected), SessionError> {
        let dir = self
            .find_dir(id)
            .ok_or_else(|| SessionError::NotFound(id.to_string()))?;
        let sel = select(&dir)?.ok_or_else(|| SessionError::NotFound(id.to_string()))?;
        check_generation(id, sel.version, &sel.path.display().to_string())?;
        Ok((dir, sel))
    }

    fn read_log(&self, id: &str, sel: &Selected) -> Result<DecodedLog, SessionError> {
        let bytes = fs::read(&sel.path).map_err(|e| io(&sel.path, e))?;
        let shown = sel.path.display().to_string();
        if !sel.zstd {
            return Ok(decode_jsonl(&bytes, sel.version, &shown, id)?);
        }
        let (plain, torn_frame) = crate::zstd::decompress_frames(&bytes)
            .map_err(|e| LogError::Corrupt(format!("corrupt session log: {e} ({shown})")))?;
        let mut decoded = decode_jsonl(&plain, sel.version, &shown, id)?;
        decoded.torn |= torn_frame;
        Ok(decoded)
    }
}

/// Selects the highest canonical generation of a session directory (format §1.4).
fn select(dir: &Path) -> Result<Option<Selected>, SessionError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(dir, e)),
    };
    let mut best: Option<(u64, PathBuf)> = None;
    let (mut plain, mut zstd) = (false, false);
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        let Some((n, z)) = name.to_str().and_then(parse_generation) else {
            continue;
        };
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
    let shown = path.display().to_string();
    if plain && zstd {
        return Err(LogError::Unsupported(format!(
            "session directory mixes plain and zstd generations; refusing it ({shown})"
        ))
        .into());
    }
    Ok(Some(Selected {
        version,
        path,
        zstd,
    }))
}

fn take_lock(dir: &Path, id: &str) -> Result<File, SessionError> {
    let path = dir.join("session.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(SessionError::Locked(id.to_string())),
        Err(std::fs::TryLockError::Error(e)) => Err(io(&path, e)),
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes `bytes` to a temporary file in `dir`, fsyncs it, and links it to `name` without
/// overwriting (format §1.6). A failed link means another writer won: `Locked`.
fn publish(dir: &Path, name: &str, bytes: &[u8], id: &str) -> Result<File, SessionError> {
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
            .map_err(|e| io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
        let target = dir.join(name);
        match fs::hard_link(&tmp, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(SessionError::Locked(id.to_string()));
            }
            Err(e) => return Err(io(&target, e)),
        }
        sync_dir(dir);
        OpenOptions::new()
            .append(true)
            .open(&target)
            .map_err(|e| io(&target, e))
    })();
    let _ = fs::remove_file(&tmp);
    result
}

impl Writer {
    /// Writes the buffer to the published file without syncing (process-crash safe). Before the
    /// file exists, the full publishing flush runs instead.
    fn write_through(&mut self) -> Result<(), SessionError> {
        if self.file.is_none() || self.truncate_to.is_some() {
            return self.flush();
        }
        if self.buffer.is_empty() {
            return Ok(());
        }
        let path = self.dir.join(generation_file(VERSION));
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        if let Err(e) = file.write_all(&self.buffer) {
            let _ = file.set_len(self.len);
            return Err(io(&path, e));
        }
        self.len += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        if self.file.is_none() {
            fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
            if self.lock.is_none() {
                self.lock = Some(take_lock(&self.dir, &self.header.id)?);
            }
            let mut bytes = self.header.to_json_line().into_bytes();
            bytes.push(b'\n');
            if let Some((events, v3, len, mtime)) = &self.successor {
                let meta = fs::metadata(v3).map_err(|e| io(v3, e))?;
                if meta.len() != *len || meta.modified().ok() != *mtime {
                    return Err(SessionError::Io(format!(
                        "{} changed since it was opened; refusing to publish its v4 successor",
                        v3.display()
                    )));
                }
                bytes.extend_from_slice(events);
                let check = decode_jsonl(&bytes, VERSION, "v4 successor", &self.header.id)?;
                if check.torn {
                    return Err(SessionError::Io("the v4 successor did not verify".into()));
                }
            }
            bytes.extend_from_slice(&self.buffer);
            let file = publish(
                &self.dir,
                &generation_file(VERSION),
                &bytes,
                &self.header.id,
            )?;
            self.len = bytes.len() as u64;
            self.file = Some(file);
            self.buffer.clear();
            self.successor = None;
            return Ok(());
        }
        if let (Some(len), Some(file)) = (self.truncate_to, self.file.as_mut()) {
            let path = self.dir.join(generation_file(VERSION));
            file.set_len(len)
                .and_then(|()| file.sync_all())
                .map_err(|e| io(&path, e))?;
            tracing::warn!(session = %self.header.id, path = %path.display(), "dropped a torn tail");
            self.truncate_to = None;
        }
        if self.buffer.is_empty() {
            return Ok(());
        }
        let path = self.dir.join(generation_file(VERSION));
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let written = file.write_all(&self.buffer).and_then(|()| file.sync_data());
        if let Err(e) = written {
            // Truncate back to the committed length; the buffer stays for a retry.
            let _ = file.set_len(self.len);
            return Err(io(&path, e));
        }
        self.len += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

impl SessionPersistence for JsonlStore {
    fn create(&self, header: &SessionHeader) -> Result<(), SessionError> {
        let mut open = self.open.lock();
        if open.contains_key(&header.id) || self.find_dir(&header.id).is_some() {
            return Err(SessionError::Exists(header.id.clone()));
        }
        let dir = self.session_dir(header);
        open.insert(header.id.clone(), Writer::new(dir, header.clone()));
        Ok(())
    }

    fn open_write(&self, id: &str) -> Result<DecodedLog, SessionError> {
        let mut open = self.open.lock();
        if open.contains_key(id) {
            // A second write open inside this process: refused without touching the disk.
            return Err(SessionError::Locked(id.to_string()));
        }
        let (dir, sel) = self.locate(id)?;
        let lock = take_lock(&dir, id)?;
        // Select again under the lock: a concurrent writer may have published meanwhile.
        let sel = select(&dir)?.unwrap_or(sel);
        if sel.zstd {
            // Writes continue in the selected encoding (format §1.4); dsh has no zstd encoder.
            return Err(LogError::Unsupported(format!(
                "session \"{id}\" is stored zstd-compressed, which dsh reads but cannot append to (no zstd encoder); open it read-only ({})",
                sel.path.display()
            ))
            .into());
        }
        let decoded = self.read_log(id, &sel)?;
        let mut w = Writer::new(dir, decoded.header.clone());
        w.lock = Some(lock);
        if decoded.source_version == VERSION {
            let file = OpenOptions::new()
                .append(true)
                .open(&sel.path)
                .map_err(|e| io(&sel.path, e))?;
            w.len = decoded.committed_len as u64;
            w.truncate_to = decoded.torn.then_some(w.len);
            w.file = Some(file);
        } else {
            // v3: the v4 successor is published at the first flush; the v3 file stays as it is.
            let meta = fs::metadata(&sel.path).map_err(|e| io(&sel.path, e))?;
            let mut events = Vec::new();
            for e in &decoded.events {
                events.extend_from_slice(e.to_json_line().as_bytes());
                events.push(b'\n');
            }
            w.successor = Some((events, sel.path.clone(), meta.len(), meta.modified().ok()));
        }
        open.insert(id.to_string(), w);
        Ok(decoded)
    }

    fn open_read(&self, id: &str) -> Result<DecodedLog, SessionError> {
        let (_, sel) = self.locate(id)?;
        self.read_log(id, &sel)
    }

    fn exists(&self, id: &str) -> bool {
        self.open.lock().contains_key(id) || self.find_dir(id).is_some()
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let mut out = Vec::new();
        let Ok(projects) = fs::read_dir(&self.root) else {
            return Ok(out);
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
        Ok(out)
    }

    fn export_raw(&self, id: &str) -> Result<Vec<u8>, SessionError> {
        let (_, sel) = self.locate(id)?;
        fs::read(&sel.path).map_err(|e| io(&sel.path, e))
    }

    fn append(&self, id: &str, events: &[Arc<Event>]) -> Result<(), SessionError> {
        let mut open = self.open.lock();
        let w = open
            .get_mut(id)
            .ok_or_else(|| SessionError::Closed(id.to_string()))?;
        for e in events {
            w.buffer.extend_from_slice(e.to_json_line().as_bytes());
            w.buffer.push(b'\n');
        }
        Ok(())
    }

    fn flush(&self, id: &str) -> Result<(), SessionError> {
        let mut open = self.open.lock();
        let w = open
            .get_mut(id)
            .ok_or_else(|| SessionError::Closed(id.to_string()))?;
        w.flush()
    }

    fn write_through(&self, id: &str) -> Result<(), SessionError> {
        let mut open = self.open.lock();
        let w = open
            .get_mut(id)
            .ok_or_else(|| SessionError::Closed(id.to_string()))?;
        w.write_through()
    }

    fn close(&self, id: &str) -> Result<(), SessionError> {
        let mut open = self.open.lock();
        let Some(mut w) = open.remove(id) else {
            return Ok(());
        };
        // Only pending appends are written: closing a refused or untouched session changes
        // nothing on disk (no torn-tail truncation, no v3 successor, no header-only file).
        let result = if w.buffer.is_empty() {
            Ok(())
        } else {
            w.flush()
        };
        drop(w); // releases the flock
        result
    }
}

/// Reads only the header line of a session directory's selected generation.
fn summarize(dir: &Path) -> Result<Option<SessionSummary>, SessionError> {
    let Some(sel) = select(dir)? else {
        return Ok(None);
    };
    let mut file = File::open(&sel.path).map_err(|e| io(&sel.path, e))?;
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = file.read(&mut buf).map_err(|e| io(&sel.path, e))?;
        if n == 0 {
            break;
        }
        first.extend_from_slice(&buf[..n]);
        if let Some(i) = first.iter().position(|b| *b == b'\n') {
            first.truncate(i);
            break;
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&first).map_err(|_| {
        SessionError::Log(LogError::Corrupt(format!(
            "header is not JSON ({})",
            sel.path.display()
        )))
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
    }))
}
