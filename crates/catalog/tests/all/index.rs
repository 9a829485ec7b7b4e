//! Indexing stored logs: rows, watermarks, reconciliation, deletion, stats.

use dsh_catalog::SqliteCatalog;
use dsh_catalog_api::{Filter, GroupBy};
use serde_json::json;

use crate::support::*;

const DAY: i64 = 86_400_000;
const T0: i64 = 1_796_149_559_000; // 2026-12-01

#[test]
fn a_log_becomes_a_row_with_its_counts_and_prompts() {
    let home = Home::new();
    home.write(
        "s1",
        "/w/proj",
        T0,
        &[
            Turn {
                prompt: "run the tests",
                reply: "they pass",
                tool: Some((
                    "bash",
                    json!({"command": "cargo test -p alpha"}),
                    "ok: 12 passed",
                )),
            },
            turn("now the docs", "done"),
        ],
    );
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    let r = cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!((r.logs, r.read, r.removed), (1, 1, 0));
    let rows = cat.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    let s = &rows[0];
    assert_eq!(s.id, "s1");
    assert_eq!(s.cwd, "/w/proj");
    assert_eq!(s.turns, 2);
    assert_eq!(s.status, "completed");
    assert_eq!(s.first_prompt, "run the tests");
    assert_eq!(s.last_prompt, "now the docs");
    assert_eq!(s.model.as_deref(), Some("deepseek-chat"));
    assert_eq!(s.provider.as_deref(), Some("deepseek-official"));
    // Three replies of 100 uncached + 300 cached input, 20 output.
    assert_eq!(
        (s.requests, s.tokens_in, s.tokens_cached, s.tokens_out),
        (3, 1200, 900, 60)
    );
    assert_eq!(s.last_seq, Some(16));
}

#[test]
fn reconciling_reads_only_what_changed_and_appends_from_the_watermark() {
    let home = Home::new();
    let path = home.write("s1", "/w", T0, &[turn("alpha prompt", "one")]);
    home.write("s2", "/w", T0 + 1, &[turn("beta prompt", "two")]);
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    let store = home.store();
    assert_eq!(cat.reconcile(store.as_ref(), &mut |_| {}).unwrap().read, 2);
    // Nothing changed: nothing is read.
    let again = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!((again.read, again.events), (0, 0));
    home.append(&path, &[turn("gamma prompt", "three")]);
    let more = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!(more.read, 1);
    assert_eq!(more.events, 6, "only the appended turn is indexed");
    let s1 = cat.get("s1").unwrap().unwrap();
    assert_eq!((s1.turns, s1.last_prompt.as_str()), (2, "gamma prompt"));
    let hits = cat
        .search(&dsh_catalog_api::SearchQuery {
            text: "gamma".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].session_id.as_str(), hits[0].turn), ("s1", 2));
}

#[test]
fn events_indexed_twice_count_once_and_a_gap_waits_for_the_log() {
    let home = Home::new();
    let path = home.write("s1", "/w", T0, &[turn("first words", "reply")]);
    let store = home.store();
    let log = store.open_read("s1").unwrap();
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    let (a, b) = log.events.split_at(3);
    assert_eq!(cat.index_events(&log.header, a).unwrap().events, 3);
    // The whole batch again: the first three are skipped.
    assert_eq!(
        cat.index_events(&log.header, &log.events).unwrap().events,
        3
    );
    assert_eq!(cat.index_events(&log.header, b).unwrap().events, 0);
    let s = cat.get("s1").unwrap().unwrap();
    assert_eq!((s.requests, s.last_seq), (1, Some(5)));
    // A later batch with a hole is not indexed past the hole.
    home.append(
        &path,
        &[turn("second words", "reply"), turn("third words", "r")],
    );
    let log = store.open_read("s1").unwrap();
    let out = cat.index_events(&log.header, &log.events[8..]).unwrap();
    assert!(out.gap && out.events == 0, "{out:?}");
    // Reconciliation reads the log and fills it.
    cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!(cat.get("s1").unwrap().unwrap().turns, 3);
}

