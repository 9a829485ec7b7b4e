//! The fleet (issue 39) on a private PostgreSQL cluster that the bench starts with
//! `scripts/postgres-setup` (and stops); without one the group is skipped with the reason.
//!
//! - **Round trips and overhead per step**: the bash scenario's turn (200 steps) run by
//!   `dsh exec` on the JSONL store and by `dsh exec --store postgres://…`, interleaved. Overhead
//!   of a step = response K finished → request K+1 arrived, minus the tool's run time; the figure
//!   is the PostgreSQL run's median minus the JSONL run's (budget: within 1 ms). Round trips are
//!   the statements the server executed for the session store (`pg_stat_statements`, enabled on
//!   the private cluster; connecting and preparing, ~10 round trips a connection, not counted):
//!   besides the session's open and close, at most one per commit batch (budget, exact) and a
//!   lease renewal every 10 s.
//! - **1,000 scripted tasks** (a `bash` call, then the answer: two steps each) through `dsh
//!   worker --drain` with 1 worker and with 4: tasks per CPU-second, where the CPU is every
//!   process but the mock model's (the workers, their `dsh exec` and `git` children, and the
//!   PostgreSQL server's processes); budget: 4 workers spend at most 1.25× one worker's CPU per
//!   task. The load average is reported beside the figures.
//! - **A watcher on another server** ([`watch`]): rows it reads per committed event over the
//!   200-step turn (target 1×), the delivery latency of a committed event and of a steer to it.

mod watch;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::{Completion, RecordedRequest};

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};
use crate::scenario::{Scenario, Variant, read_events, step_overheads_us};
use crate::stats::Stat;

/// The prompt of the per-step runs (the scenario's replies do not depend on it).
const PROMPT: &str = "Run the benchmark steps one by one, then report.";
/// Budget: the PostgreSQL store's overhead per step over the JSONL store's.
const OVERHEAD_MS: f64 = 1.0;
/// Statements a session's open and close may take besides its commits and renewals (create,
/// lease checks, release).
const OPEN_CLOSE: f64 = 8.0;
/// Budget: CPU per task with 4 workers over CPU per task with 1.
const CPU_SCALING: f64 = 1.25;

/// The private cluster; stopped (and its directory removed) on drop.
struct Cluster {
    url: String,
    dir: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    /// Whether `pg_stat_statements` is loaded (the reason when not).
    stats: std::result::Result<(), String>,
}

