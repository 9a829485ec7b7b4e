//! The shared setup of the PostgreSQL store and work queue tests (`postgres.rs`, `fleet.rs`,
//! `fleet_faults.rs`): a fresh database of the test cluster (`scripts/postgres-setup`; skipped
//! with the reason without it, failing under `CI=true`), task files, worker processes and
//! bounded waits on what the database and `/proc` show.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use dsh_test_harness::postgres::{TestCluster, cluster};
use serde_json::Value;

use crate::support::*;

/// The bound of every wait on observable state.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// The test cluster and a new database of its own, or `None` (the test skips, reason printed).
pub(crate) fn database(test: &str) -> Option<(TestCluster, String)> {
    let c = cluster(test)?;
    let url = c.fresh_database();
    Some((c, url))
}

/// Asserts that the process exited 0, showing its output otherwise.
pub(crate) fn ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    );
}

/// Polls `cond` until it holds; fails naming `what` after [`WAIT`].
pub(crate) fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "gave up after {WAIT:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    ok(&out);
}

/// A repository with one commit.
pub(crate) fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README"), "a repo\n").unwrap();
    git(dir.path(), &["add", "README"]);
    git(dir.path(), &["commit", "-q", "-m", "first"]);
    dir
}

/// Submits one task `make WORD` on `repo` per word (ids in the order of `words`).
pub(crate) fn submit(env: &Env, url: &str, words: &[&str], repo: &Path) {
    let tasks: String = words
        .iter()
        .map(|w| {
            let line = serde_json::json!({"prompt": format!("make {w}"), "repo": repo.display().to_string()});
            format!("{line}\n")
        })
        .collect();
    let file = env.work.path().join("tasks.jsonl");
    std::fs::write(&file, tasks).unwrap();
    let out = env
        .dsh()
        .args(["tasks", "submit", "--store", url])
        .arg(&file)
        .output()
        .unwrap();
    ok(&out);
}

/// A `dsh worker --concurrency 1` process on the store, output piped.
pub(crate) fn spawn_worker(env: &Env, url: &str, extra: &[&str]) -> Child {
    env.dsh()
        .env("DSH_STORE", url)
        .args(["worker", "--concurrency", "1", "--workdir"])
        .arg(env.home.path().join("workspaces"))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `dsh tasks status --json`: one JSON object.
pub(crate) fn status(env: &Env, url: &str) -> Value {
    serde_json::from_str(tasks_json(env, url, "status").trim()).unwrap()
}

/// `dsh tasks results --json`: one JSON object per task.
pub(crate) fn results(env: &Env, url: &str) -> Vec<Value> {
    tasks_json(env, url, "results")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The stdout of `dsh tasks WHAT --json --store URL`, which must succeed.
fn tasks_json(env: &Env, url: &str, what: &str) -> String {
    let out = env
        .dsh()
        .args(["tasks", what, "--json", "--store", url])
        .output()
        .unwrap();
    ok(&out);
    stdout(&out)
}

/// The ids of the live processes (not zombies) with `arg` among their arguments.
pub(crate) fn pids_with_arg(arg: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            cmdline
                .split(|b| *b == 0)
                .any(|a| a == arg.as_bytes())
                .then_some(pid)
        })
        .collect()
}

/// How many live processes have `arg` among their arguments.
pub(crate) fn running_with_arg(arg: &str) -> usize {
    pids_with_arg(arg).len()
}

/// The state letter of a process (`/proc/PID/stat`: `R`, `S`, `T` stopped, `Z` exited and not
/// yet reaped), or `None` once it is gone.
pub(crate) fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
}

/// Sends `signal` to `pid`.
pub(crate) fn signal(pid: i32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
}

/// The process id of a child, as `kill` takes it.
pub(crate) fn pid(child: &Child) -> i32 {
    i32::try_from(child.id()).unwrap()
}

/// A session's stored events in order: `(seq, line)`.
pub(crate) fn session_log(c: &TestCluster, url: &str, sid: &str) -> Vec<(i64, String)> {
    let text = c.psql(
        url,
        &format!(
            "SELECT seq || chr(9) || line FROM dsh_events WHERE session_id = '{sid}' ORDER BY seq"
        ),
    );
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (seq, line) = l.split_once('\t').unwrap();
            (seq.parse().unwrap(), line.to_owned())
        })
        .collect()
}

/// Asserts that a session's log holds every event once: seqs 0.. without a gap, each line's
/// own `seq` the row's, and no message stored twice (message ids distinct).
pub(crate) fn assert_every_event_once(log: &[(i64, String)]) {
    assert!(!log.is_empty(), "the session has no events");
    let mut ids = std::collections::HashSet::new();
    for (i, (seq, line)) in log.iter().enumerate() {
        assert_eq!(*seq, i64::try_from(i).unwrap(), "a gap before seq {seq}");
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["seq"], *seq, "{line}");
        let id = v["data"]["message"]["id"]
            .as_str()
            .or_else(|| v["data"]["id"].as_str());
        if let Some(id) = id {
            assert!(
                ids.insert(id.to_owned()),
                "message {id} stored twice: {line}"
            );
        }
    }
}
