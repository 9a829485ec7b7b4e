//! The walk of a snapshot: every directory of the workspace read on a few threads, each file
//! `stat`ed relative to its directory (no path lookup from the root) and looked up in the
//! index; only a file whose stat changed is read, hashed and stored.
//!
//! Ignore rules are those of the `ignore` crate's walker as the store used it before
//! (`.ignore`, `.gitignore`, `.git/info/exclude` of the workspace, its directories and its
//! parent directories, git's global excludes; a repository is not required), applied with the
//! same precedence: the nearest `.ignore` match of any directory wins, then the nearest
//! `.gitignore` match, then the nearest exclude, then the global excludes. `.git` is never
//! entered, symlinks are never followed, and the store's own directory is skipped when it lies
//! inside the workspace.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::id::ObjectId;
use crate::index::{FileEntry, Index, IndexNode, Stat};
use crate::tree::join;

/// Files of one directory handed to one thread at a time.
const CHUNK: usize = 256;

/// What a walk found.
#[derive(Default)]
pub(crate) struct Walked {
    /// Positions in the index of the entries found exactly as the index has them.
    pub known: Vec<usize>,
    /// Files, links and skipped files new or changed since the index (unsorted).
    pub new: Vec<(Vec<u8>, IndexNode)>,
    /// Directories (unsorted).
    pub dirs: Vec<Vec<u8>>,
    /// Files read and hashed.
    pub hashed: u64,
    /// Bytes of new blobs written.
    pub new_bytes: u64,
}

impl Walked {
    /// Every entry, sorted by path (the known ones copied from `index`).
    pub(crate) fn entries(&mut self, index: &Index) -> Vec<(Vec<u8>, IndexNode)> {
        let mut all = Vec::with_capacity(self.known.len() + self.new.len());
        all.extend(
            self.known
                .iter()
                .filter_map(|&i| index.entries.get(i).cloned()),
        );
        all.append(&mut self.new);
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// One walk of a workspace.
pub(crate) struct Walk<'a> {
    pub workspace: &'a Path,
    /// The store's directory, skipped when inside the workspace.
    pub store_dir: &'a Path,
    pub max_file_bytes: u64,
    pub index: &'a Index,
    /// Start of the snapshot (recorded with each file hashed).
    pub started_ns: i64,
    /// Stores a blob; `Ok(true)` when it was new.
    pub put_blob: &'a (dyn Fn(&ObjectId, &[u8]) -> Result<bool> + Sync),
}

/// The ignore files of one directory, and those of the directories above it.
struct Level {
    parent: Option<Arc<Level>>,
    /// Bytes of a workspace-relative path to drop for a path relative to this directory.
    strip: usize,
    ignore: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
}

/// The same for a directory above the workspace.
struct Outer {
    /// The workspace's path relative to this directory, with a trailing `/`.
    prefix: Vec<u8>,
    ignore: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
}

struct Rules {
    outer: Vec<Outer>,
    global: Gitignore,
    store_rel: Option<Vec<u8>>,
}

fn bytes_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
}

fn gitignore(root: &Path, files: &[PathBuf]) -> Gitignore {
    let mut b = GitignoreBuilder::new(root);
    for f in files {
        if let Some(e) = b.add(f) {
            tracing::warn!(path = %f.display(), error = %e, "checkpoint: an ignore file was not read in full");
        }
    }
    b.build().unwrap_or_else(|e| {
        tracing::warn!(dir = %root.display(), error = %e, "checkpoint: ignore rules not used");
        Gitignore::empty()
    })
}

