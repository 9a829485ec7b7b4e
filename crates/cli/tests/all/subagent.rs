//! Sub-agents end to end: the real `dsh` binary delegating to child agents that run real bash.

use std::sync::Arc;
use std::time::Instant;

use dsh_testkit::{Completion, RecordedRequest, Reply};
use serde_json::Value;

use crate::support::*;

/// The text of the last user message of a request that is not a runtime-context snapshot.
pub(crate) fn task_of(req: &RecordedRequest) -> String {
    let body = req.body_json().unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" && !is_runtime_context(m))
        .filter_map(|m| m["content"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_owned()
}

/// The text of the first user message of a request that is not a runtime-context snapshot.
pub(crate) fn first_task(req: &RecordedRequest) -> String {
    let body = req.body_json().unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" && !is_runtime_context(m))
        .find_map(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The tool messages of a request, in order.
pub(crate) fn tool_messages(req: &RecordedRequest) -> Vec<Value> {
    req.body_json().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// Every stored session: (header, events).
pub(crate) fn sessions(env: &Env) -> Vec<(Value, Vec<Value>)> {
    session_files(&env.home.path().join("sessions"))
        .iter()
        .map(|p| {
            let text = log_text(p);
            let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            (header, read_rows(p))
        })
        .collect()
}

fn delegate_call(id: &str, tool: &str, label: &str, prompt: &str) -> (String, String, String) {
    let args = serde_json::json!({"description": label, "prompt": prompt}).to_string();
    (id.to_owned(), tool.to_owned(), args)
}

fn calls_reply(calls: &[(String, String, String)]) -> Reply {
    let mut c = Completion::new();
    for (id, name, args) in calls {
        c = c.tool_call_with_id(id, name, args);
    }
    c.reply()
}

/// A bash command that only succeeds when all three children run at once: each creates its
/// marker and waits (bounded) for the other two.
fn barrier_command(me: &str, dir: &std::path::Path) -> String {
    let d = dir.display();
    format!(
        "touch {d}/{me}.mark && for i in $(seq 1500); do [ -e {d}/A.mark ] && [ -e {d}/B.mark ] && \
         [ -e {d}/C.mark ] && break; sleep 0.02; done && ls {d}/A.mark {d}/B.mark {d}/C.mark \
         >/dev/null && echo \"{me} saw all three in $DSH_SESSION_ID\""
    )
}

#[test]
#[allow(clippy::print_stderr)] // reports the measured wall time (`--nocapture`)
fn three_subagents_in_one_batch_run_concurrently_with_real_bash_and_answer_in_model_order() {
    let env = Env::new();
    let dir = Arc::new(env.cwd());
    let d = dir.clone();
    env.server().set_responder(move |req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match task.as_str() {
            "Delegate three" if tools.is_empty() => calls_reply(&[
                delegate_call("call_a", "subagent", "Task A", "task A"),
                delegate_call("call_b", "subagent", "Task B", "task B"),
                delegate_call("call_c", "subagent", "Task C", "task C"),
            ]),
            "Delegate three" => Completion::new().text("ALL DONE").reply(),
            t if t.starts_with("task ") => {
                let me = t.trim_start_matches("task ").to_owned();
                if tools.is_empty() {
                    let args = serde_json::json!({
                        "command": barrier_command(&me, &d),
                        "description": "Barrier"
                    })
                    .to_string();
                    Completion::new().tool_call("bash", &args).reply()
                } else {
                    let out = tools[0]["content"].as_str().unwrap_or_default().to_owned();
                    Completion::new()
                        .text(&format!("CHILD {me}: {out}"))
                        .reply()
                }
            }
            other => Completion::new()
                .text(&format!("unexpected {other}"))
                .reply(),
        }
    });
    let started = Instant::now();
    let out = env.exec(&["Delegate three"]);
    let wall = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ALL DONE\n");
    eprintln!("three concurrent children: wall time {wall:?}");

    // The parent's second request has the three results in model order, each from a real bash.
    let requests = env.server().requests();
    let last = requests
        .iter()
        .rfind(|r| task_of(r) == "Delegate three")
        .unwrap();
    let tools = tool_messages(last);
    let ids: Vec<&str> = tools
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c"]);
    for (m, me) in tools.iter().zip(["A", "B", "C"]) {
        let text = m["content"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("CHILD {me}: {me} saw all three in ")),
            "{text}"
        );
    }

    // Children are ordinary sessions under the parent, with their header fields.
    let all = sessions(&env);
    assert_eq!(
        all.len(),
        4,
        "{:?}",
        all.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    let parent = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap();
    let parent_id = parent.0["id"].as_str().unwrap();
    let children: Vec<&(Value, Vec<Value>)> = all
        .iter()
        .filter(|(h, _)| h.get("parentSession").is_some())
        .collect();
    for (h, events) in &children {
        assert_eq!(h["parentSession"], parent_id);
        assert_eq!(h["origin"], "subagent");
        assert_eq!(h["delegationDepth"], 1);
        let descriptor = events
            .iter()
            .find(|e| e["type"] == "subagent/descriptor")
            .unwrap();
        assert_eq!(descriptor["data"]["provider"], "spawn");
        let mode = events.iter().find(|e| e["type"] == "sandbox/mode").unwrap();
        assert_eq!(mode["data"]["source"], "delegation");
        let id = h["id"].as_str().unwrap();
        // The child's bash ran with the child's session id.
        let result = events.iter().find(|e| e["type"] == "tool/result").unwrap();
        assert!(
            result["data"]["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains(id),
            "{result}"
        );
    }
    // The parent's results name their children.
    let metas: Vec<&Value> = parent
        .1
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| &e["data"]["meta"])
        .collect();
    assert_eq!(metas.len(), 3);
    for m in metas {
        let child = m["childSessionId"].as_str().unwrap();
        assert!(children.iter().any(|(h, _)| h["id"] == child), "{m}");
    }
}

#[test]
fn the_depth_limit_refuses_a_grandchild_with_the_original_text() {
    let env = Env::new();
    let patch = env.patch(
        "depth.yaml",
        "plugins:\n  - id: subagents\n    name: subagents\n    config: { maxDepth: 1 }\n",
    );
    env.server().set_responder(|req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Go deep", true) => calls_reply(&[delegate_call("c1", "subagent", "Child", "child")]),
            ("child", true) => calls_reply(&[delegate_call("c2", "subagent", "Grand", "grand")]),
            ("child", false) => {
                let text = tools[0]["content"].as_str().unwrap_or_default().to_owned();
                Completion::new()
                    .text(&format!("child saw: {text}"))
                    .reply()
            }
            (_, false) => {
                let text = tools[0]["content"].as_str().unwrap_or_default().to_owned();
                Completion::new().text(&text).reply()
            }
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Go deep"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "child saw: Error: subagent depth 2 exceeds maxDepth 1\n"
    );
    assert_eq!(sessions(&env).len(), 2, "no grandchild session was created");
}

#[test]
fn a_failing_child_is_an_error_result_for_the_parent() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Delegate", true) => {
                calls_reply(&[delegate_call("c1", "subagent", "Doomed", "doomed")])
            }
            ("doomed", _) => dsh_testkit::deepseek::invalid_request("bad child request"),
            (_, false) => {
                let t = &tools[0];
                let text = format!(
                    "{} {}",
                    t["content"].as_str().unwrap_or_default(),
                    t["role"]
                );
                Completion::new().text(&text).reply()
            }
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let out = env.exec(&["Delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Error: subagent run failed\nDiagnostic: "),
        "{text}"
    );
    assert!(text.contains("bad child request"), "{text}");
    let parent = env
        .server()
        .requests()
        .into_iter()
        .rfind(|r| task_of(r) == "Delegate")
        .unwrap();
    let result = &parent.body_json().unwrap()["messages"];
    assert!(result.to_string().contains("subagent run failed"));
}

#[test]
fn cancelling_the_parent_cancels_the_child_and_kills_its_processes() {
    let env = Env::new();
    let fifo = env.work.path().join("child.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // A unique duration marks the child's process (the sandbox may give it its own pid
    // namespace, so the test finds it by its command line).
    let marker = format!("300.{}", std::process::id());
    let cmd = format!(
        r#"{{"command":"sleep {marker} & echo started > {f} ; wait","description":"Hang"}}"#,
        f = fifo.display()
    );
    env.server().set_responder(move |req| {
        let task = task_of(req);
        match task.as_str() {
            "Delegate" => calls_reply(&[delegate_call("c1", "subagent", "Hang", "hang")]),
            "hang" => Completion::new().tool_call("bash", &cmd).reply(),
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let mut child = env.spawn(&["Delegate"]);
    assert_eq!(wait_fifo(&fifo).trim(), "started");
    assert!(
        !processes_with(&marker).is_empty(),
        "the child's sleep runs"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        processes_with(&marker),
        Vec::<i32>::new(),
        "the child's sleep survived the parent's cancel"
    );
    let all = sessions(&env);
    let kid = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    let end = kid.1.iter().rfind(|e| e["type"] == "turn/end").unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "aborted", "{end}");
    let parent = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap();
    let result = parent
        .1
        .iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert!(result["data"]["isError"] == true || result["data"]["message"]["isError"] == true);
}

#[test]
#[allow(clippy::print_stderr)] // reports the measured prefix ratio (`--nocapture`)
fn a_fork_child_starts_with_the_parents_last_request_bytes() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Remember the word PLUM", _) => Completion::new().text("Noted: PLUM").reply(),
            ("Ask a fork", true) => calls_reply(&[delegate_call(
                "f1",
                "subagent_fork",
                "Recall word",
                "Which word?",
            )]),
            ("Which word?", _) => Completion::new().text("PLUM").reply(),
            ("Ask a fork", false) => {
                let text = tools[0]["content"].as_str().unwrap_or_default().to_owned();
                Completion::new().text(&format!("fork said {text}")).reply()
            }
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let first = env.exec(&["--session", "forky", "Remember the word PLUM"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let out = env.exec(&["--session", "forky", "Ask a fork"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "fork said PLUM\n");
    let requests = env.server().requests();
    assert_eq!(requests.len(), 4);
    let (parent_last, child) = (&requests[1], &requests[2]);
    assert_eq!(task_of(parent_last), "Ask a fork");
    assert_eq!(task_of(child), "Which word?");
    // Same tools, and the child's messages start with the parent's completed turn, byte for byte.
    let pb = parent_last.body_json().unwrap();
    let cb = child.body_json().unwrap();
    assert_eq!(pb["tools"], cb["tools"]);
    assert_eq!(pb["model"], cb["model"]);
    let pm = pb["messages"].as_array().unwrap();
    let cm = cb["messages"].as_array().unwrap();
    let shared = pm
        .iter()
        .position(|m| m["role"] == "user" && m["content"] == "Ask a fork")
        .unwrap();
    assert!(shared >= 3, "system, the first prompt and its answer");
    assert_eq!(pm[..shared], cm[..shared]);
    let body_prefix = common_prefix(&parent_last.body, &child.body);
    let ratio = body_prefix as f64 / child.body.len() as f64;
    // The provider renders tools ahead of the conversation: in that order the shared prefix is
    // everything but the child's own prompt.
    let prompt_order = |b: &Value| format!("{}{}", b["tools"], b["messages"]);
    let (po_parent, po_child) = (prompt_order(&pb), prompt_order(&cb));
    let po_shared = common_prefix(po_parent.as_bytes(), po_child.as_bytes());
    let po_ratio = po_shared as f64 / po_child.len() as f64;
    eprintln!(
        "fork: body bytes shared with the parent's last request: {body_prefix} of {} ({:.1}%: \
         the whole conversation before the prompt; the tools follow it in the body); in prompt \
         order (tools, messages): {po_shared} of {} ({:.1}%)",
        child.body.len(),
        ratio * 100.0,
        po_child.len(),
        po_ratio * 100.0
    );
    // Everything up to the child's own first message is shared.
    let before: Vec<String> = cm[..shared].iter().map(Value::to_string).collect();
    let expected = format!("{}[{},", cb["tools"], before.join(","));
    assert!(
        po_shared >= expected.len(),
        "{po_shared} < {}",
        expected.len()
    );
    assert!(child.cached_prefix_bytes >= body_prefix);
    // The fork child's header: seeded from the parent.
    let all = sessions(&env);
    let kid = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    assert_eq!(kid.0["parentSession"], "forky");
    assert_eq!(kid.0["isSeeded"], true);
    assert_eq!(kid.0["delegationDepth"], 1);
    assert_eq!(kid.0["origin"], "subagent");
}

/// Live (non-zombie) processes whose command line contains `needle`.
pub(crate) fn processes_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            out.push(pid);
        }
    }
    out
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn max_concurrent_one_runs_a_batch_of_children_one_at_a_time() {
    let env = Env::new();
    let patch = env.patch(
        "serial.yaml",
        "plugins:\n  - id: subagents\n    name: subagents\n    config: { maxConcurrent: 1 }\n",
    );
    let dir = env.cwd();
    env.server().set_responder(move |req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Delegate two", true) => calls_reply(&[
                delegate_call("c1", "subagent", "One", "task 1"),
                delegate_call("c2", "subagent", "Two", "task 2"),
            ]),
            ("Delegate two", false) => {
                let texts: Vec<&str> = tools.iter().filter_map(|t| t["content"].as_str()).collect();
                Completion::new().text(&texts.join("|")).reply()
            }
            (t, true) => {
                // `mkdir` is atomic: it fails when the other child is inside at the same time.
                let d = dir.display();
                let args = serde_json::json!({
                    "command": format!("mkdir {d}/inside && echo {t} alone && sleep 0.2 && rmdir {d}/inside"),
                    "description": "Exclusive"
                })
                .to_string();
                Completion::new().tool_call("bash", &args).reply()
            }
            (_, false) => {
                let out = tools[0]["content"].as_str().unwrap_or_default().trim().to_owned();
                Completion::new().text(&out).reply()
            }
        }
    });
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Delegate two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "task 1 alone|task 2 alone\n");
}

