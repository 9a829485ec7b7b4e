//! MCP client figures (issue 17), with this binary as the stdio server (`dsh-bench
//! __mcp_server …` runs `dsh-mcp-testserver`):
//!
//! - **Call overhead**: the spawn-probe method of `confine.rs` (a warm-up step, then pairs of
//!   steps: A makes one call, B makes it plus `calls` more; per pair (gap B − gap A) / calls is
//!   the cost of one more call) for the server's `echo` tool and, interleaved, for the in-process
//!   `read` tool of a one-line file. Their difference is what the MCP round trip over stdio adds
//!   to a call beyond an in-process tool (budget: under 1 ms; `echo` itself costs the server
//!   microseconds).
//! - **Startup with a slow server**: spawn to first model request with no MCP server, and with
//!   a server that takes 10 s to start, `startupGraceMs: 0` (pure background connect: budget
//!   within 50 ms of the baseline) and the default grace (reported: bounded by the grace).
//! - **Late tools**: the server adds a tool mid-session (`tools/list_changed`); the tools of
//!   the first request that moved in the request after the change (budget: 0, the new tool is
//!   appended at the end so the cached prefix holds up to it).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::{Completion, RecordedRequest};

use crate::figures::median_of;
use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// The composition patch that mounts one `mcp-client` row for this binary as the server.
fn patch(world: &World, server_args: &[&str], grace_ms: Option<u64>) -> Result<String> {
    let me = std::env::current_exe().context("locating the dsh-bench binary")?;
    let mut args = vec!["\"__mcp_server\"".to_owned()];
    args.extend(server_args.iter().map(|a| format!("{a:?}")));
    let grace = grace_ms
        .map(|g| format!("      startupGraceMs: {g}\n"))
        .unwrap_or_default();
    let yaml = format!(
        "plugins:\n  - id: mcp-bench\n    name: mcp-client\n    config:\n      transport: stdio\n      serverName: bench\n      command: {:?}\n      args: [{}]\n{grace}",
        me.display().to_string(),
        args.join(", ")
    );
    let path = world.home.path().join("mcp-bench.yaml");
    std::fs::write(&path, yaml).context("writing the MCP patch")?;
    Ok(path.display().to_string())
}

fn replies(tool: &str, args: &str, pairs: usize, calls: usize) -> Vec<dsh_testkit::Reply> {
    let mut out = vec![
        Completion::new()
            .tool_call_with_id("call_00_benchmcpwarmup", tool, args)
            .reply(),
    ];
    for p in 0..pairs {
        for b in 0..2 {
            let n = if b == 1 { 1 + calls } else { 1 };
            let mut c = Completion::new();
            for i in 0..n {
                c = c.tool_call_with_id(&format!("call_{i:02}_benchmcp{p:03}{b}"), tool, args);
            }
            out.push(c.reply());
        }
    }
    out.push(Completion::new().text("MCP probe done.").reply());
    out
}

/// Per pair, the cost of one more call of `tool` (ms).
fn per_call(dsh: &Path, tool: &str, pairs: usize, calls: usize) -> Result<Vec<f64>> {
    let world = World::new()?;
    std::fs::write(world.work.join("one.txt"), "one line\n").context("writing one.txt")?;
    let args = if tool == "read" {
        serde_json::json!({ "file_path": "one.txt" }).to_string()
    } else {
        serde_json::json!({ "text": "ping" }).to_string()
    };
    world.server.push_all(replies(tool, &args, pairs, calls));
    let patch = patch(&world, &[], Some(30_000))?;
    run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &patch, "Run the MCP probe"],
        false,
    )
    .context("the MCP call probe run")?;
    let steps = pairs * 2 + 1;
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(steps + 1, Duration::from_secs(10))
        .context("the MCP probe: a response never ended")?;
    ensure!(
        reqs.len() == steps + 1 && reqs.iter().all(|r| r.status == 200),
        "the MCP probe: {} requests (expected {})",
        reqs.len(),
        steps + 1
    );
    let gap = |k: usize| -> Result<f64> {
        let done = reqs[k].finished_at.context("a response never finished")?;
        Ok(reqs[k + 1]
            .arrived_at
            .saturating_duration_since(done)
            .as_secs_f64()
            * 1e3)
    };
    let mut out = Vec::new();
    for p in 0..pairs {
        out.push((gap(2 * p + 2)? - gap(2 * p + 1)?) / calls.max(1) as f64);
    }
    Ok(out)
}

