//! Successful runs: text, tools, parallel reads, reasoning replay, --json, stdin.

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

#[test]
fn a_text_turn_prints_the_answer_and_stores_the_session() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .text("Hello from the mock.")
            .chars_per_delta(4)
            .reply(),
    );
    let out = env.exec(&["Say hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello from the mock.\n");
    let events = env.stored_events();
    let k = kinds(&events);
    let policy = events
        .iter()
        .find(|e| e["type"] == "approval/policy")
        .expect("an approval/policy event");
    assert_eq!(policy["data"], serde_json::json!({"policy": "never"}));
    // The session's sandbox mode and approval policy are logged first, as the original does
    // (their relative order follows plugin activation, which is concurrent: see the approval
    // README's Known limitations).
    let mut first_two = [k[0].clone(), k[1].clone()];
    first_two.sort();
    assert_eq!(first_two, ["approval/policy", "sandbox/mode"]);
    assert_eq!(k[2], "agent/inbox/spliced");
    assert_eq!(k.last().unwrap(), "turn/end");
    assert_eq!(
        events.last().unwrap()["data"]["reason"]["kind"],
        "completed"
    );
    let req = env.server().request(0).unwrap();
    assert_eq!(req.bearer(), Some("sk-test-key"));
    let body = req.body_json().unwrap();
    assert_eq!(body["stream"], true);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    // The persona is byte-stable: the working directory travels as runtime context.
    assert!(
        !messages[0]["content"]
            .as_str()
            .unwrap()
            .contains(&env.cwd().display().to_string())
    );
    assert!(messages.iter().any(|m| {
        is_runtime_context(m)
            && m["content"]
                .as_str()
                .unwrap()
                .contains(&format!("Working directory: {}", env.cwd().display()))
    }));
    let prompt = messages.iter().rfind(|m| !is_runtime_context(m)).unwrap();
    assert_eq!(prompt["content"], "Say hello");
}

#[test]
fn a_bash_tool_turn_really_runs_the_command() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo TERMINAL_OK > proof.txt && cat proof.txt","description":"Write proof"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Run it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");
    assert_eq!(
        std::fs::read_to_string(env.work.path().join("proof.txt")).unwrap(),
        "TERMINAL_OK\n"
    );
    let second = request_messages(env.server(), 1);
    let tool = second.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"].as_str().unwrap().contains("TERMINAL_OK"),
        "{tool}"
    );
}

#[test]
fn two_parallel_reads_answer_in_model_order() {
    let env = Env::new();
    std::fs::write(env.work.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(env.work.path().join("b.txt"), "beta\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_read_a", "read", r#"{"file_path":"a.txt"}"#)
            .tool_call_with_id("call_read_b", "read", r#"{"file_path":"b.txt"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Read both"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = request_messages(env.server(), 1);
    let tools: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["tool_call_id"], "call_read_a");
    assert!(tools[0]["content"].as_str().unwrap().contains("alpha"));
    assert_eq!(tools[1]["tool_call_id"], "call_read_b");
    assert!(tools[1]["content"].as_str().unwrap().contains("beta"));
}

#[test]
fn reasoning_is_passed_back_on_the_next_request() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .reasoning("I should list the files.")
            .tool_call("bash", r#"{"command":"true","description":"Nothing"}"#)
            .reply(),
    );
    env.server()
        .push(Completion::new().reasoning("Done now.").text("OK").reply());
    let out = env.exec(&["--effort", "high", "List"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = env.server().request(0).unwrap().body_json().unwrap();
    assert_eq!(first["reasoning_effort"], "high");
    let second = request_messages(env.server(), 1);
    let assistant = second.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["reasoning_content"], "I should list the files.");
    // The second request extends the first byte for byte.
    let (a, b) = (
        env.server().request(0).unwrap(),
        env.server().request(1).unwrap(),
    );
    let (ma, mb) = (
        serde_json::to_string(&a.body_json().unwrap()["messages"]).unwrap(),
        serde_json::to_string(&b.body_json().unwrap()["messages"]).unwrap(),
    );
    assert!(
        mb.starts_with(&ma[..ma.len() - 1]),
        "not a prefix extension"
    );
}

#[test]
fn json_output_is_one_parseable_event_per_line() {
    let env = Env::new();
    env.server().push(Completion::new().text("fine").reply());
    let out = env.exec(&["--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let k = kinds(&lines);
    // The session's sandbox mode and approval policy are logged first, as the original does
    // (their relative order follows plugin activation, which is concurrent: see the approval
    // README's Known limitations).
    let mut first_two = [k[0].clone(), k[1].clone()];
    first_two.sort();
    assert_eq!(first_two, ["approval/policy", "sandbox/mode"]);
    assert_eq!(k[2], "agent/inbox/spliced");
    assert_eq!(k.last().unwrap(), "turn/end");
    let seqs: Vec<u64> = lines.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert!(!stdout(&out).contains("\nfine\n"));
}

#[test]
fn a_dash_prompt_is_read_from_stdin() {
    let env = Env::new();
    env.server().push(Completion::new().text("got it").reply());
    let mut child = env
        .dsh()
        .args(["exec", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let messages = request_messages(env.server(), 0);
    let prompt = messages.iter().rfind(|m| !is_runtime_context(m)).unwrap();
    assert_eq!(prompt["content"], "from stdin\n");
}

#[test]
fn max_parallel_tools_and_model_flags_reach_the_request() {
    let env = Env::new();
    env.server().push(Completion::new().text("ok").reply());
    let out = env.exec(&[
        "--model",
        "deepseek-v4-pro",
        "--max-parallel-tools",
        "1",
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        env.server().request(0).unwrap().body_json().unwrap()["model"],
        "deepseek-v4-pro"
    );
}
