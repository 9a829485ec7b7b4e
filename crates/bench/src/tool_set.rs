//! The prompt cost of the tool set: bytes of the tool schemas the first request declares with
//! every tool enabled (`web_search` configured, `ask_user_question` declared too), against the
//! exact 12 KB budget (the original's 25 tools take 19.7 KB); and their stability: two runs
//! declare byte-identical schemas in the same canonical order; and `web_fetch` under the sandbox's network policy: refused
//! with nothing sent while the network is off (the preset's default), fetched with
//! `--network on`.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::Completion;
use serde_json::Value;

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// The budget of the whole tool-schema set, bytes.
const BUDGET: usize = 12 * 1024;

/// A patch that enables every optional tool (`web_search` takes its "key" from `HOME`, which
/// every run has; the endpoint is never called), and `ask_user_question`, which front ends
/// with a person declare (the TUI, `dsh serve`): the largest set any front end sends.
const EVERY_TOOL: &str = "plugins:\n  - id: tool-web\n    name: tool-web\n    config:\n      search:\n        endpoint: http://127.0.0.1:9/search\n        apiKeyEnv: HOME\n  - id: tool-ask-user\n    name: tool-ask-user\n    config:\n      declare: always\n";

/// The `tools` array of the first request of one `dsh exec`.
fn declared_tools(dsh: &Path) -> Result<Vec<Value>> {
    let world = World::new()?;
    let patch = world.home.path().join("every-tool.yaml");
    std::fs::write(&patch, EVERY_TOOL).context("writing the tool patch")?;
    world.server.push(Completion::new().text("ok").reply());
    let patch_arg = patch.display().to_string();
    run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &patch_arg, "Hello"],
        false,
    )
    .context("the tool-set probe run")?;
    let reqs = world
        .server
        .wait_for_finished_blocking(1, Duration::from_secs(10))
        .context("the tool-set probe: the response never ended")?;
    let body: Value = serde_json::from_slice(&reqs[0].body).context("the request body")?;
    let tools = body["tools"]
        .as_array()
        .cloned()
        .context("the request declares no tools")?;
    Ok(tools)
}

/// A local page server (one request per connection) counting the connections it accepted.
fn page_server() -> Result<(u16, Arc<AtomicUsize>)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding the page server")?;
    let port = listener.local_addr()?.port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut chunk = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
            let body = "<html><body><h1>Bench page</h1><p>Fetched.</p></body></html>";
            let _ = write!(
                sock,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok((port, accepted))
}

/// Lets `web_fetch` reach the loopback page server.
const PRIVATE_FETCH: &str = "plugins:\n  - id: tool-web\n    name: tool-web\n    config:\n      fetch:\n        allowPrivateNetwork: true\n";

/// One `dsh exec` whose model calls `web_fetch` on `url` once: the tool result it got.
fn fetch_once(dsh: &Path, url: &str, extra: &[&str]) -> Result<String> {
    let world = World::new()?;
    let patch = world.home.path().join("private-fetch.yaml");
    std::fs::write(&patch, PRIVATE_FETCH).context("writing the fetch patch")?;
    let args = serde_json::json!({ "url": url }).to_string();
    world
        .server
        .push(Completion::new().tool_call("web_fetch", &args).reply());
    world.server.push(Completion::new().text("ok").reply());
    let patch_arg = patch.display().to_string();
    let mut argv = vec!["exec", "--patch", &patch_arg];
    argv.extend_from_slice(extra);
    argv.push("Fetch the page");
    run_dsh(dsh, &world, &argv, false).context("the web_fetch probe run")?;
    let reqs = world
        .server
        .wait_for_finished_blocking(2, Duration::from_secs(10))
        .context("the web_fetch probe: the second response never ended")?;
    let body: Value = serde_json::from_slice(&reqs[1].body).context("the request body")?;
    let text = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .context("the second request carries no tool result")?;
    Ok(text.to_owned())
}

/// `web_fetch` refused while the network is off, fetched with `--network on`.
fn network_rows(dsh: &Path, g: &mut Group<'_>) -> Result<()> {
    let (port, accepted) = page_server()?;
    let url = format!("http://127.0.0.1:{port}/page");
    let off = fetch_once(dsh, &url, &[])?;
    let sent = accepted.load(Ordering::SeqCst);
    let refused = off.starts_with("Error: refused: network access is off") && sent == 0;
    g.exact(
        "web_fetch with the sandbox's network off (the default): refused, nothing sent",
        "refused, 0 connections",
        &if refused {
            "refused, 0 connections".to_owned()
        } else {
            format!(
                "{sent} connections: {}",
                off.chars().take(80).collect::<String>()
            )
        },
        refused,
    );
    let on = fetch_once(dsh, &url, &["--network", "on"])?;
    let sent = accepted.load(Ordering::SeqCst);
    let fetched = on.contains("# Bench page") && sent == 1;
    g.exact(
        "web_fetch with --network on: the page fetched",
        "fetched, 1 connection",
        &if fetched {
            "fetched, 1 connection".to_owned()
        } else {
            format!(
                "{sent} connections: {}",
                on.chars().take(80).collect::<String>()
            )
        },
        fetched,
    );
    Ok(())
}

fn name(t: &Value) -> &str {
    t["function"]["name"].as_str().unwrap_or("")
}

/// The rows of the group.
pub fn rows(dsh: &Path, rows: &mut Vec<Row>) -> Result<()> {
    let first = declared_tools(dsh)?;
    let second = declared_tools(dsh)?;
    for wanted in ["web_search", "ask_user_question", "workflow"] {
        ensure!(
            first.iter().any(|t| name(t) == wanted),
            "{wanted} was not declared with every tool enabled"
        );
    }
    let bytes = serde_json::to_string(&first)?.len();
    let names: Vec<&str> = first.iter().map(name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut g = Group::new(rows, "tool set");
    // An exact budget: the set is deterministic bytes, so any run over 12 KB fails
    // (`--report-only` included), as the "keep the whole set under 12 KB" asks.
    g.exact(
        &format!("tool schema bytes, all {} tools enabled", first.len()),
        &format!("at most {BUDGET} B"),
        &format!("{bytes} B"),
        bytes <= BUDGET,
    );
    let mut largest: Vec<(usize, &str)> = first
        .iter()
        .map(|t| (serde_json::to_string(t).map_or(0, |s| s.len()), name(t)))
        .collect();
    largest.sort_unstable_by(|a, b| b.cmp(a));
    let top: Vec<String> = largest.iter().map(|(b, n)| format!("{n} {b} B")).collect();
    g.text("schema bytes per tool, largest first", &top.join(", "));
    g.exact(
        "tool order: canonical (lexicographic) and byte-identical across runs",
        "identical",
        if first == second && names == sorted {
            "identical"
        } else {
            "differs"
        },
        first == second && names == sorted,
    );
    network_rows(dsh, &mut g)
}
