//! What is measured (the plan), the measuring, and the figures it yields.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::payload::{self, PayloadRun};
use crate::report::{Group, Row, Verdict, micro_sections, table};
use crate::resume::{self, Generated, ResumeRun};
use crate::rows::{growth_rows, long_rows, payload_rows, resume_rows, scenario_rows, spawn_rows};
use crate::run::{World, run_dsh};
use crate::scenario::{Scenario, ScenarioRun, Variant};
use crate::spawn::{self, SpawnPlan, SpawnRun};

/// Bytes per MB in the report.
pub const MB: f64 = 1e6;
/// Bytes per MiB (`ru_maxrss` is KiB).
pub const MIB: f64 = 1024.0 * 1024.0;

/// How many runs of what.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Runs of every scenario and of the resume.
    pub iterations: u32,
    /// Small scenarios, one iteration.
    pub quick: bool,
    /// Runs of `dsh --version`.
    pub version_runs: u32,
    /// The scenarios, the 20-step bash one first.
    pub scenarios: Vec<Scenario>,
    /// Events in the generated session that is resumed.
    pub resume_events: usize,
    /// Events in the large generated session (the growth figures).
    pub resume_large_events: usize,
    /// Runs of the long scenarios and of the large resume.
    pub long_iterations: u32,
    /// The long sessions (issue 23): 1,000 bash steps, 200 steps of 100 KB outputs.
    pub long: Vec<Scenario>,
    /// The bash spawn probe.
    pub spawn: SpawnPlan,
    /// Content bytes of the large `write` payload.
    pub payload_bytes: usize,
}

impl Plan {
    /// The full plan, or the quick smoke plan (one iteration, small scenarios).
    pub fn new(quick: bool, iterations: u32) -> Self {
        let (iterations, steps, parallel, large, resume_events) = if quick {
            (1, 3, 2, 1, 1_000)
        } else {
            (iterations, 20, 10, 5, 10_000)
        };
        let (long_bash, long_medium, resume_large_events, payload_bytes) = if quick {
            (8, 8, 3_000, 200_000)
        } else {
            (1_000, 200, 100_000, 5_000_000)
        };
        let sc = Scenario::new;
        let split = Scenario {
            split_done: true,
            ..sc(
                "bash, `[DONE]` split from the chunked terminator",
                Variant::Bash,
                steps,
            )
        };
        let long = |name, variant, steps| Scenario {
            rss_at_quarters: true,
            ..sc(name, variant, steps)
        };
        Self {
            iterations,
            quick,
            version_runs: if quick { 3 } else { iterations * 4 },
            scenarios: vec![
                sc("bash", Variant::Bash, steps),
                split,
                sc("reasoning", Variant::Reasoning, steps),
                sc("parallel reads", Variant::ParallelReads, parallel),
                sc("large output", Variant::LargeOutput, large),
            ],
            resume_events,
            resume_large_events,
            long_iterations: if quick { 1 } else { iterations.min(3) },
            long: vec![
                long("long session: bash", Variant::Bash, long_bash),
                long(
                    "long session: 100 KB outputs",
                    Variant::MediumOutput,
                    long_medium,
                ),
            ],
            spawn: SpawnPlan {
                pairs: if quick { 1 } else { 4 },
                calls: if quick { 2 } else { 16 },
                target_rss_mb: 200.0,
            },
            payload_bytes,
        }
    }
}

/// The runs of one scenario.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioRuns {
    /// The scenario.
    pub scenario: Scenario,
    /// One entry per iteration.
    pub runs: Vec<ScenarioRun>,
}

/// The load average when a group of runs started.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupLoad {
    /// What was about to run.
    pub group: String,
    /// `/proc/loadavg` (1, 5, 15 minutes).
    pub load_average: String,
}

