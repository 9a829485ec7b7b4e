//! Approval policies end to end: the real `dsh exec`, the scripted answerer front end
//! (`approval-scripted`), the real sandbox.

use std::path::PathBuf;

use dsh_testkit::Completion;
use serde_json::{Value, json};

use crate::support::{Env, request_messages, stderr, stdout};

struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

/// A workspace and an outside directory that is not a writable root (under `/var/tmp`).
fn dirs() -> Dirs {
    let root = tempfile::Builder::new()
        .prefix("dsh-cli-approval-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Dirs {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        _root: root,
    }
}

fn bash(cmd: &str) -> String {
    json!({"command": cmd, "description": "try"}).to_string()
}

fn escalated(cmd: &str) -> String {
    json!({"command": cmd, "description": "try", "sandbox_permissions": "danger-full-access",
           "justification": "the file lives outside the workspace"})
    .to_string()
}

fn answers(env: &Env, yaml_answers: &str) -> PathBuf {
    env.patch(
        "answers.yaml",
        &format!(
            "plugins:\n  - id: approval-scripted\n    name: approval-scripted\n    config:\n      answers:\n{yaml_answers}"
        ),
    )
}

fn run(env: &Env, ws: &PathBuf, args: &[&str]) -> std::process::Output {
    let out = env
        .dsh()
        .arg("exec")
        .args(args)
        .arg("--cwd")
        .arg(ws)
        .arg("Go")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

fn tool_texts(env: &Env, request: usize) -> Vec<String> {
    request_messages(env.server(), request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn of_type(env: &Env, kind: &str) -> Vec<Value> {
    env.stored_events()
        .into_iter()
        .filter(|e| e["type"] == kind)
        .map(|e| e["data"].clone())
        .collect()
}

#[test]
fn never_denies_an_escalation_without_asking() {
    let env = Env::new();
    let d = dirs();
    env.server().push(
        Completion::new()
            .tool_call("bash", &escalated("touch ../outside/x"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    run(&env, &d.ws, &[]);
    let text = &tool_texts(&env, 1)[0];
    assert!(text.contains("the approval policy is never"), "{text}");
    assert!(!d.outside.join("x").exists());
    assert!(of_type(&env, "approval/asked").is_empty());
}

#[test]
fn untrusted_without_an_answerer_denies_and_logs_the_decision() {
    let env = Env::new();
    let d = dirs();
    std::fs::write(d.ws.join("r.txt"), "readable\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch made.txt"))
            .tool_call_with_id("c2", "read", r#"{"file_path":"r.txt"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    run(&env, &d.ws, &["--ask-for-approval", "untrusted"]);
    let texts = tool_texts(&env, 1);
    assert!(
        texts[0].contains("no approval channel is available"),
        "{}",
        texts[0]
    );
    assert!(
        texts[1].contains("readable"),
        "read-only tools are not asked about"
    );
    assert!(!d.ws.join("made.txt").exists());
    let asked = of_type(&env, "approval/asked");
    let decided = of_type(&env, "approval/decided");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["toolName"], "bash");
    assert_eq!(asked[0]["callId"], "c1");
    assert_eq!(decided[0]["id"], asked[0]["id"]);
    assert_eq!(decided[0]["outcome"], "unavailable");
    // `dsh sessions show` has the decisions.
    let id = env.session_id();
    let show = env.dsh().args(["sessions", "show", &id]).output().unwrap();
    let text = stdout(&show);
    assert!(text.contains("sandbox: workspace-write"), "{text}");
    assert!(text.contains("approval asked ("), "{text}");
    assert!(
        text.contains("unavailable (no one to ask): denied"),
        "{text}"
    );
}

#[test]
fn untrusted_allow_always_stores_a_rule_judged_per_simple_command() {
    let env = Env::new();
    let d = dirs();
    let patch = answers(
        &env,
        "        - decision: allow-always\n        - decision: deny\n          reason: not now\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("echo hi > a.txt"))
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c2", "bash", &bash("echo hi && touch b.txt"))
            .tool_call_with_id("c3", "bash", &bash("echo hi; echo hi >> a.txt"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let patch = patch.to_string_lossy().into_owned();
    run(
        &env,
        &d.ws,
        &["--ask-for-approval", "untrusted", "--patch", &patch],
    );
    assert_eq!(
        std::fs::read_to_string(d.ws.join("a.txt")).unwrap(),
        "hi\nhi\n"
    );
    assert!(!d.ws.join("b.txt").exists());
    let texts = tool_texts(&env, 2);
    assert!(
        texts[1].contains("the user rejected tool \"bash\": not now"),
        "{}",
        texts[1]
    );
    let decided = of_type(&env, "approval/decided");
    // c1 asked (allow always), c2 asked (deny), c3 allowed by the rule without asking.
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert_eq!(decided[0]["always"], true);
    assert_eq!(decided[1]["outcome"], "rejected");
    assert_eq!(decided[1]["reason"], "not now");
    let ws = d.ws.to_string_lossy().into_owned();
    let list = env
        .dsh()
        .args(["permissions", "list", "--cwd", &ws])
        .output()
        .unwrap();
    assert_eq!(stdout(&list), "1. bash: echo hi ...\n");
    let revoke = env
        .dsh()
        .args(["permissions", "revoke", "1", "--cwd", &ws])
        .output()
        .unwrap();
    assert_eq!(revoke.status.code(), Some(0), "{}", stderr(&revoke));
    let list = env
        .dsh()
        .args(["permissions", "list", "--cwd", &ws])
        .output()
        .unwrap();
    assert_eq!(stdout(&list), "no allow-always rules\n");
    let bad = env
        .dsh()
        .args(["permissions", "revoke", "7", "--cwd", &ws])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("no rule number 7"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn on_request_runs_one_approved_call_outside_the_sandbox() {
    let env = Env::new();
    let d = dirs();
    let patch = answers(&env, "        - decision: allow-once\n");
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &escalated("touch ../outside/approved"))
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c2", "bash", &bash("touch ../outside/again"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let patch = patch.to_string_lossy().into_owned();
    run(
        &env,
        &d.ws,
        &["--ask-for-approval", "on-request", "--patch", &patch],
    );
    assert!(d.outside.join("approved").exists());
    assert!(!d.outside.join("again").exists(), "the grant is one-shot");
    let asked = of_type(&env, "approval/asked");
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0]["reason"],
        "escalate sandbox to danger-full-access: the file lives outside the workspace"
    );
}

#[test]
fn on_failure_asks_after_a_denial_and_reruns_outside_the_sandbox() {
    let env = Env::new();
    let d = dirs();
    let patch = answers(
        &env,
        "        - decision: allow-once\n        - decision: deny\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch ../outside/retried"))
            .tool_call_with_id(
                "c2",
                "write",
                r#"{"file_path":"../outside/w.txt","content":"w"}"#,
            )
            .tool_call_with_id("c3", "bash", &bash("touch in-ws"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let patch = patch.to_string_lossy().into_owned();
    run(
        &env,
        &d.ws,
        &["--ask-for-approval", "on-failure", "--patch", &patch],
    );
    assert!(d.outside.join("retried").exists());
    assert!(!d.outside.join("w.txt").exists());
    assert!(d.ws.join("in-ws").exists());
    let texts = tool_texts(&env, 1);
    assert!(texts[0].contains("(no output)"), "{}", texts[0]);
    assert!(
        texts[1].contains("FS_SANDBOX_DENIED") || texts[1].contains("outside the writable roots"),
        "{}",
        texts[1]
    );
    let decided = of_type(&env, "approval/decided");
    assert_eq!(
        decided.len(),
        2,
        "only the denied calls were asked about: {decided:?}"
    );
}

#[test]
fn an_unanswered_question_is_denied_after_the_answer_timeout() {
    let env = Env::new();
    let d = dirs();
    let patch = env.patch(
        "timeout.yaml",
        "plugins:\n  - id: approval\n    name: approval\n    config:\n      answerTimeoutMs: 300\n  - id: approval-scripted\n    name: approval-scripted\n    config:\n      answers:\n        - decision: no-answer\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch asked"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let patch = patch.to_string_lossy().into_owned();
    run(
        &env,
        &d.ws,
        &["--ask-for-approval", "untrusted", "--patch", &patch],
    );
    assert!(!d.ws.join("asked").exists());
    let texts = tool_texts(&env, 1);
    assert!(texts[0].contains("no answer within 0.3s"), "{}", texts[0]);
    let decided = of_type(&env, "approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["outcome"], "cancelled");
    assert_eq!(decided[0]["reason"], "no answer within 0.3s");
    let policy = of_type(&env, "approval/policy");
    assert_eq!(policy[0]["policy"], "untrusted", "{policy:?}");
}
