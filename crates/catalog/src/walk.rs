//! Finding the logs under the log root (session-format §1: `<project>/<encodeSegment(id)>/
//! session.vN.jsonl[.zstd]`), in full or only where something may have changed.
//!
//! A full sweep reads every session directory (a directory read and a `stat` per session:
//! ~200 ms for 10,000 sessions on a busy 2-core machine). Between sweeps (at most
//! [`SWEEP_EVERY`] apart) an incremental pass looks only where a change can be:
//! - the root's and each project directory's modification time (a session directory created
//!   or removed changes its project directory's): a changed one is read again, its new
//!   session directories walked and its vanished ones forgotten;
//! - the sessions in the live table that are open, or were reported since the last sweep
//!   (a dsh process writing them);
//! - the [`RECENT`] most recently updated sessions (another program resuming a recent one).
//!
//! Appends by a program that does not report to the live table (the original harness, a dsh
//! without the catalog plugin) to a session outside the recent ones are found by the next
//! sweep. Directory times within [`RACY`] of now are not trusted (stored as unknown), so a
//! change in the same clock tick as a look is not missed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_session::SessionSummary;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Error;

/// The longest time between two full sweeps.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The most recently updated sessions whose logs every pass checks.
pub const RECENT: i64 = 64;

/// Directory times this close to now are stored as unknown (looked at again next time).
const RACY: Duration = Duration::from_secs(2);

/// Live-table rows reported this long before the last sweep are still checked (clock skew
/// between processes).
const LIVE_SLACK_MS: i64 = 5_000;

/// The scan state tables (created on open; an older file of the same schema gets them).
pub(crate) const DDL: &str = "CREATE TABLE IF NOT EXISTS dirs(
  path TEXT PRIMARY KEY,
  mtime_ns INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;";

/// What a scan found.
pub(crate) struct Found {
    /// Logs to compare with what the catalog knows of them (path, length, time).
    pub logs: Vec<SessionSummary>,
    /// A full sweep (every other catalogued session is gone), else an incremental pass.
    pub full: bool,
    /// Sessions whose directory is gone (incremental passes).
    pub gone: Vec<String>,
    /// Directory times to store (`None`: unknown, -1).
    pub dirs: Vec<(String, Option<i64>)>,
    /// Forget the stored times of every directory first (a full sweep).
    pub reset_dirs: bool,
}

fn mtime_ns(m: &std::fs::Metadata) -> Option<i64> {
    m.modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
}

/// A directory's modification time, `None` when missing or too recent to trust.
fn trusted_mtime(path: &Path) -> Option<i64> {
    let t = mtime_ns(&std::fs::metadata(path).ok()?)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())?;
    let racy = i64::try_from(RACY.as_nanos()).unwrap_or(i64::MAX);
    (t < now - racy).then_some(t)
}

fn now_ms() -> i64 {
    dsh_session::now_ms()
}

fn key(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Scans `root`: a full sweep when the last one is `every` old (or unknown),
/// else an incremental pass. `live` are the live table's rows (id, open, updated ms). `None`
/// when `root` cannot be read.
pub(crate) fn scan(
    conn: &Connection,
    root: &Path,
    live: &[(String, bool, i64)],
    every: Duration,
) -> Result<Option<Found>, Error> {
    let swept: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE key = 'swept_ms'", [], |r| {
            r.get(0)
        })
        .optional()?;
    let sweep_ms = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
    let Some(swept) = swept.filter(|s| now_ms() - s < sweep_ms && *s <= now_ms()) else {
        return Ok(sweep(root));
    };
    incremental(conn, root, live, swept)
}

/// Every log under `root`, and the directory times.
pub(crate) fn sweep(root: &Path) -> Option<Found> {
    let root_time = trusted_mtime(root);
    let mut dirs = vec![(key(root), root_time)];
    let mut logs = Vec::new();
    for project in std::fs::read_dir(root).ok()?.filter_map(Result::ok) {
        let path = project.path();
        let time = trusted_mtime(&path);
        let Ok(sessions) = std::fs::read_dir(&path) else {
            continue;
        };
        dirs.push((key(&path), time));
        for dir in sessions.filter_map(Result::ok) {
            if let Some(s) = session_dir(&dir.path()) {
                logs.push(s);
            }
        }
    }
    Some(Found {
        logs,
        full: true,
        gone: Vec::new(),
        dirs,
        reset_dirs: true,
    })
}

