//! The resume prefetch: adopted when the log is unchanged, discarded when another writer
//! appended after the read. One test: the prefetch slot is process-wide.

use std::path::Path;
use std::sync::Arc;

use dsh_session::{
    CreateOptions, DirectSink, NewEvent, SessionPersistence, SessionStore, Sessions,
};
use dsh_session_jsonl::{JsonlStore, prefetch};
use futures::executor::block_on;
use serde_json::json;

fn sessions(root: &Path) -> SessionStore {
    let p: Arc<dyn SessionPersistence> = Arc::new(JsonlStore::new(root));
    SessionStore::new(Some(p.clone()), Arc::new(DirectSink::new(p)))
}

fn turn(s: &dsh_session::Session, t: u64) {
    for (kind, data) in [
        ("turn/start", json!({"turn": t})),
        ("step/start", json!({"turn": t, "step": 1})),
        (
            "user/message",
            json!({"content": [{"type": "text", "text": format!("q{t}")}], "source": {"kind": "user"}, "role": "user", "id": format!("u{t}")}),
        ),
        ("step/end", json!({"turn": t, "step": 1})),
        (
            "turn/end",
            json!({"turn": t, "reason": {"kind": "completed"}}),
        ),
    ] {
        s.append(NewEvent::new(kind, data)).unwrap();
    }
}

fn texts(s: &dsh_session::Session) -> Vec<String> {
    s.events()
        .iter()
        .filter(|e| e.kind() == "user/message")
        .map(|e| e.to_json_line())
        .collect()
}

#[test]
fn a_prefetched_read_is_adopted_only_while_the_log_is_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let store = sessions(root);
    let s = store
        .create(CreateOptions {
            id: Some("pf".into()),
            cwd: Some("/home/u/proj".into()),
            ..Default::default()
        })
        .unwrap();
    turn(&s, 1);
    turn(&s, 2);
    block_on(store.close("pf")).unwrap();

    // Unchanged: the write open adopts the prefetched read, with the same events.
    let before = prefetch::adopted();
    prefetch::start(root.to_path_buf(), "pf");
    prefetch::settle();
    let reader = sessions(root);
    let s = reader.open("pf").unwrap();
    assert_eq!(
        prefetch::adopted(),
        before + 1,
        "the prefetch was not adopted"
    );
    assert_eq!(texts(&s).len(), 2);
    turn(&s, 3);
    block_on(reader.close("pf")).unwrap();

    // Another writer appends after the read (through a symlinked root, so it does not take
    // the prefetch itself): the stale read is discarded and the open sees the new turn.
    let link = tmp.path().with_extension("link");
    std::os::unix::fs::symlink(root, &link).unwrap();
    prefetch::start(root.to_path_buf(), "pf");
    prefetch::settle();
    let writer = sessions(&link);
    let w = writer.open("pf").unwrap();
    turn(&w, 4);
    block_on(writer.close("pf")).unwrap();
    let reader = sessions(root);
    let s = reader.open("pf").unwrap();
    assert_eq!(
        prefetch::adopted(),
        before + 1,
        "a stale prefetch was adopted"
    );
    assert_eq!(texts(&s).len(), 4, "the open lost the other writer's turn");
    block_on(reader.close("pf")).unwrap();
    std::fs::remove_file(&link).unwrap();
}
