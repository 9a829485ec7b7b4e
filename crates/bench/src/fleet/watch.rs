//! A watcher on another server (issue 39, servers on several hosts): two `dsh serve --store`
//! on the private cluster, A runs the bash scenario's turn (`steps` steps), B's event stream
//! (SSE, read by `curl -N`) follows it from the store.
//!
//! - **Rows read**: the rows the statements that read `dsh_events` returned during the watch
//!   (`pg_stat_statements`; B is the only reader), against the events the turn committed:
//!   target 1× (each committed event read once).
//! - **Delivery latency**: per committed seq, when B's stream delivered it minus when A's own
//!   stream did (A's subscribers get an event as the session commits it in memory; B's once its
//!   batch is in the store and B read it): median and p90 over the turn.
//! - **Steers**: a steer sent to B for the (idle) session, `steerQueued` on B's stream minus on
//!   A's (the owner publishes it to the store); each steer becomes a turn of its own.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::Completion;
use serde_json::{Value, json};

use super::{Cluster, PROMPT};
use crate::run::World;
use crate::scenario::{Scenario, Variant};

/// Steers sent through B.
const STEERS: usize = 10;
/// The bound of every wait.
const WAIT: Duration = Duration::from_secs(300);

/// What one watched turn measured.
pub(super) struct Watch {
    /// Rows read from `dsh_events` during the watch.
    pub rows: f64,
    /// Events the turn committed.
    pub committed: f64,
    /// Statements that read `dsh_events`.
    pub reads: f64,
    /// Per committed seq: B's delivery minus A's (ms).
    pub latency_ms: Vec<f64>,
    /// Per steer: `steerQueued` on B minus on A (ms); `None`: B never showed it.
    pub steer_ms: Vec<Option<f64>>,
}

/// A `dsh serve` process, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dsh: &Path, world: &World, store: &str) -> Result<Server> {
    let mut child = world
        .piped(dsh)
        .args(["serve", "--listen", "127.0.0.1:0", "--store", store])
        .spawn()
        .context("spawning dsh serve")?;
    let mut line = String::new();
    let stdout = child.stdout.take().context("no stdout")?;
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading dsh serve's address")?;
    let url = line.trim().to_owned();
    let server = Server { child, url };
    ensure!(
        server.url.starts_with("http://"),
        "dsh serve printed {:?}",
        server.url
    );
    Ok(server)
}

/// One JSON request (`curl`), its answer's JSON.
fn call(method: &str, url: &str, body: &Value) -> Result<Value> {
    let out = Command::new("curl")
        .args(["-sS", "--fail-with-body", "-X", method])
        .args(["-H", "content-type: application/json", "--data-binary"])
        .arg(body.to_string())
        .arg(url)
        .output()
        .context("running curl")?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "{method} {url}: {text}");
    serde_json::from_str(&text).with_context(|| format!("{method} {url} answered {text:?}"))
}

/// An event stream read by `curl -N`: each event with the instant its last line came.
struct Sse {
    child: Child,
    rx: mpsc::Receiver<(Instant, Option<String>, Value)>,
}

impl Drop for Sse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sse {
    fn open(url: &str) -> Result<Sse> {
        let mut child = Command::new("curl")
            .args(["-sSN", "-H", "accept: text/event-stream", url])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning curl")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let (mut id, mut data) = (None, String::new());
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if line.is_empty() {
                    if let Ok(v) = serde_json::from_str::<Value>(&data)
                        && tx.send((Instant::now(), id.take(), v)).is_err()
                    {
                        return;
                    }
                    data.clear();
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
        });
        Ok(Sse { child, rx })
    }

    /// Events until one `pred` accepts (returned with its instant); `seen` gets each
    /// committed seq's first arrival.
    fn until(
        &self,
        within: Duration,
        seen: &mut HashMap<u64, Instant>,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Option<Instant>> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, id, v) = match self.rx.recv_timeout(left) {
                Ok(e) => e,
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the event stream ended"),
            };
            if let Some(seq) = id.as_deref().and_then(|i| i.parse::<u64>().ok()) {
                seen.entry(seq).or_insert(at);
            }
            if pred(&v) {
                return Ok(Some(at));
            }
        }
    }
}

