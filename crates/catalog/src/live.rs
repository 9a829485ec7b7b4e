//! The live table: which sessions dsh processes hold open and what they are doing, in
//! `catalog-live.sqlite` next to the catalog.
//!
//! A writing process reports a session when it first commits to it, when a turn starts and
//! when it ends, and marks its sessions ended when it closes them. The file is its own small
//! database on 512-byte pages (WAL): a report rewrites one small page, where a row of the
//! catalog (4 KiB pages, a dozen B-trees per indexed turn) would rewrite tens of kilobytes per
//! turn (issue 33's write amplification). Rows whose process is gone without closing them (a
//! kill, a crash) read as [`LiveState::Gone`] on the same host (no process has the pid, or
//! another process does: its start time differs).

use std::path::{Path, PathBuf};

use dsh_catalog_api::{LiveSession, LiveState};
use parking_lot::Mutex;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::Error;
use crate::schema::{open_wal, remove};

/// The schema version of the live file (`PRAGMA user_version`); another is recreated.
const VERSION: i64 = 1;

/// Pages of the live file: a report rewrites one.
const PAGE_SIZE: i64 = 512;

/// Rows of ended sessions are kept this long (`dsh ps --all` shows them), then pruned.
pub const KEEP_ENDED_MS: i64 = 24 * 3_600_000;

const DDL: &str = "CREATE TABLE live(
  id TEXT PRIMARY KEY,
  pid INTEGER NOT NULL,
  proc_start TEXT NOT NULL,
  host TEXT NOT NULL,
  cwd TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  state TEXT NOT NULL
) WITHOUT ROWID;";

/// The live file of a catalog file: `catalog.sqlite` → `catalog-live.sqlite`.
pub fn live_path(catalog: &Path) -> PathBuf {
    let stem = catalog
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "catalog".into());
    catalog.with_file_name(format!("{stem}-live.sqlite"))
}

/// A session's state as its writing process reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Session id.
    pub id: String,
    /// Its working directory.
    pub cwd: String,
    /// When this process opened it, epoch ms.
    pub started_ms: i64,
    /// The current turn.
    pub turn: u64,
    /// [`LiveState::Working`] or [`LiveState::Idle`] (or [`LiveState::Ended`]).
    pub state: LiveState,
    /// The time of the report, epoch ms.
    pub at_ms: i64,
}

/// This process as the live table names it.
#[derive(Debug, Clone)]
struct Me {
    pid: u32,
    /// The process's start time (`/proc/self/stat`, clock ticks since boot): a pid reused by
    /// another process has another.
    start: String,
    host: String,
}

fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_default()
}

/// The start time of process `pid` (`/proc/PID/stat` field 22), `None` when there is none.
fn proc_start(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19).map(str::to_owned)
}

fn me() -> Me {
    Me {
        pid: std::process::id(),
        start: proc_start("self").unwrap_or_default(),
        host: hostname(),
    }
}

fn state_of(s: &str) -> LiveState {
    match s {
        "working" => LiveState::Working,
        "idle" => LiveState::Idle,
        "gone" => LiveState::Gone,
        _ => LiveState::Ended,
    }
}

/// The live table of one catalog.
pub struct LiveTable {
    conn: Mutex<Connection>,
    me: Me,
}

impl std::fmt::Debug for LiveTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTable").finish_non_exhaustive()
    }
}

