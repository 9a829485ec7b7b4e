//! Interoperability with the original harness 0.2.1 itself (issue 21): its runtime, fetched
//! from PyPI by `scripts/fetch-original` into `target/test-cache/original/`, runs offline against
//! the testkit (Anthropic Messages dialect at `/v1/messages`) in the same `DSH_HOME` as dsh, and
//! each harness lists, shows and resumes the other's sessions. Skipped, with the reason printed,
//! when the runtime is not there (PyPI unreachable).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use dsh_testkit::anthropic;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_testkit::{Completion, RecordedRequest, Reply};
use serde_json::Value;

use crate::support::*;

#[allow(clippy::print_stderr)]
fn original() -> Option<PathBuf> {
    let exe = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/test-cache/original/runtime/deepseek-harness-sdk-runtime-linux-x64");
    if exe.is_file() {
        return Some(exe);
    }
    eprintln!(
        "skipped: the original harness's runtime is not in target/test-cache/original \
         (scripts/fetch-original downloads it from PyPI; it could not, or was not run)"
    );
    None
}

/// The original headless in `env` (same home, same working directory, same mock), offline:
/// full access without a sandbox backend, telemetry off.
fn original_command(env: &Env, exe: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("DSH_HOME", env.home.path())
        .env("DEEPSEEK_API_KEY", "sk-test-key")
        .env("DEEPSEEK_BASE_URL", env.server().base_url())
        .env("DSH_PERMISSION_MODE", "danger-full-access")
        .env("DSH_TELEMETRY_MODE", "DISABLED")
        .current_dir(env.work.path())
        .stdin(Stdio::null())
        .arg("headless")
        .args(args);
    c
}

/// Runs the original headless in `env` to its end.
fn run_original(env: &Env, exe: &Path, args: &[&str]) -> Output {
    original_command(env, exe, args).output().unwrap()
}

fn is_messages(r: &RecordedRequest) -> bool {
    r.path.ends_with("/v1/messages")
}

/// The original's title side request: no tools.
fn is_title(body: &Value) -> bool {
    body.get("tools").is_none()
}

/// Replies by dialect: the original's Messages requests (its title side requests answered
/// apart) and dsh's chat-completions requests, each from its own queue.
#[derive(Clone, Default)]
struct Script {
    messages: Arc<Mutex<VecDeque<Reply>>>,
    chat: Arc<Mutex<VecDeque<Reply>>>,
}

impl Script {
    fn install(env: &Env) -> Script {
        let s = Script::default();
        let me = s.clone();
        env.server().set_responder(move |req| {
            let body = req.body_json().unwrap_or(Value::Null);
            if is_messages(req) {
                if is_title(&body) {
                    return anthropic::Message::new().text("A title").reply();
                }
                return me
                    .messages
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or_else(|| anthropic::Message::new().text("(unscripted)").reply());
            }
            me.chat
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| Completion::new().text("(unscripted)").reply())
        });
        s
    }
    fn original(&self, r: Reply) {
        self.messages.lock().unwrap().push_back(r);
    }
    fn dsh(&self, r: Reply) {
        self.chat.lock().unwrap().push_back(r);
    }
}

/// The scenarios of the matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Text,
    Bash,
    Parallel,
    Reasoning,
    Interrupted,
}

