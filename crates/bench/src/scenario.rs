//! The scripted scenarios and the figures taken from one run of each.

use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::validate::common_prefix_len;
use dsh_testkit::{Completion, RecordedRequest, Reply};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::run::{World, files_under, run_dsh, session_log};

/// The prompt every scenario starts with.
const PROMPT: &str = "Run the benchmark steps one by one, then report.";
/// Parallel-safe calls per step in the parallel-reads variant.
pub const PARALLEL_READS: usize = 8;
/// The large-output command: 1,000,000 bytes of `a` on stdout.
const LARGE_COMMAND: &str = "head -c 1000000 /dev/zero | tr '\\0' a";
/// The medium-output command: 100,000 bytes of `b` on stdout.
const MEDIUM_COMMAND: &str = "head -c 100000 /dev/zero | tr '\\0' b";
/// A command printing dsh's own `VmHWM` and `VmRSS` lines: the bench answers on a FIFO in the
/// world's home (`run::RSS_FIFO`), as the command cannot see dsh from its sandbox.
pub const RSS_COMMAND: &str = "cat \"$HOME/.dsh-bench-rss\"";

/// What the model does at each step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Variant {
    /// One `bash` call `echo step-K` per step.
    Bash,
    /// As `Bash`, with reasoning text in every response (which dsh must pass back).
    Reasoning,
    /// Eight parallel-safe `read` calls per step.
    ParallelReads,
    /// One `bash` call printing 1 MB per step.
    LargeOutput,
    /// One `bash` call printing 100 KB per step (the long-session variant).
    MediumOutput,
}

/// A scenario: a variant and its number of tool steps (a final text answer follows them).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Scenario {
    /// Short name used in the report.
    pub name: &'static str,
    /// What each step does.
    pub variant: Variant,
    /// Tool steps before the final answer.
    pub steps: usize,
    /// Send each response's `data: [DONE]` event in its own write, and the chunked terminator
    /// in a later one (testkit's `terminator_after`, 1 ms), so a client that drops the body at
    /// `[DONE]` loses the connection.
    pub split_done: bool,
    /// The last step of every quarter runs [`RSS_COMMAND`] instead of its usual command, so the
    /// log records dsh's RSS a quarter at a time.
    pub rss_at_quarters: bool,
}

/// Figures from one run of a scenario.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioRun {
    /// Wall time of the whole `dsh exec`, ms.
    pub wall_ms: f64,
    /// Peak RSS of the largest process of the run (dsh itself), MiB.
    pub peak_rss_mib: f64,
    /// Response K finished → request K+1 arrived, µs, one per tool step.
    pub gaps_us: Vec<f64>,
    /// Tool run time of each step from the session log (`meta.durationMs` of bash results, the
    /// slowest of the step), ms; `None` when the results carry no duration.
    pub tool_ms: Vec<Option<f64>>,
    /// Gap minus tool run time, µs (an upper bound: `durationMs` is truncated to whole ms).
    pub overhead_us: Vec<f64>,
    /// Per step: the fraction of request K's serialised `messages` that request K+1 repeats
    /// byte for byte as its prefix.
    pub prefix_fraction: Vec<f64>,
    /// Per request after the first: the mock's `cached_prefix_bytes` (longest byte prefix shared
    /// with an earlier request body) over the body size. In the JSON only: members after
    /// `messages` (the tool schemas) end the shared prefix, so it is no cache-hit estimate.
    pub cached_fraction: Vec<f64>,
    /// Body size of every request, bytes.
    pub request_bytes: Vec<usize>,
    /// Bytes of the system prompt text in the first request.
    pub system_prompt_bytes: usize,
    /// Bytes of the serialised `tools` array in the first request.
    pub tool_schema_bytes: usize,
    /// Bytes of every file in the session directory after the run (log, lock, spill files).
    pub session_dir_bytes: u64,
    /// Bytes of the session log (`.jsonl`) after the run.
    pub session_log_bytes: u64,
    /// Events in the session log.
    pub events: usize,
    /// Bytes the run passed to `write(2)` (dsh and its tools), if the probe could read them.
    pub wchar: Option<u64>,
    /// Bytes `dsh` printed on stdout.
    pub stdout_bytes: usize,
    /// dsh request rules broken (testkit `dsh_rule_violations`), e.g. a changed prefix.
    pub rule_violations: Vec<String>,
    /// Variant-specific checks that failed (reasoning not replayed, results out of order, …).
    pub check_failures: Vec<String>,
    /// Bytes of the largest tool result in the last request (large output: the cap).
    pub last_tool_result_bytes: usize,
    /// TCP connections the mock accepted during the run.
    pub connections: usize,
    /// `(step, KiB)`: dsh's `VmRSS` as printed by the [`RSS_COMMAND`] steps.
    pub rss_probes_kib: Vec<(usize, u64)>,
    /// `(step, KiB)`: dsh's `VmHWM` (peak RSS so far) as printed by the [`RSS_COMMAND`] steps.
    pub hwm_probes_kib: Vec<(usize, u64)>,
}

