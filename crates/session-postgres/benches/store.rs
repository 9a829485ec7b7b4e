//! `cargo bench -p dsh-session-postgres --bench store`: the PostgreSQL store under the real agent
//! loop (scripted model, one tool call per step) against the JSONL store, on the test cluster
//! (`DSH_TEST_POSTGRES_URL`, from `scripts/postgres-setup start`). Hand-written timing.
//!
//! Prints, for a turn of `STEPS` steps: database round trips per step (statements the store
//! sent; a commit batch is one), wall time per step with each store, and the difference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_session::{SessionEvent, SessionFlush, SessionPersistence};
use dsh_session_postgres::{Durability, PgOptions, PgStore};
use dsh_test_harness::TestHarness;
use dsh_test_harness::postgres::cluster;

const STEPS: usize = 200;
const RUNS: usize = 5;

/// One turn of `STEPS` tool steps; returns the wall time.
async fn turn(h: &TestHarness, agent: &Arc<dyn dsh_agent::Agent>) -> Duration {
    let calls: Vec<(String, String)> = (0..STEPS)
        .map(|i| (format!("c{i}"), format!("{{\"n\":{i}}}")))
        .collect();
    let steps: Vec<[(&str, &str, &str); 1]> = calls
        .iter()
        .map(|(id, args)| [(id.as_str(), "no_such_tool", args.as_str())])
        .collect();
    let refs: Vec<&[(&str, &str, &str)]> = steps.iter().map(|s| &s[..]).collect();
    let start = Instant::now();
    h.tool_turn(agent, &refs, "done").await;
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(c) = cluster("the store bench") else {
        return;
    };
    let url = c.fresh_database();

    // JSONL (the default: zstd, fsync at each durable barrier).
    let h = TestHarness::builder().on_disk().build().await;
    let agent = h.agent().await;
    turn(&h, &agent).await;
    let jsonl: Vec<Duration> = {
        let mut v = Vec::new();
        for _ in 0..RUNS {
            v.push(turn(&h, &agent).await);
        }
        v
    };
    h.dispose().await;

    // PostgreSQL: the plugin's three registrations, on a store whose counters we keep.
    let h = TestHarness::builder().build().await;
    let store = Arc::new(PgStore::connect(&url, PgOptions::default()).unwrap());
    let root = h.root();
    root.provide::<dyn SessionPersistence>(Arc::clone(&store) as Arc<dyn SessionPersistence>)
        .unwrap();
    let s = Arc::clone(&store);
    root.on::<SessionEvent>(move |ev| {
        s.append_events(&ev.session_id, std::slice::from_ref(&ev.event))?;
        Ok(())
    })
    .unwrap();
    let s = Arc::clone(&store);
    root.on_parallel::<SessionFlush, _, _>(move |ev| {
        let s = Arc::clone(&s);
        async move {
            let d = if ev.durable {
                Durability::Durable
            } else {
                Durability::WriteThrough
            };
            s.commit_as(&ev.session_id, d).await?;
            Ok(())
        }
    })
    .unwrap();
    let agent = h.agent().await;
    turn(&h, &agent).await;
    let mut pg = Vec::new();
    let mut trips = Vec::new();
    for _ in 0..RUNS {
        let before = store.round_trips();
        pg.push(turn(&h, &agent).await);
        trips.push(store.round_trips() - before);
    }
    h.dispose().await;

    let per = |d: Duration| d.as_secs_f64() * 1e3 / STEPS as f64;
    let (j, p) = (median(jsonl), median(pg));
    let rt = trips.iter().sum::<u64>() as f64 / (RUNS * STEPS) as f64;
    println!("steps per turn: {STEPS}, runs: {RUNS} (median)");
    println!("round trips per step (PostgreSQL): {rt:.3}");
    println!("wall per step, JSONL:      {:.3} ms", per(j));
    println!("wall per step, PostgreSQL: {:.3} ms", per(p));
    println!("PostgreSQL overhead per step: {:+.3} ms", per(p) - per(j));
}
