//! `dsh acp` using the client's files (`fs/read_text_file`, `fs/write_text_file`): a real
//! ACP client built on the `agent-client-protocol` crate's client side drives the real binary
//! and serves in-memory buffers that differ from the disk, as an editor with unsaved changes
//! does.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, FileSystemCapabilities, InitializeRequest, NewSessionRequest,
    PromptRequest, ReadTextFileRequest, ReadTextFileResponse, StopReason, TextContent,
    WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::{Agent, Client, Error, Lines};
use dsh_testkit::Completion;
use serde_json::json;

use crate::support::{Env, request_messages};

const BOUND: Duration = Duration::from_secs(60);

/// One fs request the editor was sent: `(method, path, line, limit)`.
type Asked = (String, PathBuf, Option<u32>, Option<u32>);

/// The editor's side: buffers by absolute path, and every fs request it was sent.
#[derive(Default)]
struct Editor {
    buffers: Mutex<HashMap<PathBuf, String>>,
    /// In arrival order.
    requests: Mutex<Vec<Asked>>,
}

impl Editor {
    fn buffer(&self, path: &Path) -> Option<String> {
        self.buffers.lock().unwrap().get(path).cloned()
    }

    fn asked(&self, method: &str, path: &Path) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, p, _, _)| m == method && p == path)
            .count()
    }
}

/// `dsh acp` as a child process, its stdio as the line transport of the client.
fn spawn_agent(
    env: &Env,
    extra: &[&str],
) -> (
    Child,
    Lines<
        impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
        impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
    >,
) {
    let mut child = env
        .dsh()
        .arg("acp")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (in_tx, in_rx) = futures::channel::mpsc::unbounded::<std::io::Result<String>>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if in_tx.unbounded_send(line).is_err() {
                break;
            }
        }
    });
    let (out_tx, out_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in out_rx {
            if writeln!(stdin, "{line}")
                .and_then(|()| stdin.flush())
                .is_err()
            {
                break;
            }
        }
    });
    let sink = futures::sink::unfold(out_tx, |tx, line: String| async move {
        tx.send(line).map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(tx)
    });
    (child, Lines::new(Box::pin(sink), in_rx))
}

