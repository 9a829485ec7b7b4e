//! Workspace checkpoints (issue 36) on a generated 10,000-file git repository: the snapshot
//! of an unchanged tree (same process, and a new process reading the stat cache from disk),
//! the snapshot after 10 changed files, how the store grows, and a rewind of those files and
//! its undo. In process, through `dsh-checkpoint` (what the `checkpoint` plugin and
//! `dsh rewind` call).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, ensure};
use dsh_checkpoint::Store;
use dsh_checkpoint::rewind::{self, TurnCheckpoints};

use crate::report::Group;

const MAX_FILE_BYTES: u64 = 10 << 20;

/// The process's time on a CPU so far, every thread's (user and system, `getrusage`): on a
/// loaded machine the wall time also counts the waits for a core, and a snapshot walks on
/// several threads.
fn on_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(u) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let t = |v: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(v.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(v.tv_usec()).unwrap_or(0))
    };
    t(u.user_time()) + t(u.system_time())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `dirs` directories of 100 files of ~2 KB (mtimes an hour old), an ignored `target/` of
/// 1,000 files, `git init`. Returns the tracked bytes.
fn generate(ws: &Path, dirs: usize) -> Result<u64> {
    let old = SystemTime::now() - Duration::from_secs(3600);
    let mut bytes = 0u64;
    for d in 0..dirs {
        let dir = ws.join(format!("src/mod{d:03}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..100 {
            let p = dir.join(format!("file{f:03}.rs"));
            let body = format!("// file {d}/{f}\n{}", "fn x() {}\n".repeat(200));
            bytes += body.len() as u64;
            std::fs::write(&p, body)?;
            std::fs::File::options()
                .write(true)
                .open(&p)?
                .set_modified(old)?;
        }
    }
    std::fs::create_dir_all(ws.join("target"))?;
    std::fs::write(ws.join(".gitignore"), "target/\n")?;
    // Aged like the sources: a file written within 50 ms of a snapshot is hashed again at the
    // next one (the racy-stat rule), which is not what an unchanged tree measures.
    std::fs::File::options()
        .write(true)
        .open(ws.join(".gitignore"))?
        .set_modified(old)?;
    for i in 0..1000 {
        std::fs::write(ws.join(format!("target/o{i}")), "obj")?;
    }
    let _ = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status();
    Ok(bytes)
}

/// Changes 10 files in 10 directories (run `r`); returns the bytes written.
fn change_ten(ws: &Path, dirs: usize, r: usize) -> Result<u64> {
    let mut bytes = 0;
    for i in 0..10 {
        let p = ws.join(format!(
            "src/mod{:03}/file{:03}.rs",
            (i * 7) % dirs,
            r % 100
        ));
        let body = format!("// run {r} change {i}\n{}", "fn y() {}\n".repeat(200));
        bytes += body.len() as u64;
        std::fs::write(&p, body)?;
    }
    Ok(bytes)
}

/// The `checkpoints` rows.
pub fn rows(quick: bool, iterations: u32, rows: &mut Vec<crate::report::Row>) -> Result<()> {
    let dirs = if quick { 10 } else { 100 };
    let files = dirs * 100;
    let runs = if quick {
        3
    } else {
        (iterations as usize * 3).max(15)
    };
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("repo");
    let root = tmp.path().join("checkpoints");
    eprintln!("dsh-bench: checkpoints: generating {files} files");
    let tree_bytes = generate(&ws, dirs)?;
    let ws = ws.canonicalize()?;

    let store = Store::open(&root, &ws, MAX_FILE_BYTES)?;
    let t = Instant::now();
    let first = store.snapshot()?;
    let cold_ms = ms(t.elapsed());
    ensure!(
        first.manifest.entries.len() == files + 1,
        "the snapshot holds {} entries, not {} (+ .gitignore)",
        first.manifest.entries.len(),
        files
    );
    let size0 = store.size();

    let (mut unchanged, mut unchanged_cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (t, c) = (Instant::now(), on_cpu());
        let s = store.snapshot()?;
        unchanged.push(ms(t.elapsed()));
        unchanged_cpu.push(ms(on_cpu() - c));
        ensure!(
            s.id == first.id && s.hashed == 0,
            "an unchanged tree changed ({} files hashed again, {} entries, {:?})",
            s.hashed,
            s.manifest.entries.len(),
            dsh_checkpoint::diff(&first.manifest, &s.manifest)
        );
    }
    let mut fresh = Vec::new();
    for _ in 0..runs.min(5) {
        let t = Instant::now();
        let s = Store::open(&root, &ws, MAX_FILE_BYTES)?.snapshot()?;
        fresh.push(ms(t.elapsed()));
        ensure!(s.hashed == 0, "a new process hashed {} files", s.hashed);
    }

    let (mut changed, mut changed_cpu, mut growth) = (Vec::new(), Vec::new(), Vec::new());
    let mut changed_bytes = 0;
    let mut last = first.id;
    let mut before_last = first.id;
    for r in 0..runs {
        changed_bytes = change_ten(&ws, dirs, r)?;
        let size = store.size();
        let (t, c) = (Instant::now(), on_cpu());
        let s = store.snapshot()?;
        changed.push(ms(t.elapsed()));
        changed_cpu.push(ms(on_cpu() - c));
        growth.push(store.size().saturating_sub(size) as f64);
        before_last = last;
        last = s.id;
    }

    // A rewind of the last 10 changes (a turn from `before_last` to `last`), then its undo.
    let mut turns = BTreeMap::new();
    turns.insert(
        1,
        TurnCheckpoints {
            turn: 1,
            before: Some(before_last),
            after: Some(last),
        },
    );
    let t = Instant::now();
    let current = store.snapshot()?;
    let plan = rewind::plan(&store, &turns, 1, &current.manifest, None)?
        .ok_or_else(|| anyhow::anyhow!("no plan"))?;
    let planned_ms = ms(t.elapsed());
    let done = rewind::run(&store, "bench", Some(1), None, &plan, current.id, false)?;
    let rewind_ms = ms(t.elapsed());
    ensure!(
        done.applied.written == 10 && done.applied.failed.is_empty(),
        "the rewind wrote {} files ({:?})",
        done.applied.written,
        done.applied.failed
    );
    let t = Instant::now();
    let current = store.snapshot()?;
    let undo_plan = rewind::plan_undo(&store, &done.record, &current.manifest)?;
    let undone = rewind::run(
        &store,
        "bench",
        None,
        Some(done.record.id.clone()),
        &undo_plan,
        current.id,
        false,
    )?;
    let undo_ms = ms(t.elapsed());
    ensure!(
        undone.applied.written == 10,
        "the undo wrote {}",
        undone.applied.written
    );
    ensure!(
        store.snapshot()?.id == last,
        "the undo did not restore the tree"
    );

    let mut grp = Group::new(rows, "checkpoints");
    grp.text(
        "tree",
        &format!(
            "{files} files of ~2 KB in {dirs} directories ({:.1} MB), 1,000 ignored, git repository",
            tree_bytes as f64 / 1e6
        ),
    );
    grp.text(
        "first snapshot (every file hashed and stored)",
        &format!("{:.0} ms, store {:.1} MB", cold_ms, size0 as f64 / 1e6),
    );
    grp.limit(
        &format!("snapshot, unchanged {files}-file tree (same process)"),
        &unchanged,
        "ms",
        1,
        50.0,
    );
    grp.limit(
        "snapshot, unchanged tree, new process (stat cache read from disk)",
        &fresh,
        "ms",
        1,
        50.0,
    );
    grp.limit("snapshot after 10 changed files", &changed, "ms", 1, 100.0);
    grp.text(
        "on CPU, every thread, user + system (unchanged / 10 changed), medians",
        &format!(
            "{:.1} ms / {:.1} ms (the wall times above include waits for a core; load average \
             {})",
            median(&unchanged_cpu),
            median(&changed_cpu),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    );
    let grown = median(&growth);
    grp.exact(
        "store growth per 10 changed files",
        "grows with the changed bytes, not the tree size (under 1% of the tree)",
        &format!(
            "{:.1} KB for {:.1} KB changed (tree {:.1} MB)",
            grown / 1e3,
            changed_bytes as f64 / 1e3,
            tree_bytes as f64 / 1e6
        ),
        grown < tree_bytes as f64 / 100.0,
    );
    grp.text(
        "rewind of 10 files (snapshot, plan, backup, restore, result snapshot)",
        &format!("{rewind_ms:.1} ms (of which snapshot and plan {planned_ms:.1} ms)"),
    );
    grp.text("undo of that rewind", &format!("{undo_ms:.1} ms"));
    Ok(())
}
