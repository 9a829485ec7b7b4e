//! Ownership: leases, epochs, refusals, readers, a server restart.

use dsh_session::SessionPersistence;
use dsh_session_postgres::{Durability, LeaseLoss, PgStoreError};
use dsh_test_harness::postgres::PrivateCluster;

use crate::{database, events, header, sql, store};

/// The rows stored for session `id`, counted behind the store's back.
async fn stored_rows(db: &tokio_postgres::Client, id: &str) -> i64 {
    db.query_one(
        "SELECT count(*) FROM dsh_events WHERE session_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

/// Time passes: the lease on session `id` expired `secs` seconds ago.
async fn expire(db: &tokio_postgres::Client, id: &str, secs: f64) {
    db.execute(
        "UPDATE dsh_sessions SET expires_at = now() - make_interval(secs => $2) WHERE id = $1",
        &[&id, &secs],
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_epoch_refuses_the_old_writers_next_append() {
    let Some((_c, url)) = database("a_newer_epoch_refuses_the_old_writers_next_append") else {
        return;
    };
    let a = store(&url, "writer-a");
    let b = store(&url, "writer-b");
    a.create_session(&header("s1")).unwrap();
    a.append_events("s1", &events(0, 3)).unwrap();
    a.commit("s1").await.unwrap();
    assert_eq!(a.epoch("s1"), Some(1));

    // A live lease: a second writer is refused, naming the holder.
    let err = b.open_session("s1").unwrap_err();
    assert!(
        matches!(&err, PgStoreError::Locked { owner, epoch: 1, .. } if owner == "writer-a"),
        "{err}"
    );

    // Writer A is paused past its expiry; B takes the session over with epoch 2.
    let db = sql(&url).await;
    expire(&db, "s1", 1.0).await;
    let log = b.open_session("s1").unwrap();
    assert_eq!(log.events.len(), 3);
    assert_eq!(b.epoch("s1"), Some(2));

    // A wakes up: its next batch is refused, naming the new owner, and nothing of it is stored.
    a.append_events("s1", &events(3, 5)).unwrap();
    let err = a.commit("s1").await.unwrap_err();
    match &err {
        PgStoreError::LeaseLost {
            session,
            owner,
            epoch,
            cause,
        } => {
            assert_eq!(session, "s1");
            assert_eq!(owner, "writer-a");
            assert_eq!(*epoch, 1);
            assert_eq!(
                cause,
                &LeaseLoss::TakenOver {
                    owner: "writer-b".into(),
                    epoch: 2
                }
            );
        }
        other => panic!("expected LeaseLost, got {other}"),
    }
    let text = err.to_string();
    assert!(text.starts_with("SESSION_LEASE_LOST"), "{text}");
    assert!(
        text.contains("taken over by writer-b with epoch 2"),
        "{text}"
    );
    // Through the seam it is a storage failure (the turn ends with SESSION_IO, saying why).
    let seam = SessionPersistence::flush(&a, "s1").unwrap_err();
    assert_eq!(seam.code(), "SESSION_IO");
    assert!(seam.to_string().contains("SESSION_LEASE_LOST"), "{seam}");

    // B goes on from seq 3; the log holds A's committed batch and B's, nothing of A's refused one.
    b.append_events("s1", &events(3, 4)).unwrap();
    b.commit("s1").await.unwrap();
    let stored = b.read_session("s1").unwrap();
    assert_eq!(stored.events.len(), 4);
    assert_eq!(stored_rows(&db, "s1").await, 4);
    b.close_session("s1").unwrap();
    a.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_refuses_the_writer_even_without_a_new_owner() {
    let Some((_c, url)) = database("an_expired_lease_refuses_the_writer_even_without_a_new_owner")
    else {
        return;
    };
    let a = store(&url, "writer-a");
    a.create_session(&header("s1")).unwrap();
    a.append_events("s1", &events(0, 2)).unwrap();
    a.commit("s1").await.unwrap();
    let db = sql(&url).await;
    expire(&db, "s1", 5.0).await;
    // Renewal does not revive an expired lease.
    assert_eq!(a.renew_now().unwrap(), vec!["s1".to_owned()]);
    a.append_events("s1", &events(2, 3)).unwrap();
    let err = a.commit("s1").await.unwrap_err();
    assert!(
        matches!(&err, PgStoreError::LeaseLost { cause: LeaseLoss::Expired { ago_ms }, .. } if *ago_ms >= 4000),
        "{err}"
    );
    assert_eq!(a.read_session("s1").unwrap().events.len(), 2);
}

/// The epoch alone fences a writer whose owner id came back: a process restarted with the same
/// configured owner takes the session over (epoch 2); the old writer, paused past its lease, is
/// refused although its owner id matches and the committed count is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_epoch_refuses_an_old_writer_with_the_same_owner_id() {
    let Some((_c, url)) = database("the_epoch_refuses_an_old_writer_with_the_same_owner_id") else {
        return;
    };
    let old = store(&url, "worker-1");
    old.create_session(&header("s1")).unwrap();
    old.append_events("s1", &events(0, 3)).unwrap();
    old.commit("s1").await.unwrap();
    let db = sql(&url).await;
    expire(&db, "s1", 1.0).await;
    let new = store(&url, "worker-1");
    assert_eq!(new.open_session("s1").unwrap().events.len(), 3);
    assert_eq!(new.epoch("s1"), Some(2));
    old.append_events("s1", &events(3, 5)).unwrap();
    let err = old.commit("s1").await.unwrap_err();
    assert!(
        matches!(&err, PgStoreError::LeaseLost { epoch: 1, .. }),
        "{err}"
    );
    assert_eq!(stored_rows(&db, "s1").await, 3);
    new.close_session("s1").unwrap();
    old.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_take_no_lease() {
    let Some((_c, url)) = database("readers_take_no_lease") else {
        return;
    };
    let a = store(&url, "writer-a");
    a.create_session(&header("s1")).unwrap();
    a.append_events("s1", &events(0, 4)).unwrap();
    a.commit("s1").await.unwrap();
    let reader = store(&url, "reader");
    let before = reader.round_trips();
    let log = reader.read_session("s1").unwrap();
    assert_eq!(log.events.len(), 4);
    let bytes = reader.export_jsonl("s1").unwrap();
    assert_eq!(bytes, a.export_jsonl("s1").unwrap());
    let listed = SessionPersistence::list(&reader).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "s1");
    assert!(SessionPersistence::exists(&reader, "s1"));
    assert!(reader.round_trips() > before);
    // The lease is A's as before: same owner and epoch, and A goes on writing.
    let db = sql(&url).await;
    let row = db
        .query_one("SELECT owner, epoch FROM dsh_sessions WHERE id = 's1'", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some("writer-a"));
    assert_eq!(row.get::<_, i64>(1), 1);
    a.append_events("s1", &events(4, 5)).unwrap();
    a.commit("s1").await.unwrap();
    // A reader sees only committed rows: the appended but uncommitted one is not there.
    a.append_events("s1", &events(5, 6)).unwrap();
    assert_eq!(reader.read_session("s1").unwrap().events.len(), 5);
    a.close_session("s1").unwrap();
    assert_eq!(reader.read_session("s1").unwrap().events.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_trip_per_commit_batch() {
    let Some((_c, url)) = database("one_round_trip_per_commit_batch") else {
        return;
    };
    let a = store(&url, "writer-a");
    a.create_session(&header("s1")).unwrap();
    let reader = store(&url, "reader");
    for batch in 0..6u64 {
        a.append_events("s1", &events(batch * 40, batch * 40 + 40))
            .unwrap();
        let before = a.round_trips();
        // Write-through (the barrier before a tool) and durable batches alike.
        let durability = if batch % 2 == 0 {
            Durability::WriteThrough
        } else {
            Durability::Durable
        };
        a.commit_as("s1", durability).await.unwrap();
        assert_eq!(a.round_trips() - before, 1, "batch {batch}");
        // Committed and visible to another connection at once.
        assert_eq!(
            reader.read_session("s1").unwrap().events.len() as u64,
            batch * 40 + 40
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_releases_the_lease_and_an_unflushed_session_leaves_nothing() {
    let Some((_c, url)) =
        database("closing_releases_the_lease_and_an_unflushed_session_leaves_nothing")
    else {
        return;
    };
    let a = store(&url, "writer-a");
    let b = store(&url, "writer-b");
    a.create_session(&header("s1")).unwrap();
    // Registered for write: the id is taken, but not listed.
    assert!(matches!(
        b.create_session(&header("s1")),
        Err(PgStoreError::Exists(_))
    ));
    assert!(SessionPersistence::list(&b).unwrap().is_empty());
    a.close_session("s1").unwrap();
    assert!(!SessionPersistence::exists(&b, "s1"));
    assert!(matches!(
        b.open_session("s1"),
        Err(PgStoreError::NotFound(_))
    ));

    a.create_session(&header("s2")).unwrap();
    a.append_events("s2", &events(0, 2)).unwrap();
    a.close_session("s2").unwrap();
    // Released: the next writer takes it at once, with a new epoch.
    let log = b.open_session("s2").unwrap();
    assert_eq!(log.events.len(), 2);
    assert_eq!(b.epoch("s2"), Some(2));
    b.close_session("s2").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_reconnects_after_a_server_restart_and_goes_on() {
    // Its own cluster: a restart cuts every connection of the cluster.
    let Some(private) =
        PrivateCluster::start("the_writer_reconnects_after_a_server_restart_and_goes_on")
    else {
        return;
    };
    let url = private.cluster.fresh_database();
    let a = store(&url, "writer-a");
    a.create_session(&header("s1")).unwrap();
    a.append_events("s1", &events(0, 3)).unwrap();
    a.commit("s1").await.unwrap();
    private.cluster.restart();
    a.append_events("s1", &events(3, 6)).unwrap();
    a.commit("s1").await.unwrap();
    assert!(a.reconnects() >= 1, "the store did not reconnect");
    // The lease survived the restart (it lives in the database), the log is whole.
    assert_eq!(a.epoch("s1"), Some(1));
    let reader = store(&url, "reader");
    assert_eq!(reader.read_session("s1").unwrap().events.len(), 6);
    a.close_session("s1").unwrap();
}

#[test]
fn a_server_that_is_not_there_fails_at_connect_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgresql://postgres@/db?host={}", dir.path().display());
    let err = dsh_session_postgres::PgStore::connect(&url, Default::default()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PgStoreError::Connect { .. }), "{text}");
    assert!(text.contains(&dir.path().display().to_string()), "{text}");
    let err =
        dsh_session_postgres::PgStore::connect("postgres://x:notaport/db", Default::default())
            .unwrap_err();
    assert!(matches!(err, PgStoreError::BadUrl(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_prefix_is_already_stored_sends_only_the_rest() {
    let Some((_c, url)) = database("a_batch_whose_prefix_is_already_stored_sends_only_the_rest")
    else {
        return;
    };
    let a = store(&url, "writer-a");
    a.create_session(&header("s1")).unwrap();
    a.append_events("s1", &events(0, 2)).unwrap();
    a.commit("s1").await.unwrap();
    // The first two rows of the next batch are stored already, as when the reply of an attempt
    // that committed them was lost.
    let db = sql(&url).await;
    for e in events(2, 4) {
        db.execute(
            "INSERT INTO dsh_events (session_id, seq, kind, line) VALUES ('s1', $1, 'test/row', $2)",
            &[&(e.seq() as i64), &e.to_json_line()],
        )
        .await
        .unwrap();
    }
    db.execute("UPDATE dsh_sessions SET next_seq = 4 WHERE id = 's1'", &[])
        .await
        .unwrap();
    a.append_events("s1", &events(2, 5)).unwrap();
    a.commit("s1").await.unwrap();
    let log = a.read_session("s1").unwrap();
    assert_eq!(log.events.len(), 5);
    assert_eq!(stored_rows(&db, "s1").await, 5);
    a.append_events("s1", &events(5, 6)).unwrap();
    a.commit("s1").await.unwrap();
    assert_eq!(a.read_session("s1").unwrap().events.len(), 6);
}

/// Connecting to a store whose schema exists takes no lock that a writer's insert holds: a
/// host starting (or `dsh sessions list --store`) while another host's batch is in flight goes
/// through. It used to wait for that transaction (`CREATE INDEX IF NOT EXISTS` takes the events
/// table's SHARE lock before it finds the index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_waits_for_no_writer_transaction() {
    let Some((_c, url)) = database("connecting_waits_for_no_writer_transaction") else {
        return;
    };
    drop(store(&url, "first"));
    let writer = sql(&url).await;
    writer
        .batch_execute("BEGIN; LOCK TABLE dsh_events IN ROW EXCLUSIVE MODE")
        .await
        .unwrap();
    let connect = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || store(&url, "second"))
    };
    // A bound on a wait that used to be endless, not a timing figure.
    let second = tokio::time::timeout(std::time::Duration::from_secs(60), connect).await;
    assert!(
        second.is_ok(),
        "connect waited for the transaction inserting events"
    );
    drop(second.unwrap().unwrap());
    writer.batch_execute("COMMIT").await.unwrap();
}
