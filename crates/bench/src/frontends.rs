//! The SDK runtime and the ACP server against `dsh exec`: one short turn (the model answers at
//! once) through each front end. `exec` pays a process start per turn; the servers start once,
//! so their warm turn is the front end's own per-turn cost (framing, queueing, notifications
//! of every event, the idle rule) on top of the loop.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dsh_testkit::Completion;
use serde_json::{Value, json};

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// Bound on one frame: a hang fails the run instead of the bench.
const BOUND: Duration = Duration::from_secs(30);

/// A front end on stdio.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    frames: mpsc::Receiver<Value>,
}

impl Peer {
    fn start(dsh: &Path, world: &World, args: &[&str]) -> Result<Self> {
        let mut child = world
            .piped(dsh)
            .args(args)
            .spawn()
            .context("spawning the front end")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            frames,
        })
    }

    fn send(&mut self, v: &Value) -> Result<()> {
        writeln!(self.stdin, "{v}").context("writing a frame")?;
        self.stdin.flush().context("flushing a frame")
    }

    /// Frames until `done` says so; fails on a hang.
    fn until(&self, done: impl Fn(&Value) -> bool) -> Result<Value> {
        loop {
            let f = self
                .frames
                .recv_timeout(BOUND)
                .context("the front end sent nothing")?;
            if f.get("error").is_some() {
                bail!("the front end answered an error: {f}");
            }
            if done(&f) {
                return Ok(f);
            }
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value> {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))?;
        self.until(|f| f.get("method").is_none() && f["id"] == id)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn reply(world: &World, n: usize) {
    for _ in 0..n {
        world
            .server
            .push(Completion::new().text("Front end probe done.").reply());
    }
}

/// `dsh exec` spawn → exit of one turn, ms.
fn exec_turns(dsh: &Path, runs: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        let world = World::new()?;
        reply(&world, 1);
        let run = run_dsh(dsh, &world, &["exec", "Hello"], false).context("dsh exec")?;
        out.push(ms(run.wall));
    }
    Ok(out)
}

/// Stops a world's background server (SIGTERM to the pid in `$DSH_HOME/run/serve.pid`).
struct BgServer(std::path::PathBuf);

impl Drop for BgServer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let _ = std::process::Command::new("kill")
                .arg(pid.trim())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// `dsh exec --bg "Hello"` spawn → exit (the session id printed), ms: (starting the background
/// server, with the server running).
fn bg_starts(dsh: &Path, runs: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut cold = Vec::with_capacity(runs);
    let mut warm = Vec::with_capacity(runs);
    for _ in 0..runs {
        let world = World::new()?;
        reply(&world, 2);
        let _server = BgServer(world.home.path().join("run").join("serve.pid"));
        for times in [&mut cold, &mut warm] {
            let run =
                run_dsh(dsh, &world, &["exec", "--bg", "Hello"], false).context("dsh exec --bg")?;
            if !run.stdout.trim().starts_with("session-") {
                bail!("dsh exec --bg printed no session id: {:?}", run.stdout);
            }
            times.push(ms(run.wall));
        }
    }
    Ok((cold, warm))
}

/// SDK runtime: (first prompt → idle incl. session creation, warm prompts → idle), ms.
fn sdk_turns(dsh: &Path, warm: usize) -> Result<(f64, Vec<f64>)> {
    let world = World::new()?;
    reply(&world, warm + 1);
    let mut peer = Peer::start(dsh, &world, &["--profile", "sdk"])?;
    let cwd = world.work.display().to_string();
    peer.request(
        0,
        "initialize",
        json!({"cwd": cwd, "provider": "deepseek-official", "model": "deepseek-v4-flash"}),
    )?;
    let mut times = Vec::with_capacity(warm + 1);
    for i in 0..=warm {
        let started = Instant::now();
        let id = u64::try_from(i + 1).unwrap_or(u64::MAX);
        peer.send(
            &json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{
            "sessionId":"bench","contentBlocks":[{"type":"text","text":"Hello"}]}}),
        )?;
        peer.until(|f| f["method"] == "session.status" && f["params"]["status"] == "idle")?;
        times.push(ms(started.elapsed()));
    }
    let first = times.remove(0);
    Ok((first, times))
}