/// The log of one session directory (its highest generation), as a summary holding the id
/// and the path only.
fn session_dir(dir: &Path) -> Option<SessionSummary> {
    let id = dir.file_name()?.to_str().and_then(decode_segment)?;
    let (version, path) = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|f| {
            let n = f.file_name().to_str().and_then(generation)?;
            Some((n, f.path()))
        })
        .max_by_key(|(n, _)| *n)?;
    Some(SessionSummary {
        id,
        created_at: 0,
        cwd: None,
        parent_session: None,
        version,
        path,
        title: None,
    })
}

fn incremental(
    conn: &Connection,
    root: &Path,
    live: &[(String, bool, i64)],
    swept: i64,
) -> Result<Option<Found>, Error> {
    let stored: HashMap<String, i64> = {
        let mut stmt = conn.prepare_cached("SELECT path, mtime_ns FROM dirs")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let root_key = key(root);
    let mut dirs: Vec<(String, Option<i64>)> = Vec::new();
    let unchanged = |path: &str, now: Option<i64>| {
        now.is_some() && stored.get(path).copied() == now && now != Some(-1)
    };
    // The project directories: the stored ones, or the root read again when it changed.
    let root_time = trusted_mtime(root);
    let mut vanished: Vec<String> = Vec::new();
    let projects: Vec<PathBuf> = if unchanged(&root_key, root_time) {
        stored
            .keys()
            .filter(|k| **k != root_key)
            .map(PathBuf::from)
            .collect()
    } else {
        let Ok(entries) = std::fs::read_dir(root) else {
            return Ok(None);
        };
        dirs.push((root_key.clone(), root_time));
        let now: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        let present: HashSet<String> = now.iter().map(|p| key(p)).collect();
        vanished.extend(
            stored
                .keys()
                .filter(|k| **k != root_key && !present.contains(*k))
                .cloned(),
        );
        now
    };
    // Changed project directories: their session directories against the catalogued ones.
    let mut changed: Vec<(PathBuf, Option<i64>)> = Vec::new();
    for p in projects {
        let k = key(&p);
        let t = trusted_mtime(&p);
        if !unchanged(&k, t) {
            changed.push((p, t));
        }
    }
    let mut logs: Vec<SessionSummary> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    if !changed.is_empty() || !vanished.is_empty() {
        // Catalogued sessions by project directory (the parent of their session directory).
        let mut by_project: HashMap<String, Vec<(String, String)>> = HashMap::new();
        {
            let mut stmt =
                conn.prepare_cached("SELECT id, path FROM sessions WHERE path IS NOT NULL")?;
            let rows =
                stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            for row in rows {
                let (id, path) = row?;
                let sdir = Path::new(&path).parent().map(key).unwrap_or_default();
                let project = Path::new(&sdir).parent().map(key).unwrap_or_default();
                by_project.entry(project).or_default().push((id, sdir));
            }
        }
        for v in &vanished {
            gone.extend(
                by_project
                    .remove(v)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(id, _)| id),
            );
            dirs.push((v.clone(), None));
        }
        for (p, t) in changed {
            let Ok(entries) = std::fs::read_dir(&p) else {
                continue;
            };
            let present: HashSet<String> = entries
                .filter_map(Result::ok)
                .map(|e| key(&e.path()))
                .collect();
            let known = by_project.remove(&key(&p)).unwrap_or_default();
            let known_dirs: HashSet<&str> = known.iter().map(|(_, d)| d.as_str()).collect();
            for d in &present {
                if !known_dirs.contains(d.as_str())
                    && let Some(s) = session_dir(Path::new(d))
                {
                    logs.push(s);
                }
            }
            gone.extend(
                known
                    .iter()
                    .filter(|(_, d)| !present.contains(d))
                    .map(|(id, _)| id.clone()),
            );
            dirs.push((key(&p), t));
        }
    }
    // Sessions written now or lately by a dsh process, and the most recently updated ones.
    let mut check: Vec<String> = live
        .iter()
        .filter(|(_, open, updated)| *open || *updated >= swept - LIVE_SLACK_MS)
        .map(|(id, _, _)| id.clone())
        .collect();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM sessions WHERE path IS NOT NULL ORDER BY updated_ms DESC LIMIT ?1",
        )?;
        let rows = stmt.query_map([RECENT], |r| r.get::<_, String>(0))?;
        for row in rows {
            check.push(row?);
        }
    }
    let mut seen: HashSet<String> = logs.iter().map(|s| s.id.clone()).collect();
    seen.extend(gone.iter().cloned());
    let mut path_of = conn.prepare_cached("SELECT path FROM sessions WHERE id = ?1")?;
    for id in check {
        if !seen.insert(id.clone()) {
            continue;
        }
        let path: Option<Option<String>> = path_of.query_row([&id], |r| r.get(0)).optional()?;
        let Some(Some(path)) = path else {
            // Not catalogued yet: its new directory is found above.
            continue;
        };
        let Some(sdir) = Path::new(&path).parent() else {
            continue;
        };
        match session_dir(sdir) {
            Some(s) => logs.push(s),
            None if !sdir.exists() => gone.push(id),
            None => {}
        }
    }
    Ok(Some(Found {
        logs,
        full: false,
        gone,
        dirs,
        reset_dirs: false,
    }))
}