fn setup_script() -> PathBuf {
    crate::workspace_root().join("scripts/postgres-setup")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

impl Cluster {
    /// Starts one, or the reason it cannot be started here.
    fn start() -> std::result::Result<Self, String> {
        let script = setup_script();
        let out = Command::new(&script)
            .arg("start")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let reason = err.lines().rev().find(|l| !l.trim().is_empty());
            return Err(reason.unwrap_or("scripts/postgres-setup failed").to_owned());
        }
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}='")))
                .and_then(|v| v.strip_suffix('\''))
                .map(str::to_owned)
                .ok_or_else(|| format!("scripts/postgres-setup printed no {name}"))
        };
        let mut c = Cluster {
            url: var("DSH_TEST_POSTGRES_URL")?,
            dir: var("DSH_TEST_POSTGRES_DIR")?.into(),
            data: var("DSH_TEST_POSTGRES_DATA")?.into(),
            bin: var("DSH_TEST_POSTGRES_BIN")?.into(),
            stats: Ok(()),
        };
        c.stats = c.enable_stats().map_err(|e| format!("{e:#}"));
        Ok(c)
    }

    /// Loads `pg_stat_statements` (a restart of the private cluster).
    fn enable_stats(&self) -> Result<()> {
        self.psql(
            &self.url,
            "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'",
        )?;
        let pg_ctl = self.bin.join("pg_ctl");
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
            c
        } else {
            Command::new(&pg_ctl)
        };
        let out = cmd
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-m", "fast", "-w", "-t", "60", "restart"])
            .output()
            .context("running pg_ctl restart")?;
        ensure!(
            out.status.success(),
            "pg_ctl restart failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let loaded = self.psql(&self.url, "SHOW shared_preload_libraries")?;
        ensure!(
            loaded.contains("pg_stat_statements"),
            "pg_stat_statements did not load"
        );
        Ok(())
    }

    fn psql(&self, url: &str, sql: &str) -> Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                url,
                "-c",
                sql,
            ])
            .output()
            .context("running psql")?;
        ensure!(
            out.status.success(),
            "psql failed on {sql}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// A new database and its URL (`pg_stat_statements` installed in it when loaded).
    fn database(&self, name: &str) -> Result<String> {
        self.psql(&self.url, &format!("CREATE DATABASE {name}"))?;
        let Some((user, rest)) = self.url.split_once("@/") else {
            bail!("unexpected cluster URL {}", self.url);
        };
        let query = rest.split_once('?').map_or("", |(_, q)| q);
        let url = format!("{user}@/{name}?{query}");
        if self.stats.is_ok() {
            self.psql(&url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")?;
        }
        Ok(url)
    }

    /// Forgets the statement counts (the whole cluster's).
    fn reset_stats(&self, url: &str) -> Result<()> {
        if self.stats.is_ok() {
            self.psql(url, "SELECT pg_stat_statements_reset()")?;
        }
        Ok(())
    }

    /// The statements executed on `url`'s database since the last reset, by kind.
    fn statements(&self, url: &str) -> Result<Statements> {
        if let Err(e) = &self.stats {
            bail!("pg_stat_statements is not loaded: {e}");
        }
        // The schema batches (CREATE/ALTER … IF NOT EXISTS under an advisory lock) are left out.
        let text = self.psql(
            url,
            "SELECT coalesce(sum(calls) FILTER (WHERE store), 0) || ',' || \
                    coalesce(sum(calls) FILTER (WHERE store AND query LIKE '%WITH sync AS%'), 0) || ',' || \
                    coalesce(sum(calls) FILTER (WHERE store AND query LIKE '%FROM unnest($1::text[], $2::bigint[])%'), 0) || ',' || \
                    coalesce(sum(calls) FILTER (WHERE query LIKE '%dsh_tasks%' AND NOT schema), 0) \
               FROM (SELECT calls, query, \
                            query ~* '^\\s*(CREATE|ALTER|BEGIN|COMMIT|SELECT pg_advisory)' AS schema, \
                            query ~ 'dsh_(sessions|events)' \
                              AND query !~* '^\\s*(CREATE|ALTER|BEGIN|COMMIT|SELECT pg_advisory)' AS store \
                       FROM pg_stat_statements \
                      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())) s",
        )?;
        let n: Vec<f64> = text
            .split(',')
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("unexpected statement counts {text:?}"))?;
        let [store, commits, renewals, queue] = n[..] else {
            bail!("unexpected statement counts {text:?}");
        };
        Ok(Statements {
            store,
            commits,
            renewals,
            queue,
        })
    }

    /// Prints the statements executed on `url`'s database since the last reset, most called
    /// first (what the round-trip figures are made of).
    fn print_statements(&self, url: &str, what: &str) {
        if self.stats.is_err() {
            return;
        }
        let text = self.psql(
            url,
            "SELECT calls || '  ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 110) \
               FROM pg_stat_statements \
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
              ORDER BY calls DESC",
        );
        if let Ok(text) = text {
            eprintln!("dsh-bench: fleet: statements of {what}:\n{text}");
        }
    }

    /// CPU seconds the server's processes have used so far: the postmaster with its reaped
    /// children, and the live ones.
    fn cpu_seconds(&self) -> Result<f64> {
        let pid_file = self.data.join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file)
            .with_context(|| format!("reading {}", pid_file.display()))?;
        let pm: u32 = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .context("no pid in postmaster.pid")?;
        let mut ticks = stat_ticks(pm, true).context("reading the postmaster's CPU time")?;
        for e in std::fs::read_dir("/proc")?.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid != pm && parent(pid) == Some(pm) {
                ticks += stat_ticks(pid, false).unwrap_or(0);
            }
        }
        Ok(ticks as f64 / clock_ticks())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(setup_script())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// Statement executions by kind (`pg_stat_statements`).
#[derive(Debug, Clone, Copy)]
struct Statements {
    /// Of the session store (`dsh_sessions`, `dsh_events`): commits, lease and reads.
    store: f64,
    /// Commit batches (the append statement).
    commits: f64,
    /// Lease renewals.
    renewals: f64,
    /// Of the task queue (`dsh_tasks`).
    queue: f64,
}

/// The fields after the command name of `/proc/PID/stat`.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(") ")?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn parent(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// utime + stime (+ cutime + cstime with `reaped`), in clock ticks.
fn stat_ticks(pid: u32, reaped: bool) -> Option<u64> {
    let f = stat_fields(pid)?;
    // After the state letter (index 0): utime is field 14 of the line, index 11 here.
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let own = n(11)? + n(12)?;
    Some(if reaped { own + n(13)? + n(14)? } else { own })
}

/// The unit of `/proc/PID/stat` times (`USER_HZ`, 100 on Linux whatever the kernel's HZ).
fn clock_ticks() -> f64 {
    100.0
}

