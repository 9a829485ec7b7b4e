//! Item 7: append validation (each rejection rule) and immutability.

use std::sync::Arc;

use dsh_session::{LogError, NewEvent, Rejection, SessionHeader, SessionLog, SurfaceOp};
use serde_json::json;

use crate::common::*;

/// The class of rule a rejection names (its variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    UnknownType,
    Lossless,
    Decode,
    Metadata,
    Payload,
    Structure,
    Surface,
    Inbox,
    Relation,
}

fn class(r: &Rejection) -> Class {
    match r {
        Rejection::UnknownRequiredType(_) => Class::UnknownType,
        Rejection::NotLossless(_) => Class::Lossless,
        Rejection::Decode(_) | Rejection::Serialize(_) => Class::Decode,
        Rejection::Metadata(_) => Class::Metadata,
        Rejection::Payload(_) => Class::Payload,
        Rejection::Structure(_) => Class::Structure,
        Rejection::Surface(_) => Class::Surface,
        Rejection::Inbox(_) => Class::Inbox,
        Rejection::Relation(_) => Class::Relation,
    }
}

fn opened() -> SessionLog {
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    log.append(step_start(1, 1)).unwrap();
    log.append(system(1, 1, "s", "sys")).unwrap(); // 2
    log.append(user("u1", "hi")).unwrap(); // 3
    log
}

/// Asserts that `ev` is rejected with a rule of class `expected` whose message names `needle`,
/// and that nothing was committed.
#[track_caller]
fn rejects(expected: Class, log: &mut SessionLog, ev: NewEvent, needle: &str) {
    let before = log.len();
    let gens = (
        log.surface().replace_generation(),
        log.surface().content_generation(),
    );
    let err = log.append(ev).expect_err("must be rejected");
    assert_eq!(class(&err.reason), expected, "{err}");
    assert!(
        err.to_string().contains(needle),
        "expected {needle:?} in {err}"
    );
    assert_eq!(log.len(), before, "nothing committed");
    assert_eq!(
        gens,
        (
            log.surface().replace_generation(),
            log.surface().content_generation()
        )
    );
}

#[test]
fn seq_is_contiguous_and_time_assigned() {
    let mut log = opened();
    let ev = log.append(user("u2", "x").at(42)).unwrap();
    assert_eq!(ev.seq(), 4);
    assert_eq!(ev.time(), 42);
    let ev = log.append(user("u3", "x")).unwrap();
    assert!(ev.time() > 1_700_000_000_000);
    for (i, e) in log.events().iter().enumerate() {
        assert_eq!(e.seq(), i as u64);
    }
}

#[test]
fn lossless_data_is_required() {
    let mut log = opened();
    let neg_zero: serde_json::Value = serde_json::from_str("{\"x\":-0.0}").unwrap();
    rejects(
        Class::Lossless,
        &mut log,
        NewEvent::new("dsh/x", neg_zero),
        "negative zero",
    );
    rejects(
        Class::Lossless,
        &mut log,
        NewEvent::new("dsh/x", json!({"n": 9_007_199_254_740_993_u64})),
        "safe range",
    );
    rejects(
        Class::Lossless,
        &mut log,
        user("u9", "x").at(i64::MAX),
        "time",
    );
}

#[test]
fn surface_metadata_rules() {
    let mut log = opened();
    let mut no_op = user("u2", "x");
    no_op.surface_op = None;
    rejects(Class::Metadata, &mut log, no_op, "must carry surfaceOp");
    rejects(
        Class::Metadata,
        &mut log,
        turn_end(1).with_surface_op(SurfaceOp::Append),
        "only surface events",
    );
    rejects(
        Class::Metadata,
        &mut log,
        NewEvent::new("request/context", json!({"provider":"p","model":"m"})).with_sources(vec![1]),
        "only surface events",
    );
    rejects(
        Class::Metadata,
        &mut log,
        assistant(1, 1, "a", "x", &[]).with_sources(vec![3]),
        "assistant/message must not carry",
    );
    rejects(
        Class::Metadata,
        &mut log,
        NewEvent::new("dsh/note", json!({})).with_surface_op(SurfaceOp::Append),
        "plugin-owned",
    );
    rejects(
        Class::Metadata,
        &mut log,
        user("u2", "x").with_sources(vec![7]),
        "not earlier",
    );
    rejects(
        Class::Metadata,
        &mut log,
        user("u2", "x").with_sources(vec![]),
        "empty",
    );
    rejects(
        Class::Metadata,
        &mut log,
        user("u2", "x").with_sources(vec![1, 1]),
        "repeats",
    );
}

