//! Reconciling without a full sweep: directory times, the live table and the recent sessions
//! say where a change can be (`dsh_catalog::walk`).

use std::time::{Duration, SystemTime};

use dsh_catalog::{LiveTable, Report, SqliteCatalog, live_path};
use dsh_catalog_api::LiveState;

use crate::support::*;

const T0: i64 = 1_796_000_000_000;

/// Sets the modification time of every directory under the sessions root (and the root) to an
/// hour ago: times that old are trusted by an incremental pass.
fn age_dirs(home: &Home) {
    let old = SystemTime::now() - Duration::from_secs(3_600);
    let mut dirs = vec![home.sessions()];
    let mut i = 0;
    while i < dirs.len() {
        for e in std::fs::read_dir(&dirs[i]).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            }
        }
        i += 1;
    }
    for d in dirs {
        std::fs::File::open(&d).unwrap().set_modified(old).unwrap();
    }
}

#[test]
fn an_unchanged_home_is_reconciled_from_the_recent_and_reported_sessions_only() {
    let home = Home::new();
    let mut paths = Vec::new();
    for i in 0..70 {
        let prompt = format!("prompt number {i}");
        paths.push(home.write(
            &format!("s{i:02}"),
            &format!("/w/{}", i % 3),
            T0 + i,
            &[turn(&prompt, "ok")],
        ));
    }
    age_dirs(&home);
    let cat = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_log_root(home.sessions());
    let store = home.store();
    let reconcile = || cat.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    let r = reconcile();
    assert_eq!((r.logs, r.read), (70, 70), "the first pass sweeps");
    // Nothing changed: only the 64 most recently updated logs are looked at (a stat each).
    let r = reconcile();
    assert_eq!((r.logs, r.read, r.removed), (64, 0, 0));

    // A recent session appended by another program is read again.
    home.append(&paths[69], &[turn("late words", "z")]);
    assert_eq!(reconcile().read, 1);
    // An old one is not, until the next sweep...
    home.append(&paths[0], &[turn("resumed by the harness", "z")]);
    assert_eq!(reconcile().read, 0);
    // ...unless a dsh process reported it to the live table.
    let live = LiveTable::open(&live_path(&home.catalog_path())).unwrap();
    live.report(&[Report {
        id: "s00".into(),
        cwd: "/w/0".into(),
        started_ms: T0,
        turn: 2,
        state: LiveState::Working,
        at_ms: dsh_session::now_ms(),
    }])
    .unwrap();
    assert_eq!(reconcile().read, 1);
    assert_eq!(cat.get("s00").unwrap().unwrap().turns, 2);

    // A new session directory changes its project directory's time: it is found.
    home.write("new", "/w/1", T0 + 100, &[turn("brand new", "ok")]);
    let r = reconcile();
    assert_eq!(r.read, 1);
    assert!(cat.get("new").unwrap().is_some());
    // A removed one is forgotten.
    std::fs::remove_dir_all(paths[5].parent().unwrap()).unwrap();
    assert_eq!(reconcile().removed, 1);
    assert!(cat.get("s05").unwrap().is_none());
    // A whole project directory removed: its sessions are forgotten.
    let project = paths[1].parent().unwrap().parent().unwrap().to_path_buf();
    std::fs::remove_dir_all(&project).unwrap();
    let r = reconcile();
    assert!(r.removed >= 20, "{r:?}");
    assert!(cat.get("s01").unwrap().is_none());

    // A sweep (here: every pass) reads what the incremental passes could not see.
    home.append(&paths[3], &[turn("old and resumed", "z")]);
    let sweeping = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_log_root(home.sessions())
        .with_sweep_every(Duration::ZERO);
    let r = sweeping.reconcile(store.as_ref(), &mut |_| {}).unwrap();
    assert_eq!(r.read, 1, "{r:?}");
    assert_eq!(sweeping.get("s03").unwrap().unwrap().turns, 2);
}