impl Scenario {
    /// The text of the reasoning of step `k` (reasoning variant).
    fn reasoning(k: usize) -> String {
        format!("Step {k}: the plan is to run the next command and check what it prints. ")
            .repeat(4)
    }

    fn final_text(&self) -> String {
        format!(
            "All {} steps are done; every command printed what it should. ",
            self.steps
        )
        .repeat(32)
    }

    fn call_id(k: usize, i: usize) -> String {
        format!("call_{i:02}_benchstep{k:05}call{i:02}pad12")
    }

    /// A scenario without the optional shapes.
    pub fn new(name: &'static str, variant: Variant, steps: usize) -> Self {
        Self {
            name,
            variant,
            steps,
            split_done: false,
            rss_at_quarters: false,
        }
    }

    /// The steps (1-based) that print dsh's RSS: the last of each quarter.
    pub fn rss_steps(&self) -> Vec<usize> {
        if !self.rss_at_quarters || self.steps < 4 {
            return Vec::new();
        }
        (1..=4).map(|q| q * self.steps / 4).collect()
    }

    /// The bash command of step `k` (bash-calling variants), given [`Scenario::rss_steps`].
    fn command(&self, k: usize, rss_steps: &[usize]) -> String {
        if rss_steps.contains(&k) {
            RSS_COMMAND.to_owned()
        } else if self.variant == Variant::MediumOutput {
            MEDIUM_COMMAND.to_owned()
        } else {
            format!("echo step-{k}")
        }
    }

    /// The reply playing `c`, split as [`Scenario::split_done`] asks.
    fn play(&self, c: &Completion) -> Reply {
        if !self.split_done {
            return c.reply();
        }
        let bytes = c.to_bytes();
        let done = dsh_testkit::DONE_EVENT.as_bytes();
        let head = bytes.slice(..bytes.len().saturating_sub(done.len()));
        Reply::sse()
            .bytes(head)
            .bytes(dsh_testkit::DONE_EVENT)
            .terminator_after(std::time::Duration::from_millis(1))
    }

    /// The replies of the whole run, in order: one per step, then the final answer.
    pub fn replies(&self) -> Vec<Reply> {
        let rss_steps = self.rss_steps();
        let mut out = Vec::with_capacity(self.steps + 1);
        for k in 1..=self.steps {
            let mut c = Completion::new().chars_per_delta(8);
            match self.variant {
                Variant::Bash | Variant::Reasoning => {
                    if self.variant == Variant::Reasoning {
                        c = c.reasoning(&Self::reasoning(k));
                    }
                    let args = serde_json::json!({
                        "command": self.command(k, &rss_steps),
                        "description": format!("Print step {k}"),
                    });
                    c = c.tool_call_with_id(&Self::call_id(k, 0), "bash", &args.to_string());
                }
                Variant::ParallelReads => {
                    for i in 0..PARALLEL_READS {
                        let args = serde_json::json!({ "file_path": format!("file-{i}.txt") });
                        c = c.tool_call_with_id(&Self::call_id(k, i), "read", &args.to_string());
                    }
                }
                Variant::LargeOutput => {
                    let args = serde_json::json!({
                        "command": LARGE_COMMAND,
                        "description": "Print one megabyte",
                    });
                    c = c.tool_call_with_id(&Self::call_id(k, 0), "bash", &args.to_string());
                }
                Variant::MediumOutput => {
                    let args = serde_json::json!({
                        "command": self.command(k, &rss_steps),
                        "description": "Print 100 KB",
                    });
                    c = c.tool_call_with_id(&Self::call_id(k, 0), "bash", &args.to_string());
                }
            }
            out.push(self.play(&c));
        }
        let mut last = Completion::new().chars_per_delta(8);
        if self.variant == Variant::Reasoning {
            last = last.reasoning(&Self::reasoning(self.steps + 1));
        }
        out.push(self.play(&last.text(&self.final_text())));
        out
    }