/// CPU seconds of this process's reaped children (user + system).
fn children_cpu() -> Result<f64> {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("getrusage(RUSAGE_CHILDREN)")?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(secs(u.user_time()) + secs(u.system_time()))
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// One `dsh exec` of the bash scenario on the PostgreSQL store: the per-step overheads (µs)
/// and the statements it cost.
fn pg_steps(
    dsh: &Path,
    cluster: &Cluster,
    url: &str,
    steps: usize,
    run: u32,
) -> Result<(Vec<f64>, Option<Statements>)> {
    let world = World::new()?;
    let scenario = Scenario::new("fleet-bash", Variant::Bash, steps);
    world.server.push_all(scenario.replies());
    let sid = format!("bench-{run}");
    cluster.reset_stats(url)?;
    run_dsh(
        dsh,
        &world,
        &["exec", "--store", url, "--session", &sid, PROMPT],
        false,
    )?;
    let stmts = cluster.statements(url).ok();
    if run == 0 {
        cluster.print_statements(url, "one dsh exec --store run");
    }
    let reqs = finished(&world, steps + 1)?;
    let export = run_dsh(
        dsh,
        &world,
        &["sessions", "export", &sid, "--store", url],
        false,
    )?;
    let log = world.home.path().join("export.jsonl");
    std::fs::write(&log, export.stdout).context("writing the exported log")?;
    let events = read_events(&log)?;
    Ok((step_overheads_us(&reqs, &events, steps)?, stmts))
}

/// The chat requests of a finished run, checked: `n` of them, all answered 200.
fn finished(world: &World, n: usize) -> Result<Vec<RecordedRequest>> {
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(n, Duration::from_secs(10))
        .context("fewer responses ended than steps")?
        .into_iter()
        .filter(|r| r.is_chat())
        .collect();
    ensure!(reqs.len() == n, "{} requests, expected {n}", reqs.len());
    if let Some(bad) = reqs.iter().find(|r| r.status != 200) {
        bail!("request {} got status {}", bad.index, bad.status);
    }
    Ok(reqs)
}

/// What one run of the task queue measured.
struct QueueRun {
    wall: Duration,
    /// CPU seconds: the workers and their children, and the PostgreSQL server.
    cpu: f64,
    /// Model requests (= steps).
    steps: usize,
    stmts: Option<Statements>,
}

/// `tasks` scripted tasks through `workers` worker processes (`--drain`), on a new database.
fn queue_run(dsh: &Path, cluster: &Cluster, tasks: usize, workers: usize) -> Result<QueueRun> {
    let url = cluster.database(&format!("fleet_{workers}w_{}", std::process::id()))?;
    let world = World::new()?;
    // Each task: a `bash` call, then (its result in the request) the final answer.
    world.server.set_responder(|req| {
        let tool_result = req.body_text().contains("\"role\":\"tool\"");
        if tool_result {
            Completion::new().text("done").reply()
        } else {
            let args = r#"{"command":"true","description":"Run"}"#;
            Completion::new().tool_call("bash", args).reply()
        }
    });
    let repo = world.home.path().join("repo");
    std::fs::create_dir_all(&repo)?;
    std::fs::write(repo.join("README"), "a repository\n")?;
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "README"],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-q",
            "-m",
            "one",
        ],
    ] {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .status()
            .context("running git")?
            .success();
        ensure!(ok, "git {args:?} failed");
    }
    let line = serde_json::json!({"prompt": "Run the task.", "repo": repo}).to_string();
    let file = world.home.path().join("tasks.jsonl");
    std::fs::write(&file, format!("{line}\n").repeat(tasks))?;
    let file_arg = file.display().to_string();
    run_dsh(
        dsh,
        &world,
        &["tasks", "submit", "--store", &url, &file_arg],
        false,
    )?;
    let workdir = world.home.path().join("workspaces");
    std::fs::create_dir_all(&workdir)?;
    let workdir = workdir.display().to_string();
    cluster.reset_stats(&url)?;
    let (cpu0, pg0) = (children_cpu()?, cluster.cpu_seconds()?);
    let start = Instant::now();
    let children: Vec<Child> = (0..workers)
        .map(|_| {
            let mut c = Command::new(dsh);
            c.env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", world.home.path())
                .env("DSH_HOME", world.home.path())
                .env("DEEPSEEK_API_KEY", "sk-bench")
                .env("DEEPSEEK_BASE_URL", world.server.base_url())
                .args([
                    "worker",
                    "--drain",
                    "--concurrency",
                    "1",
                    "--workdir",
                    &workdir,
                ])
                .args(["--store", &url])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            c.spawn().context("spawning dsh worker")
        })
        .collect::<Result<_>>()?;
    for c in children {
        let out = c.wait_with_output().context("waiting for a worker")?;
        ensure!(
            out.status.success(),
            "a worker failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let wall = start.elapsed();
    let cpu = children_cpu()? - cpu0 + cluster.cpu_seconds()? - pg0;
    let stmts = cluster.statements(&url).ok();
    if workers == 1 {
        cluster.print_statements(&url, &format!("{tasks} tasks, one worker"));
    }
    let done: usize = cluster
        .psql(&url, "SELECT count(*) FROM dsh_tasks WHERE state = 'done'")?
        .parse()
        .context("counting the done tasks")?;
    ensure!(done == tasks, "{done} of {tasks} tasks done");
    Ok(QueueRun {
        wall,
        cpu,
        steps: world
            .server
            .requests()
            .iter()
            .filter(|r| r.is_chat())
            .count(),
        stmts,
    })
}

/// Measures and adds the rows.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let steps = if quick { 20 } else { 200 };
    let tasks = if quick { 40 } else { 1000 };
    let load_start = load();
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(reason) => {
            Group::new(rows, "fleet").text("skipped: PostgreSQL cannot be started here", &reason);
            return Ok(());
        }
    };
    let url = cluster.database(&format!("fleet_exec_{}", std::process::id()))?;
    let (mut jsonl, mut pg, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    let mut stmts = Vec::new();
    for i in 0..iterations {
        eprintln!(
            "dsh-bench: fleet: {steps}-step turn, JSONL and PostgreSQL, run {}/{iterations}",
            i + 1
        );
        let local = Scenario::new("bash", Variant::Bash, steps)
            .run(dsh)
            .context("the JSONL run")?;
        let local = Stat::median_of(&local.overhead_us) / 1e3;
        let (remote, s) = pg_steps(dsh, &cluster, &url, steps, i).context("the PostgreSQL run")?;
        let remote = Stat::median_of(&remote) / 1e3;
        jsonl.push(local);
        pg.push(remote);
        diff.push(remote - local);
        stmts.extend(s);
    }
    let watched = watches(dsh, &cluster, steps, iterations)?;
    let mut runs = Vec::new();
    for workers in [1, 4] {
        eprintln!(
            "dsh-bench: fleet: {tasks} tasks, {workers} worker(s) (load {})",
            load()
        );
        runs.push((workers, queue_run(dsh, &cluster, tasks, workers)?));
    }
    let load_end = load();

    let mut g = Group::new(
        rows,
        format!("fleet: {steps}-step bash turn, PostgreSQL store"),
    );
    g.text(
        "load average (1, 5, 15 min) at start / end",
        &format!("{load_start} / {load_end}"),
    );
    g.info(
        "harness overhead per step, JSONL store (median of steps)",
        &jsonl,
        "ms",
        3,
    );
    g.info("harness overhead per step, PostgreSQL store", &pg, "ms", 3);
    g.limit_as(
        "per-step overhead, PostgreSQL minus JSONL",
        &diff,
        "ms",
        3,
        OVERHEAD_MS,
        &format!("within {OVERHEAD_MS} ms of the JSONL store (median)"),
    );
    let per_step: Vec<f64> = stmts.iter().map(|s| s.store / steps as f64).collect();
    let commits: Vec<f64> = stmts.iter().map(|s| s.commits / steps as f64).collect();
    let extra: Vec<f64> = stmts
        .iter()
        .map(|s| s.store - s.commits - s.renewals)
        .collect();
    match &cluster.stats {
        Ok(()) => {
            g.info(
                "database round trips per step (every store statement)",
                &per_step,
                "",
                3,
            );
            g.info("commit batches per step", &commits, "", 3);
            g.info("statements of the session's open and close", &extra, "", 0);
            // The turn's statements are its commits and renewals: one round trip each.
            let ok = !stmts.is_empty()
                && stmts
                    .iter()
                    .all(|s| s.store - s.renewals - s.commits <= OPEN_CLOSE);
            let worst = stmts
                .iter()
                .map(|s| {
                    format!(
                        "{} statements: {} commit batches, {} renewals, {} open/close",
                        s.store,
                        s.commits,
                        s.renewals,
                        s.store - s.commits - s.renewals
                    )
                })
                .next_back()
                .unwrap_or_else(|| "not measured".into());
            g.exact(
                "round trips per commit batch (the turn's statements beyond open and close)",
                &format!("at most 1 (+ a renewal every 10 s; open and close at most {OPEN_CLOSE})"),
                &worst,
                ok,
            );
        }
        Err(e) => g.text("database round trips", &format!("not measured: {e}")),
    }

    watch_group(rows, steps, &watched);

    let mut g = Group::new(
        rows,
        format!("fleet: {tasks} scripted tasks (2 steps each), dsh worker --drain"),
    );
    let per_task = |r: &QueueRun| r.cpu / tasks as f64;
    for (workers, r) in &runs {
        g.info(
            &format!(
                "tasks per CPU-second, {workers} worker(s) (workers, dsh exec, git, PostgreSQL)"
            ),
            &[tasks as f64 / r.cpu],
            "",
            2,
        );
        g.info(
            &format!("wall time, {workers} worker(s)"),
            &[r.wall.as_secs_f64()],
            "s",
            1,
        );
        g.info(
            &format!("tasks per second, {workers} worker(s)"),
            &[tasks as f64 / r.wall.as_secs_f64()],
            "",
            2,
        );
        if let Some(s) = r.stmts {
            g.info(
                &format!("database round trips per step, {workers} worker(s): session store"),
                &[s.store / r.steps as f64],
                "",
                3,
            );
            g.info(
                &format!("commit batches per step, {workers} worker(s)"),
                &[s.commits / r.steps as f64],
                "",
                3,
            );
            g.info(
                &format!("task queue round trips per task, {workers} worker(s)"),
                &[s.queue / tasks as f64],
                "",
                2,
            );
        }
    }
    if let [(_, one), (_, four)] = &runs[..] {
        g.limit_as(
            "CPU per task, 4 workers ÷ 1 worker",
            &[per_task(four) / per_task(one)],
            "×",
            2,
            CPU_SCALING,
            &format!("at most {CPU_SCALING}×"),
        );
    }
    Ok(())
}

