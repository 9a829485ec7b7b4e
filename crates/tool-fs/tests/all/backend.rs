//! A session whose files are served by a [`FileBackend`]: the same texts, limits and errors as
//! the local file system, read-before-write checked against the backend's text, and the
//! backend's failures as the fs codes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_tool_fs::{BackendError, BackendRegistration, FileBackend, FileBackends};
use dsh_tools::{ToolErrorCode, ToolRequest, ToolResult};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::common::{Env, env};

/// Serves the disk's files as text, except those it holds in "buffers" (an editor's unsaved
/// changes); writes go to the buffers.
#[derive(Default)]
struct Buffers {
    held: Mutex<HashMap<PathBuf, String>>,
    refuse: Mutex<Option<String>>,
}

impl FileBackend for Buffers {
    fn name(&self) -> &str {
        "the test editor"
    }

    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, BackendError>> {
        Box::pin(async move {
            if let Some(why) = self.refuse.lock().clone() {
                return Err(BackendError::Failed(why));
            }
            if let Some(t) = self.held.lock().get(path) {
                return Ok(t.clone());
            }
            match std::fs::read_to_string(path) {
                Ok(t) => Ok(t),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BackendError::NotFound),
                Err(e) => Err(BackendError::Failed(e.to_string())),
            }
        })
    }

    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            if let Some(why) = self.refuse.lock().clone() {
                return Err(BackendError::Failed(why));
            }
            self.held
                .lock()
                .insert(path.to_path_buf(), content.to_owned());
            Ok(())
        })
    }
}

const VIA: &str = "sess-via-backend";

async fn with_backend() -> (Env, Arc<Buffers>, BackendRegistration) {
    let e = env().await;
    let buffers = Arc::new(Buffers::default());
    let backends = e._kernel.root().get::<FileBackends>().unwrap();
    let reg = backends.set(VIA, buffers.clone());
    (e, buffers, reg)
}

async fn call_via(e: &Env, name: &str, args: &Value) -> ToolResult {
    let mut req = ToolRequest::new("call_via", name, args.to_string(), VIA, e.cwd());
    req.scratch_dir = Some(e.scratch.path().to_path_buf());
    e.tools.execute(req).await
}

#[tokio::test]
async fn reads_through_the_backend_match_local_reads() {
    let (e, _buffers, _reg) = with_backend().await;
    e.file("lines.txt", "one\ntwo\r\nthree\nfour\n");
    e.file("empty.txt", "");
    e.file("long.txt", format!("{}\nshort\n", "é".repeat(2500)));
    e.file(
        "wide.txt",
        (0..100)
            .map(|_| format!("{}\n", "x".repeat(1000)))
            .collect::<String>(),
    );
    e.file("bin.dat", b"text\0more");
    let cases = [
        json!({"file_path": "lines.txt"}),
        json!({"file_path": "lines.txt", "offset": 2, "limit": 2}),
        json!({"file_path": "lines.txt", "offset": 9}),
        json!({"file_path": "empty.txt"}),
        json!({"file_path": "long.txt"}),
        json!({"file_path": "wide.txt"}),
        json!({"file_path": "wide.txt", "offset": 60, "limit": 5}),
        json!({"file_path": "bin.dat"}),
        json!({"file_path": "missing.txt"}),
        json!({"file_path": "lines.txt", "limit": 2001}),
    ];
    for args in cases {
        let local = e.call("read", args.clone()).await;
        let via = call_via(&e, "read", &args).await;
        assert_eq!(via.text(), local.text(), "{args}");
        assert_eq!(via.code(), local.code(), "{args}");
        if !local.is_error {
            let (l, v) = (local.meta.unwrap(), via.meta.unwrap());
            assert_eq!(v["lines"], l["lines"], "{args}");
            assert_eq!(v["totalLines"], l["totalLines"], "{args}");
            assert!(v["version"].as_str().unwrap().starts_with("text:"), "{v}");
        }
    }
}

