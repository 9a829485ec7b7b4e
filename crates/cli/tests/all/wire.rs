//! Wire robustness through the real binary (issue 11 item 8, issue 12 items 1, 6, 7): connection
//! reuse, a cut stream retried, tool calls without ids, bad usage values, lone surrogates, and a
//! complete finish without `[DONE]`.

use std::time::Duration;

use dsh_testkit::{Completion, Reply, data_event};
use serde_json::{Value, json};

use crate::support::*;

const BASH_TRUE: &str = r#"{"command":"true","description":"Nothing"}"#;

/// An SSE body from raw `data:` payloads, `[DONE]` appended.
fn raw_sse(payloads: &[String]) -> Reply {
    let mut body = String::new();
    for p in payloads {
        body.push_str(&data_event(p));
    }
    body.push_str(&data_event("[DONE]"));
    Reply::sse().bytes(body)
}

/// A text answer whose finish chunk carries `usage` verbatim (raw JSON text).
fn text_with_usage(text: &str, usage: &str) -> Reply {
    raw_sse(&[
        json!({"id":"r1","choices":[{"index":0,"delta":{"content":text},"finish_reason":null}]})
            .to_string(),
        format!(
            r#"{{"id":"r1","choices":[{{"index":0,"delta":{{"content":""}},"finish_reason":"stop"}}],"usage":{usage}}}"#
        ),
    ])
}

