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

/// A one-request-per-connection HTTP server on 127.0.0.1 answering `routes` by path.
fn web_server(routes: Vec<(&'static str, String)>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 2048];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf).into_owned();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let answer = routes
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, a)| a.clone())
                .unwrap_or_else(|| {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .into()
                });
            let _ = sock.write_all(answer.as_bytes());
        }
    });
    port
}

fn html(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn moved(to: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

#[test]
fn web_fetch_refuses_loopback_by_default_and_converts_html_when_allowed() {
    let port = web_server(vec![
        (
            "/page",
            html("<html><body><h1>Release notes</h1><p>Version <b>2</b> is out.</p></body></html>"),
        ),
        ("/loop-a", moved("/loop-b")),
        ("/loop-b", moved("/loop-a")),
    ]);
    let url = |p: &str| format!(r#"{{"url":"http://127.0.0.1:{port}{p}"}}"#);
    let env = Env::new();
    // The default sandbox (workspace-write, network off) refuses the fetch itself.
    env.server().push(
        Completion::new()
            .tool_call("web_fetch", &url("/page"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Read the notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let refused = tool_text(&env, 1);
    assert!(
        refused.starts_with(
            "Error: refused: network access is off in this session's sandbox (mode \
             workspace-write, network off), so web_fetch was not run. The user can allow it by \
             starting dsh with `--network on`"
        ),
        "{refused}"
    );

    // With the network on, the SSRF guard still refuses loopback.
    env.server().push(
        Completion::new()
            .tool_call("web_fetch", &url("/page"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--network", "on", "Read the notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let refused = tool_text(&env, 3);
    assert!(
        refused.starts_with("Error: refused: 127.0.0.1 is a loopback address"),
        "{refused}"
    );

    let allow = env.patch(
        "web.yaml",
        "plugins:\n  - id: tool-web\n    name: tool-web\n    config:\n      fetch:\n        allowPrivateNetwork: true\n",
    );
    env.server().push(
        Completion::new()
            .tool_call("web_fetch", &url("/page"))
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call("web_fetch", &url("/loop-a"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&[
        "--network",
        "on",
        "--patch",
        allow.to_str().unwrap(),
        "Read the notes",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        tool_text(&env, 5),
        format!(
            "URL: http://127.0.0.1:{port}/page\nContent-Type: text/html; charset=utf-8\n\n# Release notes\n\nVersion **2** is out."
        )
    );
    let looped = tool_text(&env, 6);
    assert!(
        looped.starts_with("Error: redirect loop:") && looped.contains("/loop-a"),
        "{looped}"
    );
}

#[test]
fn web_fetch_goes_through_approvals_per_host() {
    let port = web_server(vec![
        ("/page", html("<p>Fetched page.</p>")),
        ("/other", html("<p>Another page.</p>")),
    ]);
    let url = |p: &str| format!(r#"{{"url":"http://127.0.0.1:{port}{p}"}}"#);
    let env = Env::new();
    let patch = env.patch(
        "web-approvals.yaml",
        "plugins:\n  - id: tool-web\n    name: tool-web\n    config:\n      fetch:\n        allowPrivateNetwork: true\n  - id: approval-scripted\n    name: approval-scripted\n    config:\n      answers:\n        - decision: deny\n          reason: not that site\n        - decision: allow-always\n",
    );
    for p in ["/page", "/page", "/other"] {
        env.server()
            .push(Completion::new().tool_call("web_fetch", &url(p)).reply());
    }
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&[
        "--network",
        "on",
        "--ask-for-approval",
        "untrusted",
        "--patch",
        patch.to_str().unwrap(),
        "Read the page",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Denied with a reason: the model reads it.
    assert_eq!(
        tool_text(&env, 1),
        "Error: the user rejected tool \"web_fetch\": not that site; it was not run"
    );
    // Allowed always: fetched.
    let fetched = format!(
        "URL: http://127.0.0.1:{port}/page\nContent-Type: text/html; charset=utf-8\n\nFetched page."
    );
    assert_eq!(tool_text(&env, 2), fetched);
    // The same host again: the stored rule allows it, nobody is asked.
    assert!(
        tool_text(&env, 3).starts_with(&format!("URL: http://127.0.0.1:{port}/other")),
        "{}",
        tool_text(&env, 3)
    );
    let asked: Vec<Value> = env
        .stored_events()
        .into_iter()
        .filter(|e| e["type"] == "approval/asked")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(
        asked[0]["reason"],
        "tool \"web_fetch\" reaches the network (host 127.0.0.1) and the approval policy is untrusted"
    );
    let list = env.dsh().args(["permissions", "list"]).output().unwrap();
    assert!(
        stdout(&list).contains("web_fetch: host 127.0.0.1"),
        "{}",
        stdout(&list)
    );
}

/// A 3x2 PNG (RGB, one IDAT), made by hand so the test needs no encoder.
fn tiny_png() -> Vec<u8> {
    // IHDR 3x2 RGB8, one zlib IDAT, IEND (checksums computed when it was written).
    let hex = "89504e470d0a1a0a0000000d49484452000000030000000208020000001216f14d0000001049444154789c63e01291832006380b000dac0169f8517edc0000000049454e44ae426082";
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn read_image_gives_an_image_block_on_an_image_route_and_refuses_on_a_text_only_one() {
    let env = Env::new();
    std::fs::write(env.work.path().join("shot.png"), tiny_png()).unwrap();
    std::fs::write(env.work.path().join("notes.txt"), "not an image").unwrap();
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "read_image", r#"{"file_path":"shot.png"}"#)
            .tool_call_with_id("c2", "read_image", r#"{"file_path":"notes.txt"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--model", "deepseek-flash", "Look"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = env.stored_events();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    let content = &results[0]["data"]["message"]["content"];
    assert_eq!(content[1]["type"], "image", "{content}");
    let att = &content[1]["attachment"];
    assert_eq!(att["mediaType"], "image/png");
    assert_eq!(
        (att["width"].as_u64(), att["height"].as_u64()),
        (Some(3), Some(2))
    );
    assert!(att["attachmentId"].as_str().unwrap().starts_with("sha256:"));
    let second = &results[1]["data"]["message"];
    assert_eq!(second["isError"], true);
    assert!(
        second["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not a PNG, JPEG, WebP or GIF image"),
        "{second}"
    );

    let env = Env::new();
    std::fs::write(env.work.path().join("shot.png"), tiny_png()).unwrap();
    env.server().push(
        Completion::new()
            .tool_call("read_image", r#"{"file_path":"shot.png"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--model", "deepseek-v4-pro", "Look"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        tool_text(&env, 1),
        "Error: the current model deepseek-v4-pro (route deepseek-official) accepts text only, so it cannot be shown images; describe what you need from the image another way"
    );
}
