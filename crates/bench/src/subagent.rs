//! Sub-agent delegation: the cost of a child beyond its model time. The parent's first
//! response calls `subagent` `children` times in one batch; each child answers with one text
//! response; the parent then answers. The mock answers at once, so the gap between the end of
//! the parent's first response and the arrival of its second request is the harness's own
//! time for creating, running and disposing the children (child model time is subtracted).
//! One child gives the per-child overhead; three show that a batch runs concurrently.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::{Completion, RecordedRequest};

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// (delegation gap, child model time) of one run, ms.
fn run(dsh: &Path, children: usize) -> Result<(f64, f64)> {
    let world = World::new()?;
    let mut first = Completion::new();
    for i in 0..children {
        let args = serde_json::json!({
            "description": format!("Bench child {i}"),
            "prompt": format!("Say child {i}")
        })
        .to_string();
        first = first.tool_call_with_id(&format!("call_{i:02}_benchsubagent"), "subagent", &args);
    }
    world.server.push(first.reply());
    for i in 0..children {
        world
            .server
            .push(Completion::new().text(&format!("child {i} done")).reply());
    }
    world
        .server
        .push(Completion::new().text("Delegation probe done.").reply());
    run_dsh(dsh, &world, &["exec", "Run the delegation probe"], false)
        .context("the delegation probe run")?;
    let total = children + 2;
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(total, Duration::from_secs(10))
        .context("the delegation probe: a response never ended")?;
    ensure!(
        reqs.len() == total && reqs.iter().all(|r| r.status == 200),
        "the delegation probe: {} requests (expected {total})",
        reqs.len()
    );
    let done = reqs[0].finished_at.context("a response never finished")?;
    let gap = reqs[total - 1]
        .arrived_at
        .saturating_duration_since(done)
        .as_secs_f64()
        * 1e3;
    // Concurrent children overlap: the model time on the critical path is the longest one.
    let model = reqs[1..total - 1]
        .iter()
        .filter_map(|r| {
            r.finished_at
                .map(|f| f.saturating_duration_since(r.arrived_at))
        })
        .max()
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3;
    Ok((gap, model))
}

/// The last non-runtime-context message of a request: (role, text).
pub(crate) fn last_message(req: &RecordedRequest) -> (String, String) {
    let body = req.body_json().unwrap_or_default();
    let m = body["messages"]
        .as_array()
        .and_then(|ms| {
            ms.iter().rfind(|m| {
                !m["content"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Current runtime context."))
            })
        })
        .cloned()
        .unwrap_or_default();
    (
        m["role"].as_str().unwrap_or_default().to_owned(),
        m["content"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A continuable child (`backgroundMode: continuable`): the parent starts it in the
/// background, is told when it settles, sends it a second task (a cold resume from its log)
/// and is told again. Returns (settle → the parent's notice request, the parent's
/// `send_message` response end → the resumed child's request), ms.
fn continuable(dsh: &Path) -> Result<(f64, f64)> {
    let world = World::new()?;
    let patch = world.home.path().join("continuable.yaml");
    std::fs::write(
        &patch,
        "plugins:\n  - id: tool-subagent\n    name: tool-subagent\n    config: { backgroundMode: continuable }\n",
    )
    .context("writing the continuable patch")?;
    world.server.set_responder(|req| {
        let (role, last) = last_message(req);
        let call = |name: &str, args: serde_json::Value| {
            Completion::new().tool_call(name, &args.to_string()).reply()
        };
        match (role.as_str(), last.as_str()) {
            ("user", "Run the continuable probe") => call(
                "subagent",
                serde_json::json!({"description": "Probe child", "prompt": "first task"}),
            ),
            ("user", t) if t.contains("Its closing message:\nfirst done") => {
                let id = t
                    .trim_start_matches("Background subagent ")
                    .split(' ')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                call(
                    "send_message",
                    serde_json::json!({"agent_id": id, "message": "second task"}),
                )
            }
            ("user", "first task") => Completion::new().text("first done").reply(),
            ("user", "second task") => Completion::new().text("second done").reply(),
            ("user", t) if t.contains("Its closing message:\nsecond done") => {
                Completion::new().text("Continuable probe done.").reply()
            }
            _ => Completion::new().text("ok").reply(),
        }
    });
    let p = patch.to_string_lossy().into_owned();
    run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &p, "Run the continuable probe"],
        false,
    )
    .context("the continuable probe run")?;
    let reqs = world.server.requests();
    let find = |pred: &dyn Fn(&(String, String)) -> bool| {
        reqs.iter()
            .find(|r| pred(&last_message(r)))
            .context("the continuable probe: a request is missing")
    };
    let first = find(&|(r, t)| r == "user" && t == "first task")?;
    let notice = find(&|(_, t)| t.contains("Its closing message:\nfirst done"))?;
    let sent = notice;
    let second = find(&|(r, t)| r == "user" && t == "second task")?;
    let settle = notice
        .arrived_at
        .saturating_duration_since(first.finished_at.context("a response never finished")?)
        .as_secs_f64()
        * 1e3;
    let resume = second
        .arrived_at
        .saturating_duration_since(sent.finished_at.context("a response never finished")?)
        .as_secs_f64()
        * 1e3;
    Ok((settle, resume))
}

/// Runs the probe (one child, then three) and adds its rows.
pub fn rows(dsh: &Path, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let (mut one, mut three, mut overhead) = (Vec::new(), Vec::new(), Vec::new());
    let (mut settle, mut resume) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        let (gap, model) = run(dsh, 1)?;
        one.push(gap);
        overhead.push(gap - model);
        three.push(run(dsh, 3)?.0);
        let (s, r) = continuable(dsh)?;
        settle.push(s);
        resume.push(r);
    }
    let mut g = Group::new(
        rows,
        "sub-agents (`subagent` calls, mock answering at once)",
    );
    g.info("child overhead beyond its model time", &overhead, "ms", 2);
    g.info("delegation wall time, one child", &one, "ms", 2);
    g.info(
        "delegation wall time, three children in one batch",
        &three,
        "ms",
        2,
    );
    g.info(
        "continuable child: its last response ends → the parent's notice request",
        &settle,
        "ms",
        2,
    );
    g.info(
        "continuable child: send_message response ends → resumed child's request (cold resume)",
        &resume,
        "ms",
        2,
    );
    Ok(())
}
