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
    let results: Vec<Value> = env
        .stored_events()
        .into_iter()
        .filter(|e| e["type"] == "hook/result")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["decision"], "block");
    assert_eq!(results[0]["exitCode"], 2);
    assert_eq!(
        results[0]["stderrSummary"],
        "rm is not allowed here; move files to trash/ instead"
    );
    assert_eq!(results[1]["decision"], "pass");
    let invoked = env
        .stored_events()
        .into_iter()
        .find(|e| e["type"] == "hook/invoked")
        .unwrap();
    assert_eq!(invoked["data"]["matcher"], "Bash");
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
    // Each run is in the log, inside the turn: hook/invoked, then hook/result.
    let events = env.stored_events();
    let invoked: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "hook/invoked")
        .collect();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "hook/result")
        .collect();
    assert_eq!(invoked.len(), 3, "{events:#?}");
    assert_eq!(results.len(), 3);
    for (i, e) in invoked.iter().enumerate() {
        assert_eq!(e["data"]["turn"], 1);
        assert_eq!(e["data"]["point"], "PreToolUse");
        assert_eq!(e["data"]["dialect"], "claude-code");
        assert_eq!(
            e["data"]["handlerId"],
            format!("claude-code:PreToolUse:{}", i + 1)
        );
        assert!(e["data"].get("matcher").is_none());
    }
    let r: Vec<&Value> = results.iter().map(|e| &e["data"]).collect();
    assert!(r.iter().all(|d| d["decision"] == "pass"), "{r:?}");
    assert!(r[0].get("exitCode").is_none(), "timed out: no exit code");
    assert!(
        r[0]["stderrSummary"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    assert!(r[0]["durationMs"].as_u64().unwrap() >= 1000);
    assert_eq!(r[1]["exitCode"], 0);
    assert!(
        r[1]["stderrSummary"]
            .as_str()
            .unwrap()
            .contains("is not JSON")
    );
    assert_eq!(r[2]["exitCode"], 1);
    let seqs = |v: &[&Value]| {
        v.iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    let call = events.iter().find(|e| e["type"] == "tool/call").unwrap()["seq"]
        .as_u64()
        .unwrap();
    let end = events.iter().find(|e| e["type"] == "turn/end").unwrap()["seq"]
        .as_u64()
        .unwrap();
    assert!(
        seqs(&invoked)
            .iter()
            .chain(&seqs(&results))
            .all(|s| *s > call && *s < end)
    );
    // `dsh sessions show` tells the story.
    let show = env
        .dsh()
        .args(["sessions", "show", &env.session_id()])
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(
        text.contains("hook claude-code:PreToolUse:1 invoked"),
        "{text}"
    );
    assert!(
        text.contains("hook claude-code:PreToolUse:1 result: pass, "),
        "{text}"
    );
    assert!(
        text.contains("hook claude-code:PreToolUse:3 result: pass, exit 1, "),
        "{text}"
    );
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

const SUBAGENT_START: &str = r#"#!/usr/bin/env bash
cat > "$CLAUDE_PROJECT_DIR/start-payload.json"
echo '{"hookSpecificOutput":{"hookEventName":"SubagentStart","additionalContext":"CTX-FOR-CHILD"}}'
"#;

const SUBAGENT_STOP: &str = r#"#!/usr/bin/env bash
input=$(cat)
printf '%s\n' "$input" >> "$CLAUDE_PROJECT_DIR/subagent-stop.jsonl"
if printf '%s' "$input" | grep -q '"stop_hook_active":false'; then
  echo '{"decision":"block","reason":"check again please"}'
fi
"#;

#[test]
fn subagent_start_and_stop_hooks_run_for_a_child_with_the_original_payloads() {
    let env = Env::new();
    let repo = repo(&env);
    write(&repo.join(".claude/hooks/start.sh"), SUBAGENT_START);
    write(&repo.join(".claude/hooks/stop.sh"), SUBAGENT_STOP);
    write(
        &repo.join(".claude/settings.json"),
        r#"{"hooks":{
            "SubagentStart":[{"matcher":"general-purpose","hooks":[{"type":"command","command":"bash .claude/hooks/start.sh"}]}],
            "SubagentStop":[{"hooks":[{"type":"command","command":"bash .claude/hooks/stop.sh"}]}],
            "Stop":[{"hooks":[{"type":"command","command":"cat >> parent-stop.jsonl; echo >> parent-stop.jsonl"}]}]
        }}"#,
    );
    env.server().set_responder(|req| {
        let body = req.body_json().unwrap();
        let msgs = body["messages"].as_array().unwrap();
        let users: Vec<&str> = msgs
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect();
        let tool = msgs
            .iter()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str());
        if users.iter().any(|u| u.contains("child task")) {
            let ctx = users.iter().any(|u| u.contains("CTX-FOR-CHILD"));
            if users.iter().any(|u| u.contains("check again please")) {
                Completion::new()
                    .text(&format!("child final ctx={ctx}"))
                    .reply()
            } else {
                Completion::new().text("child first").reply()
            }
        } else if let Some(t) = tool {
            Completion::new().text(&format!("parent saw: {t}")).reply()
        } else {
            Completion::new()
                .tool_call_with_id(
                    "c1",
                    "subagent",
                    r#"{"description":"Helper","prompt":"child task"}"#,
                )
                .reply()
        }
    });
    let out = env.exec(&["Delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The SubagentStart context reached the child; its SubagentStop block gave it one more
    // step, and the guard's `stop_hook_active` let the second stop through.
    assert_eq!(stdout(&out), "parent saw: child final ctx=true\n");
    let start: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join("start-payload.json")).unwrap())
            .unwrap();
    assert_eq!(start["hook_event_name"], "SubagentStart");
    assert_eq!(start["agent_type"], "general-purpose");
    let child = start["agent_id"].as_str().unwrap().to_owned();
    let parent = start["session_id"].as_str().unwrap().to_owned();
    assert_ne!(child, parent);
    let stops: Vec<Value> = std::fs::read_to_string(repo.join("subagent-stop.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stops.len(), 2, "{stops:#?}");
    assert_eq!(stops[0]["hook_event_name"], "SubagentStop");
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[0]["agent_id"], child.as_str());
    assert_eq!(stops[0]["session_id"], parent.as_str());
    assert_eq!(stops[0]["last_assistant_message"], "child first");
    assert_eq!(stops[1]["stop_hook_active"], true);
    assert_eq!(stops[1]["last_assistant_message"], "child final ctx=true");
    // Stop hooks are the parent's only.
    let parent_stops: Vec<Value> = std::fs::read_to_string(repo.join("parent-stop.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parent_stops.len(), 1);
    assert_eq!(parent_stops[0]["session_id"], parent.as_str());
    // The child's log has the runs in its own turn.
    let child_log = session_files(&env.home.path().join("sessions"))
        .into_iter()
        .find(|p| p.display().to_string().contains(&child))
        .unwrap();
    let points: Vec<String> = read_rows(&child_log)
        .iter()
        .filter(|e| e["type"] == "hook/result")
        .map(|e| e["data"]["point"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(points, ["SubagentStart", "SubagentStop", "SubagentStop"]);
}
