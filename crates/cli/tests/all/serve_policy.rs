//! Per-session sandbox modes and approval policies in one `dsh serve`: each session created
//! over HTTP with its own `sandbox` / `approvalPolicy` behaves by it (one asks before a bash
//! call, the other does not; a write outside the workspace is refused in one and done in the
//! other), keeps it across a server restart, and a bad value answers 400 naming the field. The
//! real binary against the testkit model, driven by the RemoteClient and raw requests.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_serve::RemoteClient;
use dsh_serve::protocol::{
    ApprovalDecision, ApprovalPolicy, Client, Event, EventMsg, Op, OpenSession, SandboxMode,
    SessionOptions, SessionSettings, SessionSummary,
};
use dsh_testkit::Completion;
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::serve::{raw, serve};
use crate::support::{Env, bounded};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A session of `cwd` created with these settings.
async fn create(
    remote: &dyn Client,
    cwd: &str,
    sandbox: Option<SandboxMode>,
    approval_policy: Option<ApprovalPolicy>,
) -> SessionSummary {
    remote
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(cwd.to_owned()),
                settings: SessionSettings {
                    sandbox,
                    approval_policy,
                    ..Default::default()
                },
            },
            prompt: None,
        })
        .await
        .unwrap()
}

/// Subscribes to `session` from its last event, submits `prompt`, and returns the stream.
async fn prompt(
    remote: &dyn Client,
    session: &SessionSummary,
    text: &str,
) -> BoxStream<'static, Event> {
    let events = remote
        .subscribe(&session.id, session.last_seq)
        .await
        .unwrap();
    remote
        .send(
            &session.id,
            Op::Submit {
                text: text.to_owned(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    events
}

/// The events up to the turn's end.
async fn until_turn_end(events: &mut BoxStream<'static, Event>) -> Vec<EventMsg> {
    let mut seen = Vec::new();
    while let Some(ev) = events.next().await {
        let end = matches!(ev.msg, EventMsg::TurnEnded { .. });
        seen.push(ev.msg);
        if end {
            return seen;
        }
    }
    panic!("the stream ended before the turn: {seen:?}");
}

/// The `ToolCallEnded` of the turn: its error flag and its whole JSON (the result's head).
fn tool_end(seen: &[EventMsg]) -> (bool, String) {
    seen.iter()
        .find_map(|m| match m {
            EventMsg::ToolCallEnded { is_error, .. } => {
                Some((*is_error, serde_json::to_string(m).unwrap()))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool call ended: {seen:?}"))
}

/// A directory outside every writable root of `workspace-write` (not under `/tmp`).
fn outside() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("dsh-serve-policy-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

fn write_call(path: &std::path::Path) -> Completion {
    Completion::new().tool_call(
        "write",
        &serde_json::json!({"file_path": path, "content": "written"}).to_string(),
    )
}

#[test]
fn two_sessions_of_one_server_ask_for_approval_by_their_own_policy() {
    let env = Env::new();
    env.server().push_all([
        Completion::new()
            .tool_call("bash", r#"{"command":"echo asked-in-a","description":"A"}"#)
            .reply(),
        Completion::new().text("a done").reply(),
        Completion::new()
            .tool_call("bash", r#"{"command":"echo ran-in-b","description":"B"}"#)
            .reply(),
        Completion::new().text("b done").reply(),
    ]);
    // The server's own default asks only when the model requests an escalation.
    let served = serve(&env, &["--ask-for-approval", "on-request"]);
    let cwd = env.cwd().display().to_string();
    let full = Some(SandboxMode::DangerFullAccess);
    runtime().block_on(async {
        let remote: Arc<dyn Client> = Arc::new(RemoteClient::new(&served.url, None).unwrap());
        // A: untrusted. Its bash call waits for an answer, given over HTTP.
        let a = create(&*remote, &cwd, full, Some(ApprovalPolicy::Untrusted)).await;
        assert_eq!(a.settings.approval_policy, Some(ApprovalPolicy::Untrusted));
        assert_eq!(a.settings.sandbox, full);
        let mut events = prompt(&*remote, &a, "run it").await;
        let request = loop {
            match events.next().await.unwrap().msg {
                EventMsg::ApprovalRequested(r) => break r,
                EventMsg::TurnEnded { .. } => panic!("session a ran its turn without asking"),
                _ => {}
            }
        };
        assert_eq!(request.tool_name, "bash");
        assert!(request.reason.contains("untrusted"), "{}", request.reason);
        remote
            .send(
                &a.id,
                Op::AnswerApproval {
                    request_id: request.request_id.clone(),
                    decision: ApprovalDecision::AllowOnce,
                },
            )
            .await
            .unwrap();
        let seen = until_turn_end(&mut events).await;
        let (is_error, end) = tool_end(&seen);
        assert!(!is_error && end.contains("asked-in-a"), "{end}");

        // B: never. The same kind of call runs at once, nobody asked.
        let b = create(&*remote, &cwd, full, Some(ApprovalPolicy::Never)).await;
        assert_eq!(b.settings.approval_policy, Some(ApprovalPolicy::Never));
        let mut events = prompt(&*remote, &b, "run it").await;
        let seen = until_turn_end(&mut events).await;
        assert!(
            !seen
                .iter()
                .any(|m| matches!(m, EventMsg::ApprovalRequested(_))),
            "session b asked: {seen:?}"
        );
        let (is_error, end) = tool_end(&seen);
        assert!(!is_error && end.contains("ran-in-b"), "{end}");

        // Each log records its own policy, pinned to the session.
        for (s, policy) in [(&a, "untrusted"), (&b, "never")] {
            let stored = remote.session(&s.id).await.unwrap();
            assert_eq!(
                stored.settings.approval_policy.map(ApprovalPolicy::as_str),
                Some(policy)
            );
        }
    });
    assert_eq!(env.server().request_count(), 4);
    let logs: Vec<String> = crate::support::session_files(&env.home.path().join("sessions"))
        .iter()
        .map(|f| crate::support::log_text(f))
        .collect();
    for policy in ["untrusted", "never"] {
        let line = format!(
            r#""type":"approval/policy","data":{{"policy":"{policy}","source":"session"}}"#
        );
        assert!(
            logs.iter().any(|l| l.contains(&line)),
            "no pinned {policy}: {logs:?}"
        );
    }
}

#[test]
fn two_sessions_of_one_server_write_by_their_own_sandbox_and_keep_it_after_a_restart() {
    let env = Env::new();
    let (_keep, outside) = outside();
    let (a_file, b_file, again) = (
        outside.join("a.txt"),
        outside.join("b.txt"),
        outside.join("again.txt"),
    );
    env.server().push_all([
        write_call(&a_file).reply(),
        Completion::new().text("a done").reply(),
        write_call(&b_file).reply(),
        Completion::new().text("b done").reply(),
    ]);
    // The server's default gives every session full access; session a asks for less.
    let args = ["--sandbox", "danger-full-access"];
    let served = serve(&env, &args);
    let cwd = env.cwd().display().to_string();
    let rt = runtime();
    let a = rt.block_on(async {
        let remote: Arc<dyn Client> = Arc::new(RemoteClient::new(&served.url, None).unwrap());
        let a = create(&*remote, &cwd, Some(SandboxMode::WorkspaceWrite), None).await;
        assert_eq!(a.settings.sandbox, Some(SandboxMode::WorkspaceWrite));
        let seen = until_turn_end(&mut prompt(&*remote, &a, "write a").await).await;
        let (is_error, end) = tool_end(&seen);
        assert!(is_error && end.contains("FS_SANDBOX_DENIED"), "{end}");

        let b = create(&*remote, &cwd, None, None).await;
        assert_eq!(b.settings.sandbox, Some(SandboxMode::DangerFullAccess));
        let seen = until_turn_end(&mut prompt(&*remote, &b, "write b").await).await;
        let (is_error, end) = tool_end(&seen);
        assert!(!is_error, "{end}");
        a
    });
    assert!(!a_file.exists(), "session a wrote outside its workspace");
    assert_eq!(std::fs::read_to_string(&b_file).unwrap(), "written");

    // A new server with the same default: session a, opened again, keeps its mode.
    let mut served = served;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(served.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(served.child.wait().unwrap().code(), Some(0));
    drop(served);
    env.server().push_all([
        write_call(&again).reply(),
        Completion::new().text("still refused").reply(),
    ]);
    let served = serve(&env, &args);
    rt.block_on(async {
        let remote: Arc<dyn Client> = Arc::new(RemoteClient::new(&served.url, None).unwrap());
        let stored = remote.session(&a.id).await.unwrap();
        assert_eq!(stored.settings.sandbox, Some(SandboxMode::WorkspaceWrite));
        // Resumed without settings: the mode its log pins, not the server's default.
        let reopened = remote
            .open(OpenSession::Resume {
                session_id: a.id.clone(),
                options: SessionOptions::default(),
            })
            .await
            .unwrap();
        assert_eq!(reopened.settings.sandbox, Some(SandboxMode::WorkspaceWrite));
        let seen = until_turn_end(&mut prompt(&*remote, &reopened, "write again").await).await;
        let (is_error, end) = tool_end(&seen);
        assert!(is_error && end.contains("FS_SANDBOX_DENIED"), "{end}");
        let open = remote.session(&a.id).await.unwrap();
        assert_eq!(open.settings.sandbox, Some(SandboxMode::WorkspaceWrite));
        // Reopening it with another mode while it is open is refused.
        let changed = remote
            .open(OpenSession::Resume {
                session_id: a.id.clone(),
                options: SessionOptions {
                    settings: SessionSettings {
                        sandbox: Some(SandboxMode::DangerFullAccess),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            })
            .await
            .unwrap_err();
        assert!(changed.message.starts_with("sandbox: "), "{changed:?}");
    });
    assert!(!again.exists(), "session a lost its mode on the restart");
}

#[test]
fn a_bad_sandbox_or_approval_policy_answers_400_naming_the_field() {
    let env = Env::new();
    let served = serve(&env, &[]);
    let cwd = env.cwd().display().to_string();
    for (body, field) in [
        (
            format!(r#"{{"cwd":"{cwd}","sandbox":"sandboxed"}}"#),
            "`sandbox`",
        ),
        (
            format!(r#"{{"cwd":"{cwd}","approvalPolicy":"sometimes"}}"#),
            "`approvalPolicy`",
        ),
        (
            r#"{"type":"resume","sessionId":"x","approvalPolicy":7}"#.to_owned(),
            "`approvalPolicy`",
        ),
    ] {
        let (status, answer) = raw(&served.addr, "POST", "/v1/sessions", Some(&body), None);
        assert_eq!(status, 400, "{answer}");
        assert!(answer.contains("\"code\":\"INVALID_REQUEST\""), "{answer}");
        assert!(answer.contains(field), "{field} not named: {answer}");
    }
    // Nothing was created.
    let (_, list) = raw(&served.addr, "GET", "/v1/sessions", None, None);
    assert!(list.ends_with("[]"), "{list}");
}

/// `dsh exec --server URL --sandbox MODE --ask-for-approval never`: the session's own mode on a
/// server whose default is full access (the write outside the workspace refused, the session
/// pinned to it); the flags that would change the server's composition are refused by name
/// instead of being ignored.
#[test]
fn exec_through_a_server_passes_its_sandbox_and_approval_policy() {
    let env = Env::new();
    let (_keep, outside) = outside();
    let target = outside.join("exec.txt");
    env.server().push_all([
        write_call(&target).reply(),
        Completion::new().text("refused, as asked").reply(),
    ]);
    let served = serve(&env, &["--sandbox", "danger-full-access"]);
    let out = env
        .dsh()
        .args([
            "exec",
            "--server",
            &served.url,
            "--sandbox",
            "workspace-write",
            "--ask-for-approval",
            "never",
            "--json",
            "write outside",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!target.exists(), "the session wrote outside its workspace");
    assert!(stdout.contains("FS_SANDBOX_DENIED"), "{stdout}");
    let rt = runtime();
    rt.block_on(async {
        let remote = RemoteClient::new(&served.url, None).unwrap();
        let all = remote
            .sessions(dsh_serve::protocol::SessionQuery::default())
            .await
            .unwrap();
        let [listed] = all.as_slice() else {
            panic!("one session expected: {all:?}")
        };
        // The stored session's summary: its settings as its log pins them.
        let s = remote.session(&listed.id).await.unwrap();
        assert_eq!(s.settings.sandbox, Some(SandboxMode::WorkspaceWrite));
        assert_eq!(s.settings.approval_policy, Some(ApprovalPolicy::Never));
    });
    for (flag, value) in [
        ("--network", Some("on")),
        ("--plan", None),
        ("--max-parallel-tools", Some("2")),
    ] {
        let mut args = vec!["exec", "--server", served.url.as_str(), flag];
        args.extend(value);
        args.push("task");
        let out = env.dsh().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("composition"),
            "{flag}: {stderr}"
        );
    }
    assert_eq!(
        env.server().request_count(),
        2,
        "a refused run reached the model"
    );
}

/// `dsh exec --server` on a server whose sessions ask: the run cannot ask anyone, so an
/// approval is declined (on a server asking before anything not read-only) and a question is
/// answered that no one can answer (on a server with the default policy), both said on stderr,
/// and each turn goes on to its end instead of waiting forever.
#[test]
fn exec_through_a_server_declines_approvals_and_answers_questions_it_cannot_ask() {
    let env = Env::new();
    let marker = env.cwd().join("ran.txt");
    env.server().push_all([
        Completion::new()
            .tool_call(
                "bash",
                &serde_json::json!({
                    "command": format!("touch {}", marker.display()),
                    "description": "Touch a file"
                })
                .to_string(),
            )
            .reply(),
        Completion::new().text("went on without it").reply(),
    ]);
    // Bounded: without the answers the run would wait forever for a person.
    let exec = |url: &str| bounded(env.dsh().args(["exec", "--server", url, "do it"]));
    let last_request = || {
        let requests = env.server().requests();
        String::from_utf8_lossy(&requests.last().unwrap().body).into_owned()
    };
    let served = serve(&env, &["--ask-for-approval", "untrusted"]);
    let out = exec(&served.url);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "went on without it\n");
    assert!(stderr.contains("declined bash"), "{stderr}");
    assert!(!marker.exists(), "a declined call ran");
    assert!(last_request().contains("no one can approve"));
    drop(served);

    env.server().push_all([
        Completion::new()
            .tool_call(
                "ask_user_question",
                r#"{"questions":[{"id":"q1","question":"Which one?","options":[{"label":"A"},{"label":"B"}]}]}"#,
            )
            .reply(),
        Completion::new().text("went on alone").reply(),
    ]);
    let served = serve(&env, &[]);
    let out = exec(&served.url);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "went on alone\n");
    assert!(stderr.contains("a question was asked"), "{stderr}");
    assert!(
        last_request().contains("No one can answer"),
        "{}",
        last_request()
    );
}