#[test]
fn a_turn_the_writer_never_committed_is_read_from_the_log_by_the_next_reconciliation() {
    // The plugin commits a session's events at the end of each turn; a process killed before
    // (mid-turn, or between the turn's end and its commit) leaves the catalog behind the log.
    // Rows written from events carry no log stamp, so the next reconciliation reads that log
    // from the session's watermark.
    let home = Home::new();
    home.write(
        "s1",
        "/w",
        T0,
        &[
            turn("first turn words", "one"),
            turn("second turn words", "two"),
        ],
    );
    let store = home.store();
    let log = store.open_read("s1").unwrap();
    let end = log
        .events
        .iter()
        .position(|e| e.kind() == "turn/end")
        .unwrap();
    let cat = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_log_root(home.sessions());
    cat.index_events(&log.header, &log.events[..=end]).unwrap();
    let s = cat.get("s1").unwrap().unwrap();
    assert_eq!((s.turns, s.requests), (1, 1));
    let r = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!((r.read, r.events), (1, (log.events.len() - end - 1) as u64));
    let s = cat.get("s1").unwrap().unwrap();
    assert_eq!(
        (s.turns, s.requests, s.last_prompt.as_str()),
        (2, 2, "second turn words")
    );
    let hits = cat
        .search(&dsh_catalog_api::SearchQuery {
            text: "second".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].turn, 2);
    // Read, the log is stamped: nothing to do until it changes.
    assert_eq!(cat.reconcile(store.as_ref(), &mut |_| {}).unwrap().read, 0);
}

