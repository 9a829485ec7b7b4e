//! The committed OpenAPI document is what the code generates, and the server serves it.

use std::path::PathBuf;

use dsh_approval::ApprovalPolicy;
use serde_json::Value;

use crate::common::Server;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

/// Fails when the API or the protocol types change without `docs/openapi.json`. Regenerate
/// it with `DSH_UPDATE_SCHEMA=1 cargo test -p dsh-serve`.
#[test]
fn committed_openapi_matches_the_code() {
    let generated =
        serde_json::to_string_pretty(&dsh_serve::openapi::openapi()).expect("serialises") + "\n";
    let path = committed_path();
    if std::env::var_os("DSH_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).expect("write openapi.json");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json is stale: the HTTP API or the protocol types changed. Regenerate it \
         with `DSH_UPDATE_SCHEMA=1 cargo test -p dsh-serve` and describe the change in \
         docs/http-api.md"
    );
}

#[test]
fn every_reference_resolves_and_the_document_is_openapi_3_1() {
    let doc = dsh_serve::openapi::openapi();
    assert_eq!(doc["openapi"], "3.1.0");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "Op",
        "Event",
        "OpenSession",
        "SessionSummary",
        "ProtocolError",
    ] {
        assert!(schemas.contains_key(name), "no {name}");
    }
    let text = doc.to_string();
    assert!(!text.contains("$defs"), "a $defs reference was left");
    let mut refs = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r.clone());
                }
                o.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&doc, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r}"));
        assert!(schemas.contains_key(name), "{r} does not resolve");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_serves_the_document() {
    let s = Server::start(vec![], ApprovalPolicy::Never).await;
    let served: Value = s
        .http
        .get(s.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(served, dsh_serve::openapi::openapi());
    s.stop().await;
}
