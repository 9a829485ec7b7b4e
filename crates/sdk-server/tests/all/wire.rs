//! `dsh --profile sdk` on the wire, driven by raw frames: bad clients, queued prompts and the
//! idle rule, end of input mid-turn, a client that stops reading, the profile command line.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use dsh_testkit::{Completion, Gate};
use serde_json::{Value, json};

use dsh_test_harness::e2e::{Env, read_rows, session_files, stalled_text};

/// A generous safety bound on waiting for a frame: a hang fails the test instead of the CI job.
const BOUND: Duration = Duration::from_secs(60);

struct Runtime {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<String>,
    /// Reaped by [`Runtime::wait_exit`].
    exited: bool,
}

impl Runtime {
    fn start(env: &Env) -> Self {
        Self::start_gated(env, None)
    }

    /// As [`Runtime::start`]; with a gate, stdout is not read until the gate opens (so the
    /// runtime's output pipe can fill up).
    fn start_gated(env: &Env, gate: Option<mpsc::Receiver<()>>) -> Self {
        let mut child = env
            .dsh()
            .args(["--profile", "sdk"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            if let Some(gate) = gate {
                let _ = gate.recv();
            }
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            frames,
            exited: false,
        }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, frame: Value) {
        self.send_raw(&format!("{frame}\n"));
    }

    /// The next frame; every stdout line must be one JSON object.
    fn next(&self) -> Value {
        let line = self
            .frames
            .recv_timeout(BOUND)
            .expect("no frame from the runtime");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
        assert!(v.is_object(), "{line}");
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        v
    }

    /// Frames up to and including the response to `id` (notifications before it included).
    fn until_response(&self, id: &Value) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let f = self.next();
            let done = f.get("method").is_none() && &f["id"] == id;
            seen.push(f);
            if done {
                return seen;
            }
        }
    }

    fn request(&mut self, id: &str, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        self.until_response(&json!(id)).pop().unwrap()
    }

    fn initialize(&mut self, cwd: &str) -> Value {
        self.request(
            "init",
            "initialize",
            json!({"cwd": cwd, "provider": "deepseek-official", "model": "deepseek-v4-flash"}),
        )
    }

    /// The exit code; fails the test if the runtime does not exit within the bound.
    fn wait_exit(&mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(nix::sys::wait::waitpid(pid, None));
        });
        let status = rx.recv_timeout(BOUND).expect("the runtime did not exit");
        self.exited = true;
        match status {
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => Some(code),
            other => panic!("the runtime ended with {other:?}"),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.exited {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn error_message(f: &Value) -> &str {
    assert_eq!(f["error"]["code"], -32603, "{f}");
    f["error"]["message"].as_str().unwrap()
}

#[test]
fn bad_frames_are_answered_and_the_runtime_keeps_serving() {
    let env = Env::new();
    let mut rt = Runtime::start(&env);
    rt.send_raw("this is not json\n");
    let f = rt.next();
    assert_eq!(f["error"]["code"], -32700, "{f}");
    assert_eq!(f["id"], Value::Null);
    rt.send_raw("[1,2]\n\n   \n");
    assert_eq!(rt.next()["error"]["code"], -32600);
    // A response to a request the runtime never sent is dropped; an unknown notification too.
    rt.send_raw("{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"whatever\"}\n");
    let f = rt.request("u", "no/such/method", json!({}));
    assert_eq!(
        error_message(&f),
        "unknown DeepSeek Harness SDK runtime method: no/such/method"
    );
    // Out of order: a session call before initialize.
    let f = rt.request(
        "early",
        "session/prompt",
        json!({"sessionId":"s","contentBlocks":[{"type":"text","text":"hi"}]}),
    );
    assert_eq!(
        error_message(&f),
        "initialize must be called before session/prompt"
    );
    // A numeric id is echoed as a number; CRLF line ends are accepted.
    let cwd = env.cwd().display().to_string();
    rt.send_raw(&format!(
        "{}\r\n",
        json!({"jsonrpc":"2.0","id":7,"method":"initialize","params":{"cwd":cwd}})
    ));
    let f = rt.until_response(&json!(7)).pop().unwrap();
    assert_eq!(
        f["result"],
        json!({"serverInfo":{"name":"deepseek-harness-sdk-runtime","version":"0.0.1"}})
    );
    let f = rt.initialize(&cwd);
    assert!(
        error_message(&f).contains("reinitialization is unsupported"),
        "{f}"
    );
    let f = rt.request("p", "session/prompt", json!({"sessionId":"s"}));
    assert!(
        error_message(&f)
            .starts_with("invalid params for session/prompt: missing field `contentBlocks`"),
        "{f}"
    );
    let f = rt.request(
        "w",
        "session/working-directory/set",
        json!({"sessionId":"s","path":"does-not-exist"}),
    );
    assert!(error_message(&f).contains("does-not-exist"), "{f}");
    // `shutdown` without params (as the Python client sends it): `{}`, then exit 0.
    rt.send_raw("{\"jsonrpc\":\"2.0\",\"id\":\"bye\",\"method\":\"shutdown\"}\n");
    let f = rt.until_response(&json!("bye")).pop().unwrap();
    assert_eq!(f["result"], json!({}));
    assert_eq!(rt.wait_exit(), Some(0));
    assert_eq!(env.server().request_count(), 0);
}

#[test]
fn queued_prompts_get_their_ids_at_once_and_idle_comes_once_after_both() {
    let env = Env::new();
    let gate = Gate::new();
    env.server()
        .push(Completion::new().text("one").reply().gate_head(&gate));
    env.server().push(Completion::new().text("two").reply());
    let mut rt = Runtime::start(&env);
    rt.initialize(&env.cwd().display().to_string());
    let prompt =
        |text: &str| json!({"sessionId":"q","contentBlocks":[{"type":"text","text":text}]});
    rt.send(json!({"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":prompt("first")}));
    rt.send(json!({"jsonrpc":"2.0","id":"p2","method":"session/prompt","params":prompt("second")}));
    // Both message ids arrive while the model has not answered anything.
    let mut frames = rt.until_response(&json!("p1"));
    frames.extend(rt.until_response(&json!("p2")));
    assert!(!gate.is_open());
    let id1 = frames.iter().find(|f| f["id"] == "p1").unwrap()["result"]["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    let id2 = frames.iter().find(|f| f["id"] == "p2").unwrap()["result"]["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(id1, id2);
    gate.open();
    loop {
        let f = rt.next();
        let idle = f["method"] == "session.status" && f["params"]["status"] == "idle";
        frames.push(f);
        if idle {
            break;
        }
    }
    let receipt = |id: &str| {
        frames.iter().position(|f| {
            f["method"] == "session.event"
                && f["params"]["event"]["type"] == "agent/inbox/spliced"
                && f["params"]["event"]["data"]["inserted"]
                    .as_array()
                    .is_some_and(|ins| ins.iter().any(|m| m["id"] == id))
        })
    };
    let (r1, r2) = (receipt(&id1).unwrap(), receipt(&id2).unwrap());
    assert!(r1 < r2);
    let statuses: Vec<(usize, &str)> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["method"] == "session.status")
        .map(|(i, f)| (i, f["params"]["status"].as_str().unwrap()))
        .collect();
    // One running, one idle: never idle between the two queued turns.
    assert_eq!(
        statuses.iter().map(|s| s.1).collect::<Vec<_>>(),
        ["running", "idle"]
    );
    let turn_ends: Vec<&Value> = frames
        .iter()
        .filter(|f| f["params"]["event"]["type"] == "turn/end")
        .collect();
    assert_eq!(turn_ends.len(), 2);
    assert!(
        turn_ends
            .iter()
            .all(|f| f["params"]["event"]["data"]["reason"]["kind"] == "completed")
    );
    let answers: Vec<String> = frames
        .iter()
        .filter(|f| f["params"]["event"]["type"] == "assistant/message")
        .map(|f| {
            f["params"]["event"]["data"]["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(answers, ["one", "two"]);
    assert!(
        frames
            .iter()
            .all(|f| f["params"]["sessionId"].is_null() || f["params"]["sessionId"] == "q")
    );
}

#[test]
fn end_of_input_mid_turn_flushes_the_session_and_exits() {
    let env = Env::new();
    env.server().push(stalled_text("partial answer"));
    let mut rt = Runtime::start(&env);
    rt.initialize(&env.cwd().display().to_string());
    let f = rt.request(
        "p",
        "session/prompt",
        json!({"sessionId":"eof","contentBlocks":[{"type":"text","text":"go"}]}),
    );
    assert!(f["result"]["messageId"].is_string(), "{f}");
    env.server().wait_for_requests_blocking(1, BOUND).unwrap();
    drop(rt.stdin.take());
    assert_eq!(rt.wait_exit(), Some(0));
    let files = session_files(&env.home.path().join("sessions"));
    assert_eq!(files.len(), 1);
    let rows = read_rows(&files[0]);
    let end = rows
        .iter()
        .rfind(|e| e["type"] == "turn/end")
        .expect("a closed turn");
    assert_eq!(end["data"]["reason"]["kind"], "aborted", "{end}");
}

#[test]
fn a_client_that_stops_reading_is_not_buffered_without_bound() {
    let env = Env::new();
    // The runtime's own footprint, for the bound below: one answered request, then its peak.
    let baseline = {
        let mut idle = Runtime::start(&env);
        idle.send(json!({"jsonrpc":"2.0","id":0,"method":"nope/0"}));
        assert_eq!(idle.next()["id"], 0);
        let kb = peak_rss_kb(idle.child.id());
        drop(idle.stdin.take());
        assert_eq!(idle.wait_exit(), Some(0));
        kb
    };
    let (open, gate) = mpsc::channel();
    let mut rt = Runtime::start_gated(&env, Some(gate));
    // 200,000 requests (about 16 MB of error responses) written before anything is read: the
    // writer thread blocks once the runtime stops reading (its response queue is bounded) and
    // resumes as we read.
    const N: u64 = 200_000;
    let mut stdin = rt.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for i in 0..N {
            writeln!(
                buf,
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"nope/{i}\"}}"
            )
            .unwrap();
        }
        stdin.write_all(&buf).unwrap();
        stdin
    });
    // Nothing is read until the runtime blocks writing its stdout (a full pipe).
    wait_blocked_writing(rt.child.id());
    assert!(
        !writer.is_finished(),
        "the runtime read every request without writing"
    );
    open.send(()).unwrap();
    for i in 0..N {
        let f = rt.next();
        assert_eq!(f["id"], i);
    }
    let stdin = writer.join().unwrap();
    // The runtime's peak memory stayed far below what buffering the output would take
    // (about 16 MB above its own footprint).
    let peak = peak_rss_kb(rt.child.id());
    assert!(
        baseline > 0 && peak < baseline + 6_000,
        "runtime peak RSS {peak} kB, idle {baseline} kB"
    );
    drop(stdin);
    assert_eq!(rt.wait_exit(), Some(0));
}

/// Polls the runtime's threads until one is blocked in a pipe write (bounded).
fn wait_blocked_writing(pid: u32) {
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        let blocked = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .any(|t| {
                std::fs::read_to_string(t.path().join("wchan"))
                    .is_ok_and(|w| w.contains("pipe_write"))
            });
        if blocked {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the runtime never blocked on its output"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_profile_needs_dsh_home_and_dumps_its_composition() {
    let env = Env::new();
    let out = env
        .dsh()
        .env_remove("DSH_HOME")
        .args(["--profile", "sdk"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("DSH_HOME must be set"));
    assert!(out.stdout.is_empty());

    let out = env.dsh().args(["--profile", "tui"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("profile \"tui\" does not exist"));

    let dir = env.home.path().join("profiles/sdk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("cordis.patch.yml"),
        "plugins:\n  - id: agent-loop\n    name: agent-loop\n    config:\n      maxParallelToolCalls: 3\n",
    )
    .unwrap();
    let patch = env.patch("extra.yaml", "plugins:\n  - id: sandbox\n    name: sandbox\n    config:\n      mode: read-only\n      network: \"off\"\n");
    let out = env
        .dsh()
        .args(["--profile", "sdk", "--patch"])
        .arg(&patch)
        .arg("--dump-default-config")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("id: sdk-jsonrpc-server"), "{text}");
    assert!(text.contains("from profile:sdk"), "{text}");
    assert!(text.contains("maxParallelToolCalls: 3"), "{text}");
    assert!(text.contains("cordis.patch.yml"), "{text}");
    assert!(text.contains("extra.yaml"), "{text}");
    assert!(text.contains("mode: read-only"), "{text}");

    // A profile without the server row fails at boot.
    let custom = env.home.path().join("profiles/bare");
    std::fs::create_dir_all(&custom).unwrap();
    std::fs::write(
        custom.join("cordis.yml"),
        "plugins:\n  - id: agents\n    name: agents\n",
    )
    .unwrap();
    let out = env.dsh().args(["--profile", "bare"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not mount the SDK JSON-RPC server"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every user text of a recorded request.
fn user_texts(req: &dsh_testkit::RecordedRequest) -> Vec<String> {
    req.body_json().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn subagents_are_announced_and_a_directory_change_is_logged_and_resumed() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let body = req.body_json().unwrap();
        let tool = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str().map(str::to_owned));
        let users = user_texts(req);
        if users.iter().any(|u| u.contains("child task")) {
            Completion::new().text("CHILD OUT").reply()
        } else if let Some(t) = tool {
            Completion::new().text(&format!("parent saw {t}")).reply()
        } else {
            Completion::new()
                .tool_call_with_id(
                    "c1",
                    "subagent",
                    r#"{"description":"Helper","prompt":"child task"}"#,
                )
                .reply()
        }
    });
    let sub = env.cwd().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let mut rt = Runtime::start(&env);
    rt.initialize(&env.cwd().display().to_string());
    let r = rt.request(
        "p",
        "session/prompt",
        json!({"sessionId":"root","contentBlocks":[{"type":"text","text":"Delegate"}]}),
    );
    assert!(r["result"]["messageId"].is_string(), "{r}");
    let mut frames = Vec::new();
    loop {
        let f = rt.next();
        let idle = f["method"] == "session.status"
            && f["params"]["sessionId"] == "root"
            && f["params"]["status"] == "idle";
        frames.push(f);
        if idle {
            break;
        }
    }
    let started: Vec<(usize, &Value)> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["method"] == "subagent.started")
        .collect();
    assert_eq!(started.len(), 1, "{frames:#?}");
    let (at, s) = started[0];
    assert_eq!(s["params"]["parentSessionId"], "root");
    let child = s["params"]["childSessionId"].as_str().unwrap().to_owned();
    assert_ne!(child, "root");
    // Announced before the child's first event, so the client routes the child's events.
    let first_child_event = frames
        .iter()
        .position(|f| f["method"] == "session.event" && f["params"]["sessionId"] == child.as_str())
        .expect("the child's events are streamed");
    assert!(at < first_child_event);
    let finished = frames
        .iter()
        .find(|f| f["method"] == "subagent.finished")
        .expect("subagent.finished");
    let p = &finished["params"];
    assert_eq!(p["provider"], "spawn");
    assert_eq!(p["agentId"], child.as_str());
    assert_eq!(p["childSessionId"], child.as_str());
    assert_eq!(p["parentSessionId"], "root");
    assert_eq!(p["status"], "ok");
    assert_eq!(p["stopReason"], "completed");
    assert_eq!(p["lastAssistantMessage"], "CHILD OUT");

    // session/working-directory/set logs working-directory/change; a resumed session
    // continues there.
    let r = rt.request(
        "w",
        "session/working-directory/set",
        json!({"sessionId":"root","path":"sub"}),
    );
    let sub_text = sub.canonicalize().unwrap().display().to_string();
    assert_eq!(r["result"]["cwd"], sub_text.as_str(), "{r}");
    let r = rt.request("bye", "shutdown", json!({}));
    assert!(r["result"].is_object());
    assert_eq!(rt.wait_exit(), Some(0));
    let log = session_files(&env.home.path().join("sessions"))
        .into_iter()
        .find(|p| p.display().to_string().contains("root"))
        .unwrap();
    let changes: Vec<Value> = read_rows(&log)
        .into_iter()
        .filter(|e| e["type"] == "working-directory/change")
        .collect();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0]["data"], json!({"cwd": sub_text}));

    let mut rt = Runtime::start(&env);
    rt.initialize(&env.cwd().display().to_string());
    let r = rt.request("r", "session/resume", json!({"sessionId":"root"}));
    assert!(r["result"].is_object(), "{r}");
    let r = rt.request(
        "g",
        "session/working-directory/get",
        json!({"sessionId":"root"}),
    );
    assert_eq!(r["result"]["cwd"], sub_text.as_str(), "{r}");
}
