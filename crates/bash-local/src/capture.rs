//! Reading one output pipe: bounded tail in memory, full stream to a private spill file.
//!
//! Memory per stream stays below `2 × cap + READ_CHUNK` whatever the command writes. The spill
//! file is only created once the stream outgrows the cap (small outputs touch no disk); it is
//! created `0600` with `create_new`, and deleted again if the stream outgrows the spill cap.
//! When the run has a session spill cap, the spill files of the whole directory stay within
//! it: a spill that would pass it is discarded and the stream reports
//! [`SpillSkipped::SessionCap`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use dsh_shell::{CapturedStream, SpillSkipped};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Bytes read from a pipe at once.
const READ_CHUNK: usize = 64 * 1024;

/// Where and how big one stream may spill.
#[derive(Debug, Clone)]
pub(crate) struct SpillTarget {
    /// Directory of the spill file (created `0700` if missing); `None` disables spilling.
    pub dir: Option<PathBuf>,
    /// File name of the spill file inside `dir`.
    pub file_name: String,
    /// Largest spill file; a longer stream abandons (deletes) its spill.
    pub cap: u64,
    /// The session's spill budget, shared by the streams of one run (`None`: no total cap).
    pub budget: Option<Arc<SpillBudget>>,
}

/// What the spill directory may still grow by during one run: the session's cap minus the
/// size of the files already in the directory (measured once, at the run's first spill).
/// Shared by the run's two streams; a discarded spill gives its bytes back.
#[derive(Debug)]
pub(crate) struct SpillBudget {
    cap: u64,
    dir: PathBuf,
    remaining: tokio::sync::Mutex<Option<u64>>,
}

impl SpillBudget {
    /// A budget of `cap` bytes in total for the files of `dir`.
    pub(crate) fn new(dir: PathBuf, cap: u64) -> Self {
        Self {
            cap,
            dir,
            remaining: tokio::sync::Mutex::new(None),
        }
    }

    /// Takes `bytes` from the budget; false (and nothing taken) when they do not fit.
    async fn reserve(&self, bytes: u64) -> bool {
        let mut remaining = self.remaining.lock().await;
        let left = match *remaining {
            Some(left) => left,
            None => {
                let dir = self.dir.clone();
                let used = tokio::task::spawn_blocking(move || dir_size(&dir))
                    .await
                    .unwrap_or(u64::MAX);
                self.cap.saturating_sub(used)
            }
        };
        if bytes > left {
            *remaining = Some(left);
            return false;
        }
        *remaining = Some(left - bytes);
        true
    }

    /// Gives `bytes` back (their file was deleted).
    async fn release(&self, bytes: u64) {
        if let Some(left) = self.remaining.lock().await.as_mut() {
            *left = left.saturating_add(bytes);
        }
    }
}

/// Total size of the regular files under `dir` (0 when it does not exist).
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// A unique stem for the spill files of one run: time, pid of the harness, a counter.
pub(crate) fn spill_stem() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("bash-{millis}-{}-{n}", std::process::id())
}

/// The last `cap` bytes of a stream, amortised O(1) per byte.
struct Tail {
    buf: Vec<u8>,
    cap: usize,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.cap {
            self.buf.clear();
            self.buf.extend_from_slice(&chunk[chunk.len() - self.cap..]);
            return;
        }
        self.buf.extend_from_slice(chunk);
        if self.buf.len() > self.cap.saturating_mul(2) {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.buf.len() > self.cap {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
        }
        self.buf.shrink_to_fit();
        self.buf
    }
}

enum Spill {
    /// The stream still fits in memory.
    NotStarted,
    /// Writing the whole stream to `path`.
    Writing {
        file: tokio::fs::File,
        path: PathBuf,
        written: u64,
    },
    /// No spill file, and why: disabled, failed, or over a cap.
    Abandoned(SpillSkipped),
}

async fn open_spill(dir: &Path, file_name: &str) -> std::io::Result<(tokio::fs::File, PathBuf)> {
    let mut builder = tokio::fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    builder.create(dir).await?;
    let path = dir.join(file_name);
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .await?;
    Ok((file, path))
}

async fn abandon(file: tokio::fs::File, path: &Path, written: u64, target: &SpillTarget) {
    drop(file);
    match tokio::fs::remove_file(path).await {
        Ok(()) => {
            if let Some(budget) = &target.budget {
                budget.release(written).await;
            }
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "could not delete an abandoned spill file");
        }
    }
}

