//! zstd-compressed logs of the original harness: read (torn final frame recovered), never written.

use std::sync::Arc;

use dsh_session::{CreateOptions, DirectSink, SessionPersistence, SessionStore, Sessions};
use dsh_session_jsonl::JsonlStore;
use ruzstd::encoding::{CompressionLevel, compress_to_vec};

fn store(root: &std::path::Path) -> (Arc<JsonlStore>, SessionStore) {
    let backend = Arc::new(JsonlStore::new(root));
    let p: Arc<dyn SessionPersistence> = backend.clone();
    (
        backend,
        SessionStore::new(Some(p.clone()), Arc::new(DirectSink::new(p))),
    )
}

fn frame(bytes: &[u8]) -> Vec<u8> {
    compress_to_vec(bytes, CompressionLevel::Fastest)
}

#[test]
fn zstd_logs_are_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    // A plain log written by dsh: header + 2 turns.
    let (_, sessions) = store(tmp.path());
    let s = sessions
        .create(CreateOptions {
            id: Some("plain".into()),
            cwd: Some("/z".into()),
            ..Default::default()
        })
        .unwrap();
    for t in 1..=2 {
        s.append(dsh_session::NewEvent::new(
            "turn/start",
            serde_json::json!({"turn": t}),
        ))
        .unwrap();
        s.append(dsh_session::NewEvent::new(
            "turn/end",
            serde_json::json!({"turn": t, "reason": {"kind": "blocked"}}),
        ))
        .unwrap();
    }
    futures::executor::block_on(sessions.close("plain")).unwrap();
    let plain = std::fs::read(tmp.path().join("--z--/plain/session.v4.jsonl")).unwrap();
    let text = String::from_utf8(plain.clone()).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // The original's layout: one frame with the header, then one frame per batch.
    let f1 = frame(lines[1..3].concat().as_bytes());
    let f2 = frame(lines[3..].concat().as_bytes());
    let zdir = tmp.path().join("--z--/zs");
    std::fs::create_dir_all(&zdir).unwrap();
    let zpath = zdir.join("session.v4.jsonl.zstd");
    let header = lines[0].replace("\"plain\"", "\"zs\"");
    let zbytes = [frame(header.as_bytes()), f1.clone(), f2.clone()].concat();
    std::fs::write(&zpath, &zbytes).unwrap();

    let (backend, sessions) = store(tmp.path());
    let read = backend.open_read("zs").unwrap();
    assert_eq!(read.events.len(), 4);
    assert!(!read.torn);
    assert_eq!(sessions.read("zs").unwrap().tracker().last_turn(), 2);
    assert_eq!(
        sessions.export("zs").unwrap(),
        zbytes,
        "export is the stored bytes"
    );

    // A torn final frame keeps the complete frames before it.
    let head_len = zbytes.len() - f2.len();
    for cut in [head_len + 1, head_len + f2.len() / 2, zbytes.len() - 1] {
        std::fs::write(&zpath, &zbytes[..cut]).unwrap();
        let read = backend.open_read("zs").unwrap();
        assert!(read.torn, "cut {cut}");
        assert_eq!(read.events.len(), 2, "cut {cut}");
    }
    std::fs::write(&zpath, &zbytes).unwrap();

    // Writes are refused clearly (no encoder), never by adding a plain generation.
    let err = sessions.open("zs").unwrap_err();
    assert_eq!(err.code(), "SESSION_UNSUPPORTED");
    assert!(err.to_string().contains("cannot append"), "{err}");
    assert!(!zdir.join("session.v4.jsonl").exists());

    // One encoding per directory.
    std::fs::write(zdir.join("session.v3.jsonl"), b"").unwrap();
    let err = backend.open_read("zs").unwrap_err();
    assert!(err.to_string().contains("mixes plain and zstd"), "{err}");
}