/// Everything measured, and the rows derived from it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// When the run started (UTC).
    pub generated: String,
    /// The `dsh` binary measured.
    pub dsh: String,
    /// Its `--version` output.
    pub dsh_version: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// `/proc/loadavg` (1, 5, 15 minutes) when the run started.
    pub load_average: String,
    /// `/proc/loadavg` when the run ended.
    pub load_average_end: String,
    /// `/proc/loadavg` when each group of runs started.
    pub group_load: Vec<GroupLoad>,
    /// What was run.
    pub plan: Plan,
    /// The figures with budgets and verdicts.
    pub rows: Vec<Row>,
    /// `dsh --version` wall times, ms.
    pub version_ms: Vec<f64>,
    /// Wall times of `bash -c 'echo step-1'` spawned by the runner itself, ms (the tool's
    /// process cost at µs precision, where `durationMs` has whole ms).
    pub bash_spawn_ms: Vec<f64>,
    /// Raw per-run figures of every scenario.
    pub scenarios: Vec<ScenarioRuns>,
    /// Raw figures of every resume run.
    pub resume: Vec<ResumeRun>,
    /// Raw figures of every resume run of the large session.
    pub resume_large: Vec<ResumeRun>,
    /// Raw per-run figures of the long sessions.
    pub long: Vec<ScenarioRuns>,
    /// Spawn probe runs with a small history (a fresh session).
    pub spawn_small: Vec<SpawnRun>,
    /// Spawn probe runs after resuming a large session.
    pub spawn_large: Vec<SpawnRun>,
    /// Large-payload runs.
    pub payload: Vec<PayloadRun>,
    /// Sandbox confinement probe runs (confined and unconfined, interleaved).
    pub confine: Vec<crate::confine::ConfineRun>,
}

/// The median of `v` (NaN when empty).
pub fn median_of(v: &[f64]) -> f64 {
    crate::stats::Stat::median_of(v)
}

/// The current time as `YYYY-MM-DD HH:MM UTC` (civil-from-days; no time-zone crate needed).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(i64::try_from(secs).unwrap_or(0))
}

