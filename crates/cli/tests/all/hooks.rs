//! Command hooks end to end with real scripts in bash and python: PreToolUse blocking (exit 2)
//! and denying (JSON), `updatedInput`, PostToolUse context on the next request, a Stop hook
//! forcing one more step and the loop guard, a hung hook's timeout, garbage output, a blocked
//! prompt.

#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The real python3 executable (the test environment clears variables a shim would need).
fn python() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

fn repo(env: &Env) -> PathBuf {
    let r = env.cwd();
    std::fs::create_dir_all(r.join(".git")).unwrap();
    r
}

fn tool_texts(env: &Env, i: usize) -> Vec<String> {
    request_messages(env.server(), i)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

const NO_RM: &str = r#"#!/usr/bin/env bash
input=$(cat)
printf '%s' "$input" > "$CLAUDE_PROJECT_DIR/pre-payload.json"
if printf '%s' "$input" | grep -q '"command":"rm '; then
  echo "rm is not allowed here; move files to trash/ instead" >&2
  exit 2
fi
exit 0
"#;

#[test]
fn a_bash_pre_tool_use_hook_blocks_rm_with_exit_2() {
    let env = Env::new();
    let repo = repo(&env);
    write(&repo.join("victim.txt"), "keep me\n");
    write(&repo.join(".claude/hooks/no-rm.sh"), NO_RM);
    write(
        &repo.join(".claude/settings.json"),
        r#"{"permissions":{},"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"bash \"$CLAUDE_PROJECT_DIR/.claude/hooks/no-rm.sh\""}]}]}}"#,
    );
    env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"rm victim.txt","description":"Delete it"}"#,
            )
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo fine","description":"Echo"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let out = env.exec(&["clean up"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        repo.join("victim.txt").exists(),
        "the hook kept rm from running"
    );
    assert_eq!(
        tool_texts(&env, 1),
        ["Error: rm is not allowed here; move files to trash/ instead"]
    );
    assert_eq!(tool_texts(&env, 2)[1], "fine\n");
    let payload: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join("pre-payload.json")).unwrap())
            .unwrap();
    assert_eq!(payload["hook_event_name"], "PreToolUse");
    assert_eq!(payload["tool_name"], "Bash");
    assert_eq!(payload["tool_input"]["command"], "echo fine");
    assert_eq!(payload["cwd"], repo.display().to_string());
    assert_eq!(payload["transcript_path"], "");
    assert!(payload["session_id"].as_str().unwrap().len() > 8);
}

const DENY_PY: &str = r#"import json, sys
p = json.load(sys.stdin)
open("codex-payload.json", "w").write(json.dumps(p))
path = p["tool_input"].get("file_path", "")
if path.endswith("secret.txt"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "secret.txt is off limits"}}))
elif path.endswith("draft.txt"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"file_path": "final.txt", "content": p["tool_input"]["content"].upper()}}}))
"#;

#[test]
fn a_python_codex_hook_denies_with_json_and_rewrites_input() {
    let Some(py) = python() else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    let env = Env::new();
    let repo = repo(&env);
    write(&repo.join("hooks/deny.py"), DENY_PY);
    let hooks = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Write|Edit",
        "hooks": [{"type": "command", "command": format!("{} hooks/deny.py", py.display()), "timeoutSec": 30}]}]}});
    write(&repo.join(".codex/hooks.json"), &hooks.to_string());
    env.server().push(
        Completion::new()
            .tool_call("write", r#"{"file_path":"secret.txt","content":"x"}"#)
            .tool_call("write", r#"{"file_path":"draft.txt","content":"hello"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let out = env.exec(&["write"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!repo.join("secret.txt").exists());
    assert!(!repo.join("draft.txt").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join("final.txt")).unwrap(),
        "HELLO"
    );
    let results = tool_texts(&env, 1);
    assert_eq!(results[0], "Error: secret.txt is off limits");
    let payload: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join("codex-payload.json")).unwrap())
            .unwrap();
    assert_eq!(payload["transcript_path"], Value::Null, "codex dialect");
    assert!(payload.get("model").is_some() && payload.get("turn_id").is_some());
}

const POST_PY: &str = r#"import json, sys
p = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
    "additionalContext": "lint: " + p["tool_name"] + " saw " + p["tool_response"].strip()}}))
"#;

#[test]
fn post_tool_use_context_is_carried_on_the_next_request() {
    let Some(py) = python() else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    let env = Env::new();
    let repo = repo(&env);
    write(&repo.join("post.py"), POST_PY);
    let settings = serde_json::json!({"hooks": {"PostToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": format!("{} post.py", py.display())}]}]}});
    write(
        &repo.join(".claude/settings.local.json"),
        &settings.to_string(),
    );
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo 42","description":"Echo"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let out = env.exec(&["go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = request_messages(env.server(), 1);
    let tool = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        messages[tool + 1]["content"],
        "<system-reminder>\nPostToolUse hook additional context: lint: Bash saw 42\n</system-reminder>"
    );
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
}

const STOP_SH: &str = r#"#!/usr/bin/env bash
input=$(cat)
case "$input" in
  *'"stop_hook_active":true'*) echo true >> stop.log ;;
  *) echo false >> stop.log ;;
esac
echo "Run the tests before you stop." >&2
exit 2
"#;

