//! The store of one project: `$DSH_HOME/checkpoints/<project>/` with `objects/` (blobs, by
//! SHA-256 of the content), `trees/` (one object per directory, see [`crate::tree`]), the stat
//! cache, and two append-only record files: `checkpoints.jsonl` and `rewinds.jsonl`.

use std::collections::{BTreeSet, HashSet};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{CheckpointError, Result};
use crate::id::ObjectId;
use crate::index::Index;
use crate::tree::{self, Manifest, Node};
use crate::walk::Walk;

/// Files larger than this are recorded as skipped unless configured otherwise (10 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// What a checkpoint record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointKind {
    /// Before a turn's first tool call.
    Before,
    /// At a turn's end.
    After,
    /// What a rewind was about to overwrite.
    Backup,
    /// The workspace right after a rewind.
    Restored,
}

impl CheckpointKind {
    /// `before`, `after`, `backup`, `restored`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointKind::Before => "before",
            CheckpointKind::After => "after",
            CheckpointKind::Backup => "backup",
            CheckpointKind::Restored => "restored",
        }
    }
}

/// One line of `checkpoints.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// The root tree.
    pub id: ObjectId,
    /// What it is.
    pub kind: CheckpointKind,
    /// The session it belongs to.
    pub session: String,
    /// The turn (before / after checkpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// When, ms since the Unix epoch.
    pub created_ms: i64,
    /// Files (and links) in it.
    pub files: u64,
    /// Bytes of new blobs this snapshot wrote.
    pub new_bytes: u64,
}

/// One line of `rewinds.jsonl`: a rewind (or the undo of one), itself undoable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindRecord {
    /// `rw-<ms>-<n>`.
    pub id: String,
    /// The session rewound.
    pub session: String,
    /// The turn whose start was restored (`None`: an undo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_turn: Option<u64>,
    /// The rewind this one undid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_of: Option<String>,
    /// The workspace before (what was overwritten).
    pub backup: ObjectId,
    /// The workspace after.
    pub result: ObjectId,
    /// The session the conversation was forked into, when it was rewound too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_session: Option<String>,
    /// When, ms since the Unix epoch.
    pub created_ms: i64,
}

/// A snapshot taken.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Its root tree.
    pub id: ObjectId,
    /// Its content.
    pub manifest: std::sync::Arc<Manifest>,
    /// Bytes of new blobs written.
    pub new_bytes: u64,
    /// Files read and hashed (not answered by the stat cache).
    pub hashed: u64,
}

impl Snapshot {
    /// Files over the size limit, recorded without content.
    pub fn skipped(&self) -> Vec<String> {
        self.manifest
            .entries
            .iter()
            .filter(|(_, n)| matches!(n, Node::Skipped { .. }))
            .map(|(p, _)| String::from_utf8_lossy(p).into_owned())
            .collect()
    }
}

/// What `gc` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Checkpoint records dropped.
    pub records_dropped: u64,
    /// Rewind records dropped.
    pub rewinds_dropped: u64,
    /// Objects (blobs and trees) deleted.
    pub objects_deleted: u64,
    /// Bytes freed.
    pub bytes_freed: u64,
}

#[derive(Default)]
struct State {
    /// The last snapshot's listing and stat entries (read from `statcache` at the first).
    index: Option<Index>,
    known_trees: HashSet<ObjectId>,
    /// The manifest of `index`'s root, once built in this process.
    last: Option<std::sync::Arc<Manifest>>,
    generation: u64,
}

