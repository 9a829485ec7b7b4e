//! Issue 22's tools end to end: `dsh exec` against the testkit with todo_write,
//! working_directory and plan mode.

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::{Env, request_messages, stderr, stdout};

/// The tool messages of request `i`.
fn tool_messages(env: &Env, i: usize) -> Vec<Value> {
    request_messages(env.server(), i)
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect()
}

fn tool_text(env: &Env, i: usize) -> String {
    tool_messages(env, i)
        .last()
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

#[test]
fn a_todo_list_updated_over_three_steps_is_shown_by_sessions_show() {
    let env = Env::new();
    let lists = [
        r#"{"todos":[{"content":"Read the code","status":"in_progress"},{"content":"Fix the bug","status":"pending"},{"content":"Run the tests","status":"pending"}]}"#,
        r#"{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix the bug","status":"in_progress"},{"content":"Run the tests","status":"pending"}]}"#,
        r#"{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix the bug","status":"completed"},{"content":"Run the tests","status":"in_progress"}]}"#,
    ];
    for l in lists {
        env.server()
            .push(Completion::new().tool_call("todo_write", l).reply());
    }
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Fix it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        tool_text(&env, 1),
        "Updated todo list: 2 pending, 1 in progress, 0 completed."
    );
    assert_eq!(
        tool_text(&env, 3),
        "Updated todo list: 0 pending, 1 in progress, 2 completed."
    );
    // The tool is declared with the original's schema.
    let body = env.server().request(0).unwrap().body_json().unwrap();
    let todo = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "todo_write")
        .unwrap()
        .clone();
    assert_eq!(
        todo["function"]["parameters"]["required"],
        serde_json::json!(["todos"])
    );
    let id = env.session_id();
    let show = env.dsh().args(["sessions", "show", &id]).output().unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(
        text.contains("todo:\n  [~] Read the code\n  [ ] Fix the bug\n  [ ] Run the tests"),
        "{text}"
    );
    assert!(
        text.contains("todo:\n  [x] Read the code\n  [x] Fix the bug\n  [~] Run the tests"),
        "{text}"
    );
    assert_eq!(text.matches("todo:\n").count(), 3, "{text}");
}

#[test]
fn working_directory_moves_bash_and_the_file_tools_and_resume_restores_it() {
    let env = Env::new();
    std::fs::create_dir(env.work.path().join("sub")).unwrap();
    std::fs::write(env.work.path().join("sub/inner.txt"), "inside\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call("working_directory", r#"{"cd":"sub"}"#)
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c_read", "read", r#"{"file_path":"inner.txt"}"#)
            .tool_call_with_id(
                "c_pwd",
                "bash",
                r#"{"command":"pwd","description":"Where"}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Go to sub"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sub = env.cwd().join("sub");
    assert_eq!(
        tool_text(&env, 1),
        format!("Working directory changed to {}", sub.display())
    );
    let tools = tool_messages(&env, 2);
    let tools = &tools[tools.len() - 2..];
    assert!(
        tools[0]["content"].as_str().unwrap().contains("1: inside"),
        "{}",
        tools[0]
    );
    assert!(
        tools[1]["content"]
            .as_str()
            .unwrap()
            .contains(&sub.display().to_string()),
        "{}",
        tools[1]
    );
    // The runtime context tells the model the new directory, appended, not rewritten.
    let third = request_messages(env.server(), 2);
    let wd = format!("Working directory: {}", sub.display());
    assert!(
        third
            .iter()
            .any(|m| m["role"] == "user" && m["content"].as_str().unwrap_or("").contains(&wd)),
        "{third:?}"
    );
    let id = env.session_id();
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"pwd","description":"Where"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--resume", &id, "Where are you?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        tool_text(&env, 4).contains(&sub.display().to_string()),
        "resumed in sub: {}",
        tool_text(&env, 4)
    );
    let show = env.dsh().args(["sessions", "show", &id]).output().unwrap();
    assert!(
        stdout(&show).contains(&format!("working directory: {}", sub.display())),
        "{}",
        stdout(&show)
    );
}

const EDIT: &str = r#"{"file_path":"a.txt","old_string":"old","new_string":"new"}"#;

#[test]
fn in_plan_mode_an_edit_is_refused_until_exit_plan_mode_is_accepted() {
    let env = Env::new();
    std::fs::write(env.work.path().join("a.txt"), "old\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call("read", r#"{"file_path":"a.txt"}"#)
            .reply(),
    );
    env.server()
        .push(Completion::new().tool_call("edit", EDIT).reply());
    env.server().push(
        Completion::new()
            .tool_call(
                "exit_plan_mode",
                r#"{"plan":"1. Replace old with new in a.txt"}"#,
            )
            .reply(),
    );
    env.server()
        .push(Completion::new().tool_call("edit", EDIT).reply());
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--plan", "Change a.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = request_messages(env.server(), 0);
    assert!(
        first.iter().any(|m| m["content"]
            .as_str()
            .unwrap_or("")
            .contains("[plan mode on")),
        "the model is told: {first:?}"
    );
    let refused = tool_text(&env, 2);
    assert!(
        refused.starts_with("Error: plan mode: `edit` is refused"),
        "{refused}"
    );
    assert_eq!(
        tool_text(&env, 3),
        "The user accepted the plan. Plan mode is off: carry the plan out now."
    );
    assert!(
        !tool_text(&env, 4).starts_with("Error"),
        "{}",
        tool_text(&env, 4)
    );
    assert_eq!(
        std::fs::read_to_string(env.work.path().join("a.txt")).unwrap(),
        "new\n"
    );
    let id = env.session_id();
    let show = stdout(&env.dsh().args(["sessions", "show", &id]).output().unwrap());
    let on = show.find("plan mode: on").unwrap();
    let off = show.find("plan mode: off").unwrap();
    assert!(on < off, "{show}");
}

#[test]
fn plan_stop_ends_with_the_plan_and_nothing_changed() {
    let env = Env::new();
    std::fs::write(env.work.path().join("a.txt"), "old\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo x > a.txt","description":"Write"}"#,
            )
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call("exit_plan_mode", r#"{"plan":"Replace old"}"#)
            .reply(),
    );
    env.server()
        .push(Completion::new().text("PLAN: replace old").reply());
    let out = env.exec(&["--plan=stop", "Change a.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        tool_text(&env, 1).contains("this bash command is refused because it redirects output"),
        "{}",
        tool_text(&env, 1)
    );
    assert!(
        tool_text(&env, 2).contains("recorded for the user to review"),
        "{}",
        tool_text(&env, 2)
    );
    assert_eq!(stdout(&out), "PLAN: replace old\n");
    assert_eq!(
        std::fs::read_to_string(env.work.path().join("a.txt")).unwrap(),
        "old\n"
    );
    let bad = env.exec(&["--plan=maybe", "x"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}