/// Budget: rows a watcher on another server reads per event committed.
const ROWS_PER_EVENT: f64 = 1.05;

fn watches(
    dsh: &Path,
    cluster: &Cluster,
    steps: usize,
    iterations: u32,
) -> Result<Vec<watch::Watch>> {
    (0..iterations)
        .map(|i| {
            eprintln!(
                "dsh-bench: fleet: {steps}-step turn watched from another server, run {}/{iterations} (load {})",
                i + 1,
                load()
            );
            watch::run(dsh, cluster, steps, i).context("the watched turn")
        })
        .collect()
}

fn watch_group(rows: &mut Vec<Row>, steps: usize, watched: &[watch::Watch]) {
    let mut g = Group::new(
        rows,
        format!("fleet: a {steps}-step turn on server A watched through server B (SSE)"),
    );
    let ratio: Vec<f64> = watched.iter().map(|w| w.rows / w.committed).collect();
    g.text(
        "rows B read from dsh_events / events the turn committed",
        &watched
            .iter()
            .map(|w| format!("{} / {} in {} statements", w.rows, w.committed, w.reads))
            .collect::<Vec<_>>()
            .join("; "),
    );
    g.limit_as(
        "rows read per committed event, watcher on another server",
        &ratio,
        "×",
        2,
        ROWS_PER_EVENT,
        "each committed event read once (1×; the first read covers the few events before the turn)",
    );
    let latency: Vec<f64> = watched.iter().flat_map(|w| w.latency_ms.clone()).collect();
    g.text(
        "delivery of a committed event, B's stream minus A's",
        &watch::spread(&latency),
    );
    let steers: Vec<Option<f64>> = watched.iter().flat_map(|w| w.steer_ms.clone()).collect();
    let shown: Vec<f64> = steers.iter().flatten().copied().collect();
    g.text(
        "steer sent to B: steerQueued on B's stream minus A's",
        &if shown.is_empty() {
            format!("never shown on B ({} steers)", steers.len())
        } else {
            format!(
                "{} ({} of {} shown)",
                watch::spread(&shown),
                shown.len(),
                steers.len()
            )
        },
    );
}

/// The watcher rows alone (`--only fleet-watch`).
pub fn watch_rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let steps = if quick { 20 } else { 200 };
    let load_start = load();
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(reason) => {
            Group::new(rows, "fleet").text("skipped: PostgreSQL cannot be started here", &reason);
            return Ok(());
        }
    };
    let watched = watches(dsh, &cluster, steps, iterations)?;
    let load_end = load();
    Group::new(rows, "fleet: watcher on another server").text(
        "load average (1, 5, 15 min) at start / end",
        &format!("{load_start} / {load_end}"),
    );
    watch_group(rows, steps, &watched);
    Ok(())
}
