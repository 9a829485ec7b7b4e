//! The JSONL backend on real files in temp dirs, with real second processes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use dsh_session::{CreateOptions, NewEvent, SessionError, SessionPersistence, Sessions};
use dsh_session_jsonl::JsonlStore;
use futures::executor::block_on;
use serde_json::json;

use crate::support::store;

fn opts(id: &str) -> CreateOptions {
    CreateOptions {
        id: Some(id.into()),
        cwd: Some("/home/u/proj".into()),
        ..Default::default()
    }
}

fn user(id: &str, text: &str) -> NewEvent {
    NewEvent::new(
        "user/message",
        json!({"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": id}),
    )
}

/// A complete turn: turn/start, step/start, user, assistant, step/end, turn/end.
fn turn(s: &dsh_session::Session, t: u64) {
    s.append(NewEvent::new("turn/start", json!({"turn": t})))
        .unwrap();
    s.append(NewEvent::new("step/start", json!({"turn": t, "step": 1})))
        .unwrap();
    s.append(user(&format!("u{t}"), "hello")).unwrap();
    s.append(NewEvent::new("assistant/message", json!({"turn": t, "step": 1, "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": format!("a{t}")}, "stream": []}))).unwrap();
    s.append(NewEvent::new("step/end", json!({"turn": t, "step": 1})))
        .unwrap();
    s.append(NewEvent::new(
        "turn/end",
        json!({"turn": t, "reason": {"kind": "completed"}}),
    ))
    .unwrap();
}

fn log_path(root: &Path, id: &str) -> std::path::PathBuf {
    root.join("--home-u-proj--")
        .join(id)
        .join("session.v4.jsonl")
}

#[test]
fn nothing_on_disk_before_the_first_flush_then_layout_of_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("main-session-1")).unwrap();
    assert!(!tmp.path().join("--home-u-proj--").exists());
    turn(&s, 1);
    assert!(
        !tmp.path().join("--home-u-proj--").exists(),
        "appends are buffered"
    );
    block_on(s.flush()).unwrap();
    let path = log_path(tmp.path(), "main-session-1");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7);
    assert!(
        lines[0].starts_with(r#"{"type":"session","version":4,"id":"main-session-1","createdAt":"#)
    );
    assert!(text.ends_with('\n'));
    assert_eq!(
        lines[1],
        format!(
            r#"{{"type":"turn/start","data":{{"turn":1}},"seq":0,"time":{}}}"#,
            s.events()[0].time()
        )
    );
    assert!(path.with_file_name("session.lock").exists());
    // no temporaries left behind
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn written_closed_and_reopened_yields_identical_events() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-reopen")).unwrap();
    turn(&s, 1);
    block_on(s.flush()).unwrap();
    turn(&s, 2);
    let before = s.events();
    block_on(sessions.close("s-reopen")).unwrap();
    assert!(
        s.append(user("late", "x")).is_err(),
        "closed handles refuse appends"
    );

    let (_, sessions) = store(tmp.path());
    let s2 = sessions.open("s-reopen").unwrap();
    let after = s2.events();
    assert_eq!(&after[..before.len()], &before[..]);
    // resuming a balanced log adds only the restored/live marker, once
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after.last().unwrap().kind(), "session/end-seed");
    assert_eq!(s2.derive_messages().len(), 4);
    block_on(sessions.close("s-reopen")).unwrap();
    let (_, sessions) = store(tmp.path());
    let s3 = sessions.open("s-reopen").unwrap();
    assert_eq!(
        s3.events().len(),
        after.len(),
        "an untouched reopen does not grow the log"
    );
    let read = sessions.read("s-reopen").unwrap();
    assert_eq!(read.events().len(), after.len());
}

