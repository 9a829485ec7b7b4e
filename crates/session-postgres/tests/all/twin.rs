//! Byte identity with the JSONL store, a real agent through the PostgreSQL store, import.

use std::sync::Arc;

use dsh_session::SessionPersistence;
use dsh_session_jsonl::{Compression, JsonlStore};
use dsh_session_postgres::{PgConfig, PgPlugin, PgStoreError};
use dsh_test_harness::TestHarness;

use crate::{database, store};

fn config(url: &str) -> PgConfig {
    PgConfig {
        url: url.to_owned(),
        lease_seconds: None,
        reconnect_seconds: None,
        catalog: false,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_session_exports_byte_identical_to_its_jsonl_twin() {
    let Some((_c, url)) = database("an_agent_session_exports_byte_identical_to_its_jsonl_twin")
    else {
        return;
    };
    // A real agent on the PostgreSQL store: a tool turn (an unknown tool: an error result) and
    // a text turn.
    let h = TestHarness::builder()
        .plugin::<PgPlugin>(config(&url))
        .build()
        .await;
    let agent = h.agent().await;
    let id = agent.id().to_owned();
    h.tool_turn(
        &agent,
        &[&[("c1", "no_such_tool", "{\"a\":\"é\"}")]],
        "done",
    )
    .await;
    h.reply(&agent, "and again", "sure: ünïcode \u{1F600}")
        .await;
    h.dispose().await;

    // Resumed by a second kernel on the same store: the lease was released at close.
    let h2 = TestHarness::builder()
        .plugin::<PgPlugin>(config(&url))
        .build()
        .await;
    let agent = h2.resume(&id).await;
    h2.reply(&agent, "third", "ok").await;
    h2.dispose().await;

    let pg = store(&url, "exporter");
    let exported = pg.export_jsonl(&id).unwrap();
    let log = pg.read_session(&id).unwrap();
    assert!(log.events.len() > 20, "{} events", log.events.len());

    // The JSONL twin: the same header and events written by the JSONL store (plain), in
    // several batches.
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::new(dir.path().to_path_buf()).with_compression(Compression::None);
    jsonl.create(&log.header).unwrap();
    let events: Vec<Arc<dsh_session::Event>> = log.events.iter().cloned().map(Arc::new).collect();
    for chunk in events.chunks(7) {
        jsonl.append(&id, chunk).unwrap();
        jsonl.flush(&id).unwrap();
    }
    jsonl.close(&id).unwrap();
    let listed = jsonl.list().unwrap();
    let on_disk = std::fs::read(&listed[0].path).unwrap();
    assert!(
        on_disk == exported,
        "export differs from the JSONL file ({} vs {} bytes)",
        exported.len(),
        on_disk.len()
    );

    // And back: the JSONL file imported into another database exports the same bytes.
    let Some((_c2, url2)) = database("import") else {
        return;
    };
    let other = store(&url2, "importer");
    assert_eq!(other.import_jsonl(&on_disk).unwrap(), id);
    assert_eq!(other.export_jsonl(&id).unwrap(), on_disk);
    // A second import of the same id is refused.
    assert!(matches!(
        other.import_jsonl(&on_disk),
        Err(PgStoreError::Exists(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_does_not_read_is_not_imported() {
    let Some((_c, url)) = database("a_log_that_does_not_read_is_not_imported") else {
        return;
    };
    let pg = store(&url, "importer");
    let bad = b"{\"type\":\"session\",\"version\":4,\"id\":\"x\",\"createdAt\":1,\"isSeeded\":false,\"delegationDepth\":0}\nnot json\n{\"type\":\"test/row\",\"data\":{},\"ignorable\":true,\"seq\":1,\"time\":0}\n";
    let err = pg.import_jsonl(bad).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
    assert!(SessionPersistence::list(&pg).unwrap().is_empty());
}
