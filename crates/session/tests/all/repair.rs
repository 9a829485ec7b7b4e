//! Item 7: crash repair cases.

use dsh_session::log::texts;
use dsh_session::{CloseCause, SessionLog};
use serde_json::json;

use crate::common::*;

fn kinds(log: &SessionLog, from: usize) -> Vec<String> {
    log.events()[from..]
        .iter()
        .map(|e| e.kind().to_string())
        .collect()
}

#[test]
fn balanced_log_needs_nothing() {
    let mut log = new_log();
    assert!(log.repair().unwrap().is_empty());
    full_turn(&mut log, 1);
    assert!(log.repair().unwrap().is_empty());
}

#[test]
fn open_turn_without_step() {
    let mut log = new_log();
    full_turn(&mut log, 1);
    log.append(turn_start(2).at(77)).unwrap();
    let n = log.events().len();
    let added = log.repair().unwrap();
    assert_eq!(kinds(&log, n), ["turn/end"]);
    assert_eq!(
        added[0].data(),
        &json!({"turn": 2, "reason": {"kind": "interrupted"}})
    );
    assert_eq!(added[0].time(), 77);
    // exactly once
    assert!(log.repair().unwrap().is_empty());
}

#[test]
fn open_step_without_calls() {
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    log.append(step_start(1, 1)).unwrap();
    log.append(user("u", "hi")).unwrap();
    let n = log.events().len();
    log.repair().unwrap();
    assert_eq!(kinds(&log, n), ["step/end", "turn/end"]);
    assert_eq!(log.events()[n].data(), &json!({"turn": 1, "step": 1}));
}

#[test]
fn unanswered_request_gets_not_started() {
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    log.append(step_start(1, 1)).unwrap();
    log.append(assistant(1, 1, "a", "", &["c1"]).at(5)).unwrap();
    let n = log.events().len();
    log.repair().unwrap();
    assert_eq!(kinds(&log, n), ["tool/result", "step/end", "turn/end"]);
    let r = &log.events()[n];
    assert_eq!(r.source_event_seqs(), None);
    assert_eq!(
        r.data()["message"]["id"],
        format!("interrupted-tool-result-c1-{n}")
    );
    assert_eq!(
        r.data()["error"],
        json!({"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"})
    );
    assert_eq!(
        r.data()["message"]["content"][0]["text"],
        texts::CRASH_NOT_STARTED
    );
    assert_eq!(r.data()["message"]["isError"], true);
    assert_eq!(r.time(), 5);
}

#[test]
fn started_call_gets_outcome_unknown_and_several_calls_keep_log_order() {
    // The reference's §15 example: calls a (started) and b (not started).
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    log.append(step_start(1, 1)).unwrap();
    log.append(assistant(1, 1, "m", "", &["a", "b"])).unwrap();
    let call = log
        .append(tool_call(1, 1, "a").at(1_788_700_000_000))
        .unwrap();
    let n = log.events().len();
    log.repair().unwrap();
    assert_eq!(
        kinds(&log, n),
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );
    let a = &log.events()[n];
    let b = &log.events()[n + 1];
    assert_eq!(
        a.to_json_line(),
        format!(
            r#"{{"type":"tool/result","data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-a-{n}","role":"tool","toolCallId":"a","isError":true,"source":{{"kind":"tool","callId":"a"}},"content":[{{"type":"text","text":"{}"}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"sourceEventSeqs":[{}],"surfaceOp":"append","seq":{n},"time":1788700000000}}"#,
            texts::CRASH_UNKNOWN,
            call.seq()
        )
    );
    assert_eq!(
        b.data()["message"]["id"],
        format!("interrupted-tool-result-b-{}", n + 1)
    );
    assert_eq!(b.data()["error"]["code"], "TOOL_NOT_STARTED");
    // settled calls in the same step are not repaired
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    log.append(step_start(1, 1)).unwrap();
    log.append(assistant(1, 1, "m", "", &["a", "b", "c"]))
        .unwrap();
    let ca = log.append(tool_call(1, 1, "a")).unwrap();
    log.append(tool_result(1, 1, "ra", "a", "ok").with_sources(vec![ca.seq()]))
        .unwrap();
    log.append(tool_call(1, 1, "b")).unwrap();
    let n = log.events().len();
    log.repair().unwrap();
    let ids: Vec<_> = log.events()[n..n + 2]
        .iter()
        .map(|e| e.data()["message"]["toolCallId"].clone())
        .collect();
    assert_eq!(ids, [json!("b"), json!("c")]);
    // the repaired log replays
    let replayed = SessionLog::replay(
        log.header().clone(),
        log.events().iter().map(|e| (**e).clone()).collect(),
    )
    .unwrap();
    assert!(replayed.tracker().open_turn().is_none());
}

#[test]
fn fork_closers_use_fork_texts() {
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    log.append(step_start(1, 1)).unwrap();
    log.append(assistant(1, 1, "m", "", &["c1", "c2"])).unwrap();
    log.append(tool_call(1, 1, "c2")).unwrap(); // 3
    let child = log.fork_seed(Some(3), header("child")).unwrap();
    let kinds: Vec<_> = child.events()[4..]
        .iter()
        .map(|e| e.kind().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "session/end-seed",
            "tool/result",
            "tool/result",
            "step/end",
            "turn/end"
        ]
    );
    assert_eq!(
        child.events()[5].data()["message"]["id"],
        "forked-tool-result-c1-5"
    );
    assert_eq!(
        child.events()[5].data()["message"]["content"][0]["text"],
        texts::FORK_NOT_STARTED
    );
    assert_eq!(
        child.events()[6].data()["message"]["id"],
        "forked-tool-result-c2-6"
    );
    assert_eq!(child.events()[6].source_event_seqs(), Some(&[3][..]));
    assert_eq!(child.events()[8].data()["reason"]["kind"], "forked");
    assert!(child.header().is_seeded);
    assert_eq!(
        child.header().parent_session.as_deref(),
        Some("session-test")
    );
    assert_eq!(child.inherited_cut(), Some(4));
    let _ = CloseCause::Forked;
}