    /// Runs the scenario once with the `dsh` at `dsh` and takes its figures.
    pub fn run(&self, dsh: &Path) -> Result<ScenarioRun> {
        let world = World::new()?;
        if self.variant == Variant::ParallelReads {
            for i in 0..PARALLEL_READS {
                let text: String = (1..=40)
                    .map(|l| format!("file {i} line {l}: some text to read back\n"))
                    .collect();
                std::fs::write(world.work_dir().join(format!("file-{i}.txt")), text)
                    .context("writing the files to read")?;
            }
        }
        world.server.push_all(self.replies());
        let out = run_dsh(dsh, &world, &["exec", PROMPT], true)
            .with_context(|| format!("scenario {}", self.name))?;
        let probe = out.probe.unwrap_or_default();
        // Every response's end is recorded (dsh has exited, so this returns at once).
        let reqs: Vec<RecordedRequest> = world
            .server
            .wait_for_finished_blocking(self.steps + 1, std::time::Duration::from_secs(10))
            .with_context(|| {
                format!(
                    "scenario {}: fewer than {} responses ended",
                    self.name,
                    self.steps + 1
                )
            })?
            .into_iter()
            .filter(|r| r.is_chat())
            .collect();
        ensure!(
            reqs.len() == self.steps + 1,
            "scenario {}: {} requests, expected {}",
            self.name,
            reqs.len(),
            self.steps + 1
        );
        if let Some(bad) = reqs.iter().find(|r| r.status != 200) {
            bail!(
                "scenario {}: request {} got status {}",
                self.name,
                bad.index,
                bad.status
            );
        }
        ensure!(
            out.stdout.contains(self.final_text().trim_end()),
            "scenario {}: the final answer was not printed",
            self.name
        );
        let log = session_log(world.home.path())?;
        let events = read_events(&log)?;
        let mut run = ScenarioRun {
            wall_ms: out.wall.as_secs_f64() * 1e3,
            peak_rss_mib: probe.max_rss_kib as f64 / 1024.0,
            wchar: probe.wchar,
            stdout_bytes: out.stdout.len(),
            events: events.len(),
            rule_violations: world.server.dsh_rule_violations(),
            connections: world.server.connection_count(),
            ..ScenarioRun::default()
        };
        for k in self.rss_steps() {
            let text = tool_text(&events, k).unwrap_or_default();
            if let Some(v) = vm_rss_kib(&text) {
                run.rss_probes_kib.push((k, v));
            }
            if let Some(v) = status_kib(&text, "VmHWM:") {
                run.hwm_probes_kib.push((k, v));
            }
        }
        run.session_log_bytes = std::fs::metadata(&log).map_or(0, |m| m.len());
        if let Some(dir) = log.parent() {
            run.session_dir_bytes = files_under(dir)
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum();
        }
        let bodies: Vec<Body> = reqs
            .iter()
            .map(|r| {
                serde_json::from_slice(&r.body)
                    .with_context(|| format!("request {} is not a chat body", r.index))
            })
            .collect::<Result<_>>()?;
        run.request_bytes = reqs.iter().map(|r| r.body.len()).collect();
        run.cached_fraction = reqs
            .iter()
            .skip(1)
            .map(|r| r.cached_prefix_bytes as f64 / r.body.len().max(1) as f64)
            .collect();
        run.tool_schema_bytes = bodies[0].tools.as_ref().map_or(0, |t| t.get().len());
        let first: Vec<Value> = serde_json::from_str(bodies[0].messages.get())?;
        run.system_prompt_bytes = first
            .iter()
            .find(|m| m["role"] == "system")
            .map_or(0, |m| content_text(&m["content"]).len());
        for k in 0..self.steps {
            let (a, b) = (&reqs[k], &reqs[k + 1]);
            let finished = a
                .finished_at
                .with_context(|| format!("response {} never finished", a.index))?;
            let gap = b
                .arrived_at
                .saturating_duration_since(finished)
                .as_secs_f64()
                * 1e6;
            let tool = tool_ms(&events, k + 1);
            run.gaps_us.push(gap);
            run.tool_ms.push(tool);
            run.overhead_us.push(gap - tool.unwrap_or(0.0) * 1e3);
            let prev = bodies[k].messages.get().as_bytes();
            let prev = &prev[..prev.len().saturating_sub(1)];
            let next = bodies[k + 1].messages.get().as_bytes();
            let frac = if prev.is_empty() {
                1.0
            } else {
                common_prefix_len(prev, next) as f64 / prev.len() as f64
            };
            run.prefix_fraction.push(frac);
        }
        let last: Vec<Value> = serde_json::from_str(bodies[self.steps].messages.get())?;
        run.last_tool_result_bytes = last
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| content_text(&m["content"]).len())
            .max()
            .unwrap_or(0);
        run.check_failures = self.checks(&bodies)?;
        Ok(run)
    }

    /// Variant checks on what dsh sent back.
    fn checks(&self, bodies: &[Body]) -> Result<Vec<String>> {
        let mut fails = Vec::new();
        for (n, body) in bodies.iter().enumerate().skip(1) {
            let messages: Vec<Value> = serde_json::from_str(body.messages.get())?;
            let assistants: Vec<&Value> = messages
                .iter()
                .filter(|m| m["role"] == "assistant")
                .collect();
            if assistants.len() != n {
                fails.push(format!(
                    "request {n}: {} assistant messages, expected {n}",
                    assistants.len()
                ));
                continue;
            }
            if self.variant == Variant::Reasoning {
                for (j, a) in assistants.iter().enumerate() {
                    if a["reasoning_content"].as_str() != Some(Self::reasoning(j + 1).as_str()) {
                        fails.push(format!(
                            "request {n}: the reasoning of step {} was not passed back",
                            j + 1
                        ));
                    }
                }
            }
            let calls = if self.variant == Variant::ParallelReads {
                PARALLEL_READS
            } else {
                1
            };
            let tools: Vec<&str> = messages
                .iter()
                .skip_while(|m| !std::ptr::eq(*m, assistants[n - 1]))
                .filter(|m| m["role"] == "tool")
                .filter_map(|m| m["tool_call_id"].as_str())
                .collect();
            let want: Vec<String> = (0..calls).map(|i| Self::call_id(n, i)).collect();
            if tools != want {
                fails.push(format!(
                    "request {n}: tool results {tools:?}, expected {want:?} in call order"
                ));
            }
        }
        Ok(fails)
    }
}