/// Scripts the first turn of `kind` for the original; returns what its history must show.
fn script_original(s: &Script, kind: Kind) -> Vec<&'static str> {
    match kind {
        Kind::Text => {
            s.original(
                anthropic::Message::new()
                    .text("Text from the original.")
                    .reply(),
            );
            vec!["Text from the original."]
        }
        Kind::Bash => {
            s.original(
                anthropic::Message::new()
                    .tool_use(
                        "toolu_orig_bash_01",
                        "bash",
                        r#"{"description":"Say","command":"echo orig-bash-output"}"#,
                    )
                    .stop_reason("tool_use")
                    .reply(),
            );
            s.original(
                anthropic::Message::new()
                    .text("The original ran bash.")
                    .reply(),
            );
            vec![
                "toolu_orig_bash_01",
                "echo orig-bash-output",
                "orig-bash-output\\n",
                "The original ran bash.",
            ]
        }
        Kind::Parallel => {
            s.original(
                anthropic::Message::new()
                    .tool_use("toolu_orig_read_a", "read", r#"{"file_path":"a.txt"}"#)
                    .tool_use("toolu_orig_read_b", "read", r#"{"file_path":"b.txt"}"#)
                    .stop_reason("tool_use")
                    .reply(),
            );
            s.original(
                anthropic::Message::new()
                    .text("The original read both.")
                    .reply(),
            );
            vec![
                "toolu_orig_read_a",
                "toolu_orig_read_b",
                "alpha-line",
                "beta-line",
                "The original read both.",
            ]
        }
        Kind::Reasoning => {
            s.original(
                anthropic::Message::new()
                    .thinking("The original is thinking hard.", "sig-orig-1")
                    .text("Reasoned by the original.")
                    .reply(),
            );
            vec![
                "The original is thinking hard.",
                "Reasoned by the original.",
            ]
        }
        Kind::Interrupted => {
            let partial = anthropic::Message::new()
                .text("Partial answer of the original")
                .truncated()
                .to_bytes();
            s.original(Reply::sse().bytes(partial).stall());
            vec![]
        }
    }
}

/// Scripts the first turn of `kind` for dsh; returns what its history must show.
fn script_dsh(s: &Script, kind: Kind) -> Vec<&'static str> {
    match kind {
        Kind::Text => {
            s.dsh(Completion::new().text("Text from dsh.").reply());
            vec!["Text from dsh."]
        }
        Kind::Bash => {
            s.dsh(
                Completion::new()
                    .tool_call_with_id(
                        "call_dsh_bash_01",
                        "bash",
                        r#"{"command":"echo dsh-bash-output","description":"Say"}"#,
                    )
                    .reply(),
            );
            s.dsh(Completion::new().text("dsh ran bash.").reply());
            vec![
                "call_dsh_bash_01",
                "echo dsh-bash-output",
                "dsh-bash-output",
                "dsh ran bash.",
            ]
        }
        Kind::Parallel => {
            s.dsh(
                Completion::new()
                    .tool_call_with_id("call_dsh_read_a", "read", r#"{"file_path":"a.txt"}"#)
                    .tool_call_with_id("call_dsh_read_b", "read", r#"{"file_path":"b.txt"}"#)
                    .reply(),
            );
            s.dsh(Completion::new().text("dsh read both.").reply());
            vec![
                "call_dsh_read_a",
                "call_dsh_read_b",
                "alpha-line",
                "beta-line",
                "dsh read both.",
            ]
        }
        Kind::Reasoning => {
            s.dsh(
                Completion::new()
                    .reasoning("dsh is thinking hard.")
                    .text("Reasoned by dsh.")
                    .reply(),
            );
            vec!["dsh is thinking hard.", "Reasoned by dsh."]
        }
        Kind::Interrupted => {
            s.dsh(stalled_text("Partial answer of dsh"));
            vec![]
        }
    }
}

fn files(env: &Env) {
    std::fs::write(env.work.path().join("a.txt"), "alpha-line\n").unwrap();
    std::fs::write(env.work.path().join("b.txt"), "beta-line\n").unwrap();
}

/// Bodies of the requests after `from` in one dialect (title requests left out).
fn bodies(env: &Env, from: usize, messages: bool) -> Vec<Value> {
    env.server().requests()[from..]
        .iter()
        .filter(|r| is_messages(r) == messages)
        .map(|r| r.body_json().unwrap())
        .filter(|b| !(messages && is_title(b)))
        .collect()
}

fn assert_carries(body: &Value, wanted: &[&str], who: &str) {
    let text = serde_json::to_string(&body["messages"]).unwrap();
    for w in wanted {
        assert!(
            text.contains(w),
            "{who}'s resumed request lacks {w:?}: {text}"
        );
    }
}

/// Sends SIGINT to `child` once the mock has the request it is streaming, and waits for it.
fn interrupt(env: &Env, mut child: std::process::Child, requests: usize) -> Output {
    env.server()
        .wait_for_requests_blocking(requests, Duration::from_secs(60))
        .unwrap();
    // The stalled reply has been sent (its head and partial text): interrupt the run.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    use std::io::Read;
    if let Some(mut o) = child.stdout.take() {
        o.read_to_end(&mut stdout).unwrap();
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_end(&mut stderr).unwrap();
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

fn spawn_original(env: &Env, exe: &Path, args: &[&str]) -> std::process::Child {
    original_command(env, exe, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The original writes the first turn; dsh lists, shows and resumes it (its request carries the
/// whole history); then the original resumes what dsh appended.
fn original_then_dsh(kind: Kind) {
    let Some(exe) = original() else { return };
    let env = Env::new();
    files(&env);
    let s = Script::install(&env);
    let mut wanted = script_original(&s, kind);
    wanted.push("first prompt of the original");
    let out = if kind == Kind::Interrupted {
        let child = spawn_original(&env, &exe, &["first prompt of the original"]);
        interrupt(&env, child, 1)
    } else {
        run_original(&env, &exe, &["first prompt of the original"])
    };
    let code = if kind == Kind::Interrupted { 130 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{kind:?}: {}", stderr(&out));
    let id = env.session_id();
    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    assert!(
        stdout(&list).contains(&id),
        "{kind:?}: {}{}",
        stdout(&list),
        stderr(&list)
    );
    let show = env.dsh().args(["sessions", "show", &id]).output().unwrap();
    assert_eq!(show.status.code(), Some(0), "{kind:?}: {}", stderr(&show));
    let from = env.server().request_count();
    s.dsh(Completion::new().text("dsh continues.").reply());
    let out = env.exec(&["--resume", &id, "second prompt, by dsh"]);
    assert_eq!(out.status.code(), Some(0), "{kind:?}: {}", stderr(&out));
    assert_eq!(stdout(&out), "dsh continues.\n");
    let dsh_req = bodies(&env, from, false);
    assert_eq!(dsh_req.len(), 1, "{kind:?}");
    assert_carries(&dsh_req[0], &wanted, "dsh");
    let from = env.server().request_count();
    s.original(
        anthropic::Message::new()
            .text("The original continues.")
            .reply(),
    );
    let out = run_original(
        &env,
        &exe,
        &["--session-id", &id, "third prompt, by the original"],
    );
    assert_eq!(out.status.code(), Some(0), "{kind:?}: {}", stderr(&out));
    let orig_req = bodies(&env, from, true);
    wanted.extend([
        "second prompt, by dsh",
        "dsh continues.",
        "third prompt, by the original",
    ]);
    assert_carries(&orig_req[0], &wanted, "the original");
}

/// dsh writes the first turn; the original resumes it (its request carries the whole history);
/// then dsh lists, shows and resumes what the original appended.
fn dsh_then_original(kind: Kind) {
    let Some(exe) = original() else { return };
    let env = Env::new();
    files(&env);
    let s = Script::install(&env);
    let mut wanted = script_dsh(&s, kind);
    wanted.push("first prompt of dsh");
    let out = if kind == Kind::Interrupted {
        let child = env.spawn(&["first prompt of dsh"]);
        interrupt(&env, child, 1)
    } else {
        env.exec(&["first prompt of dsh"])
    };
    let code = if kind == Kind::Interrupted { 130 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{kind:?}: {}", stderr(&out));
    let id = env.session_id();
    let from = env.server().request_count();
    s.original(
        anthropic::Message::new()
            .text("The original continues.")
            .reply(),
    );
    let out = run_original(
        &env,
        &exe,
        &["--session-id", &id, "second prompt, by the original"],
    );
    assert_eq!(out.status.code(), Some(0), "{kind:?}: {}", stderr(&out));
    let orig_req = bodies(&env, from, true);
    assert!(
        !orig_req.is_empty(),
        "{kind:?}: the original sent nothing: {}",
        stderr(&out)
    );
    assert_carries(&orig_req[0], &wanted, "the original");
    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    assert!(stdout(&list).contains(&id), "{kind:?}: {}", stdout(&list));
    let show = env.dsh().args(["sessions", "show", &id]).output().unwrap();
    assert_eq!(show.status.code(), Some(0), "{kind:?}: {}", stderr(&show));
    let from = env.server().request_count();
    s.dsh(Completion::new().text("dsh continues.").reply());
    let out = env.exec(&["--resume", &id, "third prompt, by dsh"]);
    assert_eq!(out.status.code(), Some(0), "{kind:?}: {}", stderr(&out));
    let dsh_req = bodies(&env, from, false);
    wanted.extend([
        "second prompt, by the original",
        "The original continues.",
        "third prompt, by dsh",
    ]);
    assert_carries(&dsh_req[0], &wanted, "dsh");
}

#[test]
fn text_original_to_dsh() {
    original_then_dsh(Kind::Text);
}
#[test]
fn text_dsh_to_original() {
    dsh_then_original(Kind::Text);
}
#[test]
fn bash_original_to_dsh() {
    original_then_dsh(Kind::Bash);
}
#[test]
fn bash_dsh_to_original() {
    dsh_then_original(Kind::Bash);
}
#[test]
fn parallel_tools_original_to_dsh() {
    original_then_dsh(Kind::Parallel);
}
#[test]
fn parallel_tools_dsh_to_original() {
    dsh_then_original(Kind::Parallel);
}
#[test]
fn reasoning_original_to_dsh() {
    original_then_dsh(Kind::Reasoning);
}
#[test]
fn reasoning_dsh_to_original() {
    dsh_then_original(Kind::Reasoning);
}
#[test]
fn an_interrupted_turn_original_to_dsh() {
    original_then_dsh(Kind::Interrupted);
}
#[test]
fn an_interrupted_turn_dsh_to_original() {
    dsh_then_original(Kind::Interrupted);
}

/// Byte prefix shared by `a` and `b`, over `a`'s length.
fn prefix_ratio(a: &[u8], b: &[u8]) -> f64 {
    dsh_testkit::validate::common_prefix_len(a, b) as f64 / a.len().max(1) as f64
}

/// The cache figure of issue 21: with dsh on the same dialect (`deepseek-anthropic`), how much
/// of the other harness's last request the first resumed request repeats byte for byte, in both
/// directions (printed; the bodies' messages must at least agree up to the resumed prompt).
#[test]
#[allow(clippy::print_stderr)]
fn the_first_resumed_request_reuses_the_other_harness_prefix() {
    let Some(exe) = original() else { return };
    let env = Env::new();
    let s = Script::install(&env);
    let base = env.server().base_url();
    let messages_route = |args: &[&str]| {
        env.dsh()
            .env("DEEPSEEK_ANTHROPIC_BASE_URL", &base)
            .arg("exec")
            .args(["--provider", "deepseek-anthropic"])
            .args(args)
            .output()
            .unwrap()
    };
    // original → dsh
    s.original(anthropic::Message::new().text("Answer one.").reply());
    let out = run_original(&env, &exe, &["prompt one"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = env.session_id();
    let last_original = env
        .server()
        .requests()
        .into_iter()
        .filter(|r| is_messages(r) && !is_title(&r.body_json().unwrap()))
        .last()
        .unwrap();
    let from = env.server().request_count();
    s.original(anthropic::Message::new().text("Answer two.").reply());
    let out = messages_route(&["--resume", &id, "prompt two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first_dsh = env.server().requests()[from..]
        .iter()
        .find(|r| is_messages(r))
        .cloned()
        .unwrap();
    let o2d = prefix_ratio(&last_original.body, &first_dsh.body);
    let o2d_messages = prefix_ratio(
        serde_json::to_string(&last_original.body_json().unwrap()["messages"])
            .unwrap()
            .as_bytes(),
        serde_json::to_string(&first_dsh.body_json().unwrap()["messages"])
            .unwrap()
            .as_bytes(),
    );
    // dsh → original
    let from = env.server().request_count();
    s.original(anthropic::Message::new().text("Answer three.").reply());
    let out = run_original(&env, &exe, &["--session-id", &id, "prompt three"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first_original = env.server().requests()[from..]
        .iter()
        .find(|r| is_messages(r) && !is_title(&r.body_json().unwrap()))
        .cloned()
        .unwrap();
    let d2o = prefix_ratio(&first_dsh.body, &first_original.body);
    let d2o_messages = prefix_ratio(
        serde_json::to_string(&first_dsh.body_json().unwrap()["messages"])
            .unwrap()
            .as_bytes(),
        serde_json::to_string(&first_original.body_json().unwrap()["messages"])
            .unwrap()
            .as_bytes(),
    );
    eprintln!(
        "prefix reuse of the first resumed request: original→dsh {o2d:.3} of the body \
         ({o2d_messages:.3} of the messages array), dsh→original {d2o:.3} ({d2o_messages:.3})"
    );
    let text = serde_json::to_string(&first_original.body_json().unwrap()["messages"]).unwrap();
    for w in [
        "prompt one",
        "Answer one.",
        "prompt two",
        "Answer two.",
        "prompt three",
    ] {
        assert!(text.contains(w), "{w}: {text}");
    }
}

/// The `goal/change` rows of a stored log, and the rounds (`user/message` source `goal`).
fn goal_rows(events: &[Value]) -> (Vec<Value>, Vec<u64>) {
    let changes = events
        .iter()
        .filter(|e| e["type"] == "goal/change")
        .map(|e| e["data"].clone())
        .collect();
    let rounds = events
        .iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["source"]["kind"] == "goal")
        .map(|e| e["data"]["source"]["round"].as_u64().unwrap())
        .collect();
    (changes, rounds)
}

/// `schema` without its `description` members (and the `additionalProperties: true` the
/// original writes on open objects, the JSON Schema default).
fn without_descriptions(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| {
                    *k != "description"
                        && !(*k == "additionalProperties" && **v == Value::Bool(true))
                })
                .map(|(k, v)| (k.clone(), without_descriptions(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// The text of the last tool result in `body` whose text starts with `prefix` (both dialects).
fn tool_text(body: &Value, prefix: &str) -> Option<String> {
    let text = serde_json::to_string(&body["messages"]).ok()?;
    let start = text.rfind(&prefix.replace('"', "\\\""))?;
    let rest = &text[start..];
    let end = rest.find("}\"").map_or(rest.len(), |e| e + 1);
    Some(rest[..end].replace("\\\"", "\""))
}

/// A goal exchanged both ways: the original creates it (at most one round) and ends its run; dsh
/// resumes the session, reads the original's goal (`get_goal`), runs its round and blocks it at
/// the limit; the original resumes that and reads dsh's changes (its own `get_goal`), so each
/// harness folds the other's `goal/change` rows and round messages.
#[test]
fn a_goal_original_to_dsh_and_back() {
    let Some(exe) = original() else { return };
    let env = Env::new();
    let s = Script::install(&env);
    s.original(
        anthropic::Message::new()
            .tool_use(
                "toolu_goal_01",
                "create_goal",
                r#"{"objective":"ship the release","max_goal_rounds":1}"#,
            )
            .stop_reason("tool_use")
            .reply(),
    );
    s.original(anthropic::Message::new().text("Goal set.").reply());
    let out = run_original(&env, &exe, &["Keep at it until the release ships"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = env.session_id();
    let (changes, rounds) = goal_rows(&env.stored_events());
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["operation"], "create");
    assert!(
        rounds.is_empty(),
        "the original's headless run ends with its turn"
    );
    let goal_id = changes[0]["goal"]["id"].as_str().unwrap().to_owned();
    let original_tools = bodies(&env, 0, true)[0]["tools"].clone();

    // dsh: reads the goal, then (armed again on resume) runs round 1 and blocks at the limit.
    let from = env.server().request_count();
    s.dsh(
        Completion::new()
            .tool_call_with_id("call_get_goal", "get_goal", "{}")
            .reply(),
    );
    s.dsh(Completion::new().text("dsh read the goal.").reply());
    s.dsh(Completion::new().text("Round one by dsh.").reply());
    let out = env.exec(&["--resume", &id, "what is the goal?"]);
    // Its run ended with the goal blocked at its limit: exec exits 1 and says why.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the goal is blocked: round-limit"),
        "{}",
        stderr(&out)
    );
    let dsh_req = bodies(&env, from, false);
    assert_eq!(dsh_req.len(), 3, "the prompt's two steps, then round 1");
    let read = tool_text(&dsh_req[1], "{\"goal\"").expect("get_goal's result");
    assert_eq!(
        read,
        format!(
            "{{\"goal\":{{\"id\":\"{goal_id}\",\"revision\":1,\"objective\":\"ship the release\",\"phase\":\"active\",\"roundsStarted\":0,\"maxGoalRounds\":1}},\"activation\":\"armed\"}}"
        )
    );
    // The goal tools take the original's arguments: the same schemas but for descriptions.
    let dsh_tools = dsh_req[1]["tools"].clone();
    for name in ["create_goal", "get_goal", "update_goal"] {
        let theirs = original_tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| without_descriptions(&t["input_schema"]));
        let ours = dsh_tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == name)
            .map(|t| without_descriptions(&t["function"]["parameters"]));
        assert!(theirs.is_some(), "the original declares {name}");
        assert_eq!(ours, theirs, "{name}");
    }
    let (changes, rounds) = goal_rows(&env.stored_events());
    assert_eq!(rounds, [1]);
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[1]["operation"], "block");
    assert_eq!(changes[1]["goal"]["blockedReason"]["code"], "round-limit");

    // The original: folds dsh's round and block; its get_goal says so.
    let from = env.server().request_count();
    s.original(
        anthropic::Message::new()
            .tool_use("toolu_goal_02", "get_goal", "{}")
            .stop_reason("tool_use")
            .reply(),
    );
    s.original(
        anthropic::Message::new()
            .text("The original read it.")
            .reply(),
    );
    let out = run_original(&env, &exe, &["--session-id", &id, "and now?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let orig_req = bodies(&env, from, true);
    assert!(orig_req.len() >= 2, "{}", stderr(&out));
    let read = tool_text(&orig_req[1], "{\"goal\"").expect("the original's get_goal result");
    assert!(
        read.starts_with(&format!(
            "{{\"goal\":{{\"id\":\"{goal_id}\",\"revision\":2,\"objective\":\"ship the release\",\"phase\":\"blocked\",\"roundsStarted\":1,\"maxGoalRounds\":1,\"blockedReason\":{{\"code\":\"round-limit\""
        )),
        "{read}"
    );
}
