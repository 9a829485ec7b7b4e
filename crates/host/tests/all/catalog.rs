//! With the catalog plugin mounted, the session list comes from the catalog and `q` matches
//! the full text of the sessions (prompts, replies), not only titles and ids.

use dsh_approval::ApprovalPolicy;
use dsh_catalog::{CatalogConfig, CatalogPlugin};
use dsh_protocol::{EventMsg, OpenSession, SessionOptions, SessionQuery};
use dsh_test_harness::{Script, TestHarness, text, within};
use futures::StreamExt;

use crate::compose::host_over;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_list_searches_the_full_text_through_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let h = TestHarness::builder()
        .plugin::<dsh_approval::ApprovalPlugin>(dsh_approval::ApprovalConfig {
            policy: Some(ApprovalPolicy::Never),
            ..Default::default()
        })
        .plugin::<CatalogPlugin>(CatalogConfig {
            path: Some(dir.path().join("catalog.sqlite")),
            log_root: Some(dir.path().join("sessions")),
        })
        .scripts(vec![Script::Chunks(text("the ocelot sleeps"))])
        .on_disk_at(dir.path().join("sessions"))
        .build()
        .await;
    let (_host, client) = host_over(&h, true);
    let summary = client
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(h.dir().display().to_string()),
                ..Default::default()
            },
            prompt: None,
        })
        .await
        .unwrap();
    let id = summary.id.clone();
    let mut events = client.subscribe(&id, None).await.unwrap();
    client
        .send(
            &id,
            dsh_protocol::Op::Submit {
                text: "where is the okapi".into(),
                attachments: Vec::new(),
            },
        )
        .await
        .unwrap();
    loop {
        let ev = within("no turn end", events.next()).await.unwrap();
        if matches!(ev.msg, EventMsg::TurnEnded { .. }) {
            break;
        }
    }
    client.close(&id).await.unwrap();
    let find = |q: &str| SessionQuery {
        q: Some(q.into()),
        ..Default::default()
    };
    // The prompt and the reply are found; neither is a title or an id.
    for q in ["okapi", "ocelot"] {
        let list = client.sessions(find(q)).await.unwrap();
        assert_eq!(list.len(), 1, "{q}: {list:?}");
        assert_eq!(list[0].id, id);
        assert_eq!(list[0].turns, 1);
        assert_eq!(list[0].first_prompt.as_deref(), Some("where is the okapi"));
    }
    assert!(client.sessions(find("pangolin")).await.unwrap().is_empty());
    assert_eq!(
        client
            .sessions(SessionQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    h.dispose().await;
}