fn is(v: &Value, kind: &str) -> bool {
    v["type"] == kind
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// The median and p90 of `v`, formatted.
pub(super) fn spread(v: &[f64]) -> String {
    format!(
        "median {:.2} ms, p90 {:.2} ms (n = {})",
        percentile(v, 0.5),
        percentile(v, 0.9),
        v.len()
    )
}

/// One watched turn (see the module).
pub(super) fn run(dsh: &Path, cluster: &Cluster, steps: usize, run: u32) -> Result<Watch> {
    let url = cluster.database(&format!("fleet_watch_{}_{run}", std::process::id()))?;
    let world = World::new()?;
    world
        .server
        .push_all(Scenario::new("fleet-watch", Variant::Bash, steps).replies());
    for i in 0..STEERS {
        world
            .server
            .push(Completion::new().text(&format!("steered {i}")).reply());
    }
    let a = serve(dsh, &world, &url)?;
    let b = serve(dsh, &world, &url)?;
    let cwd = world.work.display().to_string();
    let created = call(
        "POST",
        &format!("{}/v1/sessions", a.url),
        &json!({"type": "create", "cwd": cwd}),
    )?;
    let id = created["id"].as_str().context("no session id")?.to_owned();
    let ops = |server: &Server| format!("{}/v1/sessions/{id}/ops", server.url);
    call("POST", &ops(&a), &json!({"type": "persist"}))?;
    let next_seq = || -> Result<f64> {
        cluster
            .psql(
                &url,
                &format!("SELECT next_seq FROM dsh_sessions WHERE id = '{id}'"),
            )?
            .parse()
            .context("reading next_seq")
    };
    cluster.reset_stats(&url)?;
    let before = next_seq()?;
    let on_a = Sse::open(&format!("{}/v1/sessions/{id}/events", a.url))?;
    let on_b = Sse::open(&format!("{}/v1/sessions/{id}/events", b.url))?;
    let (mut seen_a, mut seen_b) = (HashMap::new(), HashMap::new());
    for s in [&on_a, &on_b] {
        s.until(WAIT, &mut HashMap::new(), |v| is(v, "snapshot"))?
            .context("no snapshot")?;
    }
    call("POST", &ops(&a), &json!({"type": "submit", "text": PROMPT}))?;
    for (s, seen) in [(&on_a, &mut seen_a), (&on_b, &mut seen_b)] {
        s.until(WAIT, seen, |v| is(v, "turnEnded"))?
            .context("the turn did not end on a stream")?;
    }
    let committed = next_seq()? - before;
    let stats = cluster.psql(
        &url,
        "SELECT coalesce(sum(rows), 0) || ',' || coalesce(sum(calls), 0) FROM pg_stat_statements \
          WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
            AND query ~ 'FROM dsh_events' AND query !~ 'WITH sync AS' \
            AND query !~* '^\\s*(CREATE|ALTER|BEGIN|COMMIT|SELECT pg_advisory)'",
    )?;
    let (rows, reads) = stats.split_once(',').context("unexpected statement rows")?;
    let mut latency_ms: Vec<f64> = seen_b
        .iter()
        .filter_map(|(seq, tb)| {
            let ta = seen_a.get(seq)?;
            Some(if tb >= ta {
                (*tb - *ta).as_secs_f64() * 1e3
            } else {
                -((*ta - *tb).as_secs_f64() * 1e3)
            })
        })
        .collect();
    latency_ms.sort_by(f64::total_cmp);

    let mut steer_ms = Vec::new();
    for i in 0..STEERS {
        let text = format!("steer {i}");
        call("POST", &ops(&b), &json!({"type": "steer", "text": text}))?;
        let queued = |v: &Value| is(v, "steerQueued") && v["text"] == text.as_str();
        let ta = on_a
            .until(WAIT, &mut HashMap::new(), queued)?
            .context("no steerQueued on A")?;
        // A server that does not relay steers never shows it: B's stream up to the steer's
        // turn end then.
        let got = std::cell::Cell::new(false);
        let tb = on_b.until(WAIT, &mut HashMap::new(), |v| {
            got.set(queued(v));
            got.get() || is(v, "turnEnded")
        })?;
        let tb = tb.filter(|_| got.get());
        steer_ms.push(tb.map(|tb| tb.saturating_duration_since(ta).as_secs_f64() * 1e3));
        let mut ends = vec![&on_a];
        if tb.is_some() {
            ends.push(&on_b);
        }
        for s in ends {
            s.until(WAIT, &mut HashMap::new(), |v| is(v, "turnEnded"))?
                .context("the steer's turn did not end")?;
        }
    }
    Ok(Watch {
        rows: rows.parse().context("rows")?,
        committed,
        reads: reads.parse().context("calls")?,
        latency_ms,
        steer_ms,
    })
}
