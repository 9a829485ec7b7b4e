//! A catalog deleted, corrupted, foreign or read-only: rebuilt from the logs, never an error.

use dsh_catalog::{Location, SqliteCatalog};
use dsh_catalog_api::{Filter, SearchQuery};

use crate::support::*;

const T0: i64 = 1_796_149_559_000;

fn q(text: &str) -> SearchQuery {
    SearchQuery {
        text: text.into(),
        ..Default::default()
    }
}

fn seeded() -> Home {
    let home = Home::new();
    home.write("s1", "/w", T0, &[turn("zebra crossing", "stripes")]);
    home.write("s2", "/w", T0 + 1, &[turn("giraffe necks", "long")]);
    home
}

fn found(cat: &SqliteCatalog) -> usize {
    cat.search(&q("zebra")).unwrap().len() + cat.search(&q("giraffe")).unwrap().len()
}

#[test]
fn a_deleted_catalog_is_rebuilt_from_the_logs_with_progress() {
    let home = seeded();
    {
        let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
        cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
        assert_eq!(found(&cat), 2);
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", home.catalog_path().display()));
    }
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    assert!(cat.is_empty().unwrap());
    let mut seen = Vec::new();
    cat.reconcile(home.store().as_ref(), &mut |p| seen.push((p.done, p.total)))
        .unwrap();
    assert_eq!(seen, [(1, 2), (2, 2)]);
    assert_eq!(found(&cat), 2);
}

#[test]
fn a_corrupt_catalog_is_replaced_and_rebuilt() {
    let home = seeded();
    {
        let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
        cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
        cat.checkpoint().unwrap();
    }
    // Garbage over the whole file.
    std::fs::write(home.catalog_path(), vec![0x5a; 64 * 1024]).unwrap();
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    assert!(cat.was_reset());
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(found(&cat), 2);
}

#[test]
fn a_damaged_page_is_detected_on_use_and_recovered() {
    let home = seeded();
    {
        let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
        cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
        cat.checkpoint().unwrap();
    }
    // Keep the header page, scribble over the rest.
    let mut bytes = std::fs::read(home.catalog_path()).unwrap();
    assert!(bytes.len() > 4096);
    for b in &mut bytes[4096..] {
        *b = 0xA5;
    }
    std::fs::write(home.catalog_path(), bytes).unwrap();
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    // The header page is intact: the damage surfaces on use, as a damage error.
    let used = cat
        .reconcile(home.store().as_ref(), &mut |_| {})
        .and_then(|_| cat.search(&q("zebra")));
    match used {
        Ok(h) => panic!("the damage went unnoticed: {h:?}"),
        Err(e) => assert!(e.is_damage(), "{e}"),
    }
    cat.recover().unwrap();
    assert!(cat.was_reset());
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(found(&cat), 2);
}

#[test]
fn a_catalog_of_another_schema_version_is_rebuilt() {
    let home = seeded();
    {
        let conn = rusqlite::Connection::open(home.catalog_path()).unwrap();
        conn.execute_batch("CREATE TABLE sessions(x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    assert!(cat.was_reset());
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(found(&cat), 2);
}

#[cfg(unix)]
#[test]
fn a_read_only_home_lists_and_searches_from_the_logs_in_memory() {
    use std::os::unix::fs::PermissionsExt;
    let home = seeded();
    let ro = |mode| {
        std::fs::set_permissions(home.dir.path(), std::fs::Permissions::from_mode(mode)).unwrap()
    };
    ro(0o555);
    // Root ignores permissions: the premise of the test does not hold.
    if std::fs::write(home.dir.path().join("probe"), b"x").is_ok() {
        ro(0o755);
        eprintln!("skipped: running as root, directories are never read-only");
        return;
    }
    let cat = SqliteCatalog::open_or_memory(home.catalog_path());
    ro(0o755);
    let cat = cat.unwrap();
    assert_eq!(cat.location(), &Location::Memory);
    assert!(!home.catalog_path().exists());
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(cat.list(&Filter::default()).unwrap().len(), 2);
    assert_eq!(found(&cat), 2);
}

#[test]
fn a_catalog_path_that_cannot_be_a_database_falls_back_to_memory() {
    let home = seeded();
    std::fs::create_dir(home.catalog_path()).unwrap();
    let cat = SqliteCatalog::open_or_memory(home.catalog_path()).unwrap();
    assert_eq!(cat.location(), &Location::Memory);
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!(found(&cat), 2);
}
