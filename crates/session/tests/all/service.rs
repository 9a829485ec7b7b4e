//! The Session handle and the in-memory service: ordered notification, re-entrant listeners.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use dsh_session::{
    CreateOptions, Event, NewEvent, SessionError, SessionSink, SessionStore, Sessions,
};
use futures::future::BoxFuture;
use serde_json::json;

use crate::common::*;

/// Records every notified seq; on seeing a `dsh/ping`, appends a `dsh/pong` re-entrantly.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(u64, String)>>,
    store: Mutex<Option<Arc<SessionStore>>>,
}

impl SessionSink for Recorder {
    fn event(&self, id: &Arc<str>, ev: &Arc<Event>) {
        self.seen
            .lock()
            .unwrap()
            .push((ev.seq(), ev.kind().to_string()));
        if ev.kind() == "dsh/ping" {
            let store = self.store.lock().unwrap().clone().unwrap();
            let s = store.get(id).unwrap();
            s.append(NewEvent::new("dsh/pong", json!({}))).unwrap();
        }
    }
    fn flush(&self, _: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn notifications_are_ordered_and_reentrant_appends_do_not_deadlock() {
    let rec = Arc::new(Recorder::default());
    let store = Arc::new(SessionStore::new(None, rec.clone()));
    *rec.store.lock().unwrap() = Some(store.clone());
    let (tx, rx) = mpsc::channel();
    let s = store.create(CreateOptions::default()).unwrap();
    let s2 = s.clone();
    std::thread::spawn(move || {
        s2.append(turn_start(1)).unwrap();
        s2.append(NewEvent::new("dsh/ping", json!({}))).unwrap();
        s2.append(turn_end(1)).unwrap();
        tx.send(()).unwrap();
    });
    // safety net only: a deadlock would otherwise hang the test
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("append deadlocked");
    let seen = rec.seen.lock().unwrap().clone();
    let kinds: Vec<_> = seen.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(kinds, ["turn/start", "dsh/ping", "dsh/pong", "turn/end"]);
    assert!(
        seen.iter()
            .enumerate()
            .all(|(i, (seq, _))| *seq == i as u64)
    );
}

#[test]
fn in_memory_service_create_get_fork_close() {
    let store = SessionStore::new(None, Arc::new(dsh_session::NullSink));
    let s = store
        .create(CreateOptions {
            id: Some("mem".into()),
            ..Default::default()
        })
        .unwrap();
    assert!(matches!(
        store.create(CreateOptions {
            id: Some("mem".into()),
            ..Default::default()
        }),
        Err(SessionError::Exists(_))
    ));
    assert!(store.exists("mem"));
    let mut log = new_log();
    full_turn(&mut log, 1);
    for ev in log.events() {
        let mut n = NewEvent::new(ev.kind(), ev.data().clone()).at(ev.time());
        n.surface_op = ev.surface_op();
        n.source_event_seqs = ev.source_event_seqs().map(<[u64]>::to_vec);
        s.append(n).unwrap();
    }
    assert_eq!(s.derive_messages().len(), log.derive_messages().len());
    let child = store.fork("mem", Default::default()).unwrap();
    assert_eq!(child.len(), log.len() + 1);
    assert!(store.get(child.id()).is_some());
    futures::executor::block_on(store.close("mem")).unwrap();
    assert!(store.get("mem").is_none());
    assert!(matches!(
        s.append(user("x", "y")),
        Err(SessionError::Closed(_))
    ));
}
