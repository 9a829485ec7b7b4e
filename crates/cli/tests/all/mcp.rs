//! MCP servers end to end: `.mcp.json` / `dsh mcp` configure the in-repo test server, the
//! testkit model calls its tools through `dsh exec`.

use std::path::PathBuf;

use dsh_testkit::Completion;
use serde_json::{Value, json};

use crate::support::*;

/// The test server cargo built with this crate's tests (`target/<profile>/examples/`).
pub fn test_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("cli_mcp_test_server");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test -p dsh-cli` builds it",
        bin.display()
    );
    bin
}

fn write_mcp_json(env: &Env, servers: Value) {
    std::fs::write(
        env.work.path().join(".mcp.json"),
        json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn exec_calls_mcp_tools_from_the_project_file_with_a_scrubbed_environment() {
    let env = Env::new();
    write_mcp_json(
        &env,
        json!({"t": {"command": test_server(), "env": {"MY_SETTING": "${MY_SOURCE:-fallback}"}}}),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_echo", "mcp__t__echo", r#"{"text":"from the model"}"#)
            .tool_call_with_id(
                "call_env",
                "mcp__t__env",
                r#"{"names":["DEEPSEEK_API_KEY","DSH_HOME","GITHUB_TOKEN","MY_SETTING","PATH"]}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .env("GITHUB_TOKEN", "ghp_secret")
        .args(["exec", "Use the MCP tools"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");
    // the server's own stderr never reaches the terminal
    assert!(
        !stderr(&out).contains("mcp test server starting"),
        "{}",
        stderr(&out)
    );

    let first = env.server().request(0).unwrap().body_json().unwrap();
    let names = tool_names(&first);
    assert!(names.contains(&"mcp__t__echo".to_owned()), "{names:?}");
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__t__add")
        .unwrap();
    assert_eq!(
        echo["function"]["parameters"]["properties"]["a"]["minimum"], 0,
        "the input schema goes to the model verbatim"
    );

    let second = request_messages(env.server(), 1);
    let tools: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools[0]["tool_call_id"], "call_echo");
    assert_eq!(tools[0]["content"], "from the model");
    let seen: Value = serde_json::from_str(tools[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(seen["DEEPSEEK_API_KEY"], Value::Null);
    assert_eq!(seen["DSH_HOME"], Value::Null);
    assert_eq!(seen["GITHUB_TOKEN"], Value::Null);
    assert_eq!(seen["MY_SETTING"], "fallback");
    assert!(seen["PATH"].is_string());
}

#[test]
fn a_slow_server_does_not_delay_the_first_request() {
    let env = Env::new();
    let patch = env.patch(
        "slow.yaml",
        &format!(
            "plugins:\n  - id: mcp-slow\n    name: mcp-client\n    config:\n      transport: stdio\n      serverName: slow\n      command: {}\n      args: [\"--delay-ms\", \"20000\"]\n      startupGraceMs: 100\n",
            test_server().display()
        ),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let started = std::time::Instant::now();
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");
    // dsh neither waited for the server's tools nor for the server to go away at exit
    let first = env.server().request(0).unwrap().body_json().unwrap();
    assert!(
        !tool_names(&first).iter().any(|n| n.starts_with("mcp__")),
        "{:?}",
        tool_names(&first)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn mcp_add_list_and_remove_edit_the_user_file() {
    let env = Env::new();
    let server = test_server();
    let out = env
        .dsh()
        .args(["mcp", "add", "t", "--"])
        .arg(&server)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env
        .dsh()
        .args(["mcp", "add", "--http", "web", "http://127.0.0.1:9/mcp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        file["mcpServers"]["t"]["command"],
        server.display().to_string()
    );
    assert_eq!(file["mcpServers"]["web"]["type"], "http");

    let out = env.dsh().args(["mcp", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!("t\tready\t15 tools\tstdio\t{}", server.display())),
        "{text}"
    );
    assert!(
        lines[1].starts_with("web\tfailed\t0 tools\tstreamable-http\thttp://127.0.0.1:9/mcp"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("  last error: initialize failed"),
        "{text}"
    );

    let bad = env
        .dsh()
        .args(["mcp", "add", "bad name", "--", "x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("a server name must match [A-Za-z0-9_-]{1,32}"),
        "{}",
        stderr(&bad)
    );

    let out = env.dsh().args(["mcp", "remove", "t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.dsh().args(["mcp", "remove", "t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no MCP server \"t\""),
        "{}",
        stderr(&out)
    );
    let list = stdout(&env.dsh().args(["mcp", "list"]).output().unwrap());
    assert!(!list.contains("t\tready"), "{list}");
}

#[test]
fn a_bad_project_file_is_a_usage_error_naming_the_field() {
    let env = Env::new();
    write_mcp_json(
        &env,
        json!({"t": {"command": "x", "args": ["${SURELY_UNSET_VAR}"]}}),
    );
    let out = env.exec(&["Hello"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("mcpServers.t.args[0]: environment variable SURELY_UNSET_VAR is not set"),
        "{}",
        stderr(&out)
    );
}

fn tool_message(server: &dsh_testkit::MockServer, request: usize, call_id: &str) -> String {
    request_messages(server, request)
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result of {call_id} in request {request}"))
        .to_owned()
}

#[test]
fn the_project_file_is_read_at_the_repository_root_and_resources_are_bridged() {
    let env = Env::new();
    std::fs::create_dir(env.work.path().join(".git")).unwrap();
    let sub = env.work.path().join("src").join("deep");
    std::fs::create_dir_all(&sub).unwrap();
    write_mcp_json(&env, json!({"t": {"command": test_server()}}));
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "call_read",
                "read_mcp_resource",
                r#"{"server":"t","uri":"mem://greeting"}"#,
            )
            .tool_call_with_id("call_list", "list_mcp_resources", "{}")
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .current_dir(&sub)
        .args(["exec", "Read the greeting"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = env.server().request(0).unwrap().body_json().unwrap();
    let names = tool_names(&first);
    assert!(names.contains(&"mcp__t__echo".to_owned()), "{names:?}");
    for bridge in [
        "list_mcp_resources",
        "list_mcp_resource_templates",
        "read_mcp_resource",
    ] {
        assert!(names.contains(&bridge.to_owned()), "{bridge}: {names:?}");
    }
    assert_eq!(
        tool_message(env.server(), 1, "call_read"),
        "Hello from a resource."
    );
    let listed: Value = serde_json::from_str(&tool_message(env.server(), 1, "call_list")).unwrap();
    assert_eq!(listed["resources"][0]["server"], "t");
    assert_eq!(listed["resources"][0]["uri"], "mem://greeting");
}

#[test]
fn no_resource_tools_without_a_server_that_offers_resources() {
    let env = Env::new();
    write_mcp_json(
        &env,
        json!({"t": {"command": test_server(), "args": ["--no-resources"]}}),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let names = tool_names(&env.server().request(0).unwrap().body_json().unwrap());
    assert!(names.contains(&"mcp__t__echo".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("mcp_resource")),
        "{names:?}"
    );
}

#[test]
fn a_late_tool_is_appended_at_the_end_of_the_tools() {
    let env = Env::new();
    // a generous grace: the server's own tools are in the first request
    let patch = env.patch(
        "late.yaml",
        &format!(
            "plugins:\n  - id: mcp-t\n    name: mcp-client\n    config:\n      transport: stdio\n      serverName: t\n      command: {}\n      startupGraceMs: 60000\n",
            test_server().display()
        ),
    );
    // the server adds a tool and announces it (answering once dsh re-listed); `wait_lists`
    // then finds the list served twice
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_add", "mcp__t__add_tool", r#"{"name":"aaa_late"}"#)
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_wait", "mcp__t__wait_lists", r#"{"count":2}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Add a tool"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");
    let names = |i: usize| tool_names(&env.server().request(i).unwrap().body_json().unwrap());
    let before = names(0);
    assert!(before.contains(&"mcp__t__echo".to_owned()), "{before:?}");
    assert!(!before.contains(&"mcp__t__aaa_late".to_owned()));
    let mut expected = before.clone();
    expected.push("mcp__t__aaa_late".to_owned());
    // The call that added it returned once it was registered: the very next request has it.
    assert_eq!(names(1), expected, "the late tool goes at the end");
    assert_eq!(names(2), expected);
    // the request rules hold across the change: messages extend, tools only grow at the end
    let violations = env.server().dsh_rule_violations();
    assert!(violations.is_empty(), "{violations:#?}");
}

/// A patch row for the test server `name` run unconfined (its `pid` is then dsh's view).
fn unconfined_row(name: &str) -> String {
    format!(
        "plugins:\n  - id: mcp-{name}\n    name: mcp-client\n    config:\n      transport: stdio\n      serverName: {name}\n      command: {}\n      sandbox: false\n",
        test_server().display()
    )
}

#[test]
fn a_server_never_outlives_dsh_killed_with_sigkill() {
    let env = Env::new();
    let patch = env.patch("k.yaml", &unconfined_row("k"));
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_pid", "mcp__k__pid", "{}")
            .reply(),
    );
    // the second request never gets an answer: dsh is killed while waiting for it
    let gate = dsh_testkit::Gate::new();
    env.server()
        .push(Completion::new().text("never").reply().gate_head(&gate));
    let mut dsh = env.spawn(&["--patch", patch.to_str().unwrap(), "Report the pid"]);
    env.server()
        .wait_for_requests_blocking(2, std::time::Duration::from_secs(60))
        .expect("dsh sent its second request");
    let pid: u32 = tool_message(env.server(), 1, "call_pid").parse().unwrap();
    assert!(!process_gone(pid), "the server runs while dsh does");
    dsh.kill().unwrap(); // SIGKILL: no destructor, no signal handler runs
    dsh.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !process_gone(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "MCP server {pid} outlived dsh killed with SIGKILL"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    gate.open();
}

/// Whether process `pid` is gone (or a zombie awaiting its reaper).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn a_stdio_server_runs_under_the_bash_sandbox_policy() {
    let env = Env::new();
    write_mcp_json(&env, json!({"t": {"command": test_server()}}));
    // Outside the workspace and the temp dirs (as the sandbox tests do: /var/tmp is neither; the
    // build's scratch directory is not either when the checkout itself lives under /tmp).
    let outside = tempfile::Builder::new()
        .prefix("dsh-mcp-outside-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let outside_file = outside.path().join("escaped.txt");
    let inside_file = env.work.path().join("inside.txt");
    let args = |p: &std::path::Path| json!({"path": p, "text": "x"}).to_string();
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_in", "mcp__t__write_file", &args(&inside_file))
            .tool_call_with_id("call_out", "mcp__t__write_file", &args(&outside_file))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Write two files"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(inside_file.is_file(), "the workspace is writable");
    assert!(
        !outside_file.exists(),
        "a write outside the workspace escaped the sandbox"
    );
    let refused = tool_message(env.server(), 1, "call_out");
    assert!(
        refused.contains("cannot write") && refused.contains("Read-only file system"),
        "{refused}"
    );

    // the same server with the sandbox off for it (a row override) writes anywhere
    let patch = env.patch(
        "open.yaml",
        &format!(
            "plugins:\n  - id: mcp-t\n    name: mcp-client\n    config:\n      transport: stdio\n      serverName: t\n      command: {}\n      sandbox: false\n",
            test_server().display()
        ),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_out2", "mcp__t__write_file", &args(&outside_file))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Write it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(outside_file.is_file());
}
