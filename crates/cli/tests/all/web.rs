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
use serde_json::Value;

use crate::support::{Env, log_text, replace_log, session_files, stalled_text};

pub(crate) const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The playwright-core install directory, or `None` (the reason printed) when the browser or
/// the package cannot be installed here.
pub(crate) fn browser_setup() -> Option<PathBuf> {
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

/// The long session's id and turns (the first-paint figure of issue 38 is for 1,000 turns).
const LONG_ID: &str = "web-long";
const LONG_TURNS: usize = 1_000;

/// Has `dsh exec` write a two-turn session `LONG_ID` (the second turn a bash call and a
/// markdown answer), then repeats its second turn in the stored log up to `LONG_TURNS` turns
/// (fresh ids; seq, time and turn shifted), as a plain log.
fn long_session(env: &Env) {
    let server = env.server();
    server.push(Completion::new().text("Hello.").reply());
    let args = serde_json::json!({"command": "echo paged", "description": "Echo"}).to_string();
    server.push(Completion::new().tool_call("bash", &args).reply());
    server.push(
        Completion::new()
            .text("Done: **paged**.\n\n```rust\nfn main() { println!(\"hi\"); }\n```\n")
            .reply(),
    );
    for prompt in ["Turn 1", "Turn 2"] {
        let out = env.exec(&["--session", LONG_ID, prompt]);
        assert!(out.status.success(), "{out:?}");
    }
    let files = session_files(&env.home.path().join("sessions"));
    let [file] = &files[..] else {
        panic!("expected one stored session: {files:?}")
    };
    let text = log_text(file);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let ends: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i]["type"] == "turn/end")
        .collect();
    let [end1, end2] = ends[..] else {
        panic!("the template has {} turns", ends.len())
    };
    let block = &rows[end1 + 1..=end2];
    let ids = ids_of(block);
    let time = |r: &Value| r["time"].as_i64().unwrap_or(0);
    let span = time(&block[block.len() - 1]) - time(&block[0]) + 1;
    let mut out = format!("{header}\n");
    for r in &rows[..=end2] {
        out.push_str(&format!("{r}\n"));
    }
    for copy in 1..=(LONG_TURNS - 2) {
        let shift = (block.len() * copy) as i64;
        let map: HashMap<&str, String> = ids
            .iter()
            .map(|id| (id.as_str(), format!("{id}-{copy}")))
            .collect();
        for r in block {
            let mut r = r.clone();
            rewrite(
                &mut r,
                None,
                &map,
                (shift, span * copy as i64),
                copy as i64 + 2,
            );
            out.push_str(&format!("{r}\n"));
        }
    }
    replace_log(file, out);
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

/// Applies the id map, shifts `seq` (and the seqs that name events) and `time` by `shift`, and
/// sets `turn`.
fn rewrite(
    v: &mut Value,
    key: Option<&str>,
    ids: &HashMap<&str, String>,
    shift: (i64, i64),
    turn: i64,
) {
    match v {
        Value::String(s) => {
            if let Some(new) = ids.get(s.as_str()) {
                *s = new.clone();
            }
        }
        Value::Number(n) => {
            let by = match key {
                Some("seq" | "sourceEventSeqs" | "startSeq" | "endSeq") => Some(shift.0),
                Some("time" | "time0") => Some(shift.1),
                _ => None,
            };
            if let (Some(by), Some(x)) = (by, n.as_i64()) {
                *v = Value::from(x + by);
            } else if key == Some("turn") {
                *v = Value::from(turn);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite(x, key, ids, shift, turn)),
        Value::Object(o) => o
            .iter_mut()
            .for_each(|(k, x)| rewrite(x, Some(k), ids, shift, turn)),
        _ => {}
    }
}

/// A running `dsh web`; killed on drop.
pub(crate) struct Served(pub(crate) Child);

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
    long_session(&env);
    std::fs::write(env.cwd().join("a.txt"), "old line\nkeep\n").unwrap();
    // For `@` completion from the server's listing: a file to offer, one the .gitignore hides.
    std::fs::create_dir_all(env.cwd().join("docs")).unwrap();
    std::fs::write(env.cwd().join("docs/guide.md"), "# Guide\n").unwrap();
    std::fs::write(env.cwd().join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(env.cwd().join("debug.log"), "noise\n").unwrap();
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
    server.push(
        Completion::new()
            .tool_call(
                "ask_user_question",
                r#"{"questions":[{"id":"q1","question":"Which one?","options":[{"label":"A"},{"label":"B"}]}]}"#,
            )
            .reply(),
    );
    server.push(Completion::new().text("You chose B.").reply());
    server.push(
        Completion::new()
            .tool_call(
                "exit_plan_mode",
                r#"{"plan":"1. Replace **old** in a.txt\n2. Check it"}"#,
            )
            .reply(),
    );
    server.push(Completion::new().text("Plan accepted.").reply());
    // A sub-agent: the parent's call, the child's answer, the parent's answer.
    let delegate = serde_json::json!({"description": "Survey", "prompt": "list the docs"});
    server.push(
        Completion::new()
            .tool_call("subagent", &delegate.to_string())
            .reply(),
    );
    server.push(
        Completion::new()
            .text("The child found docs/guide.md.")
            .reply(),
    );
    server.push(Completion::new().text("Sub-agent done.").reply());
    // A workflow of one child: the parent's call, the child's answer, the parent's answer.
    let workflow = serde_json::json!({
        "script": "const r = await agent({ prompt: 'count the docs', label: 'counter' }); return r.text;",
        "meta": {"name": "count docs", "description": "one child counts"},
    });
    server.push(
        Completion::new()
            .tool_call("workflow", &workflow.to_string())
            .reply(),
    );
    server.push(Completion::new().text("One doc.").reply());
    server.push(Completion::new().text("Workflow done.").reply());
    server.push(stalled_text("Thinking hard"));
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
        .env("DSH_WEB_LONG", LONG_ID)
        .env("DSH_WEB_LONG_TURNS", LONG_TURNS.to_string())
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
    // The answer given in the page reached the model as the question's result.
    let answered = server
        .requests()
        .iter()
        .filter(|r| r.is_chat())
        .map(|r| r.body_text())
        .find(|b| b.contains("because tests"));
    let answered = answered.expect("no request carried the question's answer");
    assert!(answered.contains("selected"), "{answered}");
    // The accepted plan: the tool told the model so.
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.is_chat() && r.body_text().contains("The user accepted the plan")),
        "no request carried the accepted plan"
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
    // Reported, not asserted (budgets are measured, never tested): issue 38's is 300 ms.
    let figure = |k: &str| {
        result["longSession"][k]
            .as_str()
            .unwrap_or("none")
            .to_owned()
    };
    println!(
        "dsh web, a {LONG_TURNS}-turn stored session on loopback (medians of {} loads): first \
         contentful paint {} ms; its first event at {} ms, the tail's end (snapshot) at {} ms, \
         its last 50 turns drawn at {} ms",
        result["longSession"]["loads"],
        figure("fcpMs"),
        figure("firstEventMs"),
        figure("replayedMs"),
        figure("transcriptMs")
    );
}
