//! The catalog's tables, and opening a file: WAL, a busy timeout, the schema version, and a
//! damaged or foreign file replaced by an empty catalog.

use std::path::Path;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::Error;

/// The schema version (`PRAGMA user_version`). A file with another version is rebuilt.
pub const SCHEMA_VERSION: i64 = 4;

/// The page size of a new catalog file (SQLite's default, stated). Every commit writes each
/// page it changed in full; smaller pages cut the bytes a turn's commit writes (measured on a
/// 20-step session into a 300-session catalog: ~53-152 KB with 4 KiB pages, ~26-30 KB with
/// 1 KiB) but cost the catalog's size budget (10,000 sessions: 32.0% of the logs with 1 KiB
/// pages, over the 30% budget), indexing time and search latency.
pub(crate) const PAGE_SIZE: i64 = 4096;

/// Pages of cache per connection (negative: KiB): the sessions table of 10,000 sessions
/// fits, so stats and lists do not read it from the file again.
const CACHE_KIB: i64 = 32 * 1024;

/// How long a writer waits for another process's transaction.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Index rows are keyed `sid << 32 | seq`: one row per event at most.
pub(crate) const SEQ_BITS: u32 = 32;

const DDL: &str = r#"
CREATE TABLE sessions(
  sid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  parent TEXT,
  title TEXT,
  cwd TEXT NOT NULL,
  project TEXT NOT NULL,
  provider TEXT,
  model TEXT,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  turns INTEGER NOT NULL DEFAULT 0,
  cur_turn INTEGER NOT NULL DEFAULT 0,
  open_turn INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT '-',
  requests INTEGER NOT NULL DEFAULT 0,
  tokens_in INTEGER NOT NULL DEFAULT 0,
  tokens_out INTEGER NOT NULL DEFAULT 0,
  tokens_cached INTEGER NOT NULL DEFAULT 0,
  cost_pico INTEGER NOT NULL DEFAULT 0,
  first_prompt TEXT NOT NULL DEFAULT '',
  last_prompt TEXT NOT NULL DEFAULT '',
  last_seq INTEGER,
  path TEXT,
  file_len INTEGER,
  file_mtime INTEGER
);
CREATE INDEX sessions_updated ON sessions(updated_ms);
CREATE TABLE docs_text(
  id INTEGER PRIMARY KEY,
  turn INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  z BLOB NOT NULL
);
CREATE VIEW docs_body(id, body) AS SELECT id, catalog_unpack(z) FROM docs_text;
CREATE VIRTUAL TABLE docs USING fts5(
  body,
  content = 'docs_body',
  content_rowid = 'id',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co So'"
);
CREATE TABLE usage(
  sid INTEGER NOT NULL,
  project TEXT NOT NULL,
  day TEXT NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  turns INTEGER NOT NULL DEFAULT 0,
  requests INTEGER NOT NULL DEFAULT 0,
  tokens_in INTEGER NOT NULL DEFAULT 0,
  tokens_out INTEGER NOT NULL DEFAULT 0,
  tokens_cached INTEGER NOT NULL DEFAULT 0,
  cost_pico INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sid, day, provider, model)
) WITHOUT ROWID;
CREATE INDEX usage_day ON usage(day);
"#;

/// Opens (creating if needed) the catalog at `path`. A damaged or foreign file is deleted
/// (with its `-wal` and `-shm`) and replaced by an empty catalog; `Ok((conn, true))` then.
pub(crate) fn open(path: &Path) -> Result<(Connection, bool), Error> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    match open_file(path) {
        Ok(c) => Ok((c, false)),
        Err(e) if e.is_damage() => {
            tracing::warn!(path = %path.display(), "the catalog is damaged, rebuilding it: {e}");
            remove(path)?;
            Ok((open_file(path)?, true))
        }
        Err(e) => Err(e),
    }
}

/// Deletes a catalog file and its WAL companions (missing ones are fine).
pub(crate) fn remove(path: &Path) -> Result<(), Error> {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(Error::Io {
                    path: p.into(),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Opens `path` with the busy timeout, `page_size` (only a new, empty file takes it; the WAL
/// switch fixes it) and the WAL journal: the catalog's and the live table's shared opening.
pub(crate) fn open_wal(path: &Path, page_size: i64) -> Result<Connection, Error> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "page_size", page_size)?;
    // Switching to WAL takes a short exclusive lock, which the busy handler does not cover:
    // several processes opening a fresh file at once retry it.
    let mut tries = 0;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => break,
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && tries < 200 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(conn)
}

fn open_file(path: &Path) -> Result<Connection, Error> {
    let conn = open_wal(path, PAGE_SIZE)?;
    // A derived index: a power cut may lose the last transactions, which the logs restore.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    // The last connection to close leaves the WAL as it is instead of copying it into the
    // file: a short process (one `dsh exec`) writes its turn's pages once, and the copy is
    // made for many sessions at once when the WAL reaches its checkpoint size (SQLite's
    // 1,000 pages), a page changed by several sessions copied once.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    crate::pack::register(&conn)?;
    migrate(conn)
}

/// An in-memory catalog (a read-only `$DSH_HOME`: listed and searched from the logs).
pub(crate) fn open_memory() -> Result<Connection, Error> {
    let conn = Connection::open_in_memory()?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    crate::pack::register(&conn)?;
    migrate(conn)
}

fn migrate(mut conn: Connection) -> Result<Connection, Error> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == SCHEMA_VERSION {
        // The scan's tables came after version 4's first files (no rebuild for them).
        let has: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE name = 'meta'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if has.is_none() {
            conn.execute_batch(crate::walk::DDL)?;
        }
        return Ok(conn);
    }
    if version != 0 {
        return Err(Error::Version {
            found: version,
            expected: SCHEMA_VERSION,
        });
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        tx.execute_batch(DDL)?;
        tx.execute_batch(crate::walk::DDL)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(conn)
}
