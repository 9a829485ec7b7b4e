//! Interoperability with real MCP servers no one here wrote: `@modelcontextprotocol/server-everything`
//! and `@modelcontextprotocol/server-filesystem` from npm (pinned, installed by
//! `scripts/mcp-interop-setup` into `target/test-cache/npm`), driven by `dsh exec`.

use std::path::PathBuf;

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

/// The installed package directory of `package`, or `None` (with the reason printed) when
/// the registry could not be reached.
#[allow(clippy::print_stderr)]
fn npm_package(package: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = std::process::Command::new(root.join("scripts/mcp-interop-setup"))
        .status()
        .unwrap();
    assert!(status.success(), "scripts/mcp-interop-setup failed");
    let cache = root.join("target/test-cache/npm");
    if let Ok(reason) = std::fs::read_to_string(cache.join("UNAVAILABLE")) {
        eprintln!("skipped: the npm packages could not be installed: {reason}");
        return None;
    }
    let dir = cache.join("node_modules").join(package);
    assert!(
        dir.join("package.json").is_file(),
        "{} is missing",
        dir.display()
    );
    Some(dir.canonicalize().unwrap())
}

fn row(id: &str, name: &str, args: &[String]) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "  - id: {id}\n    name: mcp-client\n    config:\n      transport: stdio\n      serverName: {name}\n      command: node\n      args: [{}]\n      startupGraceMs: 60000\n",
        args.join(", ")
    )
}

fn tool_texts(env: &Env, request: usize) -> Vec<String> {
    request_messages(env.server(), request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn server_everything_echo_and_sum_through_exec() {
    let Some(pkg) = npm_package("@modelcontextprotocol/server-everything") else {
        return;
    };
    let env = Env::new();
    let entry = pkg.join("dist/index.js").display().to_string();
    let patch = env.patch(
        "everything.yaml",
        &format!(
            "plugins:\n{}",
            row("mcp-everything", "everything", &[entry, "stdio".into()])
        ),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "mcp__everything__echo", r#"{"message":"interop"}"#)
            .tool_call_with_id("c2", "mcp__everything__get-sum", r#"{"a":2,"b":3}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Use everything"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = env.server().request(0).unwrap().body_json().unwrap();
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .filter(|n| n.starts_with("mcp__everything__"))
        .collect();
    assert!(names.contains(&"mcp__everything__echo"), "{names:?}");
    let texts = tool_texts(&env, 1);
    assert_eq!(texts[0], "Echo: interop");
    assert!(texts[1].contains('5'), "{}", texts[1]);
}

#[test]
fn server_filesystem_reads_and_lists_through_exec() {
    let Some(pkg) = npm_package("@modelcontextprotocol/server-filesystem") else {
        return;
    };
    let env = Env::new();
    let work = env.cwd();
    std::fs::write(work.join("hello.txt"), "hello from the workspace\n").unwrap();
    let entry = pkg.join("dist/index.js").display().to_string();
    let patch = env.patch(
        "fs.yaml",
        &format!(
            "plugins:\n{}",
            row("mcp-fs", "fs", &[entry, work.display().to_string()])
        ),
    );
    let file = work.join("hello.txt").display().to_string();
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "c1",
                "mcp__fs__read_text_file",
                &serde_json::json!({"path": file}).to_string(),
            )
            .tool_call_with_id(
                "c2",
                "mcp__fs__list_directory",
                &serde_json::json!({"path": work}).to_string(),
            )
            .tool_call_with_id(
                "c3",
                "mcp__fs__read_text_file",
                r#"{"path":"/etc/hostname"}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Read the file"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let texts = tool_texts(&env, 1);
    assert_eq!(texts[0], "hello from the workspace\n");
    assert!(texts[1].contains("[FILE] hello.txt"), "{}", texts[1]);
    // outside the allowed directory: the server's error becomes a failed result
    assert!(texts[2].starts_with("Error: "), "{}", texts[2]);
    assert!(
        texts[2].contains("denied") || texts[2].contains("outside"),
        "{}",
        texts[2]
    );
    let events = env.stored_events();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results.len(), 3);
}

#[test]
fn server_everything_resources_through_the_bridge() {
    let Some(pkg) = npm_package("@modelcontextprotocol/server-everything") else {
        return;
    };
    let env = Env::new();
    let entry = pkg.join("dist/index.js").display().to_string();
    let patch = env.patch(
        "everything.yaml",
        &format!(
            "plugins:\n{}",
            row("mcp-everything", "everything", &[entry, "stdio".into()])
        ),
    );
    // list, then read the first listed resource, then stop
    env.server().set_responder(|req| {
        let body = req.body_json().unwrap_or_default();
        let tool_result = body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
            .and_then(|m| m["content"].as_str())
            .map(str::to_owned);
        match req.index {
            0 => Completion::new()
                .tool_call_with_id("c1", "list_mcp_resources", r#"{"server":"everything"}"#)
                .reply(),
            1 => {
                let listed: Value = tool_result
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default();
                let uri = listed["resources"][0]["uri"].as_str().unwrap_or("none");
                Completion::new()
                    .tool_call_with_id(
                        "c2",
                        "read_mcp_resource",
                        &serde_json::json!({"server": "everything", "uri": uri}).to_string(),
                    )
                    .reply()
            }
            _ => Completion::new().text("DONE").reply(),
        }
    });
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Read a resource"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");
    let first = env.server().request(0).unwrap().body_json().unwrap();
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"read_mcp_resource"), "{names:?}");
    let listed: Value = serde_json::from_str(&tool_texts(&env, 1)[0]).unwrap();
    let resources = listed["resources"].as_array().unwrap();
    assert!(!resources.is_empty(), "{listed}");
    assert!(resources.iter().all(|r| r["server"] == "everything"));
    let read = &tool_texts(&env, 2)[1];
    assert!(!read.starts_with("Error: "), "{read}");
    assert!(!read.is_empty());
}
