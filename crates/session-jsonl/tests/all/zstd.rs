//! zstd-compressed logs (the original harness's default): read (torn final frame recovered),
//! continued in zstd, and written for new sessions when configured.

use std::sync::Arc;

use dsh_session::{CreateOptions, DirectSink, SessionPersistence, SessionStore, Sessions};
use dsh_session_jsonl::{Compression, JsonlStore};
use ruzstd::encoding::{CompressionLevel, compress_to_vec};

use crate::support::store;

fn frame(bytes: &[u8]) -> Vec<u8> {
    compress_to_vec(bytes, CompressionLevel::Fastest)
}

#[test]
fn zstd_logs_are_read_and_continued_in_zstd() {
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
    let mut plain_zs = header.clone().into_bytes();
    plain_zs.extend(lines[1..].concat().into_bytes());
    assert_eq!(
        sessions.export("zs").unwrap(),
        plain_zs,
        "export is the log as plain JSONL"
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

    // A write open continues the log in zstd: one frame per batch, never a plain generation.
    let s = sessions.open("zs").unwrap();
    s.append(dsh_session::NewEvent::new(
        "turn/start",
        serde_json::json!({"turn": 3}),
    ))
    .unwrap();
    futures::executor::block_on(sessions.close("zs")).unwrap();
    assert!(!zdir.join("session.v4.jsonl").exists());
    let grown = std::fs::read(&zpath).unwrap();
    assert!(
        grown.starts_with(&zbytes),
        "earlier frames are kept byte for byte"
    );
    assert_eq!(
        frame_starts(&grown).len(),
        3 + 1,
        "end-seed + turn batched in one frame"
    );
    let (_, sessions) = store(tmp.path());
    let log = sessions.read("zs").unwrap();
    assert_eq!(log.events().len(), 6);
    assert_eq!(log.tracker().last_turn(), 3);
    std::fs::write(&zpath, &zbytes).unwrap();

    // One encoding per directory (an empty file is no generation: a non-empty one).
    std::fs::write(zdir.join("session.v3.jsonl"), b"{}\n").unwrap();
    let err = backend.open_read("zs").unwrap_err();
    assert!(err.to_string().contains("mixes plain and zstd"), "{err}");
}

/// Offsets of the zstd frames in `bytes` (walks frames by decoding each).
fn frame_starts(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        out.push(at);
        let mut src = &bytes[at..];
        let mut dec = ruzstd::decoding::FrameDecoder::new();
        dec.reset(&mut src).unwrap();
        dec.decode_blocks(&mut src, ruzstd::decoding::BlockDecodingStrategy::All)
            .unwrap();
        at = bytes.len() - src.len();
    }
    out
}

fn turn(s: &dsh_session::Session, t: u64) {
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

/// `compression: zstd`: new sessions are written as the original writes them — frame 1 is exactly
/// the header line, then one frame per flush — listed, read back, and a torn final frame is cut
/// away (its complete lines written again as one frame) by the next write open.
#[test]
fn new_sessions_are_written_as_zstd_frames_when_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let backend = Arc::new(JsonlStore::new(tmp.path()).with_compression(Compression::Zstd));
    let p: Arc<dyn SessionPersistence> = backend.clone();
    let sessions = SessionStore::new(Some(p.clone()), Arc::new(DirectSink::new(p)));
    let s = sessions
        .create(CreateOptions {
            id: Some("z1".into()),
            cwd: Some("/w".into()),
            ..Default::default()
        })
        .unwrap();
    turn(&s, 1);
    futures::executor::block_on(s.flush()).unwrap();
    turn(&s, 2);
    futures::executor::block_on(s.flush()).unwrap();
    futures::executor::block_on(sessions.close("z1")).unwrap();
    let path = tmp.path().join("--w--/z1/session.v4.jsonl.zstd");
    let bytes = std::fs::read(&path).unwrap();
    assert!(!tmp.path().join("--w--/z1/session.v4.jsonl").exists());
    let starts = frame_starts(&bytes);
    assert_eq!(starts.len(), 3, "header frame, then one frame per flush");
    let header = dsh_session_jsonl::zstd::first_frame(&bytes)
        .unwrap()
        .unwrap();
    assert!(header.starts_with(b"{\"type\":\"session\""));
    assert_eq!(header.iter().filter(|b| **b == b'\n').count(), 1);
    for at in &starts {
        assert_eq!(
            bytes[at + 4],
            0x04,
            "frame descriptor as the original writes it"
        );
    }
    let listed = backend.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "z1");
    assert_eq!(listed[0].cwd.as_deref(), Some("/w"));
    assert_eq!(sessions.read("z1").unwrap().events().len(), 4);

    // Cut the last frame (a crash mid-write): resume drops it, truncates, and continues.
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let (_, sessions) = store(tmp.path());
    let s = sessions.open("z1").unwrap();
    turn(&s, 3);
    futures::executor::block_on(sessions.close("z1")).unwrap();
    let healed = std::fs::read(&path).unwrap();
    assert!(healed.starts_with(&bytes[..starts[2]]));
    let (_, sessions) = store(tmp.path());
    let log = sessions.read("z1").unwrap();
    assert_eq!(log.tracker().last_turn(), 3);
    let kinds: Vec<&str> = log.events().iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        [
            "turn/start",
            "turn/end",
            "session/end-seed",
            "turn/start",
            "turn/end"
        ]
    );
}

/// The default stays plain JSONL.
#[test]
fn the_default_encoding_is_plain() {
    let tmp = tempfile::tempdir().unwrap();
    let (backend, sessions) = store(tmp.path());
    assert_eq!(backend.compression(), Compression::None);
    let s = sessions
        .create(CreateOptions {
            id: Some("p1".into()),
            cwd: Some("/w".into()),
            ..Default::default()
        })
        .unwrap();
    turn(&s, 1);
    futures::executor::block_on(sessions.close("p1")).unwrap();
    assert!(tmp.path().join("--w--/p1/session.v4.jsonl").exists());
}
