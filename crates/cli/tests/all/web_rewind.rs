//! A rewind's fork in `dsh web`, in a real browser (`crates/cli/tests/web/rewind.mjs`): two
//! pages on one session, one applies `/rewind 2 both yes`, both follow the fork (the other keeps
//! its draft), the next prompt runs there without the dropped turn, and the old session's page
//! opened again links the fork and stays. Skips like `web` without the browser.

#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use dsh_testkit::Completion;

use crate::support::{Env, request_messages};
use crate::web::{Served, browser_setup};

const SESSION: &str = "web-rewind";

/// One `dsh exec` turn of session [`SESSION`] whose bash call runs `command`, answered `done`.
fn turn(env: &Env, prompt: &str, command: &str, done: &str) {
    let call = serde_json::json!({"command": command, "description": "change files"}).to_string();
    env.server()
        .push(Completion::new().tool_call("bash", &call).reply());
    env.server().push(Completion::new().text(done).reply());
    let out = env.exec(&["--session", SESSION, prompt]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn dsh_web_pages_follow_a_rewind_fork() {
    let Some(playwright) = browser_setup() else {
        return;
    };
    let env = Env::new();
    turn(&env, "write one", "echo one > one.txt", "First done.");
    turn(&env, "write two", "echo two > two.txt", "Second done.");
    let mut child = env
        .dsh()
        .args(["web", "--no-open", "--listen", "127.0.0.1:0"])
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
    let base = login.split("/login").next().unwrap().to_owned();
    let requests = env.server().request_count();
    env.server()
        .push(Completion::new().text("Third done.").reply());

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/rewind.mjs");
    let out = Command::new("node")
        .arg(&script)
        .env("DSH_PW_DIR", &playwright)
        .env("DSH_WEB_BASE", &base)
        .env("DSH_WEB_LOGIN", &login)
        .env("DSH_WEB_SESSION", SESSION)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the browser script failed: {stdout}");
    let result: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("result").cloned())
        .expect("the browser script reported no result");
    let fork = result["fork"].as_str().unwrap_or_default();
    assert!(fork.starts_with("session-"), "{result}");

    // The files went back; the prompt sent in the fork ran once, without the dropped turn.
    assert!(!env.cwd().join("two.txt").exists());
    assert!(env.cwd().join("one.txt").exists());
    assert_eq!(env.server().request_count(), requests + 1);
    let sent = serde_json::to_string(&request_messages(env.server(), requests)).unwrap();
    assert!(
        sent.contains("write one") && sent.contains("write three"),
        "{sent}"
    );
    assert!(!sent.contains("write two"), "{sent}");
}