#[test]
fn a_stop_hook_forces_one_more_step_and_the_guard_stops_a_second() {
    let env = Env::new();
    let repo = repo(&env);
    write(&repo.join("stop.sh"), STOP_SH);
    write(
        &env.home.path().join("hooks.json"),
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"bash stop.sh"}]}]}}"#,
    );
    env.server().push(Completion::new().text("done").reply());
    env.server()
        .push(Completion::new().text("tests pass, done").reply());
    env.server()
        .push(Completion::new().text("never asked").reply());
    let out = env.exec(&["work"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "tests pass, done\n");
    assert_eq!(
        env.server()
            .requests()
            .iter()
            .filter(|r| r.is_chat())
            .count(),
        2
    );
    let second = request_messages(env.server(), 1);
    assert_eq!(
        second.last().unwrap()["content"],
        "Run the tests before you stop."
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("stop.log")).unwrap(),
        "false\ntrue\n"
    );
    assert!(
        stderr(&out).contains("Stop hook loop guard"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
}

#[test]
fn a_hung_hook_times_out_and_garbage_is_ignored_without_breaking_the_turn() {
    let env = Env::new();
    let repo = repo(&env);
    write(
        &repo.join(".dsh/hooks.json"),
        r#"{"hooks":{"PreToolUse":[{"hooks":[
            {"type":"command","command":"sleep 30","timeout":1},
            {"type":"command","command":"echo '{not json'"},
            {"type":"command","command":"exit 1"}]}]}}"#,
    );
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo ran","description":"Echo"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let started = std::time::Instant::now();
    let out = env.exec(&["go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the hook was killed"
    );
    assert_eq!(tool_texts(&env, 1), ["ran\n"]);
    let err = stderr(&out);
    assert!(err.contains("timed out and was killed"), "{err}");
    assert!(err.contains("is not JSON"), "{err}");
    assert!(err.contains("exited with code 1"), "{err}");
}

#[test]
fn a_user_prompt_submit_hook_blocks_a_prompt_and_another_adds_context() {
    let env = Env::new();
    let repo = repo(&env);
    write(
        &repo.join(".claude/settings.json"),
        r#"{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"grep -q forbidden && { echo 'no forbidden words' >&2; exit 2; }; echo '{\"hookSpecificOutput\":{\"hookEventName\":\"UserPromptSubmit\",\"additionalContext\":\"today is build day\"}}'"}]}]}}"#,
    );
    env.server().push(Completion::new().text("ok").reply());
    let out = env.exec(&["a forbidden prompt"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no forbidden words"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        env.server()
            .requests()
            .iter()
            .filter(|r| r.is_chat())
            .count(),
        0
    );
    let out = env.exec(&["--continue", "a fine prompt"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = request_messages(env.server(), 0);
    let at = messages
        .iter()
        .position(|m| m["content"] == "a fine prompt")
        .unwrap();
    assert_eq!(
        messages[at + 1]["content"],
        "<system-reminder>\nUserPromptSubmit hook additional context: today is build day\n</system-reminder>"
    );
}

#[test]
fn a_pre_tool_use_ask_goes_to_the_approval_seam() {
    let env = Env::new();
    let repo = repo(&env);
    write(
        &repo.join(".claude/settings.json"),
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"touching files needs a human\"}}'"}]}]}}"#,
    );
    let patch = env.patch(
        "answers.yaml",
        "plugins:\n  - id: approval-scripted\n    name: approval-scripted\n    config:\n      answers:\n        - decision: allow-once\n        - decision: deny\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "c1",
                "bash",
                r#"{"command":"touch yes.txt","description":"Touch"}"#,
            )
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "c2",
                "bash",
                r#"{"command":"touch no.txt","description":"Touch"}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let out = env
        .dsh()
        .arg("exec")
        .arg("--patch")
        .arg(&patch)
        .arg("go")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(repo.join("yes.txt").exists(), "allowed once");
    assert!(!repo.join("no.txt").exists(), "denied");
    let asked: Vec<Value> = env
        .stored_events()
        .into_iter()
        .filter(|e| e["type"] == "approval/asked")
        .collect();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0]["data"]["reason"], "touching files needs a human");
}

#[test]
fn a_codex_session_start_hook_adds_plain_stdout_as_context() {
    let env = Env::new();
    let repo = repo(&env);
    write(
        &repo.join(".codex/hooks.json"),
        r#"{"hooks":{"SessionStart":[{"matcher":"startup","hooks":[{"type":"command","command":"echo branch: main"}]}]}}"#,
    );
    env.server().push(Completion::new().text("one").reply());
    env.server().push(Completion::new().text("two").reply());
    assert_eq!(env.exec(&["hi"]).status.code(), Some(0));
    let messages = request_messages(env.server(), 0);
    let at = messages.iter().position(|m| m["content"] == "hi").unwrap();
    assert_eq!(
        messages[at + 1]["content"],
        "<system-reminder>\nSessionStart hook additional context: branch: main\n</system-reminder>"
    );
    // A resumed session's source is `resume`: the `startup` matcher does not select it.
    assert_eq!(env.exec(&["--continue", "again"]).status.code(), Some(0));
    let messages = request_messages(env.server(), 1);
    let n = messages
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.contains("SessionStart hook"))
        })
        .count();
    assert_eq!(n, 1);
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
}