#[test]
fn unknown_types_need_ignorable_and_plugin_types_get_it() {
    let mut log = opened();
    let mut required = NewEvent::new("acme/thing", json!({}));
    required.ignorable = false;
    rejects(
        Class::UnknownType,
        &mut log,
        required,
        "unknown required event type",
    );
    let ev = log
        .append(NewEvent::new("dsh/turn-budget", json!({"steps": 3})))
        .unwrap();
    assert!(ev.ignorable());
    assert!(ev.to_json_line().contains("\"ignorable\":true"));
}

#[test]
fn message_slot_rules() {
    let mut log = opened();
    rejects(
        Class::Decode,
        &mut log,
        NewEvent::new(
            "user/message",
            json!({"role":"user","content":[],"source":{"kind":"user"},"id":""}),
        ),
        "id",
    );
    rejects(
        Class::Payload,
        &mut log,
        NewEvent::new(
            "user/message",
            json!({"role":"assistant","content":[],"source":{"kind":"user"},"id":"x"}),
        ),
        "role",
    );
    rejects(
        Class::Payload,
        &mut log,
        NewEvent::new(
            "user/message",
            json!({"role":"user","content":[],"source":{"kind":"plugin","plugin":"x"},"id":"x"}),
        ),
        "plugin",
    );
    rejects(
        Class::Payload,
        &mut log,
        NewEvent::new(
            "user/message",
            json!({"role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"user"},"id":"x"}),
        ),
        "retired",
    );
    rejects(
        Class::Payload,
        &mut log,
        NewEvent::new(
            "user/message",
            json!({"role":"user","content":[{"type":"tool-addition","toolName":"t"}],"source":{"kind":"user"},"id":"x"}),
        ),
        "developer role",
    );
}

#[test]
fn replace_rules() {
    let mut log = opened();
    log.append(assistant(1, 1, "a1", "hello", &[])).unwrap(); // 4
    log.append(user("u2", "more")).unwrap(); // 5
    // span must exist in the current surface
    rejects(
        Class::Surface,
        &mut log,
        user("c", "sum").replacing(0, 3).with_sources(vec![0, 3]),
        "not a current surface node",
    );
    // in order
    rejects(
        Class::Surface,
        &mut log,
        user("c", "sum").replacing(5, 3).with_sources(vec![3, 4, 5]),
        "reversed",
    );
    // covered by the sources
    rejects(
        Class::Surface,
        &mut log,
        user("c", "sum").replacing(3, 5).with_sources(vec![3, 5]),
        "cover shadowed node 4",
    );
    // the system head rule
    rejects(
        Class::Surface,
        &mut log,
        user("c", "sum").replacing(2, 3).with_sources(vec![2, 3]),
        "protected system head",
    );
    rejects(
        Class::Surface,
        &mut log,
        system(1, 1, "s2", "new")
            .replacing(2, 3)
            .with_sources(vec![2, 3]),
        "protected system head",
    );
    // assistant never replaces
    rejects(
        Class::Surface,
        &mut log,
        assistant(1, 1, "a9", "x", &[]).replacing(4, 4),
        "never replaces",
    );
    // a valid compaction-like replacement
    let ev = log
        .append(user("c", "sum").replacing(3, 5).with_sources(vec![3, 4, 5]))
        .unwrap();
    assert_eq!(roles(&log), format!("system@2 user@{}", ev.seq()));
    assert_eq!(log.surface().replace_generation(), 1);
    // replaced nodes are gone from the surface
    rejects(
        Class::Surface,
        &mut log,
        user("c2", "sum").replacing(4, 4).with_sources(vec![4]),
        "not a current surface node",
    );
    // the head may be replaced by one system message
    log.append(system(1, 1, "s3", "").replacing(2, 2).with_sources(vec![2]))
        .unwrap();
    assert_eq!(roles(&log), format!("user@{}", ev.seq()));
}

#[test]
fn tool_result_replacement_is_content_only() {
    let mut log = opened();
    log.append(assistant(1, 1, "a1", "", &["c1"])).unwrap(); // 4
    log.append(tool_call(1, 1, "c1")).unwrap(); // 5
    log.append(tool_result(1, 1, "r1", "c1", "long output").with_sources(vec![5]))
        .unwrap(); // 6
    let mut other = tool_result(1, 1, "r-other", "c1", "short")
        .replacing(6, 6)
        .with_sources(vec![6]);
    rejects(
        Class::Surface,
        &mut log,
        other.clone(),
        "only in message.content",
    );
    other = tool_result(1, 1, "r1", "c1", "short")
        .replacing(3, 3)
        .with_sources(vec![3]);
    rejects(Class::Surface, &mut log, other, "exactly one tool/result");
    let ok = tool_result(1, 1, "r1", "c1", "short")
        .replacing(6, 6)
        .with_sources(vec![6]);
    log.append(ok).unwrap();
    let last = log.derive_messages().last().cloned().unwrap();
    assert_eq!(last.text(), "short");
}

#[test]
fn turn_and_tool_relationships() {
    let mut log = new_log();
    rejects(
        Class::Structure,
        &mut log,
        step_start(1, 1),
        "outside an open turn",
    );
    rejects(Class::Structure, &mut log, turn_end(1), "not the open turn");
    log.append(turn_start(1)).unwrap();
    rejects(Class::Structure, &mut log, turn_start(2), "already open");
    rejects(
        Class::Structure,
        &mut log,
        assistant(1, 1, "a", "x", &[]),
        "not the open step",
    );
    log.append(step_start(1, 1)).unwrap();
    rejects(Class::Structure, &mut log, turn_end(1), "step is open");
    log.append(assistant(1, 1, "a", "", &["c1", "c2"])).unwrap();
    rejects(
        Class::Structure,
        &mut log,
        assistant(1, 1, "a2", "", &["c1"]),
        "advertised twice",
    );
    rejects(
        Class::Structure,
        &mut log,
        tool_call(1, 1, "nope"),
        "no advertised",
    );
    rejects(
        Class::Structure,
        &mut log,
        NewEvent::new(
            "tool/call",
            json!({"turn":1,"step":1,"callId":"c1","name":"other","arguments":"{}"}),
        ),
        "repeat the block",
    );
    rejects(
        Class::Structure,
        &mut log,
        tool_result(1, 1, "r", "c1", "x"),
        "precedes its tool/call",
    );
    rejects(Class::Structure, &mut log, step_end(1, 1), "unresolved");
    let c = log.append(tool_call(1, 1, "c1")).unwrap();
    rejects(Class::Structure, &mut log, tool_call(1, 1, "c1"), "twice");
    log.append(tool_result(1, 1, "r1", "c1", "x").with_sources(vec![c.seq()]))
        .unwrap();
    rejects(
        Class::Structure,
        &mut log,
        tool_result(1, 1, "r1b", "c1", "x"),
        "settles no pending",
    );
    let c2 = log.append(tool_call(1, 1, "c2")).unwrap();
    log.append(tool_result(1, 1, "r2", "c2", "x").with_sources(vec![c2.seq()]))
        .unwrap();
    log.append(step_end(1, 1)).unwrap();
    log.append(turn_end(1)).unwrap();
    rejects(Class::Structure, &mut log, turn_start(1), "does not follow");
    rejects(
        Class::Structure,
        &mut log,
        NewEvent::new("request/context", json!({"provider":"p","model":"m"})),
        "outside an open turn",
    );
}

#[test]
fn request_header_and_developer_rules() {
    let mut log = opened();
    let hdr = |extra: serde_json::Value| {
        let mut d = json!({"header": {"config": {"provider": "p", "model": "m"}, "tools": [{"name":"t1","description":"d","parameters":{"type":"object"}}]}, "reason": "initial"});
        for (k, v) in extra.as_object().unwrap() {
            d["header"][k] = v.clone();
        }
        NewEvent::new("request/header", d)
    };
    rejects(
        Class::Payload,
        &mut log,
        hdr(json!({"system": "x"})),
        "header.system",
    );
    rejects(
        Class::Payload,
        &mut log,
        hdr(json!({"tools": []})),
        "omitted when empty",
    );
    rejects(
        Class::Payload,
        &mut log,
        hdr(json!({"adapterDefaults": {}})),
        "adapterDefaults",
    );
    rejects(
        Class::Decode,
        &mut log,
        hdr(json!({"tools": "{{tools}}"})),
        "expected a sequence",
    );
    // The same rules on canonical texts (keys in the typed order), which are checked on the
    // typed payload rather than as a JSON tree.
    let canonical = |header: serde_json::Value, tail: &str| {
        let text = format!(r#"{{"header":{header},"reason":"initial"{tail}}}"#);
        NewEvent::new("request/header", serde_json::from_str(&text).unwrap())
    };
    let tool = r#"{"name":"t1","description":"d","parameters":{"type":"object"}}"#;
    for (header, tail, expect) in [
        (
            format!(r#"{{"config":{{"provider":"p","model":""}},"tools":[{tool}]}}"#),
            "",
            "config.model",
        ),
        (
            format!(r#"{{"config":{{"provider":"p","model":"m"}},"adapterDefaults":{{}},"tools":[{tool}]}}"#),
            "",
            "adapterDefaults must not be",
        ),
        (
            format!(r#"{{"config":{{"provider":"p","model":"m"}},"adapterDefaults":{{"temperature":true}},"tools":[{tool}]}}"#),
            "",
            "adapterDefaults.temperature",
        ),
        (
            r#"{"config":{"provider":"p","model":"m"},"tools":[]}"#.to_string(),
            "",
            "omitted when empty",
        ),
        (
            r#"{"config":{"provider":"p","model":"m"},"tools":[{"name":"t1","description":"d","parameters":"x"}]}"#.to_string(),
            "",
            "tools[0] must be",
        ),
        (
            r#"{"config":{"provider":"p","model":"m"},"tools":[{"name":"t1","description":"d","parameters":{},"deferLoading":false}]}"#.to_string(),
            "",
            "deferLoading must be true",
        ),
        (
            format!(r#"{{"config":{{"provider":"p","model":"m"}},"tools":[{tool}]}}"#),
            r#","startsSeries":false"#,
            "startsSeries must be true",
        ),
    ] {
        let header: serde_json::Value = serde_json::from_str(&header).unwrap();
        rejects(Class::Payload, &mut log, canonical(header, tail), expect);
    }
    let h = log.append(hdr(json!({}))).unwrap();
    let dev = |header_seq: Option<u64>, name: &str| {
        let mut d = json!({"turn":1,"step":1,"message":{"source":{"kind":"tool-registry"},"content":[{"type":"tool-addition","toolName":name}],"role":"developer","id":"d1"}});
        if let Some(s) = header_seq {
            d["headerSeq"] = json!(s);
        }
        NewEvent::new("developer/message", d)
    };
    rejects(
        Class::Payload,
        &mut log,
        dev(None, "t1"),
        "headerSeq exactly when",
    );
    rejects(
        Class::Relation,
        &mut log,
        dev(Some(3), "t1"),
        "earlier request/header",
    );
    rejects(
        Class::Relation,
        &mut log,
        dev(Some(h.seq()), "t9"),
        "exactly one tool",
    );
    log.append(dev(Some(h.seq()), "t1")).unwrap();
}

#[test]
fn seeds_need_a_seeded_header() {
    let mut log = opened();
    rejects(
        Class::Relation,
        &mut log,
        NewEvent::new("session/end-seed", json!({"inherited": true})),
        "isSeeded",
    );
    rejects(
        Class::Payload,
        &mut log,
        NewEvent::new("session/end-seed", json!({"x": 1})),
        "{}",
    );
    log.append(NewEvent::new("session/end-seed", json!({})))
        .unwrap();
    let mut h = SessionHeader::new("s", 1, None);
    h.is_seeded = true;
    let err = SessionLog::replay(h, Vec::new()).unwrap_err();
    assert!(
        matches!(&err, LogError::Rejected { error, .. } if class(&error.reason) == Class::Relation),
        "{err}"
    );
    assert!(err.to_string().contains("isSeeded"));
}

#[test]
fn events_are_immutable_and_shared() {
    let mut log = opened();
    let mut data = msg("user", "u2", "original");
    let ev = log
        .append(NewEvent::new("user/message", data.clone()))
        .unwrap();
    // Mutating the caller's value afterwards does not change the log.
    data["content"][0]["text"] = json!("changed");
    assert_eq!(log.events()[4].data()["content"][0]["text"], "original");
    // Readers share the committed event (no copy).
    assert!(Arc::ptr_eq(&ev, &log.events()[4]));
    let snapshot: Vec<_> = log.events().to_vec();
    log.append(user("u3", "later")).unwrap();
    assert!(Arc::ptr_eq(&snapshot[4], &log.events()[4]));
    assert_eq!(Arc::strong_count(&ev), 3);
}

#[test]
fn image_offload_projection() {
    let mut log = opened();
    let img = json!({"type":"image","attachment":{"attachmentId":"sha256:ab","mediaType":"image/png","width":1,"height":1,"bytes":3}});
    let m = json!({"role":"user","content":[img.clone(), {"type":"text","text":"see"}, img],"source":{"kind":"user"},"id":"ui"});
    let node = log.append(NewEvent::new("user/message", m)).unwrap();
    let off = |t: serde_json::Value| NewEvent::new("image/offload", json!({"targets": t}));
    rejects(
        Class::Surface,
        &mut log,
        off(json!([{"seq": 2, "imageIndexes": [0]}])),
        "not a user/message",
    );
    rejects(
        Class::Surface,
        &mut log,
        off(json!([{"seq": node.seq(), "imageIndexes": [2]}])),
        "does not have",
    );
    rejects(
        Class::Surface,
        &mut log,
        off(json!([{"seq": node.seq(), "imageIndexes": [1, 0]}])),
        "strictly increasing",
    );
    log.append(off(json!([{"seq": node.seq(), "imageIndexes": [1]}])))
        .unwrap();
    rejects(
        Class::Surface,
        &mut log,
        off(json!([{"seq": node.seq(), "imageIndexes": [1]}])),
        "already offloaded",
    );
    assert_eq!(log.surface().content_generation(), 1);
    assert_eq!(log.surface().replace_generation(), 0);
    let derived = log.derive_messages();
    let v = serde_json::to_value(&*derived[2]).unwrap();
    assert_eq!(v["content"][2]["offloaded"], true);
    assert!(v["content"][0].get("offloaded").is_none());
    // the stored event is untouched
    assert!(
        log.events()[node.seq() as usize].data()["content"][2]
            .get("offloaded")
            .is_none()
    );
}

#[test]
fn inbox_splices_rebuild_both_queues_and_check_bounds() {
    let mut log = new_log();
    let splice = |target: &str, start: u64, removed: u64, ids: &[&str]| {
        let inserted: Vec<_> = ids.iter().map(|i| msg("user", i, "queued")).collect();
        let mut d = json!({"target": target, "start": start, "inserted": inserted});
        if removed > 0 {
            d["removedCount"] = json!(removed);
        }
        NewEvent::new("agent/inbox/spliced", d)
    };
    log.append(splice("next-turn", 0, 0, &["a", "b"])).unwrap();
    log.append(splice("next-step", 0, 0, &["c"])).unwrap();
    rejects(
        Class::Inbox,
        &mut log,
        splice("next-turn", 3, 0, &["x"]),
        "outside its list",
    );
    rejects(
        Class::Inbox,
        &mut log,
        splice("next-turn", 1, 2, &[]),
        "outside its list",
    );
    rejects(
        Class::Inbox,
        &mut log,
        splice("next-step", 1, 0, &["a"]),
        "queued twice",
    );
    log.append(splice("next-turn", 0, 1, &[])).unwrap(); // claim "a"
    let ids = |v: &Vec<Arc<dsh_llm::Message>>| v.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&log.inbox().next_turn), ["b"]);
    assert_eq!(ids(&log.inbox().next_step), ["c"]);
    log.append(splice("next-turn", 1, 0, &["a"])).unwrap(); // a claimed id may be queued again
    let replayed = SessionLog::replay(
        log.header().clone(),
        log.events().iter().map(|e| (**e).clone()).collect(),
    )
    .unwrap();
    assert_eq!(replayed.inbox(), log.inbox());
}

#[test]
fn feature_relationships_commands_retries_titles() {
    let mut log = opened(); // turn 1 step 1 open; 3 = human user/message
    let cmd = |kind: &str, d: serde_json::Value| NewEvent::new(kind, d);
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "command/done",
            json!({"commandId": "c1", "kind": "success"}),
        ),
        "follows no command/run",
    );
    log.append(cmd(
        "command/run",
        json!({"commandId": "c1", "name": "compact", "source": "user"}),
    ))
    .unwrap();
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "command/run",
            json!({"commandId": "c1", "name": "x", "source": "user"}),
        ),
        "not unique",
    );
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "command/done",
            json!({"commandId": "c1", "kind": "error", "sourceEventSeq": 3}),
        ),
        "on success only",
    );
    log.append(cmd(
        "command/done",
        json!({"commandId": "c1", "kind": "success", "sourceEventSeq": 3}),
    ))
    .unwrap();
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "command/done",
            json!({"commandId": "c1", "kind": "success"}),
        ),
        "twice",
    );

    let retry = json!({"retryId": "r1", "turn": 1, "step": 1, "provider": "p", "mode": "normal", "policyKey": "k", "retry": 1, "maxRetries": 2, "delayMs": 1, "failure": {"message": "m", "code": "SERVER"}});
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "llm/retry-started",
            json!({"retryId": "r1", "turn": 1, "step": 1, "retry": 1}),
        ),
        "no scheduled retry",
    );
    log.append(cmd("llm/retry", retry.clone())).unwrap();
    rejects(
        Class::Relation,
        &mut log,
        cmd("llm/retry", retry),
        "not unique",
    );
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "llm/retry-started",
            json!({"retryId": "r1", "turn": 1, "step": 1, "retry": 2}),
        ),
        "no scheduled retry",
    );
    log.append(cmd(
        "llm/retry-started",
        json!({"retryId": "r1", "turn": 1, "step": 1, "retry": 1}),
    ))
    .unwrap();
    rejects(
        Class::Relation,
        &mut log,
        cmd(
            "llm/retry-started",
            json!({"retryId": "r1", "turn": 1, "step": 1, "retry": 1}),
        ),
        "twice",
    );

    let title = |seqs: serde_json::Value| {
        cmd(
            "session/title",
            json!({"title": "t", "messageSeqs": seqs, "source": {"kind": "fallback"}}),
        )
    };
    rejects(
        Class::Relation,
        &mut log,
        title(json!([2])),
        "human user/message",
    );
    rejects(Class::Relation, &mut log, title(json!([3, 3])), "distinct");
    log.append(title(json!([3]))).unwrap();
    log.append(title(json!([]))).unwrap(); // a user rename cites none
}
