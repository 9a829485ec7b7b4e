//! `dsh serve` (issue 34) against `dsh exec`:
//!
//! - **Per-step overhead through the server**: the 200-step bash scenario (the same replies as
//!   the `bash` scenario) run once by `dsh exec` and once by a session of `dsh serve`, created
//!   and prompted over HTTP with one SSE subscriber reading every event. Overhead of a step =
//!   response K finished → request K+1 arrived, minus the tool's own run time (`durationMs`);
//!   the figure is the median over the steps through the server minus the same median in
//!   process (budget: within 0.5 ms).
//! - **Event delivery to an SSE client**: the mock holds each of 200 text deltas behind its own
//!   gate; the bench opens gate K and times until its SSE subscriber reads delta K. This spans
//!   the mock's write, dsh's provider stream, the host's projection and fan-out, axum's SSE
//!   writer and loopback: an upper bound of host → SSE client (budget: p50 under 1 ms).
//! - **Idle sessions**: 100 sessions created over HTTP and left open, then one SSE subscriber
//!   on each, read up to its snapshot: the server's `VmRSS` with the sessions open (budget:
//!   under 100 MB) and the RSS each subscriber adds (budget: under 100 KB).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::{Completion, Gate, RecordedRequest, Reply};
use serde_json::{Value, json};

use crate::report::Group;
use crate::report::Row;
use crate::run::{World, session_log};
use crate::scenario::{Scenario, Variant, read_events, step_overheads_us};
use crate::stats::Stat;

/// The prompt of the per-step run (the scenario's replies do not depend on it).
const PROMPT: &str = "Run the benchmark steps one by one, then report.";
/// Bound on one wait: a hang fails the run instead of the bench.
const BOUND: Duration = Duration::from_secs(120);
/// Sessions of the idle run (budget: server RSS under 100 MB with this many open).
const IDLE_SESSIONS: usize = 100;

