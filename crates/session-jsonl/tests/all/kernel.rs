//! The plugins on a real kernel: `sessions` + `session-jsonl`, events through `session/event`,
//! durability through `session/flush`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_kernel::{Kernel, PluginRegistry};
use dsh_session::{CreateOptions, NewEvent, SessionEvent, Sessions, SessionsPlugin};
use dsh_session_jsonl::JsonlPlugin;
use serde_json::json;

#[tokio::test]
async fn sessions_persist_through_kernel_events() {
    let tmp = tempfile::tempdir().unwrap();
    let mut registry = PluginRegistry::new();
    registry
        .register::<SessionsPlugin>()
        .register::<JsonlPlugin>();
    let kernel = Kernel::new(registry);
    let sessions_fiber = kernel.mount("sessions", json!({})).unwrap();
    let jsonl = kernel
        .mount("session-jsonl", json!({"root": tmp.path()}))
        .unwrap();
    sessions_fiber.ready().await.unwrap();
    jsonl.ready().await.unwrap();
    let root = kernel.root();

    // A throwing observer never starves the others (nor the persistence listener).
    let seen = Arc::new(AtomicUsize::new(0));
    root.on::<SessionEvent>(|_| Err("observer failure".into()))
        .unwrap();
    let counter = Arc::clone(&seen);
    root.on::<SessionEvent>(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();

    let sessions = root.get::<dyn Sessions>().unwrap();
    let s = sessions
        .create(CreateOptions {
            id: Some("k1".into()),
            cwd: Some("/w".into()),
            ..Default::default()
        })
        .unwrap();
    s.append(NewEvent::new("turn/start", json!({"turn": 1})))
        .unwrap();
    s.append(NewEvent::new(
        "turn/end",
        json!({"turn": 1, "reason": {"kind": "blocked"}}),
    ))
    .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    // The plugin writes zstd by default (the original's encoding).
    let path = tmp
        .path()
        .join("--w--")
        .join("k1")
        .join("session.v4.jsonl.zstd");
    let read = |p: &std::path::Path| {
        let (plain, torn) =
            dsh_session_jsonl::zstd::decompress_frames(&std::fs::read(p).unwrap()).unwrap();
        assert!(!torn);
        String::from_utf8(plain).unwrap()
    };
    assert!(!path.exists(), "buffered until the barrier");
    s.flush().await.unwrap();
    assert_eq!(read(&path).lines().count(), 3);

    // unloading the kernel flushes and releases everything
    s.append(NewEvent::new("dsh/note", json!({"n": 1})))
        .unwrap();
    kernel.dispose().await;
    let text = read(&path);
    assert_eq!(text.lines().count(), 4);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains(r#""type":"dsh/note","data":{"n":1},"ignorable":true"#)
    );
}
