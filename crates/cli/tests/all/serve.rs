//! `dsh serve` as a user runs it: the real binary against the testkit model, driven over HTTP
//! (raw requests and the RemoteClient); the API key never reaches an answer; SIGTERM closes
//! the sessions and exits 0; schemathesis against its OpenAPI document.

#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use dsh_serve::RemoteClient;
use dsh_serve::protocol::{Client, EventMsg, Op, OpenSession, SessionOptions};
use dsh_testkit::Completion;
use futures::StreamExt;

use crate::support::Env;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const MARKER: &str = "sk-MARKER-7f3a9c1e-never-in-an-answer";

/// A running `dsh serve`; killed on drop.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dsh serve --listen 127.0.0.1:0 ARGS`, once it printed its URL.
pub(crate) fn serve(env: &Env, args: &[&str]) -> Served {
    let mut child = env
        .dsh()
        .env("DEEPSEEK_API_KEY", MARKER)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    let addr = url.trim_start_matches("http://").to_owned();
    Served { child, url, addr }
}

/// The `id` of a created session's summary (a JSON body).
fn session_id(body: &str) -> String {
    body.split("\"id\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned()
}

/// One request over a fresh connection; the status and the whole body (SSE: until `until`
/// appears in it).
pub(crate) fn raw(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    until: Option<&str>,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(u) = until
            && String::from_utf8_lossy(&got).contains(u)
        {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[test]
fn dsh_serve_runs_a_turn_over_http_never_shows_the_key_and_stops_cleanly_on_sigterm() {
    let env = Env::new();
    env.server()
        .push(Completion::new().text("served answer").reply());
    let served = serve(&env, &[]);
    let mut bodies = Vec::new();
    let (status, health) = raw(&served.addr, "GET", "/v1/health", None, None);
    assert_eq!(status, 200, "{health}");
    bodies.push(health);
    let cwd = env.cwd().display().to_string();
    let (status, created) = raw(
        &served.addr,
        "POST",
        "/v1/sessions",
        Some(&format!(r#"{{"cwd":"{cwd}","prompt":"hello"}}"#)),
        None,
    );
    assert_eq!(status, 201, "{created}");
    let id = session_id(&created);
    bodies.push(created);
    let (status, events) = raw(
        &served.addr,
        "GET",
        &format!("/v1/sessions/{id}/events"),
        None,
        Some("event: turnEnded"),
    );
    assert_eq!(status, 200, "{events}");
    assert!(events.contains("served answer"), "{events}");
    bodies.push(events);
    for path in [
        "/v1/sessions".to_owned(),
        format!("/v1/sessions/{id}"),
        format!("/v1/sessions/{id}/commands"),
        "/openapi.json".to_owned(),
        "/v1/sessions/nope".to_owned(),
    ] {
        bodies.push(raw(&served.addr, "GET", &path, None, None).1);
    }
    // The RemoteClient drives a second turn through the same Client trait.
    env.server()
        .push(Completion::new().text("second answer").reply());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let remote_events = rt.block_on(async {
        let remote: Arc<dyn Client> = Arc::new(RemoteClient::new(&served.url, None).unwrap());
        let last = remote.session(&id).await.unwrap().last_seq;
        let mut stream = remote.subscribe(&id, last).await.unwrap();
        remote
            .send(
                &id,
                Op::Submit {
                    text: "again".into(),
                    attachments: vec![],
                },
            )
            .await
            .unwrap();
        let mut seen = Vec::new();
        while let Some(ev) = stream.next().await {
            let end = matches!(ev.msg, EventMsg::TurnEnded { .. });
            seen.push(serde_json::to_string(&ev).unwrap());
            if end {
                break;
            }
        }
        // A session opened through the trait too.
        let other = remote
            .open(OpenSession::Create {
                session_id: None,
                options: SessionOptions {
                    cwd: Some(cwd.clone()),
                    ..Default::default()
                },
                prompt: None,
            })
            .await
            .unwrap();
        assert_ne!(other.id, id);
        seen
    });
    assert!(
        remote_events.iter().any(|e| e.contains("second answer")),
        "{remote_events:?}"
    );
    bodies.extend(remote_events);
    // The model got the key; no answer ever carried it.
    let first = env.server().request(0).unwrap();
    assert_eq!(first.bearer(), Some(MARKER));
    for b in &bodies {
        assert!(
            !b.contains(MARKER),
            "the API key leaked into an answer: {b}"
        );
    }
    // SIGTERM: the sessions are closed and flushed, exit 0.
    let mut served = served;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(served.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = served.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let out = env.dsh().args(["sessions", "show", &id]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("second answer"), "{shown}");
}

#[test]
fn token_create_list_revoke_and_a_non_loopback_listener_needs_one() {
    let env = Env::new();
    let out = env
        .dsh()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without a token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = env
        .dsh()
        .args(["serve", "token", "create", "--read-only", "--name", "watch"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let secret = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(secret.starts_with("dshs_"), "{secret}");
    let list = env.dsh().args(["serve", "token", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(list.starts_with("watch\tread-only\t"), "{list}");
    assert!(!list.contains(&secret));
    let file = std::fs::read_to_string(env.home.path().join("serve-tokens.json")).unwrap();
    assert!(!file.contains(&secret));
    // With a token, every request but health needs it, loopback included.
    let served = serve(&env, &[]);
    assert_eq!(raw(&served.addr, "GET", "/v1/health", None, None).0, 200);
    assert_eq!(raw(&served.addr, "GET", "/v1/sessions", None, None).0, 401);
    drop(served);
    let out = env
        .dsh()
        .args(["serve", "token", "revoke", "watch"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let list = env.dsh().args(["serve", "token", "list"]).output().unwrap();
    assert!(list.stdout.is_empty());
}

/// schemathesis (from PyPI, into target/test-cache/schemathesis) against `dsh serve`'s
/// OpenAPI document: no 5xx, every answer matches the schema. `scripts/schemathesis` exits 3
/// only when PyPI cannot be reached (then this test skips, with the reason printed, unless
/// `CI` is set).
#[test]
fn schemathesis_finds_no_server_error_and_no_answer_off_the_schema() {
    let dsh = env!("CARGO_BIN_EXE_dsh");
    // The model: the testkit mock, one answer in a loop (sessions schemathesis creates with a
    // prompt run real turns against it).
    let mock = dsh_testkit::MockServer::start_blocking();
    mock.set_repeat(true);
    mock.push(Completion::new().text("ok").reply());
    let out = Command::new(Path::new(ROOT).join("scripts/schemathesis"))
        .env("DSH_BIN", dsh)
        .env("DSH_MOCK_URL", mock.base_url())
        .output()
        .expect("run scripts/schemathesis");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {}
        Some(3) if std::env::var_os("CI").is_none() => {
            eprintln!(
                "skipping: schemathesis cannot be installed: {}",
                text.trim()
            );
        }
        _ => panic!("schemathesis failed:\n{text}"),
    }
    // The run reached the model (sessions with a prompt ran turns).
    assert!(mock.request_count() > 0, "no turn ran:\n{text}");
}

/// `kill -9` of the server while a turn streams: what was committed and written stays (the
/// engine writes the log through before each tool call and flushes it at each turn end), and a
/// new server resumes the session (crash repair) and runs the next turn.
#[test]
fn a_session_survives_kill_9_of_the_server_mid_turn_and_resumes_in_a_new_one() {
    let env = Env::new();
    std::fs::write(env.work.path().join("a.txt"), "contents of a\n").unwrap();
    env.server().push(
        Completion::new()
            .tool_call("read", r#"{"file_path":"a.txt"}"#)
            .reply(),
    );
    env.server()
        .push(crate::support::stalled_text("partial answer"));
    let served = serve(&env, &[]);
    let cwd = env.cwd().display().to_string();
    let (status, created) = raw(
        &served.addr,
        "POST",
        "/v1/sessions",
        Some(&format!(r#"{{"cwd":"{cwd}","prompt":"first prompt"}}"#)),
        None,
    );
    assert_eq!(status, 201, "{created}");
    let id = session_id(&created);
    // Mid-turn: the answer is streaming (and stalls there).
    let (_, events) = raw(
        &served.addr,
        "GET",
        &format!("/v1/sessions/{id}/events"),
        None,
        Some("partial answer"),
    );
    assert!(events.contains("event: textDelta"), "{events}");
    let mut served = served;
    served.child.kill().unwrap(); // SIGKILL
    served.child.wait().unwrap();
    drop(served);
    // A new server: resume, then a turn.
    env.server()
        .push(Completion::new().text("after the crash").reply());
    let again = serve(&env, &[]);
    let (status, resumed) = raw(
        &again.addr,
        "POST",
        "/v1/sessions",
        Some(&format!(r#"{{"type":"resume","sessionId":"{id}"}}"#)),
        None,
    );
    assert_eq!(status, 201, "{resumed}");
    let (status, accepted) = raw(
        &again.addr,
        "POST",
        &format!("/v1/sessions/{id}/ops"),
        Some(r#"{"type":"submit","text":"go on"}"#),
        None,
    );
    assert_eq!(status, 202, "{accepted}");
    let (_, events) = raw(
        &again.addr,
        "GET",
        &format!("/v1/sessions/{id}/events"),
        None,
        Some("after the crash\"}"),
    );
    // The first prompt and the tool call were written before the kill and are replayed; the
    // interrupted turn was repaired; the new turn ran.
    assert!(events.contains("first prompt"), "{events}");
    assert!(events.contains("event: toolCallBegan"), "{events}");
    assert!(events.contains("\"interrupted\""), "{events}");
    assert!(events.contains("after the crash"), "{events}");
}

/// Two servers on one `DSH_HOME`: a session one of them writes is watched by the other (its
/// log replayed, no lock taken) but not opened there (409 SESSION_LOCKED). The second server is
/// started after the session was written: a server does not see sessions another process
/// creates after it started (the store's index; see crates/serve/README.md).
#[test]
fn a_session_another_server_writes_is_watched_but_answers_409_to_opening() {
    let env = Env::new();
    env.server()
        .push(Completion::new().text("written by a").reply());
    let a = serve(&env, &[]);
    let cwd = env.cwd().display().to_string();
    let (status, created) = raw(
        &a.addr,
        "POST",
        "/v1/sessions",
        Some(&format!(r#"{{"cwd":"{cwd}","prompt":"hello"}}"#)),
        None,
    );
    assert_eq!(status, 201, "{created}");
    let id = session_id(&created);
    let (_, events) = raw(
        &a.addr,
        "GET",
        &format!("/v1/sessions/{id}/events"),
        None,
        Some("event: turnEnded"),
    );
    assert!(events.contains("written by a"), "{events}");
    // B (started after the session was written) watches it from the log.
    let b = serve(&env, &[]);
    let (status, watched) = raw(
        &b.addr,
        "GET",
        &format!("/v1/sessions/{id}/events"),
        None,
        Some("event: snapshot"),
    );
    assert_eq!(status, 200, "{watched}");
    assert!(watched.contains("written by a"), "{watched}");
    // B cannot open it while A holds it.
    let (status, refused) = raw(
        &b.addr,
        "POST",
        "/v1/sessions",
        Some(&format!(r#"{{"type":"resume","sessionId":"{id}"}}"#)),
        None,
    );
    assert_eq!(status, 409, "{refused}");
    assert!(refused.contains("\"code\":\"SESSION_LOCKED\""), "{refused}");
}

/// `dsh exec --server URL`: the task runs on the server; the answer on stdout and the exit
/// status as a local `exec` (0 completed, 1 failed with the reason on stderr, 2 for usage).
#[test]
fn dsh_exec_server_runs_the_task_through_a_server_with_exec_s_output_and_exit_codes() {
    let env = Env::new();
    env.server().push_all([
        Completion::new().text("remote answer").reply(),
        dsh_testkit::deepseek::error_reply(
            401,
            "bad key",
            "authentication_error",
            "invalid_api_key",
        ),
    ]);
    let served = serve(&env, &[]);
    let out = env
        .dsh()
        .args(["exec", "--server", &served.url, "say something"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout, "remote answer\n");
    // The session is the server's: listed there.
    let (status, list) = raw(&served.addr, "GET", "/v1/sessions", None, None);
    assert_eq!(status, 200);
    assert!(list.contains("\"turns\":1"), "{list}");
    // A failed turn: exit 1, the reason on stderr.
    let out = env
        .dsh()
        .args(["exec", "--server", &served.url, "again"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("AUTH"), "{stderr}");
    // A server that is not there: exit 1, naming the address.
    let out = env
        .dsh()
        .args(["exec", "--server", "http://127.0.0.1:9", "x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot be reached"), "{stderr}");
}

/// The records of `--json` output, each line checked to parse and the seqs to run 0, 1, ...
fn json_records(stdout: &str) -> Vec<serde_json::Value> {
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let seqs: Vec<u64> = lines.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{stdout}");
    lines
}

/// `dsh exec --server URL --json` prints the session's committed records as JSON lines (from
/// the server's log stream), from seq 0 on, and not the answer text: record for record what a
/// local `dsh exec --json` of the same task prints (the same types in the same order, the same
/// payloads once ids, times, durations and the host's own paths are set aside), and the same
/// `--usage` line.
#[test]
fn dsh_exec_server_json_prints_the_same_records_as_a_local_run() {
    let replies = || {
        [
            Completion::new()
                .tool_call("bash", r#"{"command":"echo hi","description":"Say hi"}"#)
                .reply(),
            Completion::new().text("remote answer").reply(),
        ]
    };
    let args = ["--json", "--usage", "run echo"];
    let local_env = Env::new();
    local_env.server().push_all(replies());
    let local = local_env.dsh().arg("exec").args(args).output().unwrap();
    let local_stderr = String::from_utf8_lossy(&local.stderr).into_owned();
    let env = Env::new();
    env.server().push_all(replies());
    let served = serve(&env, &[]);
    let out = env
        .dsh()
        .args(["exec", "--server", &served.url])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(local.status.code(), Some(0));
    assert!(!stdout.contains("\nremote answer\n"), "{stdout}");
    let remote = json_records(&stdout);
    let local_out = String::from_utf8_lossy(&local.stdout).into_owned();
    let local = json_records(&local_out);
    // The session's opening pins (sandbox mode, approval policy) come from two plugins'
    // listeners of one event, in the order their plugins registered (not fixed when they start
    // concurrently): compared as a set.
    let pins = |r: &[serde_json::Value]| {
        r.iter()
            .take_while(|e| e["type"] != "agent/inbox/spliced")
            .count()
    };
    let (remote, local) = (sorted_pins(remote, pins), sorted_pins(local, pins));
    let types = |r: &[serde_json::Value]| -> Vec<String> {
        r.iter().map(|e| e["type"].to_string()).collect()
    };
    assert_eq!(
        types(&remote).join(" "),
        types(&local).join(" "),
        "through the server vs local"
    );
    let strip = |r: &[serde_json::Value], home: &std::path::Path, cwd: &std::path::Path| {
        let text = serde_json::Value::Array(r.to_vec()).to_string();
        let text = text
            .replace(&home.display().to_string(), "$HOME")
            .replace(&cwd.display().to_string(), "$CWD");
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        scrub(&mut v);
        // The tool set is the composition's, which is the server's: its preset offers
        // ask_user_question (its clients can answer) where the headless one does not.
        for r in v.as_array_mut().unwrap() {
            if let Some(tools) = r.pointer_mut("/data/header/tools") {
                let names: Vec<serde_json::Value> = tools
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["name"].clone())
                    .filter(|n| n != "ask_user_question")
                    .collect();
                *tools = serde_json::Value::Array(names);
            }
        }
        v
    };
    let (a, b) = (
        strip(&remote, env.home.path(), &env.cwd()),
        strip(&local, local_env.home.path(), &local_env.cwd()),
    );
    for (x, y) in a.as_array().unwrap().iter().zip(b.as_array().unwrap()) {
        if let Some(at) = first_difference(x, y, String::new()) {
            panic!("through the server vs local, at {at}:\n{x}\n---\n{y}");
        }
    }
    let usage = |s: &str| {
        s.lines()
            .filter(|l| l.starts_with("dsh: usage:"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(!usage(&stderr).is_empty(), "no usage line: {stderr}");
    assert_eq!(usage(&stderr), usage(&local_stderr), "the --usage line");
}

/// `records` with its first `pins(records)` records sorted by type (their seqs renumbered).
fn sorted_pins(
    mut records: Vec<serde_json::Value>,
    pins: impl Fn(&[serde_json::Value]) -> usize,
) -> Vec<serde_json::Value> {
    let n = pins(&records);
    records[..n].sort_by(|a, b| a["type"].to_string().cmp(&b["type"].to_string()));
    for (i, r) in records[..n].iter_mut().enumerate() {
        r["seq"] = serde_json::Value::from(i);
    }
    records
}

/// The JSON pointer of the first place `a` and `b` differ.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: String) -> Option<String> {
    use serde_json::Value::{Array, Object};
    match (a, b) {
        (Object(x), Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let n = serde_json::Value::Null;
                first_difference(
                    x.get(k).unwrap_or(&n),
                    y.get(k).unwrap_or(&n),
                    format!("{at}/{k}"),
                )
            })
        }
        (Array(x), Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}"))),
        _ => (a != b).then_some(at),
    }
}

/// Sets aside what differs between two runs of one task: ids, times, durations, process ids.
fn scrub(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                let volatile = matches!(
                    k.as_str(),
                    "time"
                        | "time0"
                        | "dt"
                        | "createdAt"
                        | "id"
                        | "sessionId"
                        | "messageId"
                        | "durationMs"
                        | "startedAt"
                        | "endedAt"
                        | "pid"
                        | "elapsedMs"
                        | "at"
                        | "ms"
                ) || k.ends_with("Ms")
                    || k.ends_with("At")
                    || k.ends_with("Id");
                if volatile {
                    *x = serde_json::Value::Null;
                } else {
                    scrub(x);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
}

/// `dsh exec --server URL --continue`: the latest of the server's sessions in this directory
/// is resumed (its history in the next request, one session with two turns); with none there,
/// a usage error naming the directory.
#[test]
fn dsh_exec_server_continue_resumes_the_latest_session_of_the_directory() {
    let env = Env::new();
    let served = serve(&env, &[]);
    let exec = |args: &[&str]| {
        env.dsh()
            .args(["exec", "--server", &served.url])
            .args(args)
            .output()
            .unwrap()
    };
    let out = exec(&["--continue", "nothing yet"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no session to continue in"), "{stderr}");
    env.server().push_all([
        Completion::new().text("first answer").reply(),
        Completion::new().text("second answer").reply(),
    ]);
    let out = exec(&["remember the word pelican"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = exec(&["--continue", "which word?"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "second answer\n");
    let requests = env.server().requests();
    let last = String::from_utf8_lossy(&requests.last().unwrap().body).into_owned();
    assert!(
        last.contains("pelican") && last.contains("first answer"),
        "{last}"
    );
    let (status, list) = raw(&served.addr, "GET", "/v1/sessions", None, None);
    assert_eq!(status, 200);
    assert_eq!(list.matches("\"id\"").count(), 1, "{list}");
    assert!(list.contains("\"turns\":2"), "{list}");
}