/// ACP server: (session/new, warm prompts → response), ms.
fn acp_turns(dsh: &Path, warm: usize) -> Result<(f64, Vec<f64>)> {
    let world = World::new()?;
    reply(&world, warm);
    let mut peer = Peer::start(dsh, &world, &["acp"])?;
    peer.request(
        0,
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{}}),
    )?;
    let cwd = world.work.display().to_string();
    let started = Instant::now();
    let r = peer.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}))?;
    let new = ms(started.elapsed());
    let session = r["result"]["sessionId"]
        .as_str()
        .context("session/new gave no id")?
        .to_owned();
    let mut times = Vec::with_capacity(warm);
    for i in 0..warm {
        let id = u64::try_from(i + 2).unwrap_or(u64::MAX);
        let started = Instant::now();
        let r = peer.request(
            id,
            "session/prompt",
            json!({"sessionId": session, "prompt":[{"type":"text","text":"Hello"}]}),
        )?;
        if r["result"]["stopReason"] != "end_turn" {
            bail!("the ACP turn ended with {r}");
        }
        times.push(ms(started.elapsed()));
    }
    Ok((new, times))
}

/// Answers the agent's `fs/*` requests from in-memory buffers (as an editor does) until the
/// response to `id` arrives.
fn until_serving(
    peer: &mut Peer,
    id: u64,
    buffers: &mut std::collections::HashMap<String, String>,
) -> Result<Value> {
    loop {
        let f = peer
            .frames
            .recv_timeout(BOUND)
            .context("the front end sent nothing")?;
        let path = f["params"]["path"].as_str().unwrap_or_default().to_owned();
        match f["method"].as_str() {
            Some("fs/read_text_file") => {
                let answer = match buffers.get(&path) {
                    Some(text) => json!({"jsonrpc":"2.0","id":f["id"],"result":{"content":text}}),
                    None => {
                        json!({"jsonrpc":"2.0","id":f["id"],"error":{"code":-32002,"message":"Resource not found"}})
                    }
                };
                peer.send(&answer)?;
            }
            Some("fs/write_text_file") => {
                let content = f["params"]["content"].as_str().unwrap_or_default();
                buffers.insert(path, content.to_owned());
                peer.send(&json!({"jsonrpc":"2.0","id":f["id"],"result":{}}))?;
            }
            Some(_) => {}
            None if f["id"] == id => {
                if f.get("error").is_some() {
                    bail!("the front end answered an error: {f}");
                }
                return Ok(f);
            }
            None => {}
        }
    }
}