#[test]
fn crash_repair_on_open_is_persisted_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-crash")).unwrap();
    turn(&s, 1);
    s.append(NewEvent::new("turn/start", json!({"turn": 2})))
        .unwrap();
    s.append(NewEvent::new("step/start", json!({"turn": 2, "step": 1})))
        .unwrap();
    s.append(NewEvent::new("assistant/message", json!({"turn": 2, "step": 1, "message": {"role": "assistant", "content": [{"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a2"}, "stream": []}))).unwrap();
    block_on(s.flush()).unwrap();
    drop((s, sessions)); // "crash": the lock dies with the store

    let (_, sessions) = store(tmp.path());
    let s = sessions.open("s-crash").unwrap();
    let kinds: Vec<_> = s.events()[9..]
        .iter()
        .map(|e| e.kind().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["tool/result", "step/end", "turn/end", "session/end-seed"]
    );
    block_on(sessions.close("s-crash")).unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.open("s-crash").unwrap();
    assert_eq!(s.events().len(), 13, "repair happens once");
}

#[test]
fn torn_writes_at_every_byte_of_the_last_line_recover_all_complete_events() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-torn")).unwrap();
    turn(&s, 1);
    s.append(NewEvent::new("turn/start", json!({"turn": 2})))
        .unwrap();
    block_on(sessions.close("s-torn")).unwrap();
    let path = log_path(tmp.path(), "s-torn");
    let full = std::fs::read(&path).unwrap();
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    for cut in last_start..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let (backend, sessions) = store(tmp.path());
        let read = backend.open_read("s-torn").unwrap();
        assert_eq!(read.events.len(), 6, "cut at {cut}");
        assert_eq!(read.torn, cut > last_start);
        // a write open truncates the torn bytes, repairs nothing (turn 1 is closed) and appends
        let s = sessions.open("s-torn").unwrap();
        assert_eq!(s.events().len(), 7);
        block_on(sessions.close("s-torn")).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..last_start], &full[..last_start]);
        assert!(bytes.ends_with(b"\n"));
        assert_eq!(backend.open_read("s-torn").unwrap().events.len(), 7);
    }
    // the complete file: nothing torn, the open turn 2 is repaired
    std::fs::write(&path, &full).unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.open("s-torn").unwrap();
    assert_eq!(s.events()[7].kind(), "turn/end");
}

#[test]
fn corruption_before_a_committed_turn_end_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-bad")).unwrap();
    turn(&s, 1);
    block_on(sessions.close("s-bad")).unwrap();
    let path = log_path(tmp.path(), "s-bad");
    let text = std::fs::read_to_string(&path).unwrap();
    let broken = text.replacen("\"seq\":2", "\"seq\":9", 1);
    std::fs::write(&path, broken).unwrap();
    let (_, sessions) = store(tmp.path());
    let err = sessions.open("s-bad").unwrap_err();
    assert_eq!(err.code(), "SESSION_CORRUPT", "{err}");
    assert!(err.to_string().contains("session.v4.jsonl"), "{err}");
}

#[test]
fn newer_and_older_versions_are_refused_as_unsupported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("--x--").join("s-new");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("session.v4.jsonl"), b"{\"type\":\"session\",\"version\":4,\"id\":\"s-new\",\"createdAt\":1,\"isSeeded\":false,\"delegationDepth\":0}\n").unwrap();
    std::fs::write(
        dir.join("session.v5.jsonl"),
        b"{\"type\":\"session\",\"version\":5,\"id\":\"s-new\",\"future\":[1]}\n",
    )
    .unwrap();
    let (backend, sessions) = store(tmp.path());
    let err = sessions.open("s-new").unwrap_err();
    assert_eq!(err.code(), "SESSION_UNSUPPORTED");
    let msg = err.to_string();
    assert!(
        msg.starts_with("session \"s-new\" uses log format v5, but dsh reads only v3 and v4"),
        "{msg}"
    );
    assert!(
        msg.contains("upgrade dsh") && msg.contains("session.v5.jsonl"),
        "{msg}"
    );
    assert!(!msg.contains("corrupt"));
    assert!(
        backend.open_read("s-new").is_err(),
        "never falls back to v4"
    );

    let dir = tmp.path().join("--x--").join("s-old");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("session.v2.jsonl"),
        b"{\"type\":\"session\",\"version\":2,\"id\":\"s-old\"}\n",
    )
    .unwrap();
    let msg = sessions.open("s-old").unwrap_err().to_string();
    assert!(msg.contains("older than the supported v3"), "{msg}");
}

