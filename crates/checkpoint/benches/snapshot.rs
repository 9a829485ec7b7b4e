//! `cargo bench -p dsh-checkpoint`: snapshot budgets on a 10,000-file repository (issue 36):
//! unchanged < 50 ms, 10 changed files < 100 ms, storage growing with the changed bytes.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime};

use dsh_checkpoint::Store;

/// This thread's time on a CPU so far (`/proc/thread-self/schedstat`): the wall time minus
/// the time spent waiting for a CPU on a busy machine. Only the calling thread's: the walk's
/// other threads are not counted (`dsh-bench --only checkpoints` counts every thread).
fn on_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("repo");
    let root = tmp.path().join("checkpoints");
    // 10,000 files of ~2 KB in 100 directories of 100, plus an ignored build directory.
    let old = SystemTime::now() - Duration::from_secs(3600);
    for d in 0..100 {
        let dir = ws.join(format!("src/mod{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            let p = dir.join(format!("file{f:03}.rs"));
            let body = format!("// file {d}/{f}\n{}", "fn x() {}\n".repeat(200));
            std::fs::write(&p, body).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::fs::write(ws.join(".gitignore"), "target/\n").unwrap();
    for i in 0..1000 {
        std::fs::write(ws.join(format!("target/o{i}")), "obj").unwrap();
    }
    let _ = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status();

    let store = Store::open(&root, &ws, 10 << 20).unwrap();
    let t = Instant::now();
    let first = store.snapshot().unwrap();
    let cold = t.elapsed();
    let size0 = store.size();
    println!(
        "first snapshot: {} files, {} hashed, {:.1} ms, store {} KB",
        first.manifest.entries.len(),
        first.hashed,
        cold.as_secs_f64() * 1e3,
        size0 / 1024
    );

    let runs = 15;
    let mut unchanged = Vec::new();
    let mut unchanged_cpu = Vec::new();
    for _ in 0..runs {
        let (t, c) = (Instant::now(), on_cpu());
        let s = store.snapshot().unwrap();
        unchanged.push(t.elapsed());
        unchanged_cpu.push(on_cpu() - c);
        assert_eq!(s.id, first.id);
        assert_eq!(s.hashed, 0);
    }
    let fresh_process = {
        let t = Instant::now();
        let s = Store::open(&root, &ws, 10 << 20)
            .unwrap()
            .snapshot()
            .unwrap();
        assert_eq!(s.hashed, 0);
        t.elapsed()
    };
    let mut changed = Vec::new();
    let mut changed_cpu = Vec::new();
    let mut grown = 0;
    let mut changed_bytes = 0;
    for r in 0..runs {
        for i in 0..10 {
            let p = ws.join(format!("src/mod{:03}/file{:03}.rs", i * 7, r));
            let body = format!("// run {r} change {i}\n{}", "fn y() {}\n".repeat(200));
            changed_bytes += body.len() as u64;
            std::fs::write(&p, body).unwrap();
        }
        let before = store.size();
        let (t, cpu) = (Instant::now(), on_cpu());
        let s = store.snapshot().unwrap();
        changed.push(t.elapsed());
        changed_cpu.push(on_cpu() - cpu);
        // The 10 new files, and the previous run's 10 again: written within the racy margin
        // of the snapshot that first saw them.
        assert!(s.hashed <= 20, "{}", s.hashed);
        grown += store.size() - before;
    }
    let (u, c) = (median(unchanged), median(changed));
    let (uc, cc) = (median(unchanged_cpu), median(changed_cpu));
    println!(
        "unchanged 10,000-file tree: median {:.2} ms wall, {:.2} ms on CPU in this thread (budget 50 ms); a new \
         process (stat cache read from disk): {:.2} ms",
        u.as_secs_f64() * 1e3,
        uc.as_secs_f64() * 1e3,
        fresh_process.as_secs_f64() * 1e3
    );
    println!(
        "10 changed files: median {:.2} ms wall, {:.2} ms on CPU in this thread (budget 100 ms)",
        c.as_secs_f64() * 1e3,
        cc.as_secs_f64() * 1e3
    );
    println!(
        "load average while measuring: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "storage: {} runs of 10 changed files ({} KB written to the tree) grew the store by {} KB \
         ({} KB per run; the store holds {} KB for the whole tree)",
        runs,
        changed_bytes / 1024,
        grown / 1024,
        grown / 1024 / runs,
        size0 / 1024
    );
}
