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
        lines[0].starts_with(&format!("t\tready\t12 tools\tstdio\t{}", server.display())),
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