/// A `dsh serve --listen 127.0.0.1:0` of one world; killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(dsh: &Path, world: &World) -> Result<Self> {
        let mut child = world
            .piped(dsh)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .spawn()
            .context("spawning dsh serve")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("reading the server's URL")?;
        let addr = line
            .trim()
            .strip_prefix("http://")
            .with_context(|| format!("dsh serve printed no URL: {line:?}"))?
            .to_owned();
        Ok(Self { child, addr })
    }

    /// One request (`Connection: close`): the status and the JSON body.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let mut s = TcpStream::connect(&self.addr).context("connecting to dsh serve")?;
        s.set_read_timeout(Some(BOUND))?;
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )?;
        let mut text = String::new();
        s.read_to_string(&mut text)
            .context("reading the server's answer")?;
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("no status line: {text:?}"))?;
        let json = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.trim())
            .filter(|b| !b.is_empty())
            .map(serde_json::from_str)
            .transpose()
            .with_context(|| format!("the answer is not JSON: {text:?}"))?
            .unwrap_or(Value::Null);
        Ok((status, json))
    }

    /// A new session in `cwd`: its id.
    fn create(&self, cwd: &Path) -> Result<String> {
        let (status, s) = self.request("POST", "/v1/sessions", Some(&json!({"cwd": cwd})))?;
        ensure!(status == 201, "creating a session answered {status}: {s}");
        s["id"]
            .as_str()
            .map(str::to_owned)
            .context("the created session has no id")
    }

    fn submit(&self, id: &str, text: &str) -> Result<()> {
        let op = json!({"type": "submit", "text": text});
        let (status, a) = self.request("POST", &format!("/v1/sessions/{id}/ops"), Some(&op))?;
        ensure!(status == 202, "the prompt answered {status}: {a}");
        Ok(())
    }

    /// An SSE subscriber of session `id` on its own thread: every read, stamped when it
    /// returned.
    fn subscribe(&self, id: &str) -> Result<Subscriber> {
        let mut s = TcpStream::connect(&self.addr).context("connecting the subscriber")?;
        s.set_nodelay(true)?;
        write!(
            s,
            "GET /v1/sessions/{id}/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            self.addr
        )?;
        let (tx, rx) = mpsc::channel();
        let reader = s.try_clone()?;
        std::thread::spawn(move || {
            let mut reader = reader;
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let at = Instant::now();
                        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                        if tx.send((at, text)).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(Subscriber {
            _stream: s,
            reads: rx,
            seen: String::new(),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What an SSE subscriber read so far.
struct Subscriber {
    _stream: TcpStream,
    reads: mpsc::Receiver<(Instant, String)>,
    /// The text read and not yet matched.
    seen: String,
}

impl Subscriber {
    /// Reads until `needle` has arrived; the time of the read that completed it. What follows
    /// it stays for the next wait.
    fn until(&mut self, needle: &str) -> Result<Instant> {
        let mut at = Instant::now();
        loop {
            if let Some(i) = self.seen.find(needle) {
                self.seen.drain(..i + needle.len());
                return Ok(at);
            }
            let (t, text) = self
                .reads
                .recv_timeout(BOUND)
                .with_context(|| format!("the subscriber never read {needle:?}"))?;
            at = t;
            self.seen.push_str(&text);
        }
    }
}

/// The per-step overheads (µs) of one run through the server.
fn serve_steps(dsh: &Path, steps: usize) -> Result<Vec<f64>> {
    let world = World::new()?;
    let scenario = Scenario::new("serve-bash", Variant::Bash, steps);
    world.server.push_all(scenario.replies());
    let server = Server::start(dsh, &world)?;
    let id = server.create(&world.work)?;
    let mut sub = server.subscribe(&id)?;
    sub.until("event: snapshot")?;
    server.submit(&id, PROMPT)?;
    sub.until("event: turnEnded")?;
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(steps + 1, Duration::from_secs(10))
        .context("fewer responses ended than steps")?
        .into_iter()
        .filter(|r| r.is_chat())
        .collect();
    ensure!(
        reqs.len() == steps + 1,
        "{} requests through the server, expected {}",
        reqs.len(),
        steps + 1
    );
    if let Some(bad) = reqs.iter().find(|r| r.status != 200) {
        bail!("request {} got status {}", bad.index, bad.status);
    }
    // The turn's end is delivered before its flush completes: write the log through first.
    let (status, a) = server.request(
        "POST",
        &format!("/v1/sessions/{id}/ops"),
        Some(&json!({"type": "persist"})),
    )?;
    ensure!(status == 202, "persist answered {status}: {a}");
    let events = read_events(&session_log(world.home.path())?)?;
    step_overheads_us(&reqs, &events, steps)
}

/// The marker of delta `k` (unique in the stream).
fn marker(k: usize) -> String {
    format!("mk{k:05}x")
}

/// Gate open → SSE subscriber read, µs, for deltas 2..=n (delta 1 waits for the request).
fn delivery(dsh: &Path, n: usize) -> Result<Vec<f64>> {
    let world = World::new()?;
    let gates: Vec<Gate> = (0..n).map(|_| Gate::new()).collect();
    let bytes = Completion::new()
        .text_parts((1..=n).map(|k| format!("{} ", marker(k))))
        .to_bytes();
    let mut reply = Reply::sse();
    let mut next = 0;
    for piece in dsh_testkit::split_events(&bytes) {
        if next < n && String::from_utf8_lossy(&piece).contains(&marker(next + 1)) {
            reply = reply.gate(&gates[next]);
            next += 1;
        }
        reply = reply.bytes(piece);
    }
    ensure!(
        next == n,
        "only {next} of {n} deltas were found in the reply"
    );
    world.server.push(reply);
    let server = Server::start(dsh, &world)?;
    let id = server.create(&world.work)?;
    let mut sub = server.subscribe(&id)?;
    sub.until("event: snapshot")?;
    server.submit(&id, "Say the markers.")?;
    let started = Instant::now();
    while world.server.request_count() == 0 {
        ensure!(started.elapsed() < BOUND, "the model was never asked");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = Vec::with_capacity(n);
    for (k, gate) in gates.iter().enumerate() {
        let opened = Instant::now();
        gate.open();
        let read = sub.until(&marker(k + 1))?;
        if k > 0 {
            out.push(read.saturating_duration_since(opened).as_secs_f64() * 1e6);
        }
    }
    sub.until("event: turnEnded")?;
    Ok(out)
}

/// The `p`-quantile (0..=1) of `v` (nearest rank).
pub(crate) fn quantile(v: &[f64], p: f64) -> f64 {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let i = ((s.len() as f64 - 1.0) * p).round() as usize;
    s[i.min(s.len() - 1)]
}

/// A process's resident set now (`VmRSS`), KiB.
fn rss_kib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in the server's status")
}

/// `n` idle open sessions in one server, then one idle SSE subscriber on each: the server's
/// RSS with the sessions open (MB, 10^6 bytes) and the RSS each subscriber adds (KB, 10^3 bytes):
/// the budgets' units, so the figures are not rounded in their favour.
fn idle(dsh: &Path, n: usize) -> Result<(f64, f64)> {
    let world = World::new()?;
    let server = Server::start(dsh, &world)?;
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(server.create(&world.work)?);
    }
    // Every session answers its summary: all of them are open and settled.
    for id in &ids {
        let (status, s) = server.request("GET", &format!("/v1/sessions/{id}"), None)?;
        ensure!(status == 200, "session {id} answered {status}: {s}");
    }
    let pid = server.child.id();
    let sessions = rss_kib(pid)?;
    let mut subs = Vec::with_capacity(n);
    for id in &ids {
        let mut sub = server.subscribe(id)?;
        sub.until("event: snapshot")?;
        subs.push(sub);
    }
    let with_subs = rss_kib(pid)?;
    drop(subs);
    Ok((
        sessions * 1024.0 / 1e6,
        (with_subs - sessions) * 1024.0 / 1e3 / n as f64,
    ))
}

/// Measures and adds the rows: `iterations` runs of each, exec and serve interleaved.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let steps = if quick { 20 } else { 200 };
    let deltas = if quick { 20 } else { 200 };
    let (mut exec, mut served, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    let (mut p50, mut p90) = (Vec::new(), Vec::new());
    let (mut idle_rss, mut sub_kib) = (Vec::new(), Vec::new());
    for i in 0..iterations {
        eprintln!("dsh-bench: dsh serve run {}/{iterations}", i + 1);
        let local = Scenario::new("bash", Variant::Bash, steps)
            .run(dsh)
            .context("the in-process run")?;
        let local = Stat::median_of(&local.overhead_us) / 1e3;
        let remote =
            Stat::median_of(&serve_steps(dsh, steps).context("the run through dsh serve")?) / 1e3;
        exec.push(local);
        served.push(remote);
        diff.push(remote - local);
        let d = delivery(dsh, deltas).context("the delivery run")?;
        p50.push(quantile(&d, 0.5) / 1e3);
        p90.push(quantile(&d, 0.9) / 1e3);
        let (rss, per_sub) = idle(dsh, IDLE_SESSIONS).context("the idle sessions run")?;
        idle_rss.push(rss);
        sub_kib.push(per_sub);
    }
    let mut g = Group::new(
        rows,
        format!("dsh serve: {steps}-step bash turn, {deltas} gated deltas"),
    );
    g.info(
        "harness overhead per step, dsh exec (median of steps)",
        &exec,
        "ms",
        3,
    );
    g.info(
        "harness overhead per step, through dsh serve with one SSE subscriber",
        &served,
        "ms",
        3,
    );
    g.limit_as(
        "per-step overhead through dsh serve minus dsh exec",
        &diff,
        "ms",
        3,
        0.5,
        "within 0.5 ms of dsh exec (median)",
    );
    g.limit(
        "event delivery, gate open → SSE client read, p50",
        &p50,
        "ms",
        3,
        1.0,
    );
    g.info(
        "event delivery, gate open → SSE client read, p90",
        &p90,
        "ms",
        3,
    );
    let mut g = Group::new(
        rows,
        format!("dsh serve: {IDLE_SESSIONS} idle open sessions, one idle SSE subscriber each"),
    );
    g.limit(
        "server RSS with the sessions open (`VmRSS`)",
        &idle_rss,
        "MB",
        1,
        100.0,
    );
    g.limit(
        "RSS an idle subscriber adds (`VmRSS` difference / subscribers)",
        &sub_kib,
        "KB",
        1,
        100.0,
    );
    Ok(())
}
