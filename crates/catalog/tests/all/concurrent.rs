//! Several processes writing one catalog file at once (WAL, busy timeout): nothing is lost,
//! nothing is counted twice, nobody is locked out, the file stays sound.

use std::process::Command;

use dsh_catalog::SqliteCatalog;
use dsh_catalog_api::{Filter, SearchQuery};

use crate::support::*;

const WORKERS: usize = 8;
const PER_WORKER: usize = 6;
const T0: i64 = 1_796_149_559_000;

/// The body of one writer process (runs only when spawned by the test below): indexes its
/// own sessions in small batches, as a running dsh does at each flush, and reconciles the
/// whole root now and then, as `dsh sessions list` does in other processes.
#[test]
fn child_writer() {
    let (Ok(catalog), Ok(root), Ok(worker)) = (
        std::env::var("DSH_CATALOG_TEST_FILE"),
        std::env::var("DSH_CATALOG_TEST_ROOT"),
        std::env::var("DSH_CATALOG_TEST_WORKER"),
    ) else {
        return;
    };
    let store = dsh_session_jsonl::JsonlStore::new(root);
    let cat = SqliteCatalog::open(catalog).unwrap();
    for n in 0..PER_WORKER {
        let id = format!("w{worker}-s{n}");
        let log = dsh_session::SessionPersistence::open_read(&store, &id).unwrap();
        for batch in log.events.chunks(3) {
            cat.index_events(&log.header, batch).unwrap();
        }
        if n % 2 == 0 {
            cat.reconcile(&store, &mut |_| {}).unwrap();
        }
    }
}

#[test]
fn eight_processes_write_one_catalog() {
    let home = Home::new();
    for w in 0..WORKERS {
        for n in 0..PER_WORKER {
            let text = format!("worker{w} session{n} needle");
            home.write(
                &format!("w{w}-s{n}"),
                &format!("/w/{w}"),
                T0 + (w * 100 + n) as i64,
                &[
                    turn(&text, "reply one"),
                    turn("again", "reply two"),
                    turn("more", "three"),
                ],
            );
        }
    }
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WORKERS)
        .map(|w| {
            Command::new(&exe)
                .args(["concurrent::child_writer", "--exact", "--test-threads=1"])
                .env("DSH_CATALOG_TEST_FILE", home.catalog_path())
                .env("DSH_CATALOG_TEST_ROOT", home.sessions())
                .env("DSH_CATALOG_TEST_WORKER", w.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        let status = c.wait().unwrap();
        assert!(status.success(), "a writer failed: {status}");
    }
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    let rows = cat.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), WORKERS * PER_WORKER);
    for r in &rows {
        assert_eq!((r.turns, r.requests, r.last_seq), (3, 3, Some(17)), "{r:?}");
        assert_eq!((r.tokens_in, r.tokens_out), (1200, 60), "{r:?}");
    }
    let hits = cat
        .search(&SearchQuery {
            text: "needle".into(),
            filter: Filter {
                limit: Some(1_000),
                ..Default::default()
            },
        })
        .unwrap();
    assert_eq!(
        hits.len(),
        WORKERS * PER_WORKER,
        "one hit per session, none twice"
    );
    let conn = rusqlite::Connection::open(home.catalog_path()).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    // Reconciling finds nothing new in the logs, then has nothing left to read.
    let r = cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!((r.events, r.removed), (0, 0));
    let r = cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(r.read, 0);
}
