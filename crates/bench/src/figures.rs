//! What is measured (the plan), the measuring, and the figures it yields.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::report::{Group, Row, Verdict, micro_sections, table};
use crate::resume::{self, ResumeRun};
use crate::run::{World, run_dsh};
use crate::scenario::{PARALLEL_READS, Scenario, ScenarioRun, Variant};

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
}

impl Plan {
    /// The full plan, or the quick smoke plan (one iteration, small scenarios).
    pub fn new(quick: bool, iterations: u32) -> Self {
        let (iterations, steps, parallel, large, resume_events) = if quick {
            (1, 3, 2, 1, 1_000)
        } else {
            (iterations, 20, 10, 5, 10_000)
        };
        let sc = |name, variant, steps| Scenario {
            name,
            variant,
            steps,
        };
        Self {
            iterations,
            quick,
            version_runs: if quick { 3 } else { iterations * 4 },
            scenarios: vec![
                sc("bash", Variant::Bash, steps),
                sc("reasoning", Variant::Reasoning, steps),
                sc("parallel reads", Variant::ParallelReads, parallel),
                sc("large output", Variant::LargeOutput, large),
            ],
            resume_events,
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
}

fn median_of(v: &[f64]) -> f64 {
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
    let mut scenarios = Vec::new();
    for s in &plan.scenarios {
        eprintln!(
            "dsh-bench: scenario {} ({} steps) ×{}",
            s.name, s.steps, plan.iterations
        );
        let runs = (0..plan.iterations)
            .map(|_| s.run(dsh))
            .collect::<Result<Vec<_>>>()?;
        scenarios.push(ScenarioRuns { scenario: *s, runs });
    }
    eprintln!(
        "dsh-bench: resume of a {}-event session ×{}",
        plan.resume_events, plan.iterations
    );
    let resume = (0..plan.iterations)
        .map(|_| resume::run(dsh, plan.resume_events))
        .collect::<Result<Vec<_>>>()?;

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
    resume_rows(&mut rows, &resume, plan.resume_events);
    Ok(Report {
        generated,
        dsh: dsh.display().to_string(),
        dsh_version,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average: load_start,
        load_average_end: load_average(),
        plan: Plan::new(plan.quick, plan.iterations),
        rows,
        version_ms,
        bash_spawn_ms,
        scenarios,
        resume,
    })
}

fn scenario_rows(rows: &mut Vec<Row>, sr: &ScenarioRuns, bash_ms: f64) {
    let s = &sr.scenario;
    let runs = &sr.runs;
    let per = |f: &dyn Fn(&ScenarioRun) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let group = format!("{} ({} steps)", s.name, s.steps);
    let mut g = Group::new(rows, group);
    g.info("total wall time", &per(&|r| r.wall_ms), "ms", 1);
    let rss = per(&|r| r.peak_rss_mib * 1024.0 * 1024.0 / 1e6);
    if s.variant == Variant::Bash {
        g.limit("peak RSS", &rss, "MB", 1, 30.0);
    } else {
        g.info("peak RSS", &rss, "MB", 1);
    }
    let overhead = per(&|r| median_of(&r.overhead_us) / 1e3);
    let gap = per(&|r| median_of(&r.gaps_us) / 1e3);
    match s.variant {
        Variant::Bash => g.limit("harness overhead per step", &overhead, "ms", 2, 2.0),
        Variant::Reasoning | Variant::LargeOutput => {
            g.info("harness overhead per step", &overhead, "ms", 2)
        }
        Variant::ParallelReads => {}
    }
    let gap_name = if s.variant == Variant::ParallelReads {
        format!("step gap with {PARALLEL_READS} reads (tools included)")
    } else {
        "step gap (response end → next request)".to_owned()
    };
    if s.variant == Variant::Bash && s.steps >= 4 {
        let quarter = s.steps / 4;
        g.info(
            &format!("harness overhead, first {quarter} steps"),
            &per(&|r| median_of(&r.overhead_us[..quarter]) / 1e3),
            "ms",
            2,
        );
        g.info(
            &format!("harness overhead, last {quarter} steps"),
            &per(&|r| median_of(&r.overhead_us[r.overhead_us.len() - quarter..]) / 1e3),
            "ms",
            2,
        );
    }
    if s.variant == Variant::Bash {
        g.info(
            "harness overhead per step, tool time = runner-timed bash spawn",
            &gap.iter().map(|g| g - bash_ms).collect::<Vec<_>>(),
            "ms",
            2,
        );
    }
    g.info(&gap_name, &gap, "ms", 2);
    if s.variant != Variant::ParallelReads {
        let tool = per(&|r| {
            median_of(
                &r.tool_ms
                    .iter()
                    .map(|t| t.unwrap_or(f64::NAN))
                    .collect::<Vec<_>>(),
            )
        });
        g.info("tool run time per step (`durationMs`)", &tool, "ms", 1);
    }
    if s.variant == Variant::LargeOutput {
        g.info(
            "wall time per step",
            &per(&|r| r.wall_ms / (s.steps + 1) as f64),
            "ms",
            1,
        );
        g.info(
            "tool result bytes sent to the model per call",
            &per(&|r| r.last_tool_result_bytes as f64),
            "B",
            0,
        );
    }
    // Prefix stability: exact.
    let fracs: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.prefix_fraction.clone())
        .collect();
    let stable = fracs.iter().filter(|f| **f >= 1.0).count();
    let min = fracs.iter().copied().fold(1.0, f64::min);
    g.exact(
        "prefix stability (request K+1 repeats request K's messages)",
        "100% of steps",
        &format!(
            "{:.1}% ({stable}/{} steps), lowest fraction {min:.4}",
            if fracs.is_empty() {
                100.0
            } else {
                stable as f64 * 100.0 / fracs.len() as f64
            },
            fracs.len()
        ),
        stable == fracs.len(),
    );
    let violations: Vec<&String> = runs.iter().flat_map(|r| &r.rule_violations).collect();
    g.exact(
        "dsh request rule violations (testkit)",
        "0",
        &match violations.first() {
            None => "0".to_owned(),
            Some(v) => format!("{}: {v}", violations.len()),
        },
        violations.is_empty(),
    );
    let checks: Vec<&String> = runs.iter().flat_map(|r| &r.check_failures).collect();
    let check_name = match s.variant {
        Variant::Reasoning => "reasoning passed back and results in call order",
        _ => "tool results passed back in call order",
    };
    g.exact(
        check_name,
        "every request",
        &match checks.first() {
            None => "yes".to_owned(),
            Some(c) => format!("{} failures, first: {c}", checks.len()),
        },
        checks.is_empty(),
    );
    if s.variant == Variant::Bash {
        g.info(
            "first request size",
            &per(&|r| r.request_bytes.first().copied().unwrap_or(0) as f64),
            "B",
            0,
        );
        g.info(
            "system prompt",
            &per(&|r| r.system_prompt_bytes as f64),
            "B",
            0,
        );
        g.info(
            "tool schemas (`tools` array)",
            &per(&|r| r.tool_schema_bytes as f64),
            "B",
            0,
        );
    }
    g.info(
        "request growth per step",
        &per(&|r| {
            let d: Vec<f64> = r
                .request_bytes
                .windows(2)
                .map(|w| w[1] as f64 - w[0] as f64)
                .collect();
            median_of(&d)
        }),
        "B",
        0,
    );
    g.info(
        "session directory bytes per step",
        &per(&|r| r.session_dir_bytes as f64 / (s.steps + 1) as f64),
        "B",
        0,
    );
    if matches!(s.variant, Variant::Bash | Variant::Reasoning) {
        let name = "write(2) bytes per session byte (HTTP bodies, stdout excluded)";
        let amp = per(&ScenarioRun::write_amplification);
        if amp.iter().all(|a| a.is_nan()) {
            g.text(name, "not available (`/proc/self/io` unreadable)");
        } else {
            g.limit(name, &amp, "×", 2, 1.5);
        }
    }
    if s.variant == Variant::Bash {
        g.info("session events", &per(&|r| r.events as f64), "", 0);
    }
}

fn resume_rows(rows: &mut Vec<Row>, runs: &[ResumeRun], target: usize) {
    let per = |f: &dyn Fn(&ResumeRun) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let mut g = Group::new(rows, format!("resume ({target} events)"));
    g.limit(
        "`dsh exec --resume`: spawn → first request",
        &per(&|r| r.to_first_request_ms),
        "ms",
        1,
        100.0,
    );
    g.info(
        "fresh session: spawn → first request",
        &per(&|r| r.fresh_to_first_request_ms),
        "ms",
        1,
    );
    g.info("resumed run total wall time", &per(&|r| r.wall_ms), "ms", 1);
    g.info(
        "`dsh sessions show` of the same log (read-only load + print)",
        &per(&|r| r.show_ms),
        "ms",
        1,
    );
    g.info(
        "events in the generated log",
        &per(&|r| r.events as f64),
        "",
        0,
    );
    g.info(
        "generated log size",
        &per(&|r| r.log_bytes as f64 / 1e6),
        "MB",
        2,
    );
    g.info(
        "generated log bytes per event",
        &per(&|r| r.log_bytes as f64 / r.events.max(1) as f64),
        "B",
        0,
    );
    g.info(
        "messages in the resumed request",
        &per(&|r| r.request_messages as f64),
        "",
        0,
    );
    g.info(
        "resumed request size",
        &per(&|r| r.request_bytes as f64 / 1e6),
        "MB",
        2,
    );
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
- **Session directory bytes per step**: all files in the session's directory after the run,
  divided by the model steps (tool steps + the final answer). **write(2) bytes per session
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
";

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::utc(951_827_696), "2000-02-29 12:34 UTC");
        assert_eq!(super::utc(1_796_128_293), "2026-12-01 12:31 UTC");
    }
}
