//! Provider failures and retries, cancellation.

use std::io::{BufRead, BufReader};

use dsh_testkit::{Completion, deepseek};

use crate::support::*;

#[test]
fn a_429_with_retry_after_then_success() {
    let env = Env::new();
    env.server().push(deepseek::rate_limited(Some("1")));
    env.server()
        .push(Completion::new().text("after the wait").reply());
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "after the wait\n");
    let events = env.stored_events();
    let retry = events
        .iter()
        .find(|e| e["type"] == "llm/retry")
        .expect("llm/retry logged");
    assert_eq!(retry["data"]["delayMs"], 1000);
    assert_eq!(retry["data"]["failure"]["code"], "RATE_LIMIT");
    assert!(kinds(&events).contains(&"llm/retry-started".to_owned()));
    assert_eq!(
        kinds(&events).iter().filter(|k| *k == "turn/start").count(),
        1
    );
}

#[test]
fn a_500_then_success() {
    let env = Env::new();
    env.server().push(deepseek::server_error());
    env.server()
        .push(Completion::new().text("recovered").reply());
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "recovered\n");
    assert_eq!(env.server().request_count(), 2);
}

#[test]
fn a_stalled_stream_trips_the_idle_watchdog_then_succeeds_on_retry() {
    let env = Env::new();
    let patch = env.patch(
        "watchdog.yaml",
        "plugins:\n  - id: deepseek\n    name: deepseek\n    config: { idleTimeoutMs: 300 }\n",
    );
    env.server().push(stalled_text("never finished"));
    env.server()
        .push(Completion::new().text("second time lucky").reply());
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "second time lucky\n");
    let events = env.stored_events();
    let retry = events.iter().find(|e| e["type"] == "llm/retry").unwrap();
    assert_eq!(retry["data"]["failure"]["code"], "TIMEOUT");
    // The partial text of the failed attempt never reached history.
    let second = request_messages(env.server(), 1);
    assert!(second.iter().all(|m| m["role"] != "assistant"));
}

#[test]
fn an_unretryable_error_exits_1_with_the_code() {
    let env = Env::new();
    env.server().push(deepseek::unauthorized());
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("AUTH"), "{err}");
    assert!(!err.contains("sk-test-key"), "{err}");
    assert_eq!(env.server().request_count(), 1);
}

#[test]
fn sigint_while_streaming_exits_130_and_stores_the_delivered_text() {
    let env = Env::new();
    env.server().push(stalled_text("Partial answer"));
    let mut child = env
        .dsh()
        .env("DSH_LOG", "dsh_agent_loop=debug")
        .args(["exec", "talk"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (on the log, no sleeps) until the text was delivered to the loop.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("dsh exited before streaming").unwrap();
        if line.contains("first visible output delivered") {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let events = env.stored_events();
    let msg = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(msg["data"]["interrupted"], true);
    assert_eq!(
        msg["data"]["message"]["content"][0]["text"],
        "Partial answer"
    );
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "aborted");
}