/// Unix seconds as `YYYY-MM-DD HH:MM UTC`.
fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the plan against `dsh`.
pub fn measure(dsh: &Path, plan: &Plan) -> Result<Report> {
    let generated = utc_now();
    let load_start = load_average();
    let world = World::new()?;
    // One warm-up, also giving the version text.
    let dsh_version = run_dsh(dsh, &world, &["--version"], false)?
        .stdout
        .trim()
        .to_owned();
    let mut version_ms = Vec::new();
    for _ in 0..plan.version_runs {
        let out = run_dsh(dsh, &world, &["--version"], true).context("dsh --version")?;
        version_ms.push(out.wall.as_secs_f64() * 1e3);
    }
    let mut bash_spawn_ms = Vec::new();
    for _ in 0..plan.version_runs * 2 {
        let start = std::time::Instant::now();
        let out = std::process::Command::new("bash")
            .args(["-c", "echo step-1"])
            .current_dir(&world.work)
            .stdin(std::process::Stdio::null())
            .output()
            .context("spawning bash")?;
        bash_spawn_ms.push(start.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(out.status.success(), "bash -c 'echo step-1' failed");
    }
    let mut group_load: Vec<GroupLoad> = Vec::new();
    let mut mark = |group: String| {
        eprintln!("dsh-bench: {group}");
        group_load.push(GroupLoad {
            group,
            load_average: load_average(),
        });
    };
    let mut scenarios = Vec::new();
    for s in &plan.scenarios {
        mark(format!(
            "scenario {} ({} steps) ×{}",
            s.name, s.steps, plan.iterations
        ));
        let runs = (0..plan.iterations)
            .map(|_| s.run(dsh))
            .collect::<Result<Vec<_>>>()?;
        scenarios.push(ScenarioRuns { scenario: *s, runs });
    }
    mark(format!(
        "resume of a {}-event session ×{}",
        plan.resume_events, plan.iterations
    ));
    let resume = {
        let g = Generated::new(dsh, plan.resume_events)?;
        (0..plan.iterations)
            .map(|_| resume::run(dsh, &g))
            .collect::<Result<Vec<_>>>()?
    };
    mark(format!(
        "resume of a {}-event session ×{}",
        plan.resume_large_events, plan.long_iterations
    ));
    let large = Generated::new(dsh, plan.resume_large_events)?;
    let resume_large = (0..plan.long_iterations)
        .map(|_| resume::run(dsh, &large))
        .collect::<Result<Vec<_>>>()?;
    let mut long = Vec::new();
    for s in &plan.long {
        mark(format!(
            "scenario {} ({} steps) ×{}",
            s.name, s.steps, plan.long_iterations
        ));
        let runs = (0..plan.long_iterations)
            .map(|_| s.run(dsh))
            .collect::<Result<Vec<_>>>()?;
        long.push(ScenarioRuns { scenario: *s, runs });
    }
    let spawn_events = spawn_history(plan, &resume_large);
    mark(format!(
        "bash spawn probe, fresh and after resuming {spawn_events} events, interleaved ×{}",
        plan.iterations
    ));
    let (spawn_small, spawn_large) = {
        let owned;
        let g = if spawn_events == large.events {
            &large
        } else {
            drop(large);
            owned = Generated::new(dsh, spawn_events)?;
            &owned
        };
        let (mut small, mut big) = (Vec::new(), Vec::new());
        // Interleaved, so both sizes see the same machine load.
        for _ in 0..plan.iterations {
            small.push(spawn::run(dsh, &plan.spawn, None)?);
            big.push(spawn::run(dsh, &plan.spawn, Some(g))?);
        }
        (small, big)
    };
    mark(format!(
        "large payload ({} bytes) ×{}",
        plan.payload_bytes, plan.iterations
    ));
    let payload = (0..plan.iterations)
        .map(|_| payload::run(dsh, plan.payload_bytes))
        .collect::<Result<Vec<_>>>()?;

    mark(format!("sandbox confinement probe ×{}", plan.iterations));
    let confine = crate::confine::runs(dsh, plan.iterations, plan.quick)?;
    let mut rows = Vec::new();
    Group::new(&mut rows, "startup").limit("`dsh --version` wall time", &version_ms, "ms", 2, 10.0);
    Group::new(&mut rows, "startup").info(
        "`bash -c 'echo step-1'` spawned by the runner",
        &bash_spawn_ms,
        "ms",
        2,
    );
    let bash_ms = median_of(&bash_spawn_ms);
    for sr in &scenarios {
        scenario_rows(&mut rows, sr, bash_ms);
    }
    resume_rows(&mut rows, &resume, plan.resume_events, true);
    resume_rows(&mut rows, &resume_large, plan.resume_large_events, false);
    growth_rows(&mut rows, &resume, &resume_large);
    for sr in &long {
        long_rows(&mut rows, sr);
    }
    spawn_rows(&mut rows, &spawn_small, &spawn_large);
    payload_rows(&mut rows, &payload);
    crate::layout::rows(&mut rows, dsh);
    mark("compaction: long session in a 32k window, overhead on a 1 MB history".into());
    crate::compaction::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark("adapters: per-step overhead of every provider route".into());
    crate::providers::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    crate::confine::rows(&mut rows, &confine);
    mark("session log compression: bytes per step, zstd resume".into());
    crate::compression::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark(format!("sub-agent delegation ×{}", plan.iterations));
    crate::subagent::rows(dsh, plan.iterations, &mut rows)?;
    mark("startup: the default composition and each plugin's mount".into());
    crate::startup::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark("project context: nested AGENTS.md and 50 skills".into());
    crate::context::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark("front ends: SDK runtime and ACP server turns".into());
    crate::frontends::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark("tool set: schema bytes with every tool, order stability".into());
    crate::tool_set::rows(dsh, &mut rows)?;
    mark("MCP client: stdio call overhead, startup with a slow server".into());
    crate::mcp::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark("interactive UI in a pty: first frame, keys, streaming, RSS".into());
    crate::tui::rows(dsh, plan.quick, plan.iterations, &mut rows)?;
    mark("sessions apart in one JSONL store: step writes while another session flushes".into());
    crate::store_apart::rows(plan.quick, plan.iterations, &mut rows)?;
    Ok(Report {
        generated,
        dsh: dsh.display().to_string(),
        dsh_version,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average: load_start,
        load_average_end: load_average(),
        group_load,
        plan: Plan::new(plan.quick, plan.iterations),
        rows,
        version_ms,
        bash_spawn_ms,
        scenarios,
        resume,
        resume_large,
        long,
        spawn_small,
        spawn_large,
        payload,
        confine,
    })
}

/// Events of the session resumed for the large-RSS spawn probe: enough for about
/// `target_rss_mb` of harness memory at the per-event cost the large resume measured (the large
/// session itself when that is within 25%), 20,000–400,000 events, its resumed request kept
/// under 48 MB (the mock takes 64 MB). The quick plan always takes the large session.
pub fn spawn_history(plan: &Plan, resume_large: &[ResumeRun]) -> usize {
    let events = resume_large
        .first()
        .map_or(plan.resume_large_events, |r| r.events);
    if plan.quick {
        return events;
    }
    let rss = median_of(
        &resume_large
            .iter()
            .map(|r| r.peak_rss_mib)
            .collect::<Vec<_>>(),
    );
    let fresh = median_of(
        &resume_large
            .iter()
            .map(|r| r.fresh_peak_rss_mib)
            .collect::<Vec<_>>(),
    );
    let request = median_of(
        &resume_large
            .iter()
            .map(|r| r.request_bytes as f64)
            .collect::<Vec<_>>(),
    );
    let per_event = (rss - fresh) * MIB / events as f64;
    if !per_event.is_finite() || per_event <= 0.0 {
        return events;
    }
    let mut want = (plan.spawn.target_rss_mb * MB - fresh * MIB) / per_event;
    if request > 0.0 {
        want = want.min(48.0 * MB / (request / events as f64));
    }
    let want = want.clamp(20_000.0, 400_000.0) as usize;
    if (want as f64 - events as f64).abs() <= 0.25 * events as f64 {
        events
    } else {
        want
    }
}

/// The whole `docs/benchmarks.md`.
pub fn markdown(report: &Report, root: &Path) -> String {
    let failed = report
        .rows
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .count();
    let dsh = Path::new(&report.dsh);
    let shown = root
        .canonicalize()
        .ok()
        .and_then(|r| dsh.strip_prefix(r).ok().map(|p| p.display().to_string()))
        .unwrap_or_else(|| report.dsh.clone());
    let mut out = format!(
        "# dsh benchmarks\n\n\
         Written by `dsh-bench` (`crates/bench`; how to run it: `crates/bench/README.md`).\n\n\
         - Run: {}, {} iteration(s){}; `{}` (`{shown}`)\n\
         - Machine: {} CPUs, load average {} at the start, {} at the end\n\
         - Figures are medians over the iterations with (min–max) across them. A timing or memory\n  \
         budget fails the runner only when missed by more than 2×; exact budgets fail on any miss.\n\
         - Result: {}\n\n",
        report.generated,
        report.plan.iterations,
        if report.plan.quick {
            " (quick smoke: small scenarios, not meaningful)"
        } else {
            ""
        },
        report.dsh_version,
        report.cpus,
        report.load_average,
        report.load_average_end,
        {
            let count = |v: Verdict| report.rows.iter().filter(|r| r.verdict == v).count();
            let (pass, over) = (count(Verdict::Pass), count(Verdict::Over));
            let over_names: Vec<String> = report
                .rows
                .iter()
                .filter(|r| r.verdict != Verdict::Pass && r.verdict != Verdict::Info)
                .map(|r| format!("{} / {}", r.group, r.figure))
                .collect();
            if over_names.is_empty() {
                format!("all {pass} budgeted figures pass")
            } else {
                format!(
                    "{pass} pass, {over} over budget within the 2× margin, {failed} failed: {}",
                    over_names.join("; ")
                )
            }
        },
    );
    out.push_str(&load_lines(report));
    out.push_str("## Budgets (ARCHITECTURE §10)\n\n");
    out.push_str(&table(&report.rows, true));
    out.push_str("\n## All figures\n\n");
    out.push_str(&table(&report.rows, false));
    out.push_str(METHOD);
    out.push_str("\n## Microbenchmarks (`cargo bench`, latest figures from the crate READMEs)\n\n");
    out.push_str(
        "These are not re-run by `dsh-bench`: they are the figures each crate's README records \
         from its own `cargo bench`, copied here when this file was written.\n\n",
    );
    out.push_str(&micro_sections(root));
    out
}

/// The 1-minute load when each group started, and a warning when it reached the CPU count.
fn load_lines(report: &Report) -> String {
    let one = |l: &str| {
        l.split_whitespace()
            .next()
            .and_then(|x| x.parse::<f64>().ok())
    };
    let mut out = String::new();
    if !report.group_load.is_empty() {
        out.push_str("1-minute load average when each group of runs started:\n\n");
        for g in &report.group_load {
            out.push_str(&format!(
                "- {}: {}\n",
                g.load_average.split_whitespace().next().unwrap_or("?"),
                g.group
            ));
        }
        out.push('\n');
    }
    let peak = std::iter::once(report.load_average.as_str())
        .chain(std::iter::once(report.load_average_end.as_str()))
        .chain(report.group_load.iter().map(|g| g.load_average.as_str()))
        .filter_map(one)
        .fold(f64::NAN, f64::max);
    if peak >= report.cpus as f64 {
        out.push_str(&format!(
            "**Load warning**: the 1-minute load average reached {peak:.2} on {} CPUs during \
             this run: other processes competed for the cores, so the timings (not the memory, \
             size or exact figures) are inflated and noisier than on a quiet machine.\n\n",
            report.cpus
        ));
    }
    out
}

const METHOD: &str = "
## How the figures are measured

- Every run is the real `dsh exec` process with a fresh temporary `DSH_HOME` and working
  directory, against `dsh-testkit`'s `MockServer` started inside the runner (loopback HTTP). The
  mock answers at once, each response in one write.
- **Wall time and peak RSS**: `dsh` runs under a probe (`dsh-bench __probe`, the runner re-executed)
  that times spawn → reaped exit and reads `getrusage(RUSAGE_CHILDREN).ru_maxrss`: the peak RSS of
  the largest process of the run (dsh itself; its bash children are smaller). 1 MB = 10^6 bytes.
- **Step gap**: the mock's `finished_at` of response K (last byte handed to the socket) →
  `arrived_at` of request K+1. **Harness overhead** = step gap − the tool's own run time, taken
  from the session log (`tool/result` `meta.durationMs` of the bash tool, the slowest of the
  step). `durationMs` is truncated to whole milliseconds, so the overhead is an upper bound
  (up to 1 ms high). The bash tool's run time is mostly `fork`/`exec` of bash, so a second
  estimate subtracts instead the median wall time of `bash -c 'echo step-1'` spawned by the
  runner itself (µs precision, but not the tool's exact work: no process group, no output
  formatting).
- **Prefix stability**: per step, the fraction of request K's serialised `messages` array (raw
  bytes as sent, without its closing `]`) that request K+1 repeats byte for byte as its prefix.
  **Rule violations** are testkit's `dsh_rule_violations` (key order, nulls, changed fields).