/// Runs one prompt in a new session of `dsh acp` whose client serves `editor`'s buffers (when
/// `fs` is true, else the client offers no files); returns the stop reason.
fn run_prompt(
    env: &Env,
    editor: &Arc<Editor>,
    fs: bool,
    extra: &[&str],
    prompt: &str,
) -> StopReason {
    let (mut child, transport) = spawn_agent(env, extra);
    let cwd = env.cwd();
    let prompt = prompt.to_owned();
    let e1 = editor.clone();
    let e2 = editor.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stop = rt.block_on(async move {
        let run = Client
            .v1()
            .on_receive_request(
                async move |req: ReadTextFileRequest, responder, _cx| {
                    e1.requests.lock().unwrap().push((
                        "read".into(),
                        req.path.clone(),
                        req.line,
                        req.limit,
                    ));
                    if req.path.ends_with("secret.txt") {
                        return responder.respond_with_error(Error::new(
                            -32603,
                            "the editor refuses secret.txt",
                        ));
                    }
                    match e1.buffer(&req.path) {
                        Some(text) => responder.respond(ReadTextFileResponse::new(text)),
                        None => responder.respond_with_error(Error::new(
                            -32002,
                            format!("Resource not found: {}", req.path.display()),
                        )),
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: WriteTextFileRequest, responder, _cx| {
                    e2.requests.lock().unwrap().push((
                        "write".into(),
                        req.path.clone(),
                        None,
                        None,
                    ));
                    e2.buffers.lock().unwrap().insert(req.path, req.content);
                    responder.respond(WriteTextFileResponse::new())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let caps = ClientCapabilities::new().fs(FileSystemCapabilities::new()
                    .read_text_file(fs)
                    .write_text_file(fs));
                cx.send_request(
                    InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps),
                )
                .block_task()
                .await?;
                let session = cx
                    .send_request(NewSessionRequest::new(cwd))
                    .block_task()
                    .await?
                    .session_id;
                let answer = cx
                    .send_request(PromptRequest::new(
                        session,
                        vec![ContentBlock::Text(TextContent::new(prompt))],
                    ))
                    .block_task()
                    .await?;
                Ok(answer.stop_reason)
            });
        tokio::time::timeout(BOUND, run)
            .await
            .expect("the ACP session did not finish in time")
    });
    let _ = child.kill();
    let _ = child.wait();
    stop.unwrap()
}

/// The text of the tool result answering `call_id` in recorded request `i`.
fn tool_text(env: &Env, i: usize, call_id: &str) -> String {
    request_messages(env.server(), i)
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result of {call_id} in request {i}"))
        .to_owned()
}

fn call(id: &str, name: &str, args: serde_json::Value) -> dsh_testkit::Reply {
    Completion::new()
        .tool_call_with_id(id, name, &args.to_string())
        .reply()
}

#[test]
fn the_file_tools_see_the_editors_buffers_and_write_into_them() {
    let env = Env::new();
    let cwd = env.cwd();
    let notes = cwd.join("notes.txt");
    let fresh = cwd.join("fresh.txt");
    let unread = cwd.join("unread.txt");
    std::fs::write(&notes, "on disk\n").unwrap();
    let editor = Arc::new(Editor::default());
    editor.buffers.lock().unwrap().extend([
        (
            notes.clone(),
            "unsaved one\nunsaved two\nunsaved three\n".to_owned(),
        ),
        (unread.clone(), "only in the editor\n".to_owned()),
    ]);
    let outside = tempfile::Builder::new()
        .prefix("dsh-acp-fs-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let outside_file = outside.path().canonicalize().unwrap().join("x.txt");
    let s = env.server();
    s.push(call(
        "r1",
        "read",
        json!({"file_path": "notes.txt", "offset": 2, "limit": 1}),
    ));
    s.push(call(
        "e1",
        "edit",
        json!({"file_path": "notes.txt", "old_string": "unsaved two", "new_string": "edited two"}),
    ));
    s.push(call(
        "w1",
        "write",
        json!({"file_path": "fresh.txt", "content": "brand new\n"}),
    ));
    s.push(call(
        "e2",
        "edit",
        json!({"file_path": "unread.txt", "old_string": "only", "new_string": "never"}),
    ));
    s.push(call("r2", "read", json!({"file_path": "missing.txt"})));
    s.push(call("r3", "read", json!({"file_path": "secret.txt"})));
    s.push(call(
        "w2",
        "write",
        json!({"file_path": outside_file.display().to_string(), "content": "no"}),
    ));
    s.push(Completion::new().text("all done").reply());

    let stop = run_prompt(&env, &editor, true, &[], "work on the notes");
    assert_eq!(stop, StopReason::EndTurn);

    // The windowed read shows the buffer (line 2 of 3), with the local read's texts.
    let read = tool_text(&env, 1, "r1");
    assert_eq!(
        read,
        format!(
            "<path>{}</path>\n<type>file</type>\n<content>\n2: unsaved two\n\n(Showing lines 2-2 of 3. Use offset=3 to continue.)\n</content>",
            notes.display()
        )
    );
    // The edit matched the buffer's text and landed in the buffer; the disk is untouched.
    assert_eq!(
        tool_text(&env, 2, "e1"),
        format!(
            "The file {} has been updated successfully.",
            notes.display()
        )
    );
    assert_eq!(
        editor.buffer(&notes).as_deref(),
        Some("unsaved one\nedited two\nunsaved three\n")
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "on disk\n");
    // A new file is created in the client only.
    assert!(tool_text(&env, 3, "w1").contains("Created file"));
    assert_eq!(editor.buffer(&fresh).as_deref(), Some("brand new\n"));
    assert!(!fresh.exists());
    // Read-before-write asks the client: a file that exists only in the editor was not read.
    let unread_text = tool_text(&env, 4, "e2");
    assert_eq!(
        unread_text,
        format!(
            "Error: edit requires reading \"{}\" first — read the file, then retry",
            unread.display()
        )
    );
    assert_eq!(editor.asked("write", &unread), 0);
    // Client errors become the fs tools' errors.
    let missing = tool_text(&env, 5, "r2");
    assert_eq!(
        missing,
        format!(
            "Error: cannot read \"{}\": not found",
            cwd.join("missing.txt").display()
        )
    );
    assert_eq!(
        tool_text(&env, 6, "r3"),
        format!(
            "Error: cannot read \"{}\": the ACP client: the editor refuses secret.txt",
            cwd.join("secret.txt").display()
        )
    );
    // dsh's sandbox refuses a write outside the workspace before the client is asked.
    let outside_text = tool_text(&env, 7, "w2");
    assert!(
        outside_text.starts_with("Error: [sandbox: file access denied"),
        "{outside_text}"
    );
    assert_eq!(editor.asked("write", &outside_file), 0);
    assert_eq!(editor.asked("read", &outside_file), 0);
    assert!(!outside_file.exists());
    // Reads fetch the whole text (the footer needs the total, the version covers the text).
    let reads = editor.requests.lock().unwrap().clone();
    assert!(
        reads
            .iter()
            .all(|(_, _, line, limit)| line.is_none() && limit.is_none()),
        "{reads:?}"
    );
}

/// A client without the capability (or `dsh acp --local-fs`): the files stay on disk.
fn local_files(fs: bool, extra: &[&str]) {
    let env = Env::new();
    let notes = env.cwd().join("notes.txt");
    std::fs::write(&notes, "on disk\n").unwrap();
    let editor = Arc::new(Editor::default());
    editor
        .buffers
        .lock()
        .unwrap()
        .insert(notes.clone(), "unsaved\n".to_owned());
    env.server()
        .push(call("r1", "read", json!({"file_path": "notes.txt"})));
    env.server().push(call(
        "e1",
        "edit",
        json!({"file_path": "notes.txt", "old_string": "on disk", "new_string": "edited on disk"}),
    ));
    env.server().push(Completion::new().text("ok").reply());
    let stop = run_prompt(&env, &editor, fs, extra, "read it");
    assert_eq!(stop, StopReason::EndTurn);
    assert!(tool_text(&env, 1, "r1").contains("1: on disk"));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "edited on disk\n");
    assert!(editor.requests.lock().unwrap().is_empty());
    assert_eq!(editor.buffer(&notes).as_deref(), Some("unsaved\n"));
}

#[test]
fn a_client_without_the_fs_capability_leaves_the_files_on_disk() {
    local_files(false, &[]);
}

#[test]
fn local_fs_keeps_the_files_on_disk_though_the_client_offers_them() {
    local_files(true, &["--local-fs"]);
}
