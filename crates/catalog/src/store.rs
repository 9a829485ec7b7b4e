//! [`SqliteCatalog`]: opening, indexing, reconciling with the logs, rebuilding, deleting.
//! Queries are in [`crate::query`].

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dsh_session::{Event, SessionHeader, SessionPersistence, SessionSummary};
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::error::Error;
use crate::index::{Indexed, Pricer, Stamp, index_batch};
use crate::schema::{self, SEQ_BITS};
use crate::walk::{self, Found};
use dsh_catalog_api::LiveState;

/// How long a reconciliation keeps one write transaction open (other processes' writes
/// wait for it, up to the busy timeout).
const COMMIT_EVERY: Duration = Duration::from_millis(500);

/// The default time budget of one query.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);

/// Where a catalog lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A file (WAL mode).
    File(PathBuf),
    /// Memory only: the file could not be opened for writing (read-only `$DSH_HOME`).
    Memory,
}

/// Progress of a reconciliation or rebuild: `done` of `total` logs read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Logs read so far.
    pub done: usize,
    /// Logs to read.
    pub total: usize,
}

/// What a reconciliation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Logs looked at: every log on disk (a full sweep or a listing), or those where a change
    /// can be (an incremental pass, see [`crate::walk`]).
    pub logs: usize,
    /// Logs read again (new or changed since they were indexed).
    pub read: usize,
    /// Sessions forgotten (their log is gone).
    pub removed: usize,
    /// Logs that could not be read (catalogued as `unreadable`).
    pub unreadable: usize,
    /// Events indexed.
    pub events: u64,
}

/// What the catalog knows of a log: its path, length and modification time when last read.
type KnownLog = (Option<String>, Option<i64>, Option<i64>);

/// The SQLite catalog.
pub struct SqliteCatalog {
    pub(crate) conn: Mutex<Connection>,
    location: Location,
    pub(crate) pricer: Option<Pricer>,
    pub(crate) budget: Duration,
    pub(crate) rank_budget: Duration,
    reset: AtomicBool,
    log_root: Option<PathBuf>,
    /// The live table's file (`catalog-live.sqlite` next to a catalog file).
    live: Option<PathBuf>,
    sweep_every: Duration,
}

impl std::fmt::Debug for SqliteCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteCatalog")
            .field("location", &self.location)
            .field("reset", &self.was_reset())
            .finish_non_exhaustive()
    }
}

/// `$DSH_HOME/catalog.sqlite` (`DSH_HOME` defaults to `~/.dsh`).
pub fn default_path() -> PathBuf {
    dsh_home().join("catalog.sqlite")
}

/// `$DSH_HOME/sessions`, where the JSONL store keeps the logs by default.
pub fn default_log_root() -> PathBuf {
    dsh_home().join("sessions")
}

fn dsh_home() -> PathBuf {
    std::env::var_os("DSH_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".dsh")
        })
}

impl SqliteCatalog {
    fn with(conn: Connection, location: Location, reset: bool) -> Self {
        let live = match &location {
            Location::File(path) => Some(crate::live::live_path(path)),
            Location::Memory => None,
        };
        SqliteCatalog {
            conn: Mutex::new(conn),
            location,
            pricer: None,
            budget: DEFAULT_BUDGET,
            rank_budget: crate::query::RANK_BUDGET,
            reset: AtomicBool::new(reset),
            log_root: None,
            live,
            sweep_every: walk::SWEEP_EVERY,
        }
    }