- **Request sizes**: HTTP body bytes. System prompt: the text of the system message of the first
  request. Tool schemas: the raw `tools` array of the first request.
- **Session directory bytes per step**: all files in the session's directory after the run
  (the log, its lock and any spill files of long tool output kept with the session), divided by
  the model steps (tool steps + the final answer); **session log bytes per step**: the log file (zstd frames, the default encoding)
  alone. **write(2) bytes per session
  byte**: `wchar` of the probe after the wait (every byte dsh and its reaped children passed to
  `write`-family calls: log, stdout, pipes, sockets) minus the HTTP request bodies and stdout,
  over the session directory size. About 1 means each log byte is written once (the rest is
  HTTP headers and bash's pipe output); a log rewritten per streamed chunk (the final answer
  alone streams ~250 deltas) would multiply it. This is the check of the *bytes written per
  streamed token: amortised* budget.
- **Scenarios**: *bash*: each step one `bash` call `echo step-K`, then a final text answer
  (about 2 KB in 8-character deltas). *reasoning*: the same with reasoning text in every
  response; checks that every earlier reasoning text comes back as `reasoning_content`.
  *parallel reads*: 8 parallel-safe `read` calls per step (40-line files); the gap includes the
  reads. *large output*: one `bash` call printing 1,000,000 bytes per step.
