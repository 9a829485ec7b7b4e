//! Never stuck: slow, crashing, hung, broken servers; reconnect; no process left behind.

use std::time::Duration;

use dsh_mcp_client::{CALL_FAILED, SERVER_UNAVAILABLE, Status};
use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::harness::{Harness, process_gone, stdio};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_does_not_hold_activation() {
    let mut h = Harness::new(vec![stdio(
        "slow",
        &["--delay-ms", "3000"],
        json!({"startupGraceMs": 100}),
    )])
    .await;
    // activation returned after the grace: the server is still starting, no tools yet
    assert_eq!(h.mcp_names(), Vec::<String>::new());
    let ready = h.wait_for(|i| i.status == Status::Ready).await;
    assert_eq!(ready.tools, 15);
    assert_eq!(
        h.ok("mcp__slow__echo", json!({"text": "late"})).await,
        "late"
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_is_an_error_then_the_server_comes_back() {
    let mut h = Harness::new(vec![stdio("c", &[], json!({}))]).await;
    let first: u32 = h.ok("mcp__c__pid", json!({})).await.parse().unwrap();
    let r = h.call("mcp__c__crash", json!({})).await;
    assert!(r.is_error);
    assert_eq!(r.code(), Some(&CALL_FAILED));
    assert!(r.text().contains("closed the connection"), "{}", r.text());
    h.wait_for(|i| matches!(i.status, Status::Reconnecting { .. }))
        .await;
    h.wait_for(|i| i.status == Status::Ready && i.tools == 15)
        .await;
    let second: u32 = h.ok("mcp__c__pid", json!({})).await.parse().unwrap();
    assert_ne!(first, second);
    assert_eq!(h.ok("mcp__c__echo", json!({"text": "back"})).await, "back");
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_budget_exhausted_removes_the_tools() {
    // A budget of zero attempts gives up at the first close.
    let mut h = Harness::new(vec![stdio(
        "z",
        &[],
        json!({"reconnect": {"enabled": true, "maxAttempts": 0}}),
    )])
    .await;
    assert_eq!(h.mcp_names().len(), 15);
    let r = h.call("mcp__z__crash", json!({})).await;
    assert!(r.is_error);
    let info = h.wait_for(|i| i.status == Status::Failed).await;
    assert_eq!(info.tools, 0);
    assert_eq!(h.mcp_names(), Vec::<String>::new());
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_times_out_and_is_cancelled_on_the_server() {
    let h = Harness::new(vec![stdio("h", &[], json!({"toolCallTimeoutMs": 300}))]).await;
    let r = h.call("mcp__h__sleep", json!({"ms": 600_000})).await;
    assert_eq!(r.code(), Some(&ToolErrorCode::ToolTimeout), "{}", r.text());
    // the server learnt of the cancellation (a notification: it may trail the next request)
    let mut seen = String::new();
    for _ in 0..200 {
        seen = h.ok("mcp__h__cancelled", json!({})).await;
        if seen != "0" {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(seen, "1");
    // and the connection still serves
    assert_eq!(
        h.ok("mcp__h__echo", json!({"text": "alive"})).await,
        "alive"
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_and_hung_servers_fail_with_a_reason() {
    let mut h = Harness::new(vec![
        stdio("garbage", &["--garbage"], json!({})),
        stdio(
            "hung",
            &["--hang-startup"],
            json!({"startupTimeoutMs": 300, "startupGraceMs": 50}),
        ),
        json!({"transport": "stdio", "serverName": "missing", "command": "/nonexistent/server"}),
    ])
    .await;
    let mut failed = std::collections::BTreeMap::new();
    while failed.len() < 3 {
        let info = h.wait_for(|i| i.status == Status::Failed).await;
        failed.insert(info.name.clone(), info.last_error.unwrap_or_default());
    }
    assert!(
        failed["garbage"].starts_with("initialize failed"),
        "{failed:?}"
    );
    assert_eq!(failed["hung"], "no answer within 300 ms");
    assert!(
        failed["missing"].starts_with("cannot start \"/nonexistent/server\""),
        "{failed:?}"
    );
    assert_eq!(h.mcp_names(), Vec::<String>::new());
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_on_startup_error_fails_activation() {
    let mut registry = dsh_kernel::PluginRegistry::new();
    registry
        .register::<dsh_tools::ToolsPlugin>()
        .register::<dsh_mcp_client::McpClientPlugin>();
    let kernel = dsh_kernel::Kernel::new(registry);
    kernel.mount("tools", json!({})).unwrap();
    let row = kernel
        .mount(
            "mcp-client",
            json!({"transport": "stdio", "serverName": "x", "command": "/nonexistent/server",
                   "failOnStartupError": true}),
        )
        .unwrap();
    let err = row.ready().await.unwrap_err().to_string();
    assert!(
        err.contains("MCP server \"x\" did not start: cannot start"),
        "{err}"
    );
    kernel.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_while_reconnecting_says_so() {
    let mut h = Harness::new(vec![stdio(
        "r",
        &[],
        json!({"reconnect": {"initialDelayMs": 60000, "maxDelayMs": 60000, "maxAttempts": 3}}),
    )])
    .await;
    let _ = h.call("mcp__r__crash", json!({})).await;
    h.wait_for(|i| matches!(i.status, Status::Reconnecting { .. }))
        .await;
    let r = h.call("mcp__r__echo", json!({"text": "x"})).await;
    assert_eq!(r.code(), Some(&SERVER_UNAVAILABLE));
    assert!(
        r.text()
            .contains("MCP server \"r\" lost its connection and is reconnecting (attempt 1 of 3)"),
        "{}",
        r.text()
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_process_outlives_the_plugin() {
    let h = Harness::new(vec![stdio("p", &[], json!({}))]).await;
    let pid: u32 = h.ok("mcp__p__pid", json!({})).await.parse().unwrap();
    assert!(!process_gone(pid));
    h.dispose().await;
    // SIGKILL of the group was sent synchronously at unload; wait for the kernel to finish it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !process_gone(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "server {pid} outlived the plugin"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