#[test]
fn a_deleted_log_or_session_leaves_the_catalog() {
    let home = Home::new();
    let p1 = home.write("gone", "/w", T0, &[turn("vanishing words", "x")]);
    home.write("kept", "/w", T0, &[turn("staying words", "y")]);
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    let store = home.store();
    cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    std::fs::remove_dir_all(p1.parent().unwrap()).unwrap();
    let r = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!(r.removed, 1);
    let ids: Vec<String> = cat
        .list(&Filter::default())
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["kept"]);
    let q = |t: &str| dsh_catalog_api::SearchQuery {
        text: t.into(),
        ..Default::default()
    };
    assert!(cat.search(&q("vanishing")).unwrap().is_empty());
    cat.delete("kept").unwrap();
    cat.delete("never-there").unwrap();
    assert!(cat.search(&q("staying")).unwrap().is_empty());
    assert!(cat.get("kept").unwrap().is_none());
    assert!(
        cat.stats(GroupBy::Day, &Filter::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_log_that_shrank_is_indexed_again_from_the_start() {
    let home = Home::new();
    let path = home.write("s1", "/w", T0, &[turn("one", "a"), turn("two", "b")]);
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(cat.get("s1").unwrap().unwrap().turns, 2);
    home.write("s1", "/w", T0, &[turn("uno", "a")]);
    assert!(path.exists());
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    let s = cat.get("s1").unwrap().unwrap();
    assert_eq!(
        (s.turns, s.first_prompt.as_str(), s.requests),
        (1, "uno", 1)
    );
}

#[test]
fn filters_and_stats_group_by_day_model_and_project() {
    let home = Home::new();
    let proj = tempfile::tempdir().unwrap();
    std::fs::create_dir(proj.path().join(".git")).unwrap();
    let sub = proj.path().join("crates/x");
    std::fs::create_dir_all(&sub).unwrap();
    let root = proj.path().to_string_lossy().into_owned();
    let sub = sub.to_string_lossy().into_owned();
    home.write("a", &root, T0, &[turn("p", "r"), turn("p2", "r2")]);
    home.write("b", &sub, T0 + DAY, &[turn("p", "r")]);
    home.write("c", "/elsewhere", T0 + 2 * DAY, &[turn("p", "r")]);
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();

    let ids =
        |f: Filter| -> Vec<String> { cat.list(&f).unwrap().into_iter().map(|s| s.id).collect() };
    assert_eq!(ids(Filter::default()), ["c", "b", "a"]);
    // The project root and every directory under it.
    assert_eq!(
        ids(Filter {
            cwd: Some(root.clone()),
            ..Default::default()
        }),
        ["b", "a"]
    );
    // A subdirectory: its own sessions and its project's.
    assert_eq!(
        ids(Filter {
            cwd: Some(sub.clone()),
            ..Default::default()
        }),
        ["b", "a"]
    );
    assert_eq!(
        ids(Filter {
            since_ms: Some(T0 + DAY),
            ..Default::default()
        }),
        ["c", "b"]
    );
    assert_eq!(
        ids(Filter {
            limit: Some(1),
            ..Default::default()
        }),
        ["c"]
    );
    assert_eq!(
        ids(Filter {
            model: Some("deepseek-chat".into()),
            ..Default::default()
        })
        .len(),
        3
    );
    assert!(
        ids(Filter {
            model: Some("other".into()),
            ..Default::default()
        })
        .is_empty()
    );

    let days = cat.stats(GroupBy::Day, &Filter::default()).unwrap();
    let keys: Vec<&str> = days.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(keys, ["2026-12-03", "2026-12-02", "2026-12-01"]);
    assert_eq!(
        (days[2].sessions, days[2].turns, days[2].requests),
        (1, 2, 2)
    );
    assert_eq!(days[2].cache_hit_ratio(), 0.75);
    let models = cat.stats(GroupBy::Model, &Filter::default()).unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].key, "deepseek-official/deepseek-chat");
    assert_eq!(
        (models[0].sessions, models[0].turns, models[0].tokens_out),
        (3, 4, 80)
    );
    let projects = cat.stats(GroupBy::Project, &Filter::default()).unwrap();
    assert_eq!(projects[0].key, root);
    assert_eq!(projects[0].sessions, 2);
    assert_eq!(projects[1].key, "/elsewhere");
    let total = cat.stats(GroupBy::Total, &Filter::default()).unwrap();
    assert_eq!(
        (total[0].key.as_str(), total[0].sessions, total[0].turns),
        ("total", 3, 4)
    );
    let recent = cat
        .stats(
            GroupBy::Model,
            &Filter {
                since_ms: Some(T0 + 2 * DAY),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(recent[0].sessions, 1);
}

#[test]
fn a_pricer_prices_usage() {
    use dsh_llm::{ModelPricing, UsdPerMTok};
    let home = Home::new();
    home.write("s", "/w", T0, &[turn("p", "r")]);
    let prices = ModelPricing::new(
        UsdPerMTok::from_micros(100_000),
        UsdPerMTok::from_micros(1_000_000),
        UsdPerMTok::from_micros(2_000_000),
    );
    let cat = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_pricer(std::sync::Arc::new(move |p: &str, m: &str| {
            (p == "deepseek-official" && m == "deepseek-chat").then_some(prices)
        }));
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    // 100 miss × $1 + 300 hit × $0.1 + 20 out × $2, per million.
    let want = (100.0 * 1.0 + 300.0 * 0.1 + 20.0 * 2.0) / 1e6;
    let s = cat.get("s").unwrap().unwrap();
    assert!((s.cost_usd - want).abs() < 1e-12, "{}", s.cost_usd);
    let st = cat.stats(GroupBy::Model, &Filter::default()).unwrap();
    assert!((st[0].cost_usd - want).abs() < 1e-12);
}

#[test]
fn a_walked_log_root_finds_new_changed_and_deleted_logs_without_listing_headers() {
    let home = Home::new();
    let odd = home.write("odd/id é", "/w", T0, &[turn("first odd words", "x")]);
    home.write("plain", "/w/2", T0 + 1, &[turn("plain words", "y")]);
    let cat = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_log_root(home.sessions());
    let store = home.store();
    let r = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!((r.logs, r.read, r.unreadable), (2, 2, 0));
    let odd_row = cat.get("odd/id é").unwrap().unwrap();
    assert_eq!((odd_row.cwd.as_str(), odd_row.turns), ("/w", 1));
    assert_eq!(cat.reconcile(store.as_ref(), &mut |_| {}).unwrap().read, 0);
    home.append(&odd, &[turn("second odd words", "z")]);
    let r = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!((r.read, r.events), (1, 6));
    std::fs::remove_dir_all(odd.parent().unwrap()).unwrap();
    let r = cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!(r.removed, 1);
    let ids: Vec<String> = cat
        .list(&Filter::default())
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["plain"]);
    // A root that does not exist falls back to the store's listing.
    let elsewhere = SqliteCatalog::open_in_memory()
        .unwrap()
        .with_log_root(home.dir.path().join("no-such-dir"));
    assert_eq!(
        elsewhere
            .reconcile(store.as_ref(), &mut |_| {})
            .unwrap()
            .logs,
        1
    );
}