/// Takes `bytes` from the run's session budget (true when there is none).
async fn reserve(target: &SpillTarget, bytes: u64) -> bool {
    match &target.budget {
        Some(budget) => budget.reserve(bytes).await,
        None => true,
    }
}

impl Spill {
    /// Feeds `chunk`; `before` is everything the stream wrote before it (only read when the
    /// spill starts, at which point it is the whole stream so far).
    async fn feed(&mut self, target: &SpillTarget, before: &[u8], chunk: &[u8], total: u64) {
        if matches!(self, Spill::NotStarted) {
            let Some(dir) = &target.dir else {
                *self = Spill::Abandoned(SpillSkipped::Unavailable);
                return;
            };
            if total > target.cap {
                *self = Spill::Abandoned(SpillSkipped::StreamCap { cap: target.cap });
                return;
            }
            if !reserve(target, before.len() as u64).await {
                *self = Spill::Abandoned(session_cap(target));
                return;
            }
            match open_spill(dir, &target.file_name).await {
                Ok((mut file, path)) => match file.write_all(before).await {
                    Ok(()) => {
                        *self = Spill::Writing {
                            file,
                            path,
                            written: before.len() as u64,
                        }
                    }
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "spill write failed");
                        abandon(file, &path, before.len() as u64, target).await;
                        *self = Spill::Abandoned(SpillSkipped::Unavailable);
                        return;
                    }
                },
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "could not create a spill file");
                    if let Some(budget) = &target.budget {
                        budget.release(before.len() as u64).await;
                    }
                    *self = Spill::Abandoned(SpillSkipped::Unavailable);
                    return;
                }
            }
        }
        if let Spill::Writing {
            file,
            path,
            written,
        } = self
        {
            let next = *written + chunk.len() as u64;
            let failed = if next > target.cap {
                tracing::debug!(path = %path.display(), cap = target.cap, "stream over the spill cap; spill discarded");
                Some(SpillSkipped::StreamCap { cap: target.cap })
            } else if !reserve(target, chunk.len() as u64).await {
                tracing::debug!(path = %path.display(), "session spill cap reached; spill discarded");
                Some(session_cap(target))
            } else if let Err(error) = file.write_all(chunk).await {
                tracing::warn!(path = %path.display(), %error, "spill write failed");
                // The chunk was reserved: count it as written so the release returns it.
                *written = next;
                Some(SpillSkipped::Unavailable)
            } else {
                *written = next;
                None
            };
            if let Some(reason) = failed {
                let old = std::mem::replace(self, Spill::Abandoned(reason));
                if let Spill::Writing {
                    file,
                    path,
                    written,
                } = old
                {
                    abandon(file, &path, written, target).await;
                }
            }
        }
    }

    async fn finish(self, target: &SpillTarget) -> Result<Option<PathBuf>, SpillSkipped> {
        match self {
            Spill::Writing {
                mut file,
                path,
                written,
            } => match file.flush().await {
                Ok(()) => Ok(Some(path)),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "spill flush failed");
                    abandon(file, &path, written, target).await;
                    Err(SpillSkipped::Unavailable)
                }
            },
            Spill::NotStarted => Ok(None),
            Spill::Abandoned(reason) => Err(reason),
        }
    }
}

fn session_cap(target: &SpillTarget) -> SpillSkipped {
    SpillSkipped::SessionCap {
        cap: target.budget.as_ref().map_or(0, |b| b.cap),
    }
}