/// Stores what a scan learned: directory times, and the time of a full sweep.
pub(crate) fn record(conn: &Connection, found: &Found, started_ms: i64) -> Result<(), Error> {
    if found.dirs.is_empty() && !found.full {
        return Ok(());
    }
    if found.reset_dirs {
        conn.execute("DELETE FROM dirs", [])?;
    }
    {
        let mut up = conn.prepare_cached(
            "INSERT INTO dirs(path, mtime_ns) VALUES (?1, ?2) \
             ON CONFLICT(path) DO UPDATE SET mtime_ns = excluded.mtime_ns",
        )?;
        for (path, t) in &found.dirs {
            up.execute(params![path, t.unwrap_or(-1)])?;
        }
    }
    if found.full {
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('swept_ms', ?1) \
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [started_ms],
        )?;
    }
    Ok(())
}

/// The generation of a canonical log file name (`session.jsonl` is 0, `session.v4.jsonl.zstd`
/// is 4; session-format §1.4).
pub(crate) fn generation(name: &str) -> Option<u64> {
    let name = name.strip_suffix(".zstd").unwrap_or(name);
    let stem = name.strip_prefix("session")?.strip_suffix(".jsonl")?;
    if stem.is_empty() {
        return Some(0);
    }
    let digits = stem.strip_prefix(".v")?;
    if digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The session id of a directory name: the inverse of `encodeSegment` (session-format §1.3:
/// `~XXXX` is a UTF-16 code unit, anything else itself).
pub(crate) fn decode_segment(name: &str) -> Option<String> {
    let mut units: Vec<u16> = Vec::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if c == '~' {
            let hex = rest.get(1..5)?;
            units.push(u16::from_str_radix(hex, 16).ok()?);
            rest = &rest[5..];
        } else {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
            rest = &rest[c.len_utf8()..];
        }
    }
    String::from_utf16(&units).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{decode_segment, generation};

    #[test]
    fn directory_names_decode_to_ids() {
        assert_eq!(
            decode_segment("main-session-1").as_deref(),
            Some("main-session-1")
        );
        assert_eq!(decode_segment("a~002Fb").as_deref(), Some("a/b"));
        assert_eq!(decode_segment("~D83D~DE00").as_deref(), Some("😀"));
        assert_eq!(decode_segment("~002E~002E").as_deref(), Some(".."));
        assert_eq!(decode_segment("~00"), None);
        assert_eq!(decode_segment("~D83D"), None);
    }

    #[test]
    fn generations_follow_the_canonical_names() {
        assert_eq!(generation("session.v4.jsonl"), Some(4));
        assert_eq!(generation("session.v4.jsonl.zstd"), Some(4));
        assert_eq!(generation("session.v3.jsonl"), Some(3));
        assert_eq!(generation("session.jsonl"), Some(0));
        assert_eq!(generation("session.v03.jsonl"), None);
        assert_eq!(generation("session.lock"), None);
        assert_eq!(generation(".session.v4.jsonl.tmp-1"), None);
    }
}