/// Threads a snapshot walks on: the machine's cores, at most 8 (a stat is a system call; on
/// a 10,000-file tree they are most of a snapshot's time).
fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// The checkpoint store of one workspace.
pub struct Store {
    dir: PathBuf,
    workspace: PathBuf,
    max_file_bytes: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

/// `<root>/<first 16 hex digits of SHA-256 of the workspace path>`.
pub fn project_dir(root: &Path, workspace: &Path) -> PathBuf {
    let id = ObjectId::of(workspace.as_os_str().as_bytes());
    root.join(&id.hex()[..16])
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[derive(Serialize, Deserialize)]
struct ProjectFile {
    workspace: PathBuf,
}

impl Store {
    /// The store of `workspace` (made absolute and canonical) under `root`
    /// (`$DSH_HOME/checkpoints`), created if missing.
    pub fn open(root: &Path, workspace: &Path, max_file_bytes: u64) -> Result<Store> {
        let workspace = workspace
            .canonicalize()
            .map_err(CheckpointError::io("resolving the workspace", workspace))?;
        let dir = project_dir(root, &workspace);
        for sub in ["objects", "trees", "tmp"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(CheckpointError::io("creating", &d))?;
        }
        let pf = dir.join("project.json");
        if !pf.exists() {
            let body = serde_json::to_vec(&ProjectFile {
                workspace: workspace.clone(),
            })?;
            write_atomic(&dir, &pf, &body)?;
        }
        Ok(Store {
            dir,
            workspace,
            max_file_bytes,
            state: Mutex::new(State::default()),
        })
    }

    /// The store in `dir` (a project directory from [`Store::projects`]), whether or not its
    /// workspace still exists.
    pub fn at(dir: &Path, workspace: &Path, max_file_bytes: u64) -> Store {
        Store {
            dir: dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            max_file_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// The stores under `root` and their workspaces.
    pub fn projects(root: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(root) else {
            return Ok(out);
        };
        for e in rd.flatten() {
            let pf = e.path().join("project.json");
            if let Ok(bytes) = std::fs::read(&pf)
                && let Ok(p) = serde_json::from_slice::<ProjectFile>(&bytes)
            {
                out.push((e.path(), p.workspace));
            }
        }
        out.sort();
        Ok(out)
    }

    /// The workspace (canonical).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn object_path(&self, kind: &str, id: &ObjectId) -> PathBuf {
        let hex = id.hex();
        self.dir.join(kind).join(&hex[..2]).join(&hex[2..])
    }

    fn put(&self, kind: &str, id: &ObjectId, bytes: &[u8]) -> Result<bool> {
        let path = self.object_path(kind, id);
        if path.exists() {
            return Ok(false);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(CheckpointError::io("creating", parent))?;
        }
        write_atomic(&self.dir, &path, bytes)?;
        Ok(true)
    }

    /// A blob's bytes.
    pub fn read_blob(&self, id: &ObjectId) -> Result<Vec<u8>> {
        let path = self.object_path("objects", id);
        std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                CheckpointError::Corrupt(format!("blob {} is missing", id.short()))
            } else {
                CheckpointError::io("reading", path)(e)
            }
        })
    }

