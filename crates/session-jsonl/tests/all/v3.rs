//! A v3 log on disk: read converts in memory; a write open publishes `session.v4.jsonl` and
//! leaves the v3 file byte-identical.

use std::path::Path;
use std::sync::Arc;

use dsh_session::{DirectSink, SessionPersistence, SessionStore, Sessions};
use dsh_session_jsonl::JsonlStore;
use serde_json::{Value, json};

/// Loads a fixture with the README's recipe (placeholders filled, seq/time added).
fn fixture_bytes(rel: &str) -> Vec<u8> {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/upstream-sessions"
    ))
    .join(rel);
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.replace(
        "\"{{tools}}\"",
        r#"[{"name":"bash","description":"d","parameters":{"type":"object"}}]"#,
    );
    let text = text
        .replace("{{cwd}}", "/w")
        .replace("{{session:1}}", "v3-session");
    let mut out = Vec::new();
    let mut created = 0;
    for (i, line) in text.lines().enumerate() {
        let line = fill(line);
        let mut v: Value = serde_json::from_str(&line).unwrap();
        if i == 0 {
            created = v["createdAt"].as_i64().unwrap();
        } else {
            v["seq"] = json!(i - 1);
            v["time"] = json!(created + i as i64);
        }
        out.extend(serde_json::to_vec(&v).unwrap());
        out.push(b'\n');
    }
    out
}

fn fill(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("{{") {
        let j = rest[i..].find("}}").unwrap();
        out.push_str(&rest[..i]);
        out.push_str(&rest[i + 2..i + j].replace([':', '-'], "_"));
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

#[test]
fn v3_is_read_in_memory_and_a_write_open_publishes_v4() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("--w--").join("v3-session");
    std::fs::create_dir_all(&dir).unwrap();
    let v3 = fixture_bytes("v3/bash-tool/session.v3.jsonl");
    std::fs::write(dir.join("session.v3.jsonl"), &v3).unwrap();

    let backend = Arc::new(JsonlStore::new(tmp.path()));
    let p: Arc<dyn SessionPersistence> = backend.clone();
    let sessions = SessionStore::new(Some(Arc::clone(&p)), Arc::new(DirectSink::new(p)));
    let read = sessions.read("v3-session").unwrap();
    assert_eq!(read.header().version, 4);
    assert_eq!(read.events()[15].data()["message"]["role"], "tool");
    assert!(
        !dir.join("session.v4.jsonl").exists(),
        "a read open writes nothing"
    );

    let s = sessions.open("v3-session").unwrap();
    futures::executor::block_on(sessions.close("v3-session")).unwrap();
    assert_eq!(
        std::fs::read(dir.join("session.v3.jsonl")).unwrap(),
        v3,
        "v3 stays byte-identical"
    );
    let v4 = std::fs::read_to_string(dir.join("session.v4.jsonl")).unwrap();
    assert!(v4.starts_with(r#"{"type":"session","version":4,"id":"v3-session""#));
    assert_eq!(v4.lines().count(), 1 + s.events().len());
    // later opens select v4 (highest generation) and never convert again
    let summary = &sessions.list().unwrap()[0];
    assert_eq!(summary.version, 4);
    let again = sessions.read("v3-session").unwrap();
    assert_eq!(again.events().len(), s.events().len());
    for (a, b) in again.events().iter().zip(s.events()) {
        assert_eq!(**a, *b);
    }
}