impl LiveTable {
    /// Opens (creating if needed) the live file at `path`; a damaged or foreign one is
    /// replaced by an empty one.
    pub fn open(path: &Path) -> Result<Self, Error> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = match open_file(path) {
            Ok(c) => c,
            Err(e) if e.is_damage() => {
                tracing::warn!(path = %path.display(), "the live table is damaged, recreating it: {e}");
                remove(path)?;
                open_file(path)?
            }
            Err(e) => return Err(e),
        };
        Ok(LiveTable {
            conn: Mutex::new(conn),
            me: me(),
        })
    }

    /// The live file at `path` if it exists (a reader never creates it).
    pub fn open_existing(path: &Path) -> Result<Option<Self>, Error> {
        if !path.exists() {
            return Ok(None);
        }
        Self::open(path).map(Some)
    }

    /// Writes reports of this process in one transaction (the last report of a session wins)
    /// and prunes rows of sessions ended more than [`KEEP_ENDED_MS`] ago.
    pub fn report(&self, reports: &[Report]) -> Result<(), Error> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut up = tx.prepare_cached(
                "INSERT INTO live(id, pid, proc_start, host, cwd, started_ms, updated_ms, turn, \
                 state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(id) DO UPDATE SET \
                 pid = excluded.pid, proc_start = excluded.proc_start, host = excluded.host, \
                 cwd = excluded.cwd, started_ms = excluded.started_ms, \
                 updated_ms = excluded.updated_ms, turn = excluded.turn, state = excluded.state",
            )?;
            for r in reports {
                up.execute(params![
                    r.id,
                    self.me.pid,
                    self.me.start,
                    self.me.host,
                    r.cwd,
                    r.started_ms,
                    r.at_ms,
                    i64::try_from(r.turn).unwrap_or(i64::MAX),
                    r.state.as_str()
                ])?;
            }
        }
        if let Some(at) = reports.iter().map(|r| r.at_ms).max() {
            // Cheap when nothing is that old: an index-free scan of a few small pages.
            let old = at - KEEP_ENDED_MS;
            let any: Option<i64> = tx
                .query_row(
                    "SELECT 1 FROM live WHERE state = 'ended' AND updated_ms < ?1 LIMIT 1",
                    [old],
                    |r| r.get(0),
                )
                .optional()?;
            if any.is_some() {
                tx.execute(
                    "DELETE FROM live WHERE state = 'ended' AND updated_ms < ?1",
                    [old],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Every row, most recently updated first; rows of working or idle sessions whose process
    /// is gone (same host, pid absent or reused) read as [`LiveState::Gone`].
    pub fn list(&self) -> Result<Vec<LiveSession>, Error> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT id, pid, proc_start, host, cwd, started_ms, updated_ms, turn, state FROM live \
             ORDER BY updated_ms DESC, id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                LiveSession {
                    id: r.get(0)?,
                    pid: u32::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                    host: r.get(3)?,
                    cwd: r.get(4)?,
                    started_ms: r.get(5)?,
                    updated_ms: r.get(6)?,
                    turn: u64::try_from(r.get::<_, i64>(7)?).unwrap_or(0),
                    state: state_of(&r.get::<_, String>(8)?),
                },
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (mut s, start) = row?;
            if s.state.is_live()
                && s.host == self.me.host
                && proc_start(&s.pid.to_string()).is_none_or(|now| now != start)
            {
                s.state = LiveState::Gone;
            }
            out.push(s);
        }
        Ok(out)
    }
}

fn open_file(path: &Path) -> Result<Connection, Error> {
    let conn = open_wal(path, PAGE_SIZE)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // The last connection to close leaves the WAL as it is instead of copying it into the
    // file: every `dsh exec` closes the live table, and the copy on close was a quarter of its
    // bytes (500 processes of four reports each: 4.4 KB written per process with the copy,
    // 3.2 KB without). SQLite's autocheckpoint (1,000 pages) bounds the WAL at ~540 KB.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    let mut conn = conn;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == VERSION {
        return Ok(conn);
    }
    if version != 0 {
        return Err(Error::Version {
            found: version,
            expected: VERSION,
        });
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        tx.execute_batch(DDL)?;
        tx.pragma_update(None, "user_version", VERSION)?;
    }
    tx.commit()?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: &str, state: LiveState, at_ms: i64) -> Report {
        Report {
            id: id.into(),
            cwd: "/w".into(),
            started_ms: 1,
            turn: 2,
            state,
            at_ms,
        }
    }

    #[test]
    fn reports_upsert_and_old_ended_rows_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let path = live_path(&dir.path().join("catalog.sqlite"));
        assert_eq!(path, dir.path().join("catalog-live.sqlite"));
        let t = LiveTable::open(&path).unwrap();
        t.report(&[report("a", LiveState::Working, 10)]).unwrap();
        t.report(&[
            report("a", LiveState::Idle, 20),
            report("b", LiveState::Ended, 15),
        ])
        .unwrap();
        let rows = t.list().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].id.as_str(), rows[0].state), ("a", LiveState::Idle));
        assert_eq!(rows[0].pid, std::process::id());
        assert_eq!(rows[0].turn, 2);
        assert_eq!(rows[1].state, LiveState::Ended);
        t.report(&[report("a", LiveState::Idle, 15 + KEEP_ENDED_MS + 1)])
            .unwrap();
        let ids: Vec<String> = t.list().unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["a"]);
    }

    #[test]
    fn a_row_whose_process_is_gone_reads_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog-live.sqlite");
        let t = LiveTable::open(&path).unwrap();
        t.report(&[report("a", LiveState::Working, 10)]).unwrap();
        // Another start time under the same pid: a reused pid.
        t.conn
            .lock()
            .execute("UPDATE live SET proc_start = 'x'", [])
            .unwrap();
        assert_eq!(t.list().unwrap()[0].state, LiveState::Gone);
        // Another host cannot be checked: its word is taken.
        t.conn
            .lock()
            .execute("UPDATE live SET host = 'elsewhere'", [])
            .unwrap();
        assert_eq!(t.list().unwrap()[0].state, LiveState::Working);
    }
}