#[test]
fn kill_9_during_a_child_then_resume_of_the_parent_repairs_both_and_lists_the_tree() {
    let env = Env::new();
    let fifo = env.work.path().join("kid.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let cmd = format!(
        r#"{{"command":"echo started > {f} && sleep 30","description":"Hang"}}"#,
        f = fifo.display()
    );
    env.server().set_responder(move |req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Delegate", true) => calls_reply(&[delegate_call("c1", "subagent", "Hang", "hang")]),
            ("hang", true) => Completion::new().tool_call("bash", &cmd).reply(),
            ("what happened?", _) => Completion::new().text("recovered").reply(),
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let mut dsh = env.spawn(&["--session", "crash-parent", "Delegate"]);
    assert_eq!(wait_fifo(&fifo).trim(), "started");
    dsh.kill().unwrap();
    dsh.wait().unwrap();

    let out = env.exec(&["--resume", "crash-parent", "what happened?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "recovered\n");
    let all = sessions(&env);
    let parent = all.iter().find(|(h, _)| h["id"] == "crash-parent").unwrap();
    let repaired = parent
        .1
        .iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(repaired["data"]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    let kid = all
        .iter()
        .find(|(h, _)| h["parentSession"] == "crash-parent")
        .unwrap();
    let kid_repair = kid.1.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert_eq!(kid_repair["data"]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    let kid_ends: Vec<&str> = kid
        .1
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kid_ends, ["interrupted"]);

    // `dsh sessions list` shows the child indented under its parent.
    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    let text = stdout(&list);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("crash-parent  "), "{text}");
    let kid_id = kid.0["id"].as_str().unwrap();
    assert!(lines[1].starts_with(&format!("  {kid_id}  ")), "{text}");
}

#[test]
fn a_background_subagent_is_a_job_polled_with_job_output_and_listed() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.len()) {
            ("Background", 0) => {
                let args = serde_json::json!({
                    "description": "Count files",
                    "prompt": "count",
                    "run_in_background": true
                })
                .to_string();
                Completion::new()
                    .tool_call_with_id("bg", "subagent", &args)
                    .reply()
            }
            ("Background", 1) => {
                let started = tools[0]["content"].as_str().unwrap();
                let id = started
                    .strip_prefix("started background subagent job ")
                    .unwrap_or("missing");
                let args = serde_json::json!({"job_id": id, "wait": true}).to_string();
                Completion::new()
                    .tool_call_with_id("out", "job_output", &args)
                    .reply()
            }
            ("Background", 2) => Completion::new()
                .tool_call_with_id("ls", "job_list", "{}")
                .reply(),
            ("Background", _) => {
                let texts: Vec<&str> = tools.iter().filter_map(|t| t["content"].as_str()).collect();
                Completion::new().text(&texts.join("\n---\n")).reply()
            }
            ("count", 0) => Completion::new()
                .tool_call(
                    "bash",
                    r#"{"command":"echo counted-42","description":"Count"}"#,
                )
                .reply(),
            ("count", _) => {
                let out = tools[0]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                Completion::new().text(&format!("result {out}")).reply()
            }
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let out = env.exec(&["Background"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let parts: Vec<&str> = text.trim_end().split("\n---\n").collect();
    assert_eq!(parts.len(), 3, "{text}");
    assert!(
        parts[0].starts_with("started background subagent job subagent-"),
        "{text}"
    );
    let id = parts[0].trim_start_matches("started background subagent job ");
    assert_eq!(id.len(), "subagent-".len() + 16, "{id}");
    assert_eq!(parts[1], "result counted-42\n[status: completed]");
    assert_eq!(
        parts[2],
        format!("{id} [subagent] completed \u{2014} Count files")
    );
    // The parent's log records the job as 0.2.1 does, with no notice (the result was collected).
    let all = sessions(&env);
    let parent = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap();
    let registered = parent
        .1
        .iter()
        .find(|e| e["type"] == "job/registered")
        .unwrap();
    assert_eq!(registered["data"]["jobId"], id);
    assert_eq!(registered["data"]["kind"], "subagent");
    assert_eq!(registered["data"]["label"], "Count files");
    assert_eq!(registered["data"]["toolCall"]["callId"], "bg");
    let settled = parent
        .1
        .iter()
        .find(|e| e["type"] == "job/settled")
        .unwrap();
    assert_eq!(settled["data"]["status"], "completed");
    assert_eq!(settled["data"]["cause"], "producer");
    assert_eq!(settled["data"]["producerReported"], true);
    let notices = parent
        .1
        .iter()
        .filter(|e| e.to_string().contains("Read its output with job_output"))
        .count();
    assert_eq!(notices, 0);
}

#[test]
fn a_child_has_approvals_pinned_to_never_and_is_told_so() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Delegate", true) => calls_reply(&[delegate_call("c1", "subagent", "Wide", "widen")]),
            ("widen", true) => {
                let args = serde_json::json!({
                    "command": "touch /widened",
                    "description": "Widen",
                    "sandbox_permissions": "danger-full-access",
                    "justification": "needs root"
                })
                .to_string();
                Completion::new().tool_call("bash", &args).reply()
            }
            (_, false) => {
                let out = tools[0]["content"].as_str().unwrap_or_default().to_owned();
                Completion::new().text(&out).reply()
            }
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    // The parent may ask (on-request); its child may not.
    let out = env.exec(&["--ask-for-approval", "on-request", "Delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "Error: running \"bash\" under danger-full-access needs approval, and the approval policy \
         is never: it was not run. Work within the sandbox instead.\n"
    );
    let all = sessions(&env);
    let kid = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    let pin = kid
        .1
        .iter()
        .find(|e| e["type"] == "approval/policy")
        .unwrap();
    assert_eq!(pin["data"]["policy"], "never");
    assert_eq!(pin["data"]["source"], "delegation");
    assert!(!kid.1.iter().any(|e| e["type"] == "approval/asked"));
    let child_request = env
        .server()
        .requests()
        .into_iter()
        .find(|r| task_of(r) == "widen")
        .unwrap();
    assert!(
        child_request
            .body_text()
            .contains("You are a delegated subagent (delegation depth 1)"),
        "the child is told about its delegation"
    );
    let parent_request = env.server().request(0).unwrap();
    assert!(
        !parent_request
            .body_text()
            .contains("You are a delegated subagent")
    );
}

#[test]
fn json_events_name_the_child_session_and_carry_its_usage() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let task = task_of(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.is_empty()) {
            ("Delegate", true) => calls_reply(&[delegate_call("c1", "subagent", "Hi", "say hi")]),
            ("say hi", _) => Completion::new()
                .text("hi")
                .usage(dsh_testkit::Usage::new(120, 7).cache_hit(100))
                .reply(),
            _ => Completion::new().text("done").reply(),
        }
    });
    let out = env.exec(&["--json", "Delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kid = sessions(&env)
        .into_iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    let kid_id = kid.0["id"].as_str().unwrap().to_owned();
    let catalog = events
        .iter()
        .find(|e| e.to_string().contains("\"subagent/catalog\""))
        .unwrap();
    assert!(catalog.to_string().contains(&kid_id), "{catalog}");
    let result = events
        .iter()
        .find(|e| e.to_string().contains("childSessionId"))
        .unwrap();
    let s = result.to_string();
    assert!(
        s.contains(&format!("\"childSessionId\":\"{kid_id}\"")),
        "{s}"
    );
    assert!(s.contains("\"stopReason\":\"completed\""), "{s}");
    // The child's usage, as its own log records it, travels with the result.
    let kid_usage = kid
        .1
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .map(|e| e["data"]["usage"].clone())
        .unwrap();
    let meta_usage = &result
        .pointer("/data/meta/usage")
        .or_else(|| result.pointer("/event/data/meta/usage"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(meta_usage["outputTokens"], kid_usage["outputTokens"], "{s}");
    assert_eq!(meta_usage["outputTokens"], 7, "{s}");
}

#[test]
fn a_child_messages_its_parent_which_sees_it_at_its_next_step() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let task = first_task(req);
        let tools = tool_messages(req);
        match (task.as_str(), tools.len()) {
            ("Delegate", 0) => calls_reply(&[delegate_call("c1", "subagent", "Chatty", "chat")]),
            ("chat", 0) => {
                let args =
                    serde_json::json!({"agent_id": "msg-parent", "message": "halfway there"})
                        .to_string();
                Completion::new().tool_call("send_message", &args).reply()
            }
            ("chat", _) => {
                let out = tools[0]["content"].as_str().unwrap_or_default().to_owned();
                Completion::new().text(&format!("child got: {out}")).reply()
            }
            ("Delegate", 1) => {
                let args =
                    serde_json::json!({"agent_id": "nobody", "message": "hello?"}).to_string();
                Completion::new().tool_call("send_message", &args).reply()
            }
            (_, _) => {
                let texts: Vec<&str> = tools.iter().filter_map(|t| t["content"].as_str()).collect();
                Completion::new().text(&texts.join(" | ")).reply()
            }
        }
    });
    let out = env.exec(&["--session", "msg-parent", "Delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "child got: message delivered to agent msg-parent | Error: agent nobody is not a live \
         subagent or parent of this agent; the message was not delivered\n"
    );
    let kid = sessions(&env)
        .into_iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    let kid_id = kid.0["id"].as_str().unwrap().to_owned();
    // The parent's request after the delegation carries the relayed message after the result.
    let second = env
        .server()
        .requests()
        .into_iter()
        .find(|r| first_task(r) == "Delegate" && tool_messages(r).len() == 1)
        .unwrap();
    let body = second.body_json().unwrap();
    let messages = body["messages"].as_array().unwrap();
    let relayed = messages
        .iter()
        .position(|m| m["content"] == format!("Message from subagent {kid_id}:\nhalfway there"))
        .expect("the relayed message");
    let result = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert!(result < relayed);
}

#[test]
fn a_parent_messages_its_running_child_which_takes_it_as_its_next_turn() {
    let env = Env::new();
    let fifo = env.work.path().join("go.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let cmd = serde_json::json!({
        "command": format!("cat {}", fifo.display()),
        "description": "Wait"
    })
    .to_string();
    // The parent's list_agents step is answered only once the child's first request arrived
    // (the child is live by then).
    let child_live = dsh_testkit::Gate::new();
    env.server().set_responder(move |req| {
        let tools = tool_messages(req);
        let last_tool = tools
            .last()
            .and_then(|t| t["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        match (first_task(req).as_str(), tools.len()) {
            ("Orchestrate", 0) => {
                let args = serde_json::json!({
                    "description": "Slow",
                    "prompt": "slow",
                    "run_in_background": true
                })
                .to_string();
                calls_reply(&[("bg".into(), "subagent".into(), args)])
            }
            ("Orchestrate", 1) => calls_reply(&[("ls".into(), "list_agents".into(), "{}".into())])
                .gate_head(&child_live),
            ("Orchestrate", 2) => {
                let child = last_tool.split(' ').next().unwrap_or_default();
                let args =
                    serde_json::json!({"agent_id": child, "message": "also do Y"}).to_string();
                calls_reply(&[("msg".into(), "send_message".into(), args)])
            }
            ("Orchestrate", 3) => {
                let started = tools[0]["content"].as_str().unwrap_or_default();
                let job = started.trim_start_matches("started background subagent job ");
                let args = serde_json::json!({"job_id": job, "wait": true}).to_string();
                calls_reply(&[("out".into(), "job_output".into(), args)])
            }
            ("Orchestrate", _) => {
                let texts: Vec<&str> = tools.iter().filter_map(|t| t["content"].as_str()).collect();
                Completion::new().text(&texts[1..].join(" | ")).reply()
            }
            ("slow", 0) => {
                child_live.open();
                Completion::new().tool_call("bash", &cmd).reply()
            }
            ("slow", _) if task_of(req) == "also do Y" => Completion::new().text("Y done").reply(),
            ("slow", _) => Completion::new().text("first done").reply(),
            _ => Completion::new().text("unexpected").reply(),
        }
    });
    let child = env.spawn(&["Orchestrate"]);
    // Four parent requests and the child's first have been answered: the message is queued
    // and the parent waits in job_output. Let the child's command finish.
    env.server()
        .wait_for_finished_blocking(5, std::time::Duration::from_secs(30))
        .expect("the parent never reached job_output");
    std::fs::write(&fifo, "go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let parts: Vec<&str> = text.trim_end().split(" | ").collect();
    assert_eq!(parts.len(), 3, "{text}");
    assert!(parts[0].contains(" [running] \u{2014} Slow"), "{text}");
    assert!(
        parts[1].starts_with("message queued as the next turn for subagent "),
        "{text}"
    );
    assert_eq!(parts[2], "Y done\n[status: completed]");
    let kid = sessions(&env)
        .into_iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    let ends = kid.1.iter().filter(|e| e["type"] == "turn/end").count();
    assert_eq!(ends, 2, "the message was the child's second turn");
}
