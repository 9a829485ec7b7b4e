//! Resume: generate a long, valid v4 session and time `dsh exec --resume` on it.
//!
//! Generation copies real events: `dsh` itself writes a two-turn session (one `bash` step, then
//! eight, each turn a separate `dsh exec`), then the second turn's events are repeated with fresh message and call ids, shifted
//! `seq`, `turn`, `time` and `sourceEventSeqs`, until the log holds the requested number of events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::Completion;
use serde::Serialize;
use serde_json::Value;

use crate::run::{World, run_dsh, session_log};

/// The id of the generated session.
const SESSION_ID: &str = "bench-resume";
/// Bash steps in each generated turn (after a first turn of one step).
const STEPS_PER_TURN: usize = 8;

/// Figures from one resume run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeRun {
    /// Events in the generated log before the resume.
    pub events: usize,
    /// Size of the generated log, bytes.
    pub log_bytes: u64,
    /// Spawn of `dsh exec --resume` → its first request at the mock, ms: open, load, fold,
    /// derive, compose and send.
    pub to_first_request_ms: f64,
    /// The same for a fresh one-message session in the same world, ms (the fixed cost).
    pub fresh_to_first_request_ms: f64,
    /// Whole resumed run including the answer and the appends, ms.
    pub wall_ms: f64,
    /// `dsh sessions show` of the generated session (read-only open, fold, print), ms: the load
    /// part of the resume without composing, deriving the request or sending it.
    pub show_ms: f64,
    /// Peak RSS of a second, probed `dsh exec --resume` of the same log, MiB.
    pub peak_rss_mib: f64,
    /// Peak RSS of a probed fresh one-message session in the same world, MiB.
    pub fresh_peak_rss_mib: f64,
    /// Messages in the resumed request (all turns replayed).
    pub request_messages: usize,
    /// Body size of the resumed request, bytes.
    pub request_bytes: usize,
}

impl ResumeRun {
    /// Peak RSS of the resume beyond a fresh session's, per stored event, bytes.
    pub fn bytes_per_event(&self) -> f64 {
        (self.peak_rss_mib - self.fresh_peak_rss_mib) * 1024.0 * 1024.0 / self.events.max(1) as f64
    }
}

fn bash_step(tag: &str) -> Completion {
    let args = serde_json::json!({ "command": format!("echo {tag}"), "description": "Echo a tag" });
    let id = format!("call_00_benchresume{tag:0>12}");
    Completion::new().tool_call_with_id(&id, "bash", &args.to_string())
}

/// A generated long session in its own world, restorable to its generated state.
pub struct Generated {
    /// The world holding the session (its mock serves the resumes).
    pub world: World,
    /// The session log.
    pub log: PathBuf,
    /// The generated log, byte for byte (written back before every resume).
    text: String,
    /// Turns in the generated log.
    pub turns: usize,
    /// Events in the generated log.
    pub events: usize,
}

impl Generated {
    /// Has `dsh` write a two-turn session and repeats its second turn up to `target_events`.
    pub fn new(dsh: &Path, target_events: usize) -> Result<Self> {
        let world = World::new()?;
        for turn in 1..=2 {
            let steps = if turn == 1 { 1 } else { STEPS_PER_TURN };
            for k in 1..=steps {
                world
                    .server
                    .push(bash_step(&format!("t{turn}s{k}")).reply());
            }
            world
                .server
                .push(Completion::new().text("Turn done.").reply());
            run_dsh(
                dsh,
                &world,
                &["exec", "--session", SESSION_ID, &format!("Turn {turn}")],
                false,
            )
            .context("writing the template session")?;
        }
        // The generated log is plain (dsh continues a plain log in plain); the compression
        // rows measure a zstd one.
        let log = crate::run::to_plain(&session_log(world.home.path())?)?;
        let turns = generate(&log, target_events)?;
        let text = std::fs::read_to_string(&log)?;
        let events = text.lines().count() - 1;
        Ok(Self {
            world,
            log,
            text,
            turns,
            events,
        })
    }

    /// Writes the generated log back (a resume appends to it).
    pub fn restore(&self) -> Result<()> {
        std::fs::write(&self.log, &self.text)
            .with_context(|| format!("restoring {}", self.log.display()))
    }

    /// The session id to resume.
    pub fn id(&self) -> &'static str {
        SESSION_ID
    }

    /// Copies the generated log into `dir` laid out as a `DSH_HOME` and returns that home.
    pub fn export_home(&self, dir: &Path) -> Result<PathBuf> {
        let rel = self
            .log
            .strip_prefix(self.world.home.path())
            .context("the generated log is outside its home")?;
        let dest = dir.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&dest, &self.text).with_context(|| format!("writing {}", dest.display()))?;
        Ok(dir.to_path_buf())
    }

    /// Size of the generated log, bytes.
    pub fn bytes(&self) -> u64 {
        self.text.len() as u64
    }
}