/// Reads `reader` to its end (or until `stop` fires) and returns the captured stream.
pub(crate) async fn capture<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: usize,
    spill_target: SpillTarget,
    stop: CancellationToken,
) -> CapturedStream {
    let cap = cap.max(1);
    let mut tail = Tail::new(cap);
    let mut spill = Spill::NotStarted;
    let mut total: u64 = 0;
    // Read into spare capacity (`read_buf`): zeroing 64 KiB for every stream of every call
    // cost more than the rest of a short command's capture.
    let mut buf = Vec::with_capacity(READ_CHUNK);
    loop {
        buf.clear();
        let n = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) => break,
                Ok(n) => n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    tracing::warn!(%error, "reading command output failed");
                    break;
                }
            },
        };
        let chunk = &buf[..n];
        let next_total = total + n as u64;
        if next_total > cap as u64 && !matches!(spill, Spill::Abandoned(_)) {
            spill
                .feed(&spill_target, &tail.buf, chunk, next_total)
                .await;
        }
        tail.push(chunk);
        total = next_total;
    }
    let truncated = total > cap as u64;
    let (spill_path, spill_skipped) = match spill.finish(&spill_target).await {
        Ok(path) => (path, None),
        Err(reason) => (None, truncated.then_some(reason)),
    };
    CapturedStream {
        tail: tail.finish(),
        total_bytes: total,
        truncated,
        spill_path,
        spill_skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_bytes() {
        let mut t = Tail::new(4);
        for chunk in [&b"ab"[..], b"cd", b"ef", b"g"] {
            t.push(chunk);
            assert!(t.buf.len() <= 8);
        }
        assert_eq!(t.finish(), b"defg");
        let mut t = Tail::new(4);
        t.push(b"0123456789");
        assert_eq!(t.finish(), b"6789");
    }

    #[tokio::test]
    async fn spill_only_when_over_cap_and_holds_whole_stream() {
        let dir = tempfile::tempdir().unwrap();
        let target = |name: &str| SpillTarget {
            dir: Some(dir.path().join("spill")),
            file_name: name.into(),
            cap: 1 << 20,
            budget: None,
        };
        let small = capture(&b"hello"[..], 8, target("a"), CancellationToken::new()).await;
        assert_eq!(small.tail, b"hello");
        assert!(!small.truncated);
        assert_eq!(small.spill_path, None);
        assert!(!dir.path().join("spill").join("a").exists());

        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let big = capture(&data[..], 1000, target("b"), CancellationToken::new()).await;
        assert!(big.truncated);
        assert_eq!(big.total_bytes, data.len() as u64);
        assert_eq!(big.tail, &data[data.len() - 1000..]);
        let path = big.spill_path.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[tokio::test]
    async fn spill_over_its_cap_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let target = SpillTarget {
            dir: Some(dir.path().to_path_buf()),
            file_name: "c".into(),
            cap: 5000,
            budget: None,
        };
        let data = vec![b'x'; 10_000];
        let s = capture(&data[..], 100, target, CancellationToken::new()).await;
        assert!(s.truncated);
        assert_eq!(s.total_bytes, 10_000);
        assert_eq!(s.spill_path, None);
        assert_eq!(s.spill_skipped, Some(SpillSkipped::StreamCap { cap: 5000 }));
        assert!(!dir.path().join("c").exists());
    }

    #[tokio::test]
    async fn session_cap_counts_existing_files_and_is_shared() {
        let dir = tempfile::tempdir().unwrap();
        // 3,000 bytes of earlier spills are already there; the session may hold 10,000.
        std::fs::write(dir.path().join("old"), vec![b'o'; 3000]).unwrap();
        let budget = Arc::new(SpillBudget::new(dir.path().to_path_buf(), 10_000));
        let target = |name: &str| SpillTarget {
            dir: Some(dir.path().to_path_buf()),
            file_name: name.into(),
            cap: 1 << 20,
            budget: Some(budget.clone()),
        };
        // 5,000 bytes fit (8,000 in total) and are spilled.
        let first = vec![b'a'; 5000];
        let s = capture(&first[..], 100, target("first"), CancellationToken::new()).await;
        assert_eq!(std::fs::read(s.spill_path.unwrap()).unwrap(), first);
        assert_eq!(s.spill_skipped, None);
        // 5,000 more would make 13,000: not written, and the reason is reported.
        let second = vec![b'b'; 5000];
        let s = capture(&second[..], 100, target("second"), CancellationToken::new()).await;
        assert!(s.truncated);
        assert_eq!(s.spill_path, None);
        assert_eq!(
            s.spill_skipped,
            Some(SpillSkipped::SessionCap { cap: 10_000 })
        );
        assert!(!dir.path().join("second").exists());
        // The discarded spill gave its bytes back: 1,500 still fit.
        let third = vec![b'c'; 1500];
        let s = capture(&third[..], 100, target("third"), CancellationToken::new()).await;
        assert_eq!(std::fs::read(s.spill_path.unwrap()).unwrap(), third);
        assert_eq!(dir_size(dir.path()), 9500);
    }
}