#[tokio::test]
async fn writes_and_edits_land_in_the_backend_with_the_local_texts() {
    let (e, buffers, _reg) = with_backend().await;
    let crlf = e.file("crlf.txt", "a\r\nb\r\nb\r\n");
    // The editor holds an unsaved version of notes.txt; the disk has another.
    let notes = e.file("notes.txt", "disk\n");
    buffers
        .held
        .lock()
        .insert(notes.clone(), "buffer x\nbuffer y\n".into());

    // Never read: refused like a local file would be.
    let r = call_via(
        &e,
        "edit",
        &json!({"file_path": "notes.txt", "old_string": "x", "new_string": "z"}),
    )
    .await;
    assert_eq!(r.code(), Some(&ToolErrorCode::FsNotObserved));
    let r = call_via(&e, "read", &json!({"file_path": "notes.txt"})).await;
    assert!(
        r.text().contains("1: buffer x\n2: buffer y"),
        "{}",
        r.text()
    );
    let r = call_via(
        &e,
        "edit",
        &json!({"file_path": "notes.txt", "old_string": "x", "new_string": "z"}),
    )
    .await;
    assert_eq!(
        r.text(),
        format!(
            "The file {} has been updated successfully.",
            notes.display()
        )
    );
    assert_eq!(buffers.held.lock()[&notes], "buffer z\nbuffer y\n");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "disk\n");
    // The edit's result is the new observation: a second edit needs no re-read.
    let r = call_via(
        &e,
        "edit",
        &json!({"file_path": "notes.txt", "old_string": "y", "new_string": "w"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.text());
    // Changed in the editor since: stale.
    buffers
        .held
        .lock()
        .insert(notes.clone(), "typed by the user\n".into());
    let r = call_via(
        &e,
        "write",
        &json!({"file_path": "notes.txt", "content": "mine"}),
    )
    .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_STALE_VERSION));
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot write \"{}\": file changed since it was read — re-read the file, then retry",
            notes.display()
        )
    );

    // Edit errors and the CRLF style, as local.
    call_via(&e, "read", &json!({"file_path": "crlf.txt"})).await;
    e.call("read", json!({"file_path": "crlf.txt"})).await;
    for args in [
        json!({"file_path": "crlf.txt", "old_string": "nope", "new_string": "x"}),
        json!({"file_path": "crlf.txt", "old_string": "b", "new_string": "c"}),
    ] {
        let local = e.call("edit", args.clone()).await;
        let via = call_via(&e, "edit", &args).await;
        assert_eq!(via.text(), local.text(), "{args}");
        assert_eq!(via.code(), local.code());
    }
    let args =
        json!({"file_path": "crlf.txt", "old_string": "b", "new_string": "c", "replace_all": true});
    let via = call_via(&e, "edit", &args).await;
    assert!(!via.is_error, "{}", via.text());
    assert_eq!(buffers.held.lock()[&crlf], "a\r\nc\r\nc\r\n");
    let local = e.call("edit", args).await;
    assert_eq!(via.text(), local.text());
    assert_eq!(std::fs::read_to_string(&crlf).unwrap(), "a\r\nc\r\nc\r\n");

    // Created vs updated, as local.
    let fresh = e.path("fresh.txt");
    let r = call_via(
        &e,
        "write",
        &json!({"file_path": "fresh.txt", "content": "new\n"}),
    )
    .await;
    assert_eq!(
        r.text(),
        format!(
            "<path>{}</path>\n<type>file</type>\n<content>\nCreated file\n</content>",
            fresh.display()
        )
    );
    assert_eq!(r.meta.as_ref().unwrap()["created"], true);
    assert!(!fresh.exists());
    let r = call_via(
        &e,
        "write",
        &json!({"file_path": "fresh.txt", "content": "newer\n"}),
    )
    .await;
    assert!(r.text().contains("Updated file"), "{}", r.text());
    assert_eq!(buffers.held.lock()[&fresh], "newer\n");
}

#[tokio::test]
async fn backend_failures_are_fs_errors_and_unsetting_returns_to_disk() {
    let (e, buffers, reg) = with_backend().await;
    let p = e.file("a.txt", "disk\n");
    *buffers.refuse.lock() = Some("the buffer is locked".into());
    let r = call_via(&e, "read", &json!({"file_path": "a.txt"})).await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_IO_ERROR));
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot read \"{}\": the test editor: the buffer is locked",
            p.display()
        )
    );
    let r = call_via(&e, "write", &json!({"file_path": "b.txt", "content": "x"})).await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot write \"{}\": the test editor: the buffer is locked",
            e.path("b.txt").display()
        )
    );
    // glob and grep stay local whatever the backend says.
    let r = call_via(&e, "grep", &json!({"pattern": "disk"})).await;
    assert!(r.text().contains("a.txt"), "{}", r.text());
    drop(reg);
    let r = call_via(&e, "read", &json!({"file_path": "a.txt"})).await;
    assert!(r.text().contains("1: disk"), "{}", r.text());
}