impl ScenarioRun {
    /// `write(2)` bytes that were neither HTTP request bodies nor stdout, per byte in the session
    /// directory (about 1 when the log is appended once; a log rewritten per streamed chunk
    /// would make it grow with the chunk count). NaN when the probe could not read `wchar`.
    pub fn write_amplification(&self) -> f64 {
        let Some(w) = self.wchar else {
            return f64::NAN;
        };
        let http: usize = self.request_bytes.iter().sum();
        (w as f64 - http as f64 - self.stdout_bytes as f64) / self.session_dir_bytes.max(1) as f64
    }
}

/// The parts of a chat request body the figures need, raw as sent.
#[derive(Deserialize)]
struct Body {
    messages: Box<RawValue>,
    tools: Option<Box<RawValue>>,
}

/// The text of a message `content` (a string or an array of text parts).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The events of a session log (rows after the header).
pub fn read_events(log: &Path) -> Result<Vec<Value>> {
    let text = crate::run::log_text(log)
        .with_context(|| format!("reading the session log {}", log.display()))?;
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}: row {} is not JSON", log.display(), i + 1))
        })
        .collect()
}

/// The text of the first `tool/result` of `step` (turn 1).
fn tool_text(events: &[Value], step: usize) -> Option<String> {
    events
        .iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["step"].as_u64() == Some(step as u64))
        .map(|e| content_text(&e["data"]["message"]["content"]))
}

