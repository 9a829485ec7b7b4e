//! `dsh acp` driven by `acpx` (the headless ACP client, from npm, installed by
//! `scripts/test-clients` into a cache directory) against the testkit model (the real `dsh`
//! binary, found by `dsh_test_harness::e2e::dsh_bin`).

#![allow(clippy::print_stderr)] // skip reasons are printed

use std::path::{Path, PathBuf};
use std::process::Command;

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::{Env, request_messages};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// acpx, installing it first when needed; `None` (with the reason printed) only when the npm
/// registry cannot be reached.
fn acpx() -> Option<PathBuf> {
    let out = Command::new(Path::new(ROOT).join("scripts/test-clients"))
        .arg("acpx")
        .output()
        .expect("run scripts/test-clients");
    match out.status.code() {
        Some(0) => {}
        Some(3) => {
            eprintln!(
                "skipping: acpx cannot be installed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        _ => panic!(
            "scripts/test-clients acpx failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
    let cache = std::env::var_os("DSH_TEST_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target/test-clients"));
    Some(cache.join("acpx/node_modules/.bin/acpx"))
}

/// Runs acpx with dsh as its agent; returns the JSON-RPC frames it printed (`--format json`).
fn run_acpx(acpx: &Path, env: &Env, args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let agent = format!("{} acp", crate::support::dsh_bin().display());
    let out = Command::new(acpx)
        .args(["--agent", &agent, "--cwd"])
        .arg(env.cwd())
        .args(["--format", "json", "--timeout", "60"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("DSH_HOME", env.home.path())
        .env("DEEPSEEK_API_KEY", "sk-test-key")
        .env("DEEPSEEK_BASE_URL", env.server().base_url())
        .current_dir(env.work.path())
        .output()
        .unwrap();
    let frames = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        out.status.code(),
        frames,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn updates<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| {
            f["method"] == "session/update" && f["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|f| &f["params"]["update"])
        .collect()
}

#[test]
fn acpx_streams_chunks_and_a_tool_card_of_a_real_bash_call() {
    let Some(acpx) = acpx() else { return };
    let env = Env::new();
    env.server().push(
        Completion::new()
            .reasoning("I will run echo.")
            .tool_call(
                "bash",
                r#"{"command":"echo acp-proof","description":"Echo"}"#,
            )
            .reply(),
    );
    env.server().push(
        Completion::new()
            .text("DONE with acp-proof")
            .chars_per_delta(4)
            .reply(),
    );
    let (code, frames, stderr) = run_acpx(&acpx, &env, &["--approve-all", "exec", "Run it"]);
    assert_eq!(code, Some(0), "{stderr}\n{frames:#?}");
    let thoughts = updates(&frames, "agent_thought_chunk");
    assert!(!thoughts.is_empty(), "{frames:#?}");
    let chunks: Vec<&str> = updates(&frames, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    // Deltas, not one committed message.
    assert!(chunks.len() > 1, "{chunks:?}");
    assert_eq!(chunks.concat(), "DONE with acp-proof");
    let card = updates(&frames, "tool_call");
    assert_eq!(card.len(), 1, "{frames:#?}");
    assert_eq!(card[0]["kind"], "execute");
    assert_eq!(card[0]["title"], "echo acp-proof");
    assert_eq!(card[0]["status"], "in_progress");
    let done = updates(&frames, "tool_call_update");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["toolCallId"], card[0]["toolCallId"]);
    assert_eq!(done[0]["status"], "completed");
    assert!(done[0]["rawOutput"].as_str().unwrap().contains("acp-proof"));
    let stop = frames
        .iter()
        .find_map(|f| f["result"]["stopReason"].as_str())
        .unwrap();
    assert_eq!(stop, "end_turn");
    // The command really ran: its output went back to the model.
    let second = request_messages(env.server(), 1);
    let tool = second.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(tool["content"].as_str().unwrap().contains("acp-proof"));
}

/// acpx with dsh as its agent, as a command to run or spawn (persistent-session commands).
fn acpx_command(acpx: &Path, env: &Env, args: &[&str]) -> Command {
    let agent = format!("{} acp", crate::support::dsh_bin().display());
    let mut c = Command::new(acpx);
    c.args(["--agent", &agent, "--cwd"])
        .arg(env.cwd())
        // The queue owner acpx keeps between prompts (and its dsh) stays for the whole test;
        // `sessions close` ends it.
        .args(["--format", "json", "--timeout", "60", "--ttl", "60"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("DSH_HOME", env.home.path())
        .env("DEEPSEEK_API_KEY", "sk-test-key")
        .env("DEEPSEEK_BASE_URL", env.server().base_url())
        .current_dir(env.work.path());
    c
}

fn frames_of(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn acpx_cancels_a_running_prompt_of_a_persistent_session() {
    let Some(acpx) = acpx() else { return };
    let env = Env::new();
    env.server()
        .push(crate::support::stalled_text("partial answer"));
    let out = acpx_command(&acpx, &env, &["sessions", "new"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prompt = acpx_command(&acpx, &env, &["prompt", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The turn is running once the model has the request.
    assert!(
        env.server()
            .wait_for_requests_blocking(1, std::time::Duration::from_secs(60))
            .is_some(),
        "the prompt never reached the model"
    );
    let cancel = acpx_command(&acpx, &env, &["cancel"]).output().unwrap();
    assert_eq!(
        cancel.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&cancel.stderr)
    );
    let out = prompt.wait_with_output().unwrap();
    let frames = frames_of(&out);
    let stop = frames
        .iter()
        .find_map(|f| f["result"]["stopReason"].as_str())
        .unwrap_or_else(|| {
            panic!(
                "no stop reason: {frames:#?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(stop, "cancelled");
    // dsh ended the turn as cancelled by the user and stored it.
    let log = crate::support::session_files(&env.home.path().join("sessions"));
    let events = crate::support::read_rows(&log[0]);
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_ne!(end["data"]["reason"]["kind"], "completed", "{end}");
    let _ = acpx_command(&acpx, &env, &["sessions", "close"]).output();
}

#[test]
fn acpx_loads_a_stored_session_into_a_new_agent_process_and_continues_it() {
    let Some(acpx) = acpx() else { return };
    let env = Env::new();
    env.server()
        .push(Completion::new().text("first answer").reply());
    env.server()
        .push(Completion::new().text("second answer").reply());
    // A one-shot run leaves a stored dsh session (its agent process exits).
    let (code, frames, stderr) = run_acpx(&acpx, &env, &["exec", "remember the word kiwi"]);
    assert_eq!(code, Some(0), "{stderr}");
    let session = frames
        .iter()
        .find_map(|f| f["result"]["sessionId"].as_str())
        .unwrap_or_else(|| panic!("{frames:#?}"))
        .to_owned();
    // acpx resumes it in a fresh `dsh acp` (session/load), then prompts it.
    let out = acpx_command(
        &acpx,
        &env,
        &["sessions", "new", "--resume-session", &session],
    )
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acpx_command(&acpx, &env, &["prompt", "which word?"])
        .output()
        .unwrap();
    let frames = frames_of(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{frames:#?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text: String = updates(&frames, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(text.ends_with("second answer"), "{text:?}");
    // The second request continued the first conversation.
    let second = request_messages(env.server(), 1);
    let texts: Vec<String> = second
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    assert!(
        texts.iter().any(|t| t == "remember the word kiwi"),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t == "first answer"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "which word?"), "{texts:?}");
    // One stored session, both turns in it.
    let logs = crate::support::session_files(&env.home.path().join("sessions"));
    assert_eq!(logs.len(), 1, "{logs:?}");
    let turns = crate::support::read_rows(&logs[0])
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .count();
    assert_eq!(turns, 2);
    let _ = acpx_command(&acpx, &env, &["sessions", "close"]).output();
}

#[test]
fn acpx_runs_bash_in_its_own_terminal_with_client_terminal() {
    let Some(acpx) = acpx() else { return };
    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo parent=$(cat /proc/$PPID/comm)","description":"Who runs me"}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let agent = format!(
        "{} acp --client-terminal",
        crate::support::dsh_bin().display()
    );
    let out = Command::new(&acpx)
        .args(["--agent", &agent, "--cwd"])
        .arg(env.cwd())
        .args([
            "--format",
            "json",
            "--timeout",
            "60",
            "--approve-all",
            "exec",
            "Run it",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("DSH_HOME", env.home.path())
        .env("DEEPSEEK_API_KEY", "sk-test-key")
        .env("DEEPSEEK_BASE_URL", env.server().base_url())
        .current_dir(env.work.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // acpx (node) started the shell, not dsh.
    let second = request_messages(env.server(), 1);
    let tool = second.iter().find(|m| m["role"] == "tool").unwrap();
    let text = tool["content"].as_str().unwrap();
    assert!(text.contains("parent="), "{text}");
    assert!(!text.contains("parent=dsh"), "{text}");
    assert!(!text.contains("parent=bwrap"), "{text}");
}

#[test]
fn acpx_serves_the_file_tools_through_its_fs_methods() {
    let Some(acpx) = acpx() else { return };
    let env = Env::new();
    let notes = env.cwd().join("notes.txt");
    std::fs::write(&notes, "alpha\nbeta\n").unwrap();
    let outside = tempfile::Builder::new()
        .prefix("dsh-acpx-fs-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let foreign = outside.path().canonicalize().unwrap().join("foreign.txt");
    std::fs::write(&foreign, "not yours\n").unwrap();
    let s = env.server();
    s.push(
        Completion::new()
            .tool_call_with_id("r1", "read", r#"{"file_path":"notes.txt"}"#)
            .reply(),
    );
    s.push(
        Completion::new()
            .tool_call_with_id(
                "e1",
                "edit",
                r#"{"file_path":"notes.txt","old_string":"beta","new_string":"gamma"}"#,
            )
            .reply(),
    );
    s.push(
        Completion::new()
            .tool_call_with_id(
                "r2",
                "read",
                &serde_json::json!({"file_path": foreign.display().to_string()}).to_string(),
            )
            .reply(),
    );
    s.push(Completion::new().text("edited").reply());
    let (code, frames, stderr) = run_acpx(&acpx, &env, &["--approve-all", "exec", "Edit it"]);
    assert_eq!(code, Some(0), "{stderr}\n{frames:#?}");
    // The tools asked acpx, which read and wrote the file in its workspace.
    let asked = |method: &str| {
        frames
            .iter()
            .filter(|f| f["method"] == method)
            .map(|f| f["params"]["path"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let notes_path = notes.display().to_string();
    assert!(
        asked("fs/read_text_file").contains(&notes_path),
        "{frames:#?}"
    );
    assert_eq!(asked("fs/write_text_file"), vec![notes_path], "{frames:#?}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "alpha\ngamma\n");
    let tool_text = |i: usize, id: &str| {
        request_messages(env.server(), i)
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .unwrap()
            .to_owned()
    };
    assert!(tool_text(1, "r1").contains("1: alpha\n2: beta"));
    assert!(tool_text(2, "e1").contains("has been updated successfully"));
    // A path outside the session's cwd is read by dsh itself (acpx would refuse it: its
    // workspace is the cwd); acpx is not asked.
    assert!(tool_text(3, "r2").contains("1: not yours"));
    assert!(
        !asked("fs/read_text_file").contains(&foreign.display().to_string()),
        "{frames:#?}"
    );
}
