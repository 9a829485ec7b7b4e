//! The catalog seam over the store: listing, usage, full-text search.

use dsh_catalog_api::{Catalog, Filter, GroupBy, HitKind, SearchQuery};
use dsh_session_postgres::{PgConfig, PgPlugin};
use dsh_test_harness::TestHarness;

use crate::database;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_lists_and_searches_the_stored_sessions() {
    let Some((c, url)) = database("the_catalog_lists_and_searches_the_stored_sessions") else {
        return;
    };
    let h = TestHarness::builder()
        .plugin::<PgPlugin>(PgConfig {
            url: url.clone(),
            lease_seconds: None,
            reconnect_seconds: None,
            catalog: true,
            ..Default::default()
        })
        .build()
        .await;
    let agent = h.agent().await;
    let id = agent.id().to_owned();
    h.reply(&agent, "where is the aardvark?", "The zebracorn knows.")
        .await;
    h.reply(&agent, "and the ocelot?", "Nobody knows that one.")
        .await;
    let catalog = h.get::<dyn Catalog>();

    let rows = catalog.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.id, id);
    assert_eq!(row.turns, 2);
    assert_eq!(row.status, "completed");
    assert_eq!(row.first_prompt, "where is the aardvark?");
    assert_eq!(row.last_prompt, "and the ocelot?");
    assert!(row.last_seq.is_some());
    assert_eq!(catalog.get(&id).unwrap().as_ref(), Some(row));
    assert!(catalog.get("no-such").unwrap().is_none());
    let elsewhere = Filter {
        cwd: Some("/nowhere".into()),
        ..Filter::default()
    };
    assert!(catalog.list(&elsewhere).unwrap().is_empty());

    // Full-text search: a word of a reply, a prompt's word by prefix, a phrase.
    let search = |text: &str| {
        catalog
            .search(&SearchQuery {
                text: text.into(),
                filter: Filter::default(),
            })
            .unwrap()
    };
    let hits = search("zebracorn");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].session_id, id);
    assert_eq!(hits[0].kind, HitKind::Assistant);
    assert_eq!(hits[0].turn, 1);
    let (a, b) = hits[0].highlights[0];
    assert_eq!(&hits[0].snippet[a..b], "zebracorn");
    let hits = search("aard*");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].kind, HitKind::Prompt);
    assert_eq!(search("\"nobody knows\"").len(), 1);
    assert!(search("\"knows nobody\"").is_empty());
    assert!(search("it's (unbalanced & | !").is_empty());

    // Events stored before the store kept their words are indexed by the next search.
    c.psql(&url, "UPDATE dsh_events SET doc = NULL");
    assert_eq!(search("zebracorn").len(), 1);
    assert_eq!(
        c.psql(
            &url,
            "SELECT count(*) FROM dsh_events WHERE doc IS NULL AND kind IN \
             ('user/message', 'assistant/message', 'session/title', 'tool/call', 'tool/result')"
        ),
        "0"
    );

    // Usage: the same requests and tokens as the rows.
    let total = catalog.stats(GroupBy::Total, &Filter::default()).unwrap();
    let requests: u64 = total.iter().map(|r| r.requests).sum();
    assert_eq!(requests, row.requests);
    let tokens: u64 = total.iter().map(|r| r.tokens_in).sum();
    assert_eq!(tokens, row.tokens_in);

    // A NUL in a prompt and a reply (`\u0000` in the line, which jsonb refuses) neither fails
    // the commit nor the listing, and the rest of the text is still found.
    let other = h.agent().await;
    h.reply(&other, "binary\0output of the pangolin", "it\0printed")
        .await;
    let rows = catalog.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].first_prompt, "binary output of the pangolin");
    assert_eq!(search("pangolin").len(), 1);
    assert!(catalog.stats(GroupBy::Day, &Filter::default()).is_ok());
    h.dispose().await;
}
