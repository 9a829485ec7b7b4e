//! The read-before-write policy (FS_NOT_OBSERVED, FS_STALE_VERSION) through the pipeline.

use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::common::{env, env_opts};

#[tokio::test]
async fn overwrite_needs_a_read_of_the_current_version() {
    let e = env().await;
    let p = e.file("exists.txt", "v1\n");
    let r = e
        .call(
            "write",
            json!({"file_path": "exists.txt", "content": "v2\n"}),
        )
        .await;
    assert_eq!(r.code(), Some(&ToolErrorCode::FsNotObserved));
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot overwrite existing \"{}\" without reading it first — read the file, then retry",
            p.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "v1\n");

    // A windowed read authorizes the write.
    e.call(
        "read",
        json!({"file_path": "exists.txt", "offset": 1, "limit": 1}),
    )
    .await;
    let r = e
        .call(
            "write",
            json!({"file_path": "exists.txt", "content": "v2\n"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.text());

    // Changed behind our back: refused with the remedy.
    std::fs::write(&p, "changed elsewhere\n").unwrap();
    let r = e
        .call(
            "write",
            json!({"file_path": "exists.txt", "content": "v3\n"}),
        )
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_STALE_VERSION));
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot write \"{}\": file changed since it was read — re-read the file, then retry",
            p.display()
        )
    );
    let r = e
        .call(
            "edit",
            json!({"file_path": "exists.txt", "old_string": "changed", "new_string": "x"}),
        )
        .await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot edit \"{}\": file changed since it was read — re-read the file, then retry",
            p.display()
        )
    );
    e.call("read", json!({"file_path": "exists.txt"})).await;
    let r = e
        .call(
            "edit",
            json!({"file_path": "exists.txt", "old_string": "changed", "new_string": "x"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.text());

    // Deleted since read.
    std::fs::remove_file(&p).unwrap();
    let r = e
        .call(
            "write",
            json!({"file_path": "exists.txt", "content": "v4\n"}),
        )
        .await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot write \"{}\": file no longer exists — re-read the file, then retry",
            p.display()
        )
    );
}

#[tokio::test]
async fn edit_requires_a_read_and_new_files_are_free() {
    let e = env().await;
    let p = e.file("e.txt", "abc\n");
    let r = e
        .call(
            "edit",
            json!({"file_path": "e.txt", "old_string": "abc", "new_string": "x"}),
        )
        .await;
    assert_eq!(r.code(), Some(&ToolErrorCode::FsNotObserved));
    assert_eq!(
        r.text(),
        format!(
            "Error: edit requires reading \"{}\" first — read the file, then retry",
            p.display()
        )
    );
    // Never seen and absent: created without a read.
    let r = e
        .call("write", json!({"file_path": "fresh.txt", "content": "new"}))
        .await;
    assert!(!r.is_error);
    // Absent and never read: edit says not found.
    let r = e
        .call(
            "edit",
            json!({"file_path": "nope.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_NOT_FOUND));
}

#[tokio::test]
async fn observations_are_per_session() {
    let mut e = env().await;
    e.file("shared.txt", "x\n");
    e.call("read", json!({"file_path": "shared.txt"})).await;
    e.session = "other-session".into();
    let r = e
        .call("write", json!({"file_path": "shared.txt", "content": "y"}))
        .await;
    assert_eq!(r.code(), Some(&ToolErrorCode::FsNotObserved));
}

#[tokio::test]
async fn without_the_policy_plugin_writes_are_unchecked() {
    let e = env_opts(false).await;
    let p = e.file("free.txt", "x\n");
    let r = e
        .call("write", json!({"file_path": "free.txt", "content": "y"}))
        .await;
    assert!(!r.is_error);
    assert_eq!(std::fs::read_to_string(p).unwrap(), "y");
}

#[tokio::test]
async fn observations_can_be_rebuilt_from_logged_results() {
    let e = env().await;
    let p = e.file("resumed.txt", "v1\n");
    // A result logged in an earlier run of this session (e.g. replayed on resume).
    let logged = e.call("read", json!({"file_path": "resumed.txt"})).await;
    let fresh = env().await; // a new process: empty observations
    let store = fresh
        ._kernel
        .root()
        .get::<dsh_tool_fs::Observations>()
        .unwrap();
    let write = json!({"file_path": p, "content": "v2\n"});
    assert_eq!(
        fresh.call("write", write.clone()).await.code(),
        Some(&ToolErrorCode::FsNotObserved)
    );
    store.record_logged(&fresh.session, "read", false, logged.meta.as_ref());
    let r = fresh.call("write", write).await;
    assert!(!r.is_error, "{}", r.text());
    // Failed or foreign results record nothing.
    store.record_logged(&fresh.session, "bash", false, logged.meta.as_ref());
    store.record_logged(&fresh.session, "read", true, logged.meta.as_ref());
}

/// A resumed session's observations come back from its log: `replay_log` matches each
/// `tool/result` to the name of its `tool/call` on the typed events.
#[test]
fn replay_log_restores_observations_from_typed_events() {
    use dsh_session::{NewEvent, SessionHeader, SessionLog};
    let mut log = SessionLog::new(SessionHeader::new("s-replay", 1_788_000_000_000, None));
    let model = json!({"kind": "model", "provider": "p", "model": "m"});
    let assistant = json!({"role": "assistant", "id": "a1", "source": model, "content": [
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
        {"type": "tool-call", "id": "c2", "name": "bash", "arguments": "{}"},
    ]});
    let result = |id: &str, call: &str, meta: serde_json::Value, is_error: bool| {
        let m = json!({"role": "tool", "id": id, "source": {"kind": "tool", "callId": call},
                       "toolCallId": call, "content": [{"type": "text", "text": "x"}],
                       "isError": is_error});
        NewEvent::new(
            "tool/result",
            json!({"turn": 1, "step": 1, "message": m, "meta": meta}),
        )
    };
    let call = |id: &str, name: &str| {
        NewEvent::new(
            "tool/call",
            json!({"turn": 1, "step": 1, "callId": id, "name": name, "arguments": "{}"}),
        )
    };
    for event in [
        NewEvent::new("turn/start", json!({"turn": 1})),
        NewEvent::new(
            "user/message",
            json!({"role": "user", "id": "u1", "source": {"kind": "user"},
                   "content": [{"type": "text", "text": "go"}]}),
        ),
        NewEvent::new("step/start", json!({"turn": 1, "step": 1})),
        NewEvent::new(
            "assistant/message",
            json!({"turn": 1, "step": 1, "message": assistant, "stream": []}),
        ),
        call("c1", "read"),
        call("c2", "bash"),
        result(
            "r1",
            "c1",
            json!({"path": "/w/a.txt", "version": "v-a"}),
            false,
        ),
        // Not a file tool: its meta is ignored even if it looks like an observation.
        result(
            "r2",
            "c2",
            json!({"path": "/w/b.txt", "version": "v-b"}),
            false,
        ),
    ] {
        log.append(event).unwrap();
    }
    let store = dsh_tool_fs::Observations::default();
    store.replay_log("s-replay", log.events());
    assert_eq!(
        store.get("s-replay", std::path::Path::new("/w/a.txt")),
        Some("v-a".to_owned())
    );
    assert_eq!(
        store.get("s-replay", std::path::Path::new("/w/b.txt")),
        None
    );
}
