//! Sessions: exact ids, resume, continue, kill -9 repair, the sessions commands.

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

#[test]
fn session_resume_and_continue_keep_one_history() {
    let env = Env::new();
    env.server().push(Completion::new().text("first").reply());
    env.server().push(Completion::new().text("second").reply());
    env.server().push(Completion::new().text("third").reply());
    let out = env.exec(&["--session", "my-session", "one"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.exec(&["--resume", "my-session", "two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.exec(&["--continue", "three"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let texts: Vec<String> = request_messages(env.server(), 2)
        .iter()
        .filter(|m| m["role"] != "system" && !is_runtime_context(m))
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, vec!["one", "first", "two", "second", "three"]);
    let events = env.stored_events();
    let turns: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "turn/start")
        .map(|e| e["data"]["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, vec![1, 2, 3]);

    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    let text = stdout(&list);
    assert!(text.starts_with("my-session "), "{text}");
    assert!(
        text.contains("turns=3") && text.contains("completed") && text.contains("one"),
        "{text}"
    );
    let show = env
        .dsh()
        .args(["sessions", "show", "my-session"])
        .output()
        .unwrap();
    let text = stdout(&show);
    assert!(
        text.contains("user: two\n") && text.contains("assistant: second\n"),
        "{text}"
    );
    let export = env
        .dsh()
        .args(["sessions", "export", "my-session"])
        .output()
        .unwrap();
    let first: Value =
        serde_json::from_slice(export.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["type"], "session");
    assert_eq!(first["version"], 4);
}

#[test]
fn an_unknown_session_id_is_a_clear_error() {
    let env = Env::new();
    let out = env.exec(&["--resume", "nope", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no stored session `nope`"),
        "{}",
        stderr(&out)
    );
    let out = env.exec(&["--continue", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no session to continue"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kill_9_while_a_tool_runs_then_resume_repairs_the_log() {
    let env = Env::new();
    let (fifo, cmd) = blocking_bash(&env, "started.fifo");
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_wait", "bash", &cmd)
            .reply(),
    );
    env.server()
        .push(Completion::new().text("after the crash").reply());
    let mut child = env.spawn(&["--session", "crashy", "run the slow thing"]);
    // Opening the FIFO blocks until the tool's shell writes to it: the tool is running.
    let started = wait_fifo(&fifo);
    assert_eq!(started.trim(), "started");
    child.kill().unwrap();
    child.wait().unwrap();

    let out = env.exec(&["--resume", "crashy", "what happened?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = env.stored_events();
    let repaired = events
        .iter()
        .find(|e| e["type"] == "tool/result")
        .expect("a repair result");
    assert_eq!(repaired["data"]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    let ends: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(ends, vec!["interrupted", "completed"]);
    // The next request carries the whole history.
    let messages: Vec<Value> = request_messages(env.server(), 1)
        .into_iter()
        .filter(|m| !is_runtime_context(m))
        .collect();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "tool", "user"]);
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("Its outcome is unknown")
    );
}

#[test]
fn a_locked_session_is_refused() {
    let env = Env::new();
    let (fifo, cmd) = blocking_bash(&env, "lock.fifo");
    env.server()
        .push(Completion::new().tool_call("bash", &cmd).reply());
    let mut holder = env.spawn(&["--session", "busy", "hold it"]);
    assert_eq!(wait_fifo(&fifo).trim(), "started");
    let out = env.exec(&["--resume", "busy", "me too"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("SESSION_LOCKED"), "{}", stderr(&out));
}

#[test]
fn the_user_file_is_reloaded_while_dsh_runs() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let started = env.work.path().join("started.fifo");
    let release = env.work.path().join("release.fifo");
    for f in [&started, &release] {
        assert!(
            std::process::Command::new("mkfifo")
                .arg(f)
                .status()
                .unwrap()
                .success()
        );
    }
    let cmd = format!(
        r#"{{"command":"echo started > {} && cat {}","description":"Wait"}}"#,
        started.display(),
        release.display()
    );
    env.server()
        .push(Completion::new().tool_call("bash", &cmd).reply());
    env.server()
        .push(Completion::new().text("finished").reply());
    let mut child = env
        .dsh()
        .env("DSH_LOG", "dsh=info")
        .args(["exec", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(wait_fifo(&started).trim(), "started");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut wait_for = |needle: &str| loop {
        let line = lines.next().expect("dsh exited early").unwrap();
        if line.contains(needle) {
            return line;
        }
    };
    let user = env.home.path().join("dsh.yaml");
    // An invalid edit is refused and the run goes on.
    std::fs::write(&user, "plugins:\n  - name: [\n").unwrap();
    let refused = wait_for("keeping the last good configuration");
    assert!(refused.contains("dsh.yaml"), "{refused}");
    // A valid edit restarts only the changed row.
    std::fs::write(
        &user,
        "plugins:\n  - id: tool-timeout\n    name: tool-timeout\n    config: { defaultMs: 600000 }\n",
    )
    .unwrap();
    let reloaded = wait_for("configuration reloaded");
    assert!(
        reloaded.contains("tool-timeout") && reloaded.contains("llm-retry"),
        "{reloaded}"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&release)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "finished\n");
}

#[test]
fn files_read_before_a_resume_can_be_edited_after_it() {
    let env = Env::new();
    std::fs::write(env.work.path().join("a.txt"), "old line\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call("read", r#"{"file_path":"a.txt"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("read it").reply());
    let edit = r#"{"file_path":"a.txt","old_string":"old line","new_string":"new line"}"#;
    env.server()
        .push(Completion::new().tool_call("edit", edit).reply());
    env.server().push(Completion::new().text("edited").reply());
    let out = env.exec(&["--session", "observe", "read a.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.exec(&["--continue", "now change it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(env.work.path().join("a.txt")).unwrap(),
        "new line\n"
    );
    let results: Vec<Value> = env
        .stored_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(
        results[1]["data"]["message"]["isError"], false,
        "{results:?}"
    );
}

/// A session written by a dsh whose tool descriptions differed (as before the tool set was
/// tightened) is resumed with today's schemas: one `resume` header records them, no
/// `developer/message` is written (only the descriptions changed, not the names), the history
/// is kept, and the request declares the current tools; the next resume is byte-stable again.
#[test]
fn resuming_a_log_with_other_tool_descriptions_redeclares_them_once() {
    let env = Env::new();
    for text in ["first", "second", "third"] {
        env.server().push(Completion::new().text(text).reply());
    }
    let out = env.exec(&["--session", "old-tools", "one"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let current_tools = env.server().request(0).unwrap().body_json().unwrap()["tools"].clone();
    assert!(current_tools.as_array().is_some_and(|t| !t.is_empty()));

    // Rewrite the log's header as an older dsh wrote it: another bash description.
    const OLD: &str = "Run a bash command and return its output (an older, longer description).";
    let files = session_files(&env.home.path().join("sessions"));
    let text = log_text(&files[0]);
    let mut rewritten = String::new();
    let mut edited = 0;
    for line in text.lines() {
        let mut row: Value = serde_json::from_str(line).unwrap();
        if row["type"] == "request/header" {
            for tool in row["data"]["header"]["tools"].as_array_mut().unwrap() {
                if tool["name"] == "bash" {
                    tool["description"] = Value::from(OLD);
                    edited += 1;
                }
            }
        }
        rewritten.push_str(&serde_json::to_string(&row).unwrap());
        rewritten.push('\n');
    }
    assert_eq!(edited, 1, "the first run logged one header declaring bash");
    replace_log(&files[0], rewritten);

    let out = env.exec(&["--resume", "old-tools", "two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = env.stored_events();
    let headers: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "request/header")
        .collect();
    assert_eq!(headers.len(), 2, "{headers:?}");
    assert_eq!(headers[1]["data"]["reason"], "resume");
    let logged: Vec<Value> = headers[1]["data"]["header"]["tools"]
        .as_array()
        .unwrap()
        .clone();
    let bash = logged.iter().find(|t| t["name"] == "bash").unwrap();
    assert_ne!(bash["description"], OLD);
    assert!(
        !events.iter().any(|e| e["type"] == "developer/message"),
        "same tool names: no developer message"
    );
    // The request declares today's tools (as the first run did), after the same history.
    let second = env.server().request(1).unwrap().body_json().unwrap();
    assert_eq!(second["tools"], current_tools);
    let texts: Vec<String> = request_messages(env.server(), 1)
        .iter()
        .filter(|m| m["role"] != "system" && !is_runtime_context(m))
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, vec!["one", "first", "two"]);

    // Resumed again with the same tools: the request's tools are byte-identical.
    let out = env.exec(&["--resume", "old-tools", "three"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (a, b) = (
        env.server().request(1).unwrap().body_json().unwrap(),
        env.server().request(2).unwrap().body_json().unwrap(),
    );
    assert_eq!(
        serde_json::to_string(&a["tools"]).unwrap(),
        serde_json::to_string(&b["tools"]).unwrap()
    );
    assert!(
        !env.stored_events()
            .iter()
            .any(|e| e["type"] == "developer/message")
    );
}