- **Resume**: `dsh` writes a two-turn session (one bash step, then eight; each turn its own
  `dsh exec`, so each turn also logs a `request/header` with the tool schemas), the runner
  repeats the second turn's events (fresh message and call ids; shifted `seq`, `turn`, `time`,
  `sourceEventSeqs`) up to the event count, then times `dsh exec --resume` from spawn to its
  first request at the mock (open, load, fold, derive, compose, send) and checks that the
  request replays every turn. The fresh-session figure is the same path without a stored log.
  The log is generated once per size and written back before every resume. Each iteration
  also resumes it once more under the probe, and runs a fresh session under the probe:
  **memory per stored event** = (peak RSS of that resume − peak RSS of the fresh session) /
  events in the log. The same is done with a 100,000-event log (same template, ten times the
  repeats).
- **Resume growth**: from the 10k to the 100k log, the median spawn → first request beyond a
  fresh session's, the median `sessions show` time and the median peak RSS beyond a fresh
  session's, each as large / small; *growth per event* divides that by the ratio of the event
  counts, so 1 is linear, above 1 worse than linear.
- **Connections per run**: `MockServer::connection_count()`, the TCP connections the mock
  accepted during the run: exactly 1 in every run (one keep-alive connection for every
  request). hyper returns a finished connection to its pool from a task of its own, which the
  OS can preempt just as the next request looks for it; dsh's client waits for that return
  instead of opening a second connection (`dsh-llm-http`'s `pool` module), so the budget is
  exact. A client that does not keep connections alive opens one per
  request. The *`[DONE]`
  split* variant runs the same bash scenario with every response sent as: the SSE events, then
  `data: [DONE]` in its own write, then 1 ms later the end of the body (testkit's
  `Reply::terminator_after`), so the chunked terminator arrives after `[DONE]` as it can from
  a real server; a client that stops reading at `[DONE]` cannot return the connection to its
  pool. Its gaps start after the pause, so only the connection count and the exact checks are
  reported for it.
- **Long sessions** (issue 23): the bash scenario with 1,000 steps, and 200 steps whose bash
  call prints 100 KB (`head -c 100000 /dev/zero | tr '\\0' b`; the model gets the capped
  result). Figures per quarter of the steps: the median harness overhead and step gap of the
  quarter's steps, the median tool time, the request size after the quarter's last step, and
  dsh's RSS (and peak RSS so far) at the quarter's end: the last step of each quarter runs
  `cat \"$HOME/.dsh-bench-rss\"` instead of its usual command: a FIFO on which the bench answers
  with the `VmHWM`/`VmRSS` lines of dsh's own `/proc/PID/status` (the command cannot read them:
  the sandbox gives it a PID namespace where dsh is not visible and `$PPID` is the warm
  sandbox's supervisor), and the figures are read from that tool result in the log.
  Peak RSS is the probe's. These run `min(iterations, 3)` times.
- **Bash spawn round trip**: one turn of a warm-up step, then pairs of steps: A = one bash call
  (the RSS command above, which records dsh's RSS at that moment), B = the
  same call plus 16 bash calls `true`. Bash calls are exclusive (run one at a time), so
  (gap of B − gap of A) / 16 is the round trip of one more `true` call as the harness sees it
  (spawn, wait, result, log append), while request serialisation, which grows with the
  history, is in both gaps and cancels out. Measured in a fresh session (small history) and
  after resuming a generated session sized, from the 100k resume's memory per event, for about
  200 MB of dsh RSS (20,000–400,000 events, the resumed request under 48 MB; the 100k log itself
  when within 25%). Each run's figure is the median over its 4 pairs; the small and large runs
  alternate; the ratio is the median of the large runs over the median of the small ones.
- **Large payload** (issue 12 item 8): one step whose tool call is a `write` of 5,000,000 bytes
  of text lines (with quotes and backslashes to escape) to a new file, streamed in 256-character
  argument deltas, then a short answer. *Payload* = the bytes of the call's JSON arguments.
  Budgets: peak RSS under 3 × payload + 15 MB, the session log (zstd, the default encoding) at most 1.2 × payload;
  the file on disk must be the content byte for byte.
- **Binary layout**: read from the measured binary's symbol table, no run. How many of the
  functions in `crates/cli/hot-functions.txt` (the link order file of the release build, see
  `crates/cli/build.rs`) the binary defines, and the span of `.text` they occupy: laid out by
  the order they are a few contiguous megabytes; without it (another build shape, a stale file,
  another linker) they are scattered over all of `.text`, and every fresh session's RSS doubles.
  Budget (exact): a binary linked with the file (it defines `DSH_LINK_ORDER_FILE`) holds at least
  80 % of its names; under that the file is stale and `scripts/hot-functions` regenerates it.
";

#[cfg(test)]
mod tests {
    use super::*;

    fn resumed(events: usize, rss: f64, fresh: f64, request: usize) -> ResumeRun {
        ResumeRun {
            events,
            peak_rss_mib: rss,
            fresh_peak_rss_mib: fresh,
            request_bytes: request,
            ..ResumeRun::default()
        }
    }

    #[test]
    fn the_spawn_history_is_sized_for_the_target_rss() {
        let plan = Plan::new(false, 5);
        // 290 MiB beyond fresh for 100k events: ~2.9 KiB an event; 200 MB needs ~62k events.
        let runs = [resumed(100_016, 300.0, 10.0, 5_000_000)];
        let n = spawn_history(&plan, &runs);
        assert!((60_000..66_000).contains(&n), "{n}");
        // Within 25% of the large log: the large log itself.
        let runs = [resumed(100_016, 190.0, 10.0, 5_000_000)];
        assert_eq!(spawn_history(&plan, &runs), 100_016);
        // A lean dsh needs more events, capped by the request size (48 MB) and 400k.
        let runs = [resumed(100_016, 30.0, 10.0, 20_000_000)];
        let n = spawn_history(&plan, &runs);
        assert!((230_000..250_000).contains(&n), "{n}");
        let runs = [resumed(100_016, 12.0, 10.0, 1_000_000)];
        assert_eq!(spawn_history(&plan, &runs), 400_000);
        // The quick plan never generates another log.
        let quick = Plan::new(true, 1);
        assert_eq!(
            spawn_history(&quick, &[resumed(3_016, 30.0, 10.0, 1)]),
            3_016
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::utc(951_827_696), "2000-02-29 12:34 UTC");
        assert_eq!(super::utc(1_796_128_293), "2026-12-01 12:31 UTC");
    }
}