/// The repository directory whose `info/exclude` applies to `dir` (`dir/.git`, or for a
/// worktree or submodule whose `.git` is a file, its common directory), as the `ignore` crate
/// resolves it.
fn git_common_dir(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    let meta = std::fs::metadata(&dot_git).ok()?;
    if !meta.is_file() {
        return Some(dot_git);
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let real = PathBuf::from(text.lines().next()?.strip_prefix("gitdir: ")?);
    let common = std::fs::read_to_string(real.join("commondir")).ok()?;
    let line = common.lines().next()?;
    Some(if line.starts_with('.') {
        real.join(line)
    } else {
        PathBuf::from(line)
    })
}

/// The three matchers of `dir`, reading only the files that exist.
fn matchers(
    dir: &Path,
    ignore: bool,
    git: bool,
    dot_git: bool,
) -> (Gitignore, Gitignore, Gitignore) {
    let one = |present: bool, name: &str| {
        if present {
            gitignore(dir, &[dir.join(name)])
        } else {
            Gitignore::empty()
        }
    };
    let exclude = match dot_git.then(|| git_common_dir(dir)).flatten() {
        Some(common) => {
            let f = common.join("info/exclude");
            if f.exists() {
                gitignore(dir, &[f])
            } else {
                Gitignore::empty()
            }
        }
        None => Gitignore::empty(),
    };
    (one(ignore, ".ignore"), one(git, ".gitignore"), exclude)
}

impl Rules {
    fn new(workspace: &Path, store_dir: &Path) -> Rules {
        let mut outer = Vec::new();
        for dir in workspace.ancestors().skip(1) {
            let (ignore, git, exclude) = matchers(
                dir,
                dir.join(".ignore").exists(),
                dir.join(".gitignore").exists(),
                dir.join(".git").exists(),
            );
            if ignore.is_empty() && git.is_empty() && exclude.is_empty() {
                continue;
            }
            let Ok(rel) = workspace.strip_prefix(dir) else {
                continue;
            };
            let mut prefix = rel.as_os_str().as_bytes().to_vec();
            prefix.push(b'/');
            outer.push(Outer {
                prefix,
                ignore,
                git,
                exclude,
            });
        }
        let (global, err) = GitignoreBuilder::new(workspace).build_global();
        if let Some(e) = err {
            tracing::debug!(error = %e, "checkpoint: git's global excludes");
        }
        let store_rel = store_dir
            .strip_prefix(workspace)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .map(|r| r.as_os_str().as_bytes().to_vec());
        Rules {
            outer,
            global,
            store_rel,
        }
    }

    /// Whether `rel` (workspace-relative) is ignored, given the ignore files of its directory
    /// and those above.
    fn ignored(&self, level: Option<&Level>, rel: &[u8], is_dir: bool) -> bool {
        let (mut m_ignore, mut m_git, mut m_exclude) = (Match::None, Match::None, Match::None);
        let mut next = level;
        while let Some(l) = next {
            let path = bytes_path(rel.get(l.strip..).unwrap_or_default());
            if m_ignore.is_none() {
                m_ignore = l.ignore.matched(path, is_dir);
                if !m_ignore.is_none() {
                    return m_ignore.is_ignore();
                }
            }
            if m_git.is_none() {
                m_git = l.git.matched(path, is_dir);
            }
            if m_exclude.is_none() {
                m_exclude = l.exclude.matched(path, is_dir);
            }
            next = l.parent.as_deref();
        }
        for o in &self.outer {
            let mut full = Vec::with_capacity(o.prefix.len() + rel.len());
            full.extend_from_slice(&o.prefix);
            full.extend_from_slice(rel);
            let path = bytes_path(&full);
            if m_ignore.is_none() {
                m_ignore = o.ignore.matched(path, is_dir);
                if !m_ignore.is_none() {
                    return m_ignore.is_ignore();
                }
            }
            if m_git.is_none() {
                m_git = o.git.matched(path, is_dir);
            }
            if m_exclude.is_none() {
                m_exclude = o.exclude.matched(path, is_dir);
            }
        }
        let decided = m_git.or(m_exclude);
        if !decided.is_none() {
            return decided.is_ignore();
        }
        self.global.matched(bytes_path(rel), is_dir).is_ignore()
    }
}

enum Job {
    /// A directory to read.
    Dir {
        rel: Vec<u8>,
        level: Option<Arc<Level>>,
    },
    /// Files of a large directory, read by another thread.
    Files {
        dir: Arc<Vec<u8>>,
        level: Option<Arc<Level>>,
        entries: Vec<(std::fs::DirEntry, OsString)>,
    },
}

#[derive(Default)]
struct QueueState {
    jobs: Vec<Job>,
    busy: usize,
}

#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
}

impl Queue {
    /// The next job, or `None` when every thread is idle and nothing is left.
    fn next(&self) -> Option<Job> {
        let mut s = self.state.lock();
        loop {
            if let Some(job) = s.jobs.pop() {
                s.busy += 1;
                return Some(job);
            }
            if s.busy == 0 {
                self.wake.notify_all();
                return None;
            }
            self.wake.wait(&mut s);
        }
    }