    fn read_tree(&self, id: ObjectId) -> Result<Vec<u8>> {
        let path = self.object_path("trees", &id);
        std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                CheckpointError::NotFound(id.hex())
            } else {
                CheckpointError::io("reading", path)(e)
            }
        })
    }

    /// The flattened content of a checkpoint.
    pub fn manifest(&self, id: ObjectId) -> Result<Manifest> {
        tree::flatten(id, |t| self.read_tree(t))
    }

    fn generation(&self) -> u64 {
        std::fs::read(self.dir.join("generation"))
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Snapshots the workspace: every file not ignored (`.gitignore`, `.ignore`, git's
    /// excludes; `.git` itself is never read), symlinks as links, files over the size limit as
    /// skipped. Unchanged files are answered by the index's stat entries, and an unchanged
    /// listing by the index's root (no tree is built).
    pub fn snapshot(&self) -> Result<Snapshot> {
        let started = now_ns();
        let mut state = self.state.lock();
        let generation = self.generation();
        if state.index.is_none() || state.generation != generation {
            state.index = Some(Index::load(&self.dir.join("statcache")));
            state.known_trees.clear();
            state.last = None;
            state.generation = generation;
        }
        let index = state.index.take().unwrap_or_default();
        let put_blob = |id: &ObjectId, bytes: &[u8]| self.put("objects", id, bytes);
        let walked = Walk {
            workspace: &self.workspace,
            store_dir: &self.dir,
            max_file_bytes: self.max_file_bytes,
            index: &index,
            started_ns: started,
            put_blob: &put_blob,
        }
        .run(walk_threads());
        let mut walked = match walked {
            Ok(w) => w,
            Err(e) => {
                state.index = Some(index);
                return Err(e);
            }
        };
        walked.dirs.sort_unstable();
        let mut new_bytes = walked.new_bytes;
        let hashed = walked.hashed;
        // Everything found as the index has it, nothing new, the same directories: the
        // index's listing, whose tree is known.
        let unchanged = walked.new.is_empty()
            && walked.known.len() == index.entries.len()
            && walked.dirs == index.dirs;
        let (id, manifest, index, dirty) = match index.root {
            Some(root) if unchanged => {
                let manifest = match state.last.take() {
                    Some(m) => m,
                    None => std::sync::Arc::new(index.manifest()),
                };
                (root, manifest, index, false)
            }
            _ => {
                let entries = walked.entries(&index);
                let dirs = std::mem::take(&mut walked.dirs);
                let same = index.root.is_some() && index.same_listing(&entries, &dirs);
                let index = Index {
                    root: index.root.filter(|_| same),
                    entries,
                    dirs,
                };
                let manifest = index.manifest();
                let root = match index.root {
                    // Only stat entries changed (files hashed again, found the same).
                    Some(root) => root,
                    None => {
                        let known = &mut state.known_trees;
                        tree::build(&manifest, |bytes| {
                            let id = ObjectId::of(&bytes);
                            if known.insert(id) && self.put("trees", &id, &bytes)? {
                                new_bytes += bytes.len() as u64;
                            }
                            Ok(id)
                        })?
                    }
                };
                let index = Index {
                    root: Some(root),
                    ..index
                };
                (root, std::sync::Arc::new(manifest), index, true)
            }
        };
        if dirty {
            let path = self.dir.join("statcache");
            if let Err(e) = write_atomic(&self.dir, &path, &index.encode()) {
                tracing::warn!(error = %e, "checkpoint: the stat cache was not saved");
            }
        }
        state.index = Some(index);
        state.last = Some(manifest.clone());
        Ok(Snapshot {
            id,
            manifest,
            new_bytes,
            hashed,
        })
    }

    /// Appends a checkpoint record.
    pub fn record(&self, rec: &CheckpointRecord) -> Result<()> {
        append_line(&self.dir.join("checkpoints.jsonl"), rec)
    }

    /// Every checkpoint record, oldest first (unreadable lines are skipped).
    pub fn records(&self) -> Result<Vec<CheckpointRecord>> {
        read_lines(&self.dir.join("checkpoints.jsonl"))
    }

    /// Appends a rewind record.
    pub fn record_rewind(&self, rec: &RewindRecord) -> Result<()> {
        append_line(&self.dir.join("rewinds.jsonl"), rec)
    }

    /// Every rewind record, oldest first.
    pub fn rewinds(&self) -> Result<Vec<RewindRecord>> {
        read_lines(&self.dir.join("rewinds.jsonl"))
    }

    /// Bytes on disk.
    pub fn size(&self) -> u64 {
        dir_size(&self.dir)
    }

    /// Keeps the records `keep` accepts (and the rewinds of kept sessions), deletes every
    /// object no kept record reaches, and resets the stat cache.
    pub fn gc(&self, keep: impl Fn(&str) -> bool) -> Result<GcReport> {
        let mut state = self.state.lock();
        let mut report = GcReport::default();
        let records = self.records()?;
        let rewinds = self.rewinds()?;
        let (kept, dropped): (Vec<_>, Vec<_>) = records.into_iter().partition(|r| keep(&r.session));
        let (kept_rw, dropped_rw): (Vec<_>, Vec<_>) =
            rewinds.into_iter().partition(|r| keep(&r.session));
        report.records_dropped = dropped.len() as u64;
        report.rewinds_dropped = dropped_rw.len() as u64;
        let (mut trees, mut blobs) = (BTreeSet::new(), BTreeSet::new());
        let roots = kept
            .iter()
            .map(|r| r.id)
            .chain(kept_rw.iter().flat_map(|r| [r.backup, r.result]));
        for root in roots {
            if let Err(e) = tree::reach(root, &mut trees, &mut blobs, |t| self.read_tree(t)) {
                tracing::warn!(error = %e, "checkpoint gc: a tree is unreadable");
            }
        }
        rewrite_lines(&self.dir, &self.dir.join("checkpoints.jsonl"), &kept)?;
        rewrite_lines(&self.dir, &self.dir.join("rewinds.jsonl"), &kept_rw)?;
        for (kind, live) in [("objects", &blobs), ("trees", &trees)] {
            let base = self.dir.join(kind);
            let Ok(rd) = std::fs::read_dir(&base) else {
                continue;
            };
            for fan in rd.flatten() {
                let Ok(files) = std::fs::read_dir(fan.path()) else {
                    continue;
                };
                let prefix = fan.file_name().to_string_lossy().into_owned();
                for f in files.flatten() {
                    let hex = format!("{prefix}{}", f.file_name().to_string_lossy());
                    let alive = hex.parse::<ObjectId>().is_ok_and(|id| live.contains(&id));
                    if !alive {
                        let len = f.metadata().map_or(0, |m| m.len());
                        if std::fs::remove_file(f.path()).is_ok() {
                            report.objects_deleted += 1;
                            report.bytes_freed += len;
                        }
                    }
                }
            }
        }
        // Every process drops its in-memory stat cache at its next snapshot: a cached blob id
        // may name a deleted object now.
        let _ = std::fs::remove_file(self.dir.join("statcache"));
        let next = self.generation() + 1;
        write_atomic(
            &self.dir,
            &self.dir.join("generation"),
            next.to_string().as_bytes(),
        )?;
        state.index = None;
        state.known_trees.clear();
        state.last = None;
        Ok(report)
    }
}

static TMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn tmp_name() -> String {
    let n = TMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{}-{n}", std::process::id(), now_ns())
}

fn write_atomic(store: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = store.join("tmp").join(tmp_name());
    std::fs::write(&tmp, bytes).map_err(CheckpointError::io("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CheckpointError::io("writing", path)(e)
    })
}

fn append_line<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(CheckpointError::io("opening", path))?;
    f.write_all(&line)
        .map_err(CheckpointError::io("appending to", path))
}

fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CheckpointError::io("reading", path)(e)),
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn rewrite_lines<T: Serialize>(store: &Path, path: &Path, values: &[T]) -> Result<()> {
    let mut out = Vec::new();
    for v in values {
        out.extend(serde_json::to_vec(v)?);
        out.push(b'\n');
    }
    write_atomic(store, path, &out)
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => total += e.metadata().map_or(0, |m| m.len()),
                Err(_) => {}
            }
        }
    }
    total
}