/// Times the fresh session, `dsh sessions show` and `dsh exec --resume` on `g` once, then
/// resumes it again under the probe for the peak RSS.
pub fn run(dsh: &Path, g: &Generated) -> Result<ResumeRun> {
    let world = &g.world;
    g.restore()?;
    // The fixed cost: a fresh session in the same world.
    world.server.push(Completion::new().text("Fresh.").reply());
    let first = world.server.request_count();
    let fresh = run_dsh(dsh, world, &["exec", "A fresh session"], false)?;
    let fresh_req = world
        .server
        .wait_for_requests_blocking(first + 1, Duration::from_secs(5))
        .context("the fresh run's request never arrived")?;
    let fresh_first = fresh_req[first].arrived_at.duration_since(fresh.spawned_at);
    world.server.push(Completion::new().text("Fresh.").reply());
    let fresh_probed = run_dsh(dsh, world, &["exec", "A fresh session"], true)?;

    let show = run_dsh(dsh, world, &["sessions", "show", SESSION_ID], false)
        .context("dsh sessions show of the generated session")?;

    world
        .server
        .push(Completion::new().text("Resumed.").reply());
    let first = world.server.request_count();
    let out = run_dsh(
        dsh,
        world,
        &["exec", "--resume", SESSION_ID, "Continue"],
        false,
    )
    .context("resuming the generated session")?;
    let reqs = world
        .server
        .wait_for_requests_blocking(first + 1, Duration::from_secs(5))
        .context("the resumed run's request never arrived")?;
    let req = &reqs[first];
    let body = req.body_json().context("the resumed request is not JSON")?;
    let messages = body["messages"].as_array().map_or(0, Vec::len);
    let tool_messages = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let calls = 1 + (g.turns - 1) * STEPS_PER_TURN;
    ensure!(
        tool_messages == calls,
        "the resumed request replays {tool_messages} tool results, the log holds {calls} calls"
    );
    ensure!(
        out.stdout.contains("Resumed."),
        "the resumed run did not print its answer"
    );

    g.restore()?;
    world
        .server
        .push(Completion::new().text("Resumed.").reply());
    let probed = run_dsh(
        dsh,
        world,
        &["exec", "--resume", SESSION_ID, "Continue"],
        true,
    )
    .context("resuming the generated session under the probe")?;
    Ok(ResumeRun {
        events: g.events,
        log_bytes: g.bytes(),
        to_first_request_ms: req.arrived_at.duration_since(out.spawned_at).as_secs_f64() * 1e3,
        fresh_to_first_request_ms: fresh_first.as_secs_f64() * 1e3,
        wall_ms: out.wall.as_secs_f64() * 1e3,
        show_ms: show.wall.as_secs_f64() * 1e3,
        peak_rss_mib: probed
            .probe
            .map_or(f64::NAN, |p| p.max_rss_kib as f64 / 1024.0),
        fresh_peak_rss_mib: fresh_probed
            .probe
            .map_or(f64::NAN, |p| p.max_rss_kib as f64 / 1024.0),
        request_messages: messages,
        request_bytes: req.body.len(),
    })
}

/// Rewrites the two-turn log at `log` into one of at least `target` events by repeating its
/// second turn; returns the number of turns written.
fn generate(log: &Path, target: usize) -> Result<usize> {
    generate_until(log, |events, _| events < target)
}

/// Repeats the template log's second turn (as [`Generated::new`] does) until the log holds
/// `turns` turns; returns the turns.
pub(crate) fn generate_turns(log: &Path, turns: usize) -> Result<usize> {
    generate_until(log, |_, t| t < turns)
}

/// Repeats the template's second turn while `more(events, turns)`.
fn generate_until(log: &Path, more: impl Fn(usize, usize) -> bool) -> Result<usize> {
    let text = std::fs::read_to_string(log)?;
    let mut lines = text.lines();
    let header = lines.next().context("the template log is empty")?;
    let rows: Vec<Value> = lines
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("the template log has a row that is not JSON")?;
    let ends: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r["type"] == "turn/end")
        .map(|(i, _)| i)
        .collect();
    let [end1, end2] = ends[..] else {
        bail!("the template log has {} turns, expected 2", ends.len());
    };
    let block = &rows[end1 + 1..=end2];
    let time_span = block
        .last()
        .and_then(|r| r["time"].as_i64())
        .zip(block.first().and_then(|r| r["time"].as_i64()))
        .map_or(1, |(b, a)| b - a + 1);
    let ids = ids_of(block);

    let mut out = String::with_capacity(text.len() * 64);
    out.push_str(header);
    out.push('\n');
    for r in &rows[..=end2] {
        out.push_str(&serde_json::to_string(r)?);
        out.push('\n');
    }
    let mut events = end2 + 1;
    let mut turns = 2;
    let mut copy = 0i64;
    while more(events, turns) {
        copy += 1;
        turns += 1;
        let seq_shift = (events - (end1 + 1)) as i64;
        let map: HashMap<&str, String> = ids
            .iter()
            .enumerate()
            .map(|(j, id)| (id.as_str(), fresh_id(id, copy, j)))
            .collect();
        for r in block {
            let mut r = r.clone();
            rewrite(
                &mut r,
                None,
                &map,
                seq_shift,
                time_span * copy,
                turns as i64,
            );
            out.push_str(&serde_json::to_string(&r)?);
            out.push('\n');
            events += 1;
        }
    }
    std::fs::write(log, out).context("writing the generated session log")?;
    Ok(turns)
}