    fn push(&self, jobs: &mut Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        self.state.lock().jobs.append(jobs);
        self.wake.notify_all();
    }

    fn done(&self) {
        let mut s = self.state.lock();
        s.busy -= 1;
        if s.busy == 0 {
            self.wake.notify_all();
        }
    }
}

/// A job being done: the queue is told when it ends, however it ends.
struct Busy<'q>(&'q Queue);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.done();
    }
}

struct Worker<'w, 'a> {
    walk: &'w Walk<'a>,
    rules: &'w Rules,
    queue: &'w Queue,
    failed: &'w AtomicBool,
    out: Walked,
    error: Option<crate::error::CheckpointError>,
    /// The path being looked at (reused: a known file allocates nothing for its path).
    path: Vec<u8>,
}

impl Walk<'_> {
    /// Walks the workspace on up to `threads` threads (the calling one included).
    pub(crate) fn run(&self, threads: usize) -> Result<Walked> {
        let rules = Rules::new(self.workspace, self.store_dir);
        let queue = Queue::default();
        let failed = AtomicBool::new(false);
        queue.state.lock().jobs.push(Job::Dir {
            rel: Vec::new(),
            level: None,
        });
        let work = || {
            let mut w = Worker {
                walk: self,
                rules: &rules,
                queue: &queue,
                failed: &failed,
                out: Walked::default(),
                error: None,
                path: Vec::new(),
            };
            while let Some(job) = queue.next() {
                // Done even if the job panics: the other threads must not wait for it forever.
                let _busy = Busy(&queue);
                if !failed.load(Ordering::Relaxed) {
                    w.job(job);
                }
            }
            (w.out, w.error)
        };
        let results: Vec<(Walked, Option<crate::error::CheckpointError>)> = std::thread::scope(
            |s| {
                let handles: Vec<_> = (1..threads.max(1))
                    .filter_map(|i| {
                        std::thread::Builder::new()
                            .name(format!("dsh-checkpoint-{i}"))
                            .spawn_scoped(s, work)
                            .map_err(|e| tracing::debug!(error = %e, "checkpoint: walking on fewer threads"))
                            .ok()
                    })
                    .collect();
                let mut all = vec![work()];
                for h in handles {
                    match h.join() {
                        Ok(r) => all.push(r),
                        Err(p) => std::panic::resume_unwind(p),
                    }
                }
                all
            },
        );
        let mut walked = Walked::default();
        for (out, error) in results {
            if let Some(e) = error {
                return Err(e);
            }
            walked.known.extend(out.known);
            walked.new.extend(out.new);
            walked.dirs.extend(out.dirs);
            walked.hashed += out.hashed;
            walked.new_bytes += out.new_bytes;
        }
        Ok(walked)
    }
}

impl Worker<'_, '_> {
    fn job(&mut self, job: Job) {
        match job {
            Job::Dir { rel, level } => self.dir(rel, level),
            Job::Files {
                dir,
                level,
                entries,
            } => {
                for (e, name) in entries {
                    self.leaf(&dir, level.as_deref(), &e, &name);
                }
            }
        }
    }

