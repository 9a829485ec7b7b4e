//! Resume prefetch: a front end that knows which stored session it is about to continue
//! (`dsh exec --resume ID`) starts reading it on a thread before the composition is up, so the
//! read overlaps plugin start-up. The store's write open adopts the result only when the file
//! is provably the one that was read: same path, and the same identity, size and change times
//! (`dev`, `ino`, `len`, `mtime`, `ctime`) before the read, after it, and again under the
//! session lock. Writers only ever append to a log or publish a new file, so any write in
//! between changes one of them; the store then reads the file again, as without a prefetch.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use dsh_session::codec::DecodedLog;
use parking_lot::Mutex;

use crate::store::{JsonlStore, Selected};

/// What a write open needs from a read: the decoded log, the kept length of a zstd log and
/// the bytes a zstd tail repair recovered.
pub(crate) type Read = (DecodedLog, Option<u64>, Vec<u8>);

/// The one pending prefetch of this process.
static SLOT: Mutex<Option<Pending>> = Mutex::new(None);

/// How many write opens of this process adopted a prefetched read.
static ADOPTED: AtomicU64 = AtomicU64::new(0);

struct Pending {
    root: PathBuf,
    id: String,
    state: State,
}

enum State {
    Reading(JoinHandle<Option<Fetched>>),
    Done(Option<Box<Fetched>>),
}

impl State {
    fn finish(self) -> Option<Box<Fetched>> {
        match self {
            State::Reading(handle) => handle.join().ok().flatten().map(Box::new),
            State::Done(fetched) => fetched,
        }
    }
}

struct Fetched {
    path: PathBuf,
    stamp: Stamp,
    read: Read,
}

/// The identity and change state of a file.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    unix: (u64, u64, i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let unix = {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())
    };
    Some(Stamp {
        len: m.len(),
        modified: m.modified().ok(),
        #[cfg(unix)]
        unix,
    })
}

/// Starts reading session `id` of the store at `root` on a thread (replacing an earlier
/// prefetch). Nothing is locked or written; a failed or unused prefetch costs only the read.
pub fn start(root: PathBuf, id: &str) {
    let store = JsonlStore::new(root.clone());
    let owned = id.to_owned();
    let spawned = std::thread::Builder::new()
        .name("dsh-prefetch".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let (_, sel) = store.locate(&owned).ok()?;
            let before = stamp(&sel.path)?;
            let read = store.read_selected(&owned, &sel).ok()?;
            tracing::debug!(
                id = %owned,
                events = read.0.events.len(),
                ms = started.elapsed().as_secs_f64() * 1e3,
                "resume prefetch read"
            );
            (stamp(&sel.path)? == before).then_some(Fetched {
                path: sel.path,
                stamp: before,
                read,
            })
        });
    match spawned {
        Ok(handle) => {
            *SLOT.lock() = Some(Pending {
                root,
                id: id.to_owned(),
                state: State::Reading(handle),
            });
        }
        Err(error) => tracing::debug!(%error, "resume prefetch not started"),
    }
}

/// The prefetched read of `sel` (session `id` under `root`), when one was started for it and
/// the file has not changed since. Called under the session lock.
pub(crate) fn take(root: &Path, id: &str, sel: &Selected) -> Option<Read> {
    let mut slot = SLOT.lock();
    if !slot.as_ref().is_some_and(|p| p.root == root && p.id == id) {
        return None;
    }
    let pending = slot.take()?;
    drop(slot);
    let waited = std::time::Instant::now();
    let fetched = pending.state.finish()?;
    tracing::debug!(%id, waited_ms = waited.elapsed().as_secs_f64() * 1e3, "resume prefetch joined");
    if fetched.path != sel.path || stamp(&sel.path)? != fetched.stamp {
        tracing::debug!(%id, "resume prefetch discarded: the log changed");
        return None;
    }
    ADOPTED.fetch_add(1, Ordering::Relaxed);
    Some(fetched.read)
}

/// Waits until a started prefetch has finished reading (its result stays pending): lets tests
/// and benchmarks change the file after the read, deterministically.
pub fn settle() {
    let mut slot = SLOT.lock();
    if let Some(p) = slot.as_mut() {
        let state = std::mem::replace(&mut p.state, State::Done(None));
        p.state = State::Done(state.finish());
    }
}

/// How many write opens of this process adopted a prefetched read (a diagnostic).
pub fn adopted() -> u64 {
    ADOPTED.load(Ordering::Relaxed)
}