/// Message and call ids in `rows` (string values of `id`, `callId` and `toolCallId`).
fn ids_of(rows: &[Value]) -> Vec<String> {
    fn walk(v: &Value, key: Option<&str>, out: &mut Vec<String>) {
        match v {
            Value::String(s)
                if matches!(key, Some("id" | "callId" | "toolCallId")) && !out.contains(s) =>
            {
                out.push(s.clone());
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, key, out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| walk(x, Some(k), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    rows.iter().for_each(|r| walk(r, None, &mut out));
    out
}

/// A new id of the same shape for copy `copy`: the tail replaced by a counter.
fn fresh_id(id: &str, copy: i64, j: usize) -> String {
    let tail = format!("{:012x}", copy * 4096 + j as i64);
    if id.len() > tail.len() && id.is_char_boundary(id.len() - tail.len()) {
        format!("{}{tail}", &id[..id.len() - tail.len()])
    } else {
        format!("{id}-{tail}")
    }
}

/// Applies the id map and shifts `seq`/`sourceEventSeqs`, `time`/`time0` and `turn`.
fn rewrite(
    v: &mut Value,
    key: Option<&str>,
    ids: &HashMap<&str, String>,
    seq_shift: i64,
    time_shift: i64,
    turn: i64,
) {
    match v {
        Value::String(s) => {
            if let Some(new) = ids.get(s.as_str()) {
                *s = new.clone();
            }
        }
        Value::Number(n) => {
            let shift = match key {
                Some("seq" | "sourceEventSeqs" | "startSeq" | "endSeq") => Some(seq_shift),
                Some("time" | "time0") => Some(time_shift),
                _ => None,
            };
            if let (Some(d), Some(x)) = (shift, n.as_i64()) {
                *v = Value::from(x + d);
            } else if key == Some("turn") {
                *v = Value::from(turn);
            }
        }
        Value::Array(a) => a
            .iter_mut()
            .for_each(|x| rewrite(x, key, ids, seq_shift, time_shift, turn)),
        Value::Object(o) => o
            .iter_mut()
            .for_each(|(k, x)| rewrite(x, Some(k), ids, seq_shift, time_shift, turn)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_copied_row_gets_fresh_ids_and_shifted_numbers() {
        let rows = vec![json!({
            "type": "tool/result",
            "data": {"turn": 2, "step": 1, "message": {"role": "tool", "toolCallId": "call_00_abc",
                     "source": {"kind": "tool", "callId": "call_00_abc"}, "id": "m-0000-aaaaaaaaaaaa"}},
            "sourceEventSeqs": [[4, 6], 9],
            "surfaceOp": "append",
            "seq": 10,
            "time": 1000
        })];
        let ids = ids_of(&rows);
        assert_eq!(ids, ["call_00_abc", "m-0000-aaaaaaaaaaaa"]);
        let map: HashMap<&str, String> = ids
            .iter()
            .enumerate()
            .map(|(j, id)| (id.as_str(), fresh_id(id, 3, j)))
            .collect();
        let mut r = rows[0].clone();
        rewrite(&mut r, None, &map, 100, 50, 7);
        assert_eq!(r["seq"], 110);
        assert_eq!(r["time"], 1050);
        assert_eq!(r["sourceEventSeqs"], json!([[104, 106], 109]));
        assert_eq!(r["data"]["turn"], 7);
        assert_eq!(r["data"]["step"], 1);
        let call = r["data"]["message"]["toolCallId"].as_str().unwrap();
        assert_eq!(call, r["data"]["message"]["source"]["callId"]);
        assert_ne!(call, "call_00_abc");
        assert_eq!(call.len(), "call_00_abc".len() + 12 + 1);
        let id = r["data"]["message"]["id"].as_str().unwrap();
        assert_eq!(id, "m-0000-000000003001");
        assert_ne!(
            fresh_id("m-0000-aaaaaaaaaaaa", 3, 1),
            fresh_id("m-0000-aaaaaaaaaaaa", 4, 1)
        );
    }
}