/// ACP turns that `read` a file (and then `edit` it, when `edit`), with the files on the local
/// disk or served by the client's `fs/*` (in-memory buffers): prompt → `end_turn`, ms.
fn acp_file_turns(dsh: &Path, warm: usize, client_fs: bool, edit: bool) -> Result<Vec<f64>> {
    let world = World::new()?;
    let file = world.work.join("probe.txt");
    let path = file.display().to_string();
    std::fs::write(&file, "v0\n").context("writing the probe file")?;
    let mut buffers = std::collections::HashMap::from([(path.clone(), "v0\n".to_owned())]);
    for i in 0..warm {
        let read = json!({"file_path": path}).to_string();
        let edit_args = json!({"file_path": path, "old_string": format!("v{i}"), "new_string": format!("v{}", i + 1)})
            .to_string();
        world
            .server
            .push(Completion::new().tool_call("read", &read).reply());
        if edit {
            world
                .server
                .push(Completion::new().tool_call("edit", &edit_args).reply());
        }
        world.server.push(Completion::new().text("Edited.").reply());
    }
    let mut peer = Peer::start(dsh, &world, &["acp"])?;
    let caps = if client_fs {
        json!({"fs": {"readTextFile": true, "writeTextFile": true}})
    } else {
        json!({})
    };
    peer.request(
        0,
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities": caps}),
    )?;
    let cwd = world.work.display().to_string();
    let r = peer.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}))?;
    let session = r["result"]["sessionId"]
        .as_str()
        .context("session/new gave no id")?
        .to_owned();
    let mut times = Vec::with_capacity(warm);
    for i in 0..warm {
        let id = u64::try_from(i + 2).unwrap_or(u64::MAX);
        let started = Instant::now();
        peer.send(&json!({"jsonrpc":"2.0","id":id,"method":"session/prompt",
            "params":{"sessionId": session, "prompt":[{"type":"text","text":"Edit it"}]}}))?;
        let r = until_serving(&mut peer, id, &mut buffers)?;
        if r["result"]["stopReason"] != "end_turn" {
            bail!("the ACP turn ended with {r}");
        }
        times.push(ms(started.elapsed()));
    }
    let expected = format!("v{}\n", if edit { warm } else { 0 });
    let (where_, text) = if client_fs {
        (
            "the client's buffer",
            buffers.get(&path).cloned().unwrap_or_default(),
        )
    } else {
        (
            "the disk",
            std::fs::read_to_string(&file).unwrap_or_default(),
        )
    };
    if text != expected {
        bail!("after {warm} edits {where_} holds {text:?}, not {expected:?}");
    }
    Ok(times)
}

/// The rows of the scenario.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let runs = if quick { 3 } else { iterations.max(5) as usize };
    let warm = if quick { 5 } else { 20 };
    let exec = exec_turns(dsh, runs)?;
    let (bg_cold, bg_warm) = bg_starts(dsh, runs)?;
    let mut sdk_first = Vec::new();
    let mut sdk_warm = Vec::new();
    let mut acp_new = Vec::new();
    let mut acp_warm = Vec::new();
    let mut read_local = Vec::new();
    let mut read_client = Vec::new();
    let mut file_local = Vec::new();
    let mut file_client = Vec::new();
    for _ in 0..runs {
        let (f, w) = sdk_turns(dsh, warm)?;
        sdk_first.push(f);
        sdk_warm.extend(w);
        let (n, w) = acp_turns(dsh, warm)?;
        acp_new.push(n);
        acp_warm.extend(w);
        read_local.extend(acp_file_turns(dsh, warm, false, false)?);
        read_client.extend(acp_file_turns(dsh, warm, true, false)?);
        file_local.extend(acp_file_turns(dsh, warm, false, true)?);
        file_client.extend(acp_file_turns(dsh, warm, true, true)?);
    }
    let mut g = Group::new(
        rows,
        "front ends (one short turn: dsh exec, the SDK runtime, the ACP server)",
    );
    g.info("dsh exec: spawn → exit of one turn", &exec, "ms", 2);
    g.info(
        "dsh exec --bg: spawn → id printed, starting the background server",
        &bg_cold,
        "ms",
        2,
    );
    g.info(
        "dsh exec --bg: spawn → id printed, background server running",
        &bg_warm,
        "ms",
        2,
    );
    g.info(
        "SDK runtime: first prompt → idle (creates the session)",
        &sdk_first,
        "ms",
        2,
    );
    g.info("SDK runtime: warm prompt → idle", &sdk_warm, "ms", 2);
    g.info("ACP: session/new", &acp_new, "ms", 2);
    g.info("ACP: warm session/prompt → end_turn", &acp_warm, "ms", 2);
    g.info(
        "ACP: read turn, file on the local disk",
        &read_local,
        "ms",
        2,
    );
    g.info(
        "ACP: read turn, file through the client's fs/read_text_file",
        &read_client,
        "ms",
        2,
    );
    g.info(
        "ACP: read + edit turn, files on the local disk",
        &file_local,
        "ms",
        2,
    );
    g.info(
        "ACP: read + edit turn, files through the client's fs/* (4 round trips)",
        &file_client,
        "ms",
        2,
    );
    Ok(())
}
