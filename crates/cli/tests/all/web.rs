//! `dsh web` in a real browser: Playwright (`playwright-core`) drives Debian's chromium,
//! headless, against the real binary on the testkit model (`crates/cli/tests/web/browser.mjs`).
//! `scripts/browser-setup` installs both when missing; without them the test skips with the
//! reason, except under `CI=true`, where it fails.

#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use dsh_testkit::{Completion, Gate, Reply, data_event};

use crate::support::Env;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The playwright-core install directory, or `None` (the reason printed) when the browser or
/// the package cannot be installed here.
fn browser_setup() -> Option<PathBuf> {
    let root = PathBuf::from(ROOT);
    let status = Command::new(root.join("scripts/browser-setup"))
        .status()
        .unwrap();
    assert!(status.success(), "scripts/browser-setup failed");
    let dir = root.join("target/test-cache/browser");
    if let Ok(reason) = std::fs::read_to_string(dir.join("UNAVAILABLE")) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the browser test cannot run under CI=true: {reason}"
        );
        eprintln!("skipped: the browser test needs chromium and playwright-core: {reason}");
        return None;
    }
    let pw = dir.join("node_modules/playwright-core");
    assert!(
        pw.join("package.json").is_file(),
        "{} is missing",
        pw.display()
    );
    Some(pw.canonicalize().unwrap())
}

/// A streamed answer whose first `held` SSE payloads are sent, then waits for `gate`.
fn gated(c: &Completion, held: usize, gate: &Gate) -> Reply {
    let payloads = c.payloads();
    let join = |p: &[String]| p.iter().map(|s| data_event(s)).collect::<String>();
    Reply::sse()
        .bytes(join(&payloads[..held]))
        .gate(gate)
        .bytes(join(&payloads[held..]))
}

/// A running `dsh web`; killed on drop.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn dsh_web_in_a_real_browser() {
    let Some(playwright) = browser_setup() else {
        return;
    };
    let env = Env::new();
    std::fs::write(env.cwd().join("a.txt"), "old line\nkeep\n").unwrap();
    let stream = Gate::new();
    let steer = Gate::new();
    let xss = r#"printf '%s\n' '<script>window.__pwned=1</script>' '<img src=x onerror="window.__pwned=2">'; exit 3"#;
    let bash_args = serde_json::json!({"command": xss, "description": "Print markup"}).to_string();
    let server = env.server();
    server.push(gated(
        &Completion::new().text_parts(["Streaming the first half", ", then the rest."]),
        2,
        &stream,
    ));
    server.push(Completion::new().tool_call("bash", &bash_args).reply());
    server.push(
        Completion::new()
            .text("The command failed with exit 3.")
            .reply(),
    );
    server.push(
        Completion::new()
            .tool_call("read", r#"{"file_path":"a.txt"}"#)
            .reply(),
    );
    server.push(
        Completion::new()
            .tool_call(
                "edit",
                r#"{"file_path":"a.txt","old_string":"old line","new_string":"new line"}"#,
            )
            .reply(),
    );
    server.push(Completion::new().text("Edited.").reply());
    server.push(
        Completion::new()
            .text("Working on it.")
            .reply()
            .gate_head(&steer),
    );
    server.push(Completion::new().text("Steer received.").reply());
    let gates: HashMap<&str, &Gate> = [("stream", &stream), ("steer", &steer)].into();

    // A watch-only token (its existence also makes the stored tokens count).
    let out = env
        .dsh()
        .args(["serve", "token", "create", "--read-only", "--name", "watch"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let ro_token = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    let mut child = env
        .dsh()
        .args(["web", "--no-open", "--listen", "127.0.0.1:0"])
        // Until the host applies a session's own policy, the server's is the one in force.
        .args(["--ask-for-approval", "untrusted"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _served = Served(child);
    let login = line.trim().to_owned();
    assert!(
        login.starts_with("http://127.0.0.1:") && login.contains("/login?token=dshl_"),
        "{login:?}"
    );
    let base = login.split("/login").next().unwrap().to_owned();

    let shots = PathBuf::from(ROOT).join("target/web-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/browser.mjs");
    let mut node = Command::new("node")
        .arg(&script)
        .env("DSH_PW_DIR", &playwright)
        .env("DSH_WEB_BASE", &base)
        .env("DSH_WEB_LOGIN", &login)
        .env("DSH_WEB_RO_TOKEN", &ro_token)
        .env("DSH_WEB_CWD", env.cwd())
        .env("DSH_WEB_OUT", &shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut to_node = node.stdin.take().unwrap();
    let mut result = None;
    for line in BufReader::new(node.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            eprintln!("browser.mjs: {line}");
            continue;
        };
        if let Some(name) = msg["gate"].as_str() {
            gates
                .get(name)
                .unwrap_or_else(|| panic!("no gate {name}"))
                .open();
            writeln!(to_node, "ok").unwrap();
        } else if msg.get("result").is_some() {
            result = Some(msg["result"].clone());
        }
    }
    let status = node.wait().unwrap();
    assert!(status.success(), "the browser script failed: {status}");
    let result = result.expect("the browser script reported no result");

    // The steer typed mid-turn reached the model in the next request.
    let steered = server.requests().iter().any(|r| {
        r.is_chat()
            && r.body_text().contains("also check the docs")
            && r.body_text().contains("Working on it.")
    });
    assert!(
        steered,
        "no request carried the steer after the turn it joined"
    );
    assert_eq!(
        result["foreignRequests"].as_array().map(Vec::len),
        Some(0),
        "{result}"
    );
    println!(
        "dsh web browser test: assets {} bytes ({}), {} requests, screenshots in {}",
        result["assetTotal"],
        result["assetBytes"],
        result["requests"],
        shots.display()
    );
}
