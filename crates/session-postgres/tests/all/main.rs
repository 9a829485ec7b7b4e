//! The PostgreSQL store against a real cluster (`scripts/postgres-setup`, found through
//! `DSH_TEST_POSTGRES_URL`; each test has its own database). Without the cluster the tests
//! skip with the reason, and fail under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog;
mod lease;
mod twin;

use std::sync::Arc;
use std::time::Duration;

use dsh_session::Event;
use dsh_session::header::SessionHeader;
use dsh_session_postgres::{PgOptions, PgStore};
use dsh_test_harness::postgres::{TestCluster, cluster};

/// A fresh database of the shared cluster, or `None` (skipped).
pub fn database(test: &str) -> Option<(TestCluster, String)> {
    let c = cluster(test)?;
    let url = c.fresh_database();
    Some((c, url))
}

/// A store on `url` with a long lease (no renewal during a test) and a named owner.
pub fn store(url: &str, owner: &str) -> PgStore {
    PgStore::connect(
        url,
        PgOptions {
            lease: Duration::from_secs(3600),
            owner: Some(owner.into()),
            ..PgOptions::default()
        },
    )
    .unwrap()
}

/// A v4 header.
pub fn header(id: &str) -> SessionHeader {
    SessionHeader::new(id, 1_790_000_000_000, Some("/work/p".into()))
}

/// Events `from..to` of a plugin type (admitted anywhere: ignorable).
pub fn events(from: u64, to: u64) -> Vec<Arc<Event>> {
    (from..to)
        .map(|i| {
            let line = format!(
                "{{\"type\":\"test/row\",\"data\":{{\"n\":{i},\"text\":\"row {i} \\u00e9\\n\"}},\"ignorable\":true,\"seq\":{i},\"time\":{}}}",
                1_790_000_000_000u64 + i
            );
            Arc::new(Event::from_line(&line, i).unwrap())
        })
        .collect()
}

/// A plain SQL client for what a test inspects or changes behind the store's back.
pub async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}