    fn dir(&mut self, rel: Vec<u8>, level: Option<Arc<Level>>) {
        let abs = if rel.is_empty() {
            self.walk.workspace.to_path_buf()
        } else {
            self.walk.workspace.join(bytes_path(&rel))
        };
        let rd = match std::fs::read_dir(&abs) {
            Ok(rd) => rd,
            Err(e) => {
                tracing::warn!(path = %abs.display(), error = %e, "checkpoint: a directory was not read");
                return;
            }
        };
        let mut entries = Vec::new();
        let (mut ignore, mut git, mut dot_git) = (false, false, false);
        for e in rd {
            match e {
                Ok(e) => {
                    let name = e.file_name();
                    match name.as_bytes() {
                        b".ignore" => ignore = true,
                        b".gitignore" => git = true,
                        b".git" => {
                            dot_git = true;
                            continue;
                        }
                        _ => {}
                    }
                    entries.push((e, name));
                }
                Err(e) => {
                    tracing::warn!(path = %abs.display(), error = %e, "checkpoint: a directory was not read in full")
                }
            }
        }
        let level = if ignore || git || dot_git {
            let (ignore, git, exclude) = matchers(&abs, ignore, git, dot_git);
            if ignore.is_empty() && git.is_empty() && exclude.is_empty() {
                level
            } else {
                Some(Arc::new(Level {
                    parent: level,
                    strip: if rel.is_empty() { 0 } else { rel.len() + 1 },
                    ignore,
                    git,
                    exclude,
                }))
            }
        } else {
            level
        };
        // Subdirectories first, so other threads can start on them.
        let mut jobs = Vec::new();
        entries.retain(|(e, name)| match e.file_type() {
            Ok(t) if t.is_dir() => {
                let child = join(&rel, name.as_bytes());
                if self.rules.store_rel.as_deref() != Some(child.as_slice())
                    && !self.rules.ignored(level.as_deref(), &child, true)
                {
                    self.out.dirs.push(child.clone());
                    jobs.push(Job::Dir {
                        rel: child,
                        level: level.clone(),
                    });
                }
                false
            }
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(path = %e.path().display(), error = %err, "checkpoint: a path was not read");
                false
            }
        });
        let dir = Arc::new(rel);
        while entries.len() > CHUNK {
            let rest = entries.split_off(entries.len() - CHUNK);
            jobs.push(Job::Files {
                dir: dir.clone(),
                level: level.clone(),
                entries: rest,
            });
        }
        self.queue.push(&mut jobs);
        for (e, name) in entries {
            self.leaf(&dir, level.as_deref(), &e, &name);
        }
    }

    /// Records `node` at `self.path`: by its index position when the index has it so.
    fn found(&mut self, node: IndexNode) {
        if let Some(i) = self.walk.index.position(&self.path)
            && self
                .walk
                .index
                .entries
                .get(i)
                .is_some_and(|(_, n)| *n == node)
        {
            self.out.known.push(i);
        } else {
            self.out.new.push((self.path.clone(), node));
        }
    }

    /// A non-directory entry of `dir`.
    fn leaf(&mut self, dir: &[u8], level: Option<&Level>, e: &std::fs::DirEntry, name: &OsStr) {
        let Ok(ft) = e.file_type() else {
            return;
        };
        if !ft.is_file() && !ft.is_symlink() {
            return; // sockets, fifos, devices
        }
        self.path.clear();
        if !dir.is_empty() {
            self.path.extend_from_slice(dir);
            self.path.push(b'/');
        }
        self.path.extend_from_slice(name.as_bytes());
        if self.rules.ignored(level, &self.path, false) {
            return;
        }
        if ft.is_symlink() {
            match std::fs::read_link(e.path()) {
                Ok(t) => self.found(IndexNode::Symlink(t.as_os_str().as_bytes().to_vec())),
                Err(err) => {
                    tracing::warn!(path = %e.path().display(), error = %err, "checkpoint: a link was not read")
                }
            }
            return;
        }
        // `DirEntry::metadata` is an `lstat` relative to the open directory.
        let stat = match e.metadata() {
            Ok(m) => Stat::of(&m),
            Err(err) => {
                tracing::warn!(path = %e.path().display(), error = %err, "checkpoint: a file was not read");
                return;
            }
        };
        if stat.size > self.walk.max_file_bytes {
            self.found(IndexNode::Skipped(stat.size));
            return;
        }
        if let Some(i) = self.walk.index.position(&self.path)
            && let Some((_, IndexNode::File(known))) = self.walk.index.entries.get(i)
            && known.trusted_for(&stat)
        {
            self.out.known.push(i);
            return;
        }
        let bytes = match std::fs::read(e.path()) {
            Ok(b) => b,
            Err(err) => {
                tracing::warn!(path = %e.path().display(), error = %err, "checkpoint: a file was not read");
                return;
            }
        };
        self.out.hashed += 1;
        let id = ObjectId::of(&bytes);
        match (self.walk.put_blob)(&id, &bytes) {
            Ok(true) => self.out.new_bytes += bytes.len() as u64,
            Ok(false) => {}
            Err(err) => {
                self.failed.store(true, Ordering::Relaxed);
                self.error.get_or_insert(err);
                return;
            }
        }
        // The size read, not the size seen: a file growing between the two is hashed again
        // next time (its stat differs from the one recorded).
        let stat = Stat {
            size: bytes.len() as u64,
            ..stat
        };
        let entry = FileEntry {
            stat,
            recorded_ns: self.walk.started_ns,
            id,
        };
        self.out
            .new
            .push((self.path.clone(), IndexNode::File(entry)));
    }
}
