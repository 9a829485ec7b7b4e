//! The resources bridge: declared only while a connected server offers resources.

use dsh_mcp_client::Status;
use dsh_mcp_client::resources::{LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE};
use dsh_tools::ToolErrorCode;
use serde_json::{Value, json};

use crate::harness::{Harness, stdio};

fn bridge(h: &Harness) -> Vec<String> {
    h.names()
        .into_iter()
        .filter(|n| [LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE].contains(&n.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_listed_and_read_through_the_bridge() {
    let h = Harness::with_resources(vec![
        stdio("docs", &[], json!({})),
        stdio("plain", &["--no-resources"], json!({})),
    ])
    .await;
    assert_eq!(
        bridge(&h),
        [LIST_TEMPLATES, LIST_RESOURCES, READ_RESOURCE],
        "all three declared once (sorted by name)"
    );

    // every server's first page, each item tagged with its server; `plain` offers none
    let all: Value = serde_json::from_str(&h.ok(LIST_RESOURCES, json!({})).await).unwrap();
    let items = all["resources"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{all}");
    assert_eq!(items[0]["server"], "docs");
    assert_eq!(items[0]["uri"], "mem://greeting");
    assert_eq!(items[0]["mimeType"], "text/plain");
    assert!(all.get("errors").is_none(), "{all}");
    let one: Value =
        serde_json::from_str(&h.ok(LIST_RESOURCES, json!({"server": "docs"})).await).unwrap();
    assert_eq!(one["resources"], all["resources"]);
    let templates: Value = serde_json::from_str(&h.ok(LIST_TEMPLATES, json!({})).await).unwrap();
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "mem://notes/{name}"
    );

    assert_eq!(
        h.ok(
            READ_RESOURCE,
            json!({"server": "docs", "uri": "mem://greeting"})
        )
        .await,
        "Hello from a resource."
    );
    assert_eq!(
        h.ok(
            READ_RESOURCE,
            json!({"server": "docs", "uri": "mem://notes/todo"})
        )
        .await,
        "note todo"
    );
    let blob = h
        .ok(
            READ_RESOURCE,
            json!({"server": "docs", "uri": "mem://logo.png"}),
        )
        .await;
    assert!(blob.starts_with("[binary resource (image/png, "), "{blob}");

    // errors name the problem
    let missing = h
        .call(
            READ_RESOURCE,
            json!({"server": "docs", "uri": "mem://nope"}),
        )
        .await;
    assert!(missing.is_error);
    assert!(
        missing.text().contains("no resource mem://nope"),
        "{}",
        missing.text()
    );
    let unknown = h
        .call(
            READ_RESOURCE,
            json!({"server": "plain", "uri": "mem://greeting"}),
        )
        .await;
    assert_eq!(
        unknown.code(),
        Some(&ToolErrorCode::tool_defined("MCP_UNKNOWN_SERVER"))
    );
    assert!(
        unknown.text().contains("servers with resources: docs"),
        "{}",
        unknown.text()
    );
    let no_uri = h.call(READ_RESOURCE, json!({"server": "docs"})).await;
    assert_eq!(no_uri.code(), Some(&ToolErrorCode::InvalidArgs));
    let cursor_alone = h.call(LIST_RESOURCES, json!({"cursor": "x"})).await;
    assert_eq!(cursor_alone.code(), Some(&ToolErrorCode::InvalidArgs));
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bridge_without_a_server_that_offers_resources() {
    let h = Harness::with_resources(vec![stdio("plain", &["--no-resources"], json!({}))]).await;
    assert!(h.mcp_names().contains(&"mcp__plain__echo".to_owned()));
    assert!(bridge(&h).is_empty(), "{:?}", h.names());
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_goes_with_the_last_server_that_offers_resources() {
    let mut h = Harness::with_resources(vec![stdio(
        "gone",
        &[],
        json!({"reconnect": {"enabled": false}}),
    )])
    .await;
    assert_eq!(bridge(&h).len(), 3);
    // the server exits mid-call; without reconnection it is given up
    let crashed = h.call("mcp__gone__crash", json!({})).await;
    assert!(crashed.is_error);
    h.wait_for(|i| i.status == Status::Failed).await;
    assert!(bridge(&h).is_empty(), "{:?}", h.names());
    h.dispose().await;
}
