//! Listing, naming, calling and rendering.

use dsh_mcp_client::names::tool_name;
use dsh_mcp_testserver::LONG_TOOL;
use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::harness::{Harness, stdio};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_named_and_called() {
    let h = Harness::new(vec![stdio("t", &[], json!({}))]).await;
    let names = h.mcp_names();
    assert!(names.contains(&"mcp__t__echo".to_owned()), "{names:?}");
    assert_eq!(names.len(), 15, "{names:?}");
    // a dot is replaced and the name gets the hash; a long name is cut to 64
    let dotted = tool_name("t", "get.thing");
    assert!(dotted.starts_with("mcp__t__get_thing_") && dotted.len() == 18 + 12);
    assert!(names.contains(&dotted));
    let long = tool_name("t", LONG_TOOL);
    assert_eq!(long.len(), 64);
    assert!(names.contains(&long));
    // the raw names go on the wire
    assert_eq!(h.ok(&dotted, json!({})).await, "thing");
    assert_eq!(h.ok(&long, json!({})).await, "long");

    // description and input schema verbatim (including keywords outside dsh's own subset)
    let add = h
        .tools
        .schemas(None)
        .into_iter()
        .find(|s| s.name == "mcp__t__add")
        .unwrap();
    assert_eq!(add.description, "Add two numbers (structured result).");
    assert_eq!(add.parameters["properties"]["a"]["minimum"], json!(0));

    assert_eq!(
        h.ok("mcp__t__echo", json!({"text": "hello"})).await,
        "hello"
    );
    assert_eq!(
        h.ok("mcp__t__add", json!({"a": 1, "b": 2})).await,
        r#"{"sum":3.0}"#
    );
    assert_eq!(
        h.ok("mcp__t__links", json!({})).await,
        "Resource link: readme (file:///readme.md)\n\
         [image image/png (12 bytes base64) not shown: this route has no image attachment store]"
    );
    let failed = h.call("mcp__t__fail", json!({})).await;
    assert!(failed.is_error);
    assert_eq!(failed.code(), Some(&ToolErrorCode::ToolFailed));
    assert!(
        failed.text().contains("it failed on purpose"),
        "{}",
        failed.text()
    );
    // a non-object argument never reaches the server
    let bad = h.call("mcp__t__echo", json!("text")).await;
    assert_eq!(bad.code(), Some(&ToolErrorCode::InvalidArgs));
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_env_reaches_the_server() {
    let h = Harness::new(vec![stdio(
        "e",
        &[],
        json!({"env": {"MY_SETTING": "on", "SERVICE_TOKEN": "configured"}}),
    )])
    .await;
    let text = h
        .ok(
            "mcp__e__env",
            json!({"names": ["MY_SETTING", "SERVICE_TOKEN", "PATH"]}),
        )
        .await;
    let env: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(env["MY_SETTING"], "on");
    // configured explicitly: passed although the name matches TOKEN
    assert_eq!(env["SERVICE_TOKEN"], "configured");
    assert!(env["PATH"].is_string());
    h.dispose().await;
}

/// A call during which the server announced a list change returns once the new list is
/// registered: the tool it added is there when its result is (no waiting), so the model's next
/// request carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_resyncs_the_tool_set() {
    let h = Harness::new(vec![stdio("lc", &[], json!({}))]).await;
    assert!(!h.mcp_names().contains(&"mcp__lc__fresh".to_owned()));
    assert_eq!(
        h.ok("mcp__lc__add_tool", json!({"name": "fresh"})).await,
        "added"
    );
    assert!(h.mcp_names().contains(&"mcp__lc__fresh".to_owned()));
    assert_eq!(
        h.mcp_names()
            .iter()
            .filter(|n| n.starts_with("mcp__lc__"))
            .count(),
        16
    );
    assert_eq!(h.ok("mcp__lc__fresh", json!({})).await, "fresh called");
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_lists_and_calls() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(crate::harness::server_bin())
        .arg("http")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().unwrap();
    let row = json!({
        "transport": "streamable-http",
        "serverName": "web",
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "headers": {"X-Test": "1"},
        "startupGraceMs": 20000,
    });
    let mut h = Harness::new(vec![row]).await;
    assert!(h.mcp_names().contains(&"mcp__web__echo".to_owned()));
    assert_eq!(
        h.ok("mcp__web__echo", json!({"text": "over http"})).await,
        "over http"
    );
    assert_eq!(
        h.ok("mcp__web__add_tool", json!({"name": "late"})).await,
        "added"
    );
    h.wait_for(|i| i.tools == 16).await;
    assert_eq!(h.ok("mcp__web__late", json!({})).await, "late called");
    h.dispose().await;
    let _ = child.kill();
    let _ = child.wait();
}