/// Every finish note recorded in the stored assistant messages.
fn finish_notes(events: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for e in events
        .iter()
        .filter(|e| e["type"] == "assistant/message" || e["type"] == "assistant/attempt")
    {
        for rec in e["data"]["stream"].as_array().into_iter().flatten() {
            if rec["chunk"]["type"] == "finish" {
                out.extend(
                    rec["chunk"]["notes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
        }
    }
    out
}

#[test]
fn a_twenty_step_run_uses_one_connection_when_the_terminator_comes_apart() {
    let env = Env::new();
    for i in 0..19 {
        env.server().push(
            Completion::new()
                .tool_call_with_id(&format!("call_00_step{i}"), "bash", BASH_TRUE)
                .reply()
                .terminator_after(Duration::from_millis(15)),
        );
    }
    env.server().push(
        Completion::new()
            .text("twenty steps")
            .reply()
            .terminator_after(Duration::from_millis(15)),
    );
    let out = env.exec(&["go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "twenty steps\n");
    assert_eq!(env.server().request_count(), 20);
    assert!(
        env.server().kept_one_connection(),
        "one keep-alive connection, not {}",
        env.server().connection_count()
    );
}

#[test]
fn a_cut_stream_is_retried_and_the_whole_answer_wins() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .text("the partial ans")
            .no_finish()
            .no_usage()
            .no_done()
            .reply(),
    );
    env.server()
        .push(Completion::new().text("the whole answer").reply());
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "the whole answer\n");
    assert_eq!(env.server().request_count(), 2);
    // The user is told the answer restarted.
    assert!(
        stderr(&out).contains("the answer restarts: STREAM_CLOSED"),
        "{}",
        stderr(&out)
    );
    let events = env.stored_events();
    let attempt = events
        .iter()
        .find(|e| e["type"] == "assistant/attempt")
        .expect("the cut attempt is logged");
    let attempt_text = attempt.to_string();
    assert!(attempt_text.contains("STREAM_CLOSED"), "{attempt_text}");
    assert!(attempt_text.contains("the partial ans"), "{attempt_text}");
    let retry = events.iter().find(|e| e["type"] == "llm/retry").unwrap();
    assert_eq!(retry["data"]["failure"]["code"], "STREAM_CLOSED");
    // The partial output never entered the second request.
    let second = request_messages(env.server(), 1);
    assert!(second.iter().all(|m| m["role"] != "assistant"));
    assert!(!second.iter().any(|m| m.to_string().contains("partial ans")));
}

#[test]
fn retry_stream_closed_false_restores_the_original_turn_end() {
    let env = Env::new();
    let patch = env.patch(
        "no-stream-retry.yaml",
        "plugins:\n  - id: llm-retry\n    name: llm-retry\n    config:\n      default: { initialDelayMs: 1, retryStreamClosed: false }\n",
    );
    env.server().push(
        Completion::new()
            .text("cut")
            .no_finish()
            .no_usage()
            .no_done()
            .reply(),
    );
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("STREAM_CLOSED"), "{}", stderr(&out));
    assert_eq!(env.server().request_count(), 1);
}

#[test]
fn a_bash_call_with_an_empty_or_missing_id_runs_and_the_session_resumes() {
    for missing in [false, true] {
        let env = Env::new();
        let head = if missing {
            json!({"tool_calls":[{"index":0,"type":"function","function":{"name":"bash","arguments":""}}]})
        } else {
            json!({"tool_calls":[{"index":0,"id":"","type":"function","function":{"name":"bash","arguments":""}}]})
        };
        env.server().push(raw_sse(&[
            json!({"id":"resp-7","choices":[{"index":0,"delta":head,"finish_reason":null}]})
                .to_string(),
            json!({"id":"resp-7","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"echo RAN > ran.txt\",\"description\":\"Run\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":5}})
                .to_string(),
        ]));
        env.server().push(Completion::new().text("ran it").reply());
        env.server().push(Completion::new().text("resumed").reply());
        let out = env.exec(&["--session", "noid", "run it"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "ran it\n");
        assert_eq!(
            std::fs::read_to_string(env.work.path().join("ran.txt")).unwrap(),
            "RAN\n"
        );
        // The synthetic id is on the call and on its result, in the log and the next request.
        let id = "call_synth_0_resp-7";
        let second = request_messages(env.server(), 1);
        let call = second.iter().find(|m| m["role"] == "assistant").unwrap();
        assert_eq!(call["tool_calls"][0]["id"], id);
        let result = second.iter().find(|m| m["role"] == "tool").unwrap();
        assert_eq!(result["tool_call_id"], id);
        let events = env.stored_events();
        assert!(
            finish_notes(&events)
                .contains(&json!({"kind":"synthesized-tool-call-id","index":0,"id":id})),
            "{:?}",
            finish_notes(&events)
        );
        // The log is healthy: resume continues it.
        let out = env.exec(&["--resume", "noid", "again"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "resumed\n");
    }
}

#[test]
fn bad_usage_values_are_dropped_and_the_answer_kept() {
    for bad in ["-5", "1e30", "18446744073709551617", "1e308"] {
        let env = Env::new();
        env.server().push(text_with_usage(
            "still here",
            &format!(r#"{{"prompt_tokens":{bad},"completion_tokens":3}}"#),
        ));
        let out = env.exec(&["hi"]);
        assert_eq!(out.status.code(), Some(0), "{bad}: {}", stderr(&out));
        assert_eq!(stdout(&out), "still here\n", "{bad}");
        let events = env.stored_events();
        let message = events
            .iter()
            .find(|e| e["type"] == "assistant/message")
            .unwrap();
        assert_eq!(message["data"]["usage"]["outputTokens"], 3, "{bad}");
        let notes = finish_notes(&events);
        assert_eq!(notes.len(), 1, "{bad}: {notes:?}");
        assert_eq!(notes[0]["kind"], "usage-field-dropped");
        assert_eq!(notes[0]["field"], "usage.prompt_tokens");
    }
}

#[test]
fn a_lone_surrogate_becomes_a_replacement_character_and_the_log_stays_valid() {
    let env = Env::new();
    env.server().push(raw_sse(&[
        r#"{"id":"r","choices":[{"index":0,"delta":{"content":"bad \ud800 char"},"finish_reason":null}]}"#.to_owned(),
        r#"{"id":"r","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#.to_owned(),
    ]));
    let out = env.exec(&["--session", "sur", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "bad \u{fffd} char\n");
    // Every stored row parses (stored_events parses each line) and the note is there.
    let events = env.stored_events();
    assert!(finish_notes(&events).contains(&json!({"kind":"surrogates-replaced","count":1})));
    env.server().push(Completion::new().text("fine").reply());
    let out = env.exec(&["--resume", "sur", "again"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_wrong_field_type_names_the_field() {
    let env = Env::new();
    env.server().push(raw_sse(&[
        r#"{"id":"r","choices":[{"index":0,"delta":{"content":7},"finish_reason":null}]}"#
            .to_owned(),
    ]));
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("MALFORMED_RESPONSE"), "{err}");
    assert!(
        err.contains("`choices[0].delta.content` is a number, expected a string"),
        "{err}"
    );
}

#[test]
fn a_complete_finish_then_eof_without_done_is_accepted() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo NODONE > nd.txt","description":"Run"}"#,
            )
            .no_done()
            .reply(),
    );
    env.server().push(Completion::new().text("after").reply());
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "after\n");
    assert_eq!(
        std::fs::read_to_string(env.work.path().join("nd.txt")).unwrap(),
        "NODONE\n"
    );
    assert_eq!(env.server().request_count(), 2);
    let events = env.stored_events();
    assert!(finish_notes(&events).contains(&json!({"kind":"missing-done"})));
    assert!(!events.iter().any(|e| e["type"] == "llm/retry"));
}