#[test]
fn second_writer_in_process_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (backend, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-lock")).unwrap();
    turn(&s, 1);
    block_on(s.flush()).unwrap();
    let err = backend.open_write("s-lock").unwrap_err();
    assert_eq!(err.code(), "SESSION_LOCKED");
    // another store (another handle on the same files) is refused by the flock
    let (other, _) = store(tmp.path());
    assert!(matches!(
        other.open_write("s-lock"),
        Err(SessionError::Locked(_))
    ));
    block_on(sessions.close("s-lock")).unwrap();
    other.open_write("s-lock").unwrap();
}

const CHILD_ENV: &str = "DSH_JSONL_LOCK_CHILD_ROOT";

/// Child half of the two-process test: holds the write lock until stdin closes.
#[test]
fn lock_holder_child() {
    let Ok(root) = std::env::var(CHILD_ENV) else {
        return;
    };
    // Safety net: never outlive a vanished parent.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(60));
        std::process::exit(3);
    });
    let backend = JsonlStore::new(root);
    let line = match backend.open_write("s-proc") {
        Ok(_) => "HOLDING\n".to_string(),
        Err(e) => format!("FAILED {e}\n"),
    };
    let mut out = std::io::stdout();
    out.write_all(line.as_bytes()).unwrap();
    out.flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

#[test]
fn a_second_process_opening_for_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-proc")).unwrap();
    turn(&s, 1);
    block_on(sessions.close("s-proc")).unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store::lock_holder_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let status_line = loop {
        match lines.next() {
            // libtest prints "test <name> ... " right before the child's own output
            Some(Ok(l)) if l.contains("HOLDING") || l.contains("FAILED ") => break l,
            Some(Ok(_)) => continue,
            _ => panic!("child exited without reporting"),
        }
    };
    assert!(status_line.ends_with("HOLDING"), "{status_line}");
    let (backend, sessions) = store(tmp.path());
    let err = sessions.open("s-proc").unwrap_err();
    assert_eq!(err.code(), "SESSION_LOCKED", "{err}");
    assert!(backend.open_read("s-proc").is_ok(), "reads take no lock");
    drop(child.stdin.take()); // the child exits; its lock dies with it
    assert!(child.wait().unwrap().success());
    sessions.open("s-proc").unwrap();
}

#[test]
fn list_export_and_ids_sort_by_creation() {
    let tmp = tempfile::tempdir().unwrap();
    let (backend, sessions) = store(tmp.path());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let s = sessions
            .create(CreateOptions {
                cwd: Some("/srv/my app".into()),
                ..Default::default()
            })
            .unwrap();
        turn(&s, 1);
        block_on(s.flush()).unwrap();
        ids.push(s.id().to_string());
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "uuid v7 ids sort by creation");
    assert!(ids[0].starts_with("session-"));
    let listed: Vec<_> = sessions.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, ids);
    let raw = sessions.export(&ids[1]).unwrap();
    let path = tmp
        .path()
        .join("--srv-my~0020app--")
        .join(&ids[1])
        .join("session.v4.jsonl");
    assert_eq!(raw, std::fs::read(path).unwrap());
    assert!(matches!(
        backend.export_raw("nope"),
        Err(SessionError::NotFound(_))
    ));
}