/// Spawn to first request (ms) with the server `server` (`None`: no MCP server).
fn first_request(dsh: &Path, server: Option<Option<u64>>) -> Result<f64> {
    let world = World::new()?;
    world.server.push(Completion::new().text("Hi.").reply());
    let mut args = vec!["exec".to_owned()];
    if let Some(grace) = server {
        args.push("--patch".into());
        args.push(patch(&world, &["--delay-ms", "10000"], grace)?);
    }
    args.push("Hello".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_dsh(dsh, &world, &argv, false).context("the MCP startup run")?;
    let req = world.server.request(0).context("no request arrived")?;
    Ok(req.arrived_at.duration_since(out.spawned_at).as_secs_f64() * 1e3)
}

/// Names of the tools of a recorded request.
fn tool_names(req: &RecordedRequest) -> Result<Vec<String>> {
    let body = req.body_json().context("a request body that is not JSON")?;
    Ok(body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

/// How many tools of the first request are not at the same index after a late tool arrived.
fn late_tool_moves(dsh: &Path) -> Result<f64> {
    let world = World::new()?;
    world.server.push(
        Completion::new()
            .tool_call_with_id(
                "call_00_benchadd",
                "mcp__bench__add_tool",
                r#"{"name":"aaa_late"}"#,
            )
            .reply(),
    );
    world.server.push(
        Completion::new()
            .tool_call_with_id(
                "call_00_benchwait",
                "mcp__bench__wait_lists",
                r#"{"count":2}"#,
            )
            .reply(),
    );
    world.server.push(Completion::new().text("Done.").reply());
    let patch = patch(&world, &[], None)?;
    run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &patch, "Add a tool"],
        false,
    )
    .context("the late-tool run")?;
    let first = tool_names(&world.server.request(0).context("no first request")?)?;
    let last = tool_names(&world.server.request(2).context("no third request")?)?;
    ensure!(
        last.iter().any(|n| n == "mcp__bench__aaa_late"),
        "the late tool never reached the model: {last:?}"
    );
    let moved = first
        .iter()
        .enumerate()
        .filter(|(i, n)| last.get(*i) != Some(n))
        .count();
    Ok(moved as f64)
}

/// Measures and appends the MCP rows.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let (pairs, calls) = if quick { (2, 8) } else { (4, 16) };
    let (mut mcp, mut local, mut overhead) = (Vec::new(), Vec::new(), Vec::new());
    let (mut base, mut bg, mut graced, mut bg_delta) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut moved = Vec::new();
    for _ in 0..iterations {
        let m = median_of(&per_call(dsh, "mcp__bench__echo", pairs, calls)?);
        let l = median_of(&per_call(dsh, "read", pairs, calls)?);
        mcp.push(m);
        local.push(l);
        overhead.push(m - l);
        let b = first_request(dsh, None)?;
        let g0 = first_request(dsh, Some(Some(0)))?;
        base.push(b);
        bg.push(g0);
        bg_delta.push(g0 - b);
        graced.push(first_request(dsh, Some(None))?);
        moved.push(late_tool_moves(dsh)?);
    }
    let mut g = Group::new(rows, "MCP client (stdio test server)");
    g.info("one more `mcp__bench__echo` call", &mcp, "ms", 3);
    g.info(
        "one more in-process `read` call (one line)",
        &local,
        "ms",
        3,
    );
    g.limit(
        "MCP stdio round trip beyond an in-process tool, per call",
        &overhead,
        "ms",
        3,
        1.0,
    );
    g.info("spawn to first request, no MCP server", &base, "ms", 1);
    g.info(
        "spawn to first request, 10 s server, startupGraceMs 0",
        &bg,
        "ms",
        1,
    );
    g.limit(
        "first request delay from a 10 s server (background connect)",
        &bg_delta,
        "ms",
        1,
        50.0,
    );
    g.info(
        "spawn to first request, 10 s server, default grace (500 ms)",
        &graced,
        "ms",
        1,
    );
    g.limit(
        "tools of the first request moved by a late MCP tool",
        &moved,
        "tools",
        0,
        0.0,
    );
    Ok(())
}