    /// Opens the catalog file, creating it; a damaged or foreign file is replaced by an empty
    /// catalog ([`SqliteCatalog::was_reset`]).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, Error> {
        let path = path.into();
        let (conn, reset) = schema::open(&path)?;
        Ok(Self::with(conn, Location::File(path), reset))
    }

    /// An empty catalog in memory.
    pub fn open_in_memory() -> Result<Self, Error> {
        Ok(Self::with(schema::open_memory()?, Location::Memory, false))
    }

    /// The file at `path`, or memory when it cannot be written (read-only location): a
    /// listing or search then reads the logs into memory first.
    pub fn open_or_memory(path: impl Into<PathBuf>) -> Result<Self, Error> {
        let path = path.into();
        match Self::open(&path) {
            Ok(c) => Ok(c),
            Err(e) if e.is_read_only() => {
                tracing::info!(path = %path.display(), "the catalog is read-only, kept in memory: {e}");
                Self::open_in_memory()
            }
            Err(e) => Err(e),
        }
    }

    /// Prices usage (cost columns); without one, costs are 0.
    pub fn with_pricer(mut self, pricer: Pricer) -> Self {
        self.pricer = Some(pricer);
        self
    }

    /// The directory of the logs (`$DSH_HOME/sessions`, laid out as session-format §1 says):
    /// [`reconcile`](Self::reconcile) then finds the logs by walking it (a directory read and
    /// a `stat` per session) instead of reading every log's header through
    /// `SessionPersistence::list`. A missing directory falls back to the listing.
    pub fn with_log_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.log_root = Some(root.into());
        self
    }

    /// The longest time between two full sweeps of the log root (default
    /// [`walk::SWEEP_EVERY`]; zero: every reconciliation sweeps). See [`crate::walk`].
    pub fn with_sweep_every(mut self, every: Duration) -> Self {
        self.sweep_every = every;
        self
    }

    /// The time budget of one query (default [`DEFAULT_BUDGET`]).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// How long a search may rank every match before it ranks the matches of the most
    /// recently catalogued sessions only (default [`crate::RANK_BUDGET`]).
    pub fn with_rank_budget(mut self, budget: Duration) -> Self {
        self.rank_budget = budget;
        self
    }

    /// Where the catalog lives.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Whether opening replaced a damaged or foreign file with an empty catalog.
    pub fn was_reset(&self) -> bool {
        self.reset.load(Ordering::Relaxed)
    }

    /// Replaces a damaged catalog ([`Error::is_damage`]) with an empty one: the file and its
    /// WAL are deleted and created again (memory: emptied). Reconcile afterwards.
    pub fn recover(&self) -> Result<(), Error> {
        let mut conn = self.conn.lock();
        let fresh = match &self.location {
            Location::File(path) => {
                // Close the damaged file before deleting it.
                *conn = Connection::open_in_memory()?;
                schema::remove(path)?;
                schema::open(path)?.0
            }
            Location::Memory => schema::open_memory()?,
        };
        *conn = fresh;
        self.reset.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// What the writing processes last reported of their sessions (the live table next to the
    /// catalog file; none for a catalog in memory or a home where no process reported yet).
    /// A live table that cannot be read (a read-only home) lists nothing.
    pub fn live(&self) -> Result<Vec<dsh_catalog_api::LiveSession>, Error> {
        let Some(path) = &self.live else {
            return Ok(Vec::new());
        };
        match crate::live::LiveTable::open_existing(path) {
            Ok(Some(t)) => t.list(),
            Ok(None) => Ok(Vec::new()),
            Err(e) if e.is_read_only() => {
                tracing::info!(path = %path.display(), "the live table cannot be read: {e}");
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    /// Whether no session is catalogued.
    pub fn is_empty(&self) -> Result<bool, Error> {
        let conn = self.conn.lock();
        let any: Option<i64> = conn
            .query_row("SELECT sid FROM sessions LIMIT 1", [], |r| r.get(0))
            .optional()?;
        Ok(any.is_none())
    }

    /// Folds committed events of one session into the catalog, from its watermark on: events
    /// already indexed are skipped; a missing seq stops the batch (the next reconciliation
    /// reads the rest from the log).
    pub fn index_events<E: Borrow<Event>>(
        &self,
        header: &SessionHeader,
        events: &[E],
    ) -> Result<Indexed, Error> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = index_batch(&tx, header, events, None, self.pricer.as_ref())?;
        tx.commit()?;
        Ok(out)
    }

    /// Reads one stored log and folds what is new into the catalog. A log that shrank (a
    /// repair moved its tail aside) is indexed again from the start; a log that cannot be read
    /// is catalogued with status `unreadable` until it changes.
    pub fn index_log(
        &self,
        persistence: &dyn SessionPersistence,
        summary: &SessionSummary,
    ) -> Result<Indexed, Error> {
        let stamp = Stamp::of(&summary.path);
        let decoded = persistence.open_read(&summary.id);
        self.index_decoded(summary, stamp, decoded)
    }

    /// Folds a log read (or refused) by the caller into the catalog; `stamp` is the file's
    /// before it was read.
    fn index_decoded(
        &self,
        summary: &SessionSummary,
        stamp: Option<Stamp>,
        decoded: Result<dsh_session::codec::DecodedLog, dsh_session::SessionError>,
    ) -> Result<Indexed, Error> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = index_decoded(&tx, self.pricer.as_ref(), summary, stamp, decoded)?;
        tx.commit()?;
        Ok(out)
    }

    /// Brings the catalog in line with the logs on disk: new and changed logs are read (from
    /// each session's watermark), sessions whose log is gone are forgotten. Logs unchanged
    /// since they were read (same path, length and modification time) are not opened.
    pub fn reconcile(
        &self,
        persistence: &dyn SessionPersistence,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Reconciled, Error> {
        // What the writing processes reported: where an incremental scan looks.
        let live: Vec<(String, bool, i64)> = match self.log_root {
            Some(_) => self
                .live()
                .unwrap_or_default()
                .into_iter()
                .map(|l| (l.id, l.state != LiveState::Ended, l.updated_ms))
                .collect(),
            None => Vec::new(),
        };
        let started_ms = dsh_session::now_ms();
        let scanned = match self.log_root.as_deref() {
            Some(root) => walk::scan(&self.conn.lock(), root, &live, self.sweep_every)?,
            None => None,
        };
        let scanned_root = scanned.is_some();
        let found = match scanned {
            Some(f) => f,
            None => Found {
                logs: persistence.list()?,
                full: true,
                gone: Vec::new(),
                dirs: Vec::new(),
                reset_dirs: false,
            },
        };
        let logs = &found.logs;
        let known: HashMap<String, KnownLog> = {
            let conn = self.conn.lock();
            if found.full {
                let mut stmt =
                    conn.prepare_cached("SELECT id, path, file_len, file_mtime FROM sessions")?;
                let rows =
                    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))?;
                rows.collect::<Result<_, _>>()?
            } else {
                let mut stmt = conn.prepare_cached(
                    "SELECT path, file_len, file_mtime FROM sessions WHERE id = ?1",
                )?;
                let mut known = HashMap::new();
                for s in logs {
                    if let Some(k) = stmt
                        .query_row([&s.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .optional()?
                    {
                        known.insert(s.id.clone(), k);
                    }
                }
                known
            }
        };
        let mut out = Reconciled {
            logs: logs.len(),
            ..Default::default()
        };
        let stale: Vec<&String> = if found.full {
            let on_disk: HashSet<&str> = logs.iter().map(|s| s.id.as_str()).collect();
            known
                .keys()
                .filter(|id| !on_disk.contains(id.as_str()))
                .collect()
        } else {
            found.gone.iter().collect()
        };
        if !stale.is_empty() {
            let mut conn = self.conn.lock();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for id in &stale {
                forget(&tx, id)?;
            }
            tx.commit()?;
            out.removed = stale.len();
        }
        let mut work: Vec<(&SessionSummary, Option<Stamp>)> = logs
            .iter()
            .map(|s| (s, Stamp::of(&s.path)))
            .filter(|(s, now)| {
                let Some((path, len, mtime)) = known.get(&s.id) else {
                    return true;
                };
                path.as_deref() != Some(&*s.path.to_string_lossy())
                    || now.map(|n| n.len) != *len
                    || now.map(|n| n.mtime_ns) != *mtime
            })
            .collect();
        // Oldest first: newer sessions get the higher row ids (a search past its ranking budget
        // takes the highest).
        work.sort_by_key(|(_, stamp)| stamp.map_or(0, |s| s.mtime_ns));
        let record = scanned_root && (found.full || !found.dirs.is_empty());
        if work.is_empty() {
            if record {
                let mut conn = self.conn.lock();
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                walk::record(&tx, &found, started_ms)?;
                tx.commit()?;
            }
            return Ok(out);
        }
        let total = work.len();
        // Two threads: one reads and decodes the logs (the larger part of the work), this one
        // writes SQLite; a few decoded logs wait in between.
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(8);
            scope.spawn(move || {
                for (s, _) in work {
                    let stamp = Stamp::of(&s.path);
                    let decoded = persistence.open_read(&s.id);
                    if tx.send((s, stamp, decoded)).is_err() {
                        return;
                    }
                }
            });
            // Several logs per transaction: each commit writes its changed pages and a new
            // FTS5 segment, which later merges rewrite.
            let mut conn = self.conn.lock();
            let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut since = std::time::Instant::now();
            for (n, (s, stamp, decoded)) in rx.into_iter().enumerate() {
                let refused = decoded.is_err();
                let indexed = index_decoded(&tx, self.pricer.as_ref(), s, stamp, decoded)?;
                out.read += 1;
                out.events += indexed.events;
                if refused {
                    out.unreadable += 1;
                }
                if since.elapsed() >= COMMIT_EVERY {
                    tx.commit()?;
                    tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    since = std::time::Instant::now();
                }
                progress(Progress { done: n + 1, total });
            }
            if record {
                walk::record(&tx, &found, started_ms)?;
            }
            tx.commit()?;
            Ok(out)
        })
    }

    /// Empties the catalog and indexes every log again.
    pub fn rebuild(
        &self,
        persistence: &dyn SessionPersistence,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Reconciled, Error> {
        {
            let mut conn = self.conn.lock();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute_batch(
                "INSERT INTO docs(docs) VALUES ('delete-all'); DELETE FROM docs_text; \
                 DELETE FROM usage; DELETE FROM sessions; DELETE FROM dirs; DELETE FROM meta;",
            )?;
            tx.commit()?;
        }
        self.reconcile(persistence, progress)
    }

    /// Forgets a session. Unknown ids are not an error.
    pub fn delete(&self, id: &str) -> Result<(), Error> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        forget(&tx, id)?;
        tx.commit()?;
        Ok(())
    }

    /// Bytes of the catalog file (and its WAL), 0 in memory.
    pub fn file_size(&self) -> u64 {
        let Location::File(path) = &self.location else {
            return 0;
        };
        ["", "-wal"]
            .iter()
            .filter_map(|suffix| {
                let mut p = path.as_os_str().to_owned();
                p.push(suffix);
                std::fs::metadata(Path::new(&p)).ok()
            })
            .map(|m| m.len())
            .sum()
    }

    /// Folds the WAL into the main file (smaller file, for measuring).
    pub fn checkpoint(&self) -> Result<(), Error> {
        let conn = self.conn.lock();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// Folds a log read (or refused) by the caller into the catalog inside `tx`; `stamp` is the
/// file's before it was read.
fn index_decoded(
    tx: &Transaction<'_>,
    pricer: Option<&Pricer>,
    summary: &SessionSummary,
    stamp: Option<Stamp>,
    decoded: Result<dsh_session::codec::DecodedLog, dsh_session::SessionError>,
) -> Result<Indexed, Error> {
    let path = summary.path.to_string_lossy().into_owned();
    let out = match decoded {
        Ok(log) => {
            let known: Option<(Option<i64>, Option<i64>)> = tx
                .query_row(
                    "SELECT last_seq, file_len FROM sessions WHERE id = ?1",
                    [&summary.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let last = log.events.last().map(|e| e.seq() as i64);
            if let Some((seq, len)) = known {
                let shrank = stamp.zip(len).is_some_and(|(s, l)| s.len < l);
                if seq > last || shrank {
                    forget(tx, &summary.id)?;
                }
            }
            index_batch(
                tx,
                &log.header,
                &log.events,
                stamp.map(|s| (path.as_str(), s)),
                pricer,
            )?
        }
        Err(e) => {
            tracing::debug!(session = %summary.id, "unreadable log: {e}");
            let header = SessionHeader {
                parent_session: summary.parent_session.clone(),
                ..SessionHeader::new(summary.id.clone(), summary.created_at, summary.cwd.clone())
            };
            index_batch::<Event>(tx, &header, &[], None, None)?;
            tx.execute(
                "UPDATE sessions SET status = 'unreadable', title = coalesce(title, ?2), \
                 path = ?3, file_len = ?4, file_mtime = ?5 WHERE id = ?1",
                params![
                    summary.id,
                    summary.title,
                    path,
                    stamp.map(|s| s.len),
                    stamp.map(|s| s.mtime_ns)
                ],
            )?;
            Indexed::default()
        }
    };
    Ok(out)
}

/// Removes a session's row, documents and usage.
fn forget(tx: &Transaction<'_>, id: &str) -> Result<(), Error> {
    let sid: Option<i64> = tx
        .query_row("SELECT sid FROM sessions WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    let Some(sid) = sid else { return Ok(()) };
    let lo = sid << SEQ_BITS;
    let hi = lo | ((1i64 << SEQ_BITS) - 1);
    // An external-content index forgets a document given its text.
    {
        let mut texts =
            tx.prepare_cached("SELECT id, z FROM docs_text WHERE id BETWEEN ?1 AND ?2")?;
        let mut unindex =
            tx.prepare_cached("INSERT INTO docs(docs, rowid, body) VALUES ('delete', ?1, ?2)")?;
        let rows = texts.query_map(params![lo, hi], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (id, z) = row?;
            let body = crate::pack::unpack(&z).map_err(Error::Unpack)?;
            unindex.execute(params![id, body])?;
        }
    }
    tx.execute(
        "DELETE FROM docs_text WHERE id BETWEEN ?1 AND ?2",
        params![lo, hi],
    )?;
    tx.execute("DELETE FROM usage WHERE sid = ?1", [sid])?;
    tx.execute("DELETE FROM sessions WHERE sid = ?1", [sid])?;
    Ok(())
}
