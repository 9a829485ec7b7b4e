//! `dsh acp` driven by `acpx` (the headless ACP client, from npm, installed by
//! `scripts/test-clients` into a cache directory) against the testkit model.

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
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_dsh"));
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