/// The `VmRSS:` figure (KiB) in the output of [`RSS_COMMAND`].
pub fn vm_rss_kib(text: &str) -> Option<u64> {
    status_kib(text, "VmRSS:")
}

/// The KiB figure after `key` (e.g. `VmHWM:`) in `/proc/PID/status` text.
fn status_kib(text: &str, key: &str) -> Option<u64> {
    let rest = &text[text.find(key)? + key.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// The harness overhead of each of `steps` steps (µs): response K finished → request K+1
/// arrived, minus the tool's own run time (`durationMs` of step K's results in `events`).
///
/// # Errors
/// A response that never finished, or a step without a timed tool result.
pub fn step_overheads_us(
    reqs: &[RecordedRequest],
    events: &[Value],
    steps: usize,
) -> Result<Vec<f64>> {
    let mut overhead = Vec::with_capacity(steps);
    for k in 0..steps {
        let (a, b) = (&reqs[k], &reqs[k + 1]);
        let finished = a
            .finished_at
            .with_context(|| format!("response {} never finished", a.index))?;
        let gap = b
            .arrived_at
            .saturating_duration_since(finished)
            .as_secs_f64()
            * 1e6;
        let tool = tool_ms(events, k + 1).context("a bash result without durationMs")?;
        overhead.push(gap - tool * 1e3);
    }
    Ok(overhead)
}

/// The tool run time of `step` (turn 1): the largest `meta.durationMs` of its `tool/result`
/// events; `None` when none carries one.
pub fn tool_ms(events: &[Value], step: usize) -> Option<f64> {
    events
        .iter()
        .filter(|e| e["type"] == "tool/result" && e["data"]["step"].as_u64() == Some(step as u64))
        .filter_map(|e| e["data"]["meta"]["durationMs"].as_f64())
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_testkit::Step;

    #[test]
    fn vm_rss_is_read_from_the_status_line() {
        assert_eq!(vm_rss_kib("VmRSS:\t   16652 kB\n"), Some(16652));
        let both = "VmHWM:\t   20000 kB\nVmRSS:\t   16652 kB\n";
        assert_eq!(vm_rss_kib(both), Some(16652));
        assert_eq!(status_kib(both, "VmHWM:"), Some(20000));
        assert_eq!(vm_rss_kib("no such line"), None);
    }

    #[test]
    fn rss_steps_end_each_quarter() {
        let s = Scenario {
            rss_at_quarters: true,
            ..Scenario::new("x", Variant::Bash, 1000)
        };
        assert_eq!(s.rss_steps(), [250, 500, 750, 1000]);
        assert!(
            Scenario::new("x", Variant::Bash, 1000)
                .rss_steps()
                .is_empty()
        );
        let steps = s.rss_steps();
        assert_eq!(s.command(250, &steps), RSS_COMMAND);
        assert_eq!(s.command(251, &steps), "echo step-251");
        let medium = Scenario {
            variant: Variant::MediumOutput,
            ..s
        };
        assert_eq!(medium.command(1000, &steps), RSS_COMMAND);
        assert_eq!(medium.command(999, &steps), MEDIUM_COMMAND);
    }

    #[test]
    fn split_done_sends_done_alone_and_ends_later() {
        let plain = Scenario::new("x", Variant::Bash, 2);
        let split = Scenario {
            split_done: true,
            ..plain
        };
        for (a, b) in plain.replies().iter().zip(split.replies()) {
            assert_eq!(a.body_bytes(), b.body_bytes());
            let steps = b.body_steps();
            assert!(
                matches!(&steps[1], Step::Bytes(d) if &d[..] == dsh_testkit::DONE_EVENT.as_bytes())
            );
            assert!(matches!(steps[2], Step::Sleep(_)));
            assert_eq!(steps.len(), 3);
        }
    }
}