#[test]
fn fork_boundaries() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-parent")).unwrap();
    turn(&s, 1);
    turn(&s, 2);
    s.append(NewEvent::new("turn/start", json!({"turn": 3})))
        .unwrap(); // 12: open turn
    // default boundary: the latest completed turn
    let child = sessions
        .fork(
            "s-parent",
            dsh_session::ForkOptions {
                child_id: Some("s-child".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let ev = child.events();
    assert_eq!(ev.len(), 13);
    assert_eq!(ev[11].kind(), "turn/end");
    assert_eq!(ev[12].data(), &json!({"inherited": true}));
    let h = child.header();
    assert!(h.is_seeded);
    assert_eq!(h.parent_session.as_deref(), Some("s-parent"));
    assert_eq!(h.cwd.as_deref(), Some("/home/u/proj"));
    // an explicit earlier boundary at a turn end is fine
    let c2 = sessions
        .fork(
            "s-parent",
            dsh_session::ForkOptions {
                boundary: Some(5),
                subagent: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(c2.events().len(), 7);
    assert_eq!(c2.header().delegation_depth, 1);
    assert_eq!(c2.header().origin.as_deref(), Some("subagent"));
    // a boundary inside an open turn is refused
    for b in [2, 12] {
        let err = sessions
            .fork(
                "s-parent",
                dsh_session::ForkOptions {
                    boundary: Some(b),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(err.code(), "FORK_REFUSED", "{b}: {err}");
    }
    // a duplicate child id is refused
    let err = sessions
        .fork(
            "s-parent",
            dsh_session::ForkOptions {
                child_id: Some("s-child".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "SESSION_EXISTS");
    // the child is persisted and reopens with its inherited prefix
    block_on(sessions.close("s-child")).unwrap();
    let (_, again) = store(tmp.path());
    let reopened = again.read("s-child").unwrap();
    assert_eq!(reopened.inherited_cut(), Some(12));
    assert_eq!(reopened.derive_messages().len(), 4);
}

#[test]
fn a_refused_log_is_never_modified_by_a_write_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("--x--").join("s-refused");
    std::fs::create_dir_all(&dir).unwrap();
    // a well-formed row that violates the rules (a step outside any turn), then a torn tail
    let bytes = b"{\"type\":\"session\",\"version\":4,\"id\":\"s-refused\",\"createdAt\":1,\"isSeeded\":false,\"delegationDepth\":0}\n{\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1},\"seq\":0,\"time\":1}\n{\"type\":\"turn/st";
    std::fs::write(dir.join("session.v4.jsonl"), bytes).unwrap();
    let (_, sessions) = store(tmp.path());
    let err = sessions.open("s-refused").unwrap_err();
    assert_eq!(err.code(), "SESSION_CORRUPT", "{err}");
    assert_eq!(std::fs::read(dir.join("session.v4.jsonl")).unwrap(), bytes);
    // the lock was released: another open is refused for the same reason, not as locked
    assert_eq!(
        sessions.open("s-refused").unwrap_err().code(),
        "SESSION_CORRUPT"
    );
}

#[test]
fn write_through_hands_appends_to_the_file_before_the_turn_end() {
    let tmp = tempfile::tempdir().unwrap();
    let (backend, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-through")).unwrap();
    // Before the file exists, write-through publishes it like a flush.
    s.append(NewEvent::new("turn/start", json!({"turn": 1})))
        .unwrap();
    block_on(s.write_through()).unwrap();
    assert_eq!(backend.open_read("s-through").unwrap().events.len(), 1);
    // Later appends reach the file (a reader in another process would see them).
    s.append(NewEvent::new("step/start", json!({"turn": 1, "step": 1})))
        .unwrap();
    s.append(user("u1", "hello")).unwrap();
    block_on(s.write_through()).unwrap();
    let path = log_path(tmp.path(), "s-through");
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4);
    assert_eq!(backend.open_read("s-through").unwrap().events.len(), 3);
    // Nothing buffered: a second write-through writes nothing.
    block_on(s.write_through()).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4);
}

#[test]
fn an_empty_log_file_is_no_session() {
    // What a power loss can leave of a session whose first write-through published its file
    // without fsync: the name, with no bytes. Nothing was committed there.
    let tmp = tempfile::tempdir().unwrap();
    let (backend, sessions) = store(tmp.path());
    let s = sessions.create(opts("s-kept")).unwrap();
    turn(&s, 1);
    block_on(s.flush()).unwrap();
    let dir = tmp.path().join("--home-u-proj--").join("s-cut");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("session.v4.jsonl"), b"").unwrap();
    let listed: Vec<String> = backend.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, ["s-kept"]);
    let err = backend.open_read("s-cut").unwrap_err();
    assert_eq!(err.code(), "SESSION_NOT_FOUND", "{err}");
}
