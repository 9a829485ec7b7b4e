//! The typed API: core appends, plugin events, unknown closed-set values, the inbox projection,
//! errors by variant.

use std::sync::Arc;

use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_session::codec::encode_jsonl;
use dsh_session::data::{
    AbortCause, InboxOutcome, InboxSpliced, RequestReason, StepStart, Target, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use dsh_session::{
    CoreEvent, Event, EventError, EventKind, Inbox, LogError, NewEvent, PluginEvent, Rejection,
    SessionLog, SurfaceOp,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::*;

fn user_msg(id: &str, text: &str) -> Arc<Message> {
    Arc::new(Message::new(
        id,
        Role::User,
        vec![ContentBlock::text(text)],
        MessageSource::user(),
    ))
}

fn reread(log: &SessionLog) -> Result<SessionLog, LogError> {
    let bytes = encode_jsonl(log.header(), log.events());
    let text = std::str::from_utf8(&bytes).unwrap();
    let events = text
        .lines()
        .skip(1)
        .enumerate()
        .map(|(i, l)| Event::from_line(l, i as u64).unwrap())
        .collect();
    SessionLog::replay(log.header().clone(), events)
}

#[test]
fn core_appends_are_typed_and_read_back_as_variants() {
    let mut log = new_log();
    log.append(NewEvent::core(TurnStart { turn: 1 })).unwrap();
    log.append(NewEvent::core(StepStart { turn: 1, step: 1 }))
        .unwrap();
    let u = log
        .append(NewEvent::core(UserMessage(user_msg("u1", "hi"))))
        .unwrap();
    assert_eq!(u.event_kind(), &EventKind::UserMessage);
    assert_eq!(u.surface_op(), Some(SurfaceOp::Append));
    assert_eq!(
        u.data_json(),
        r#"{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"}"#
    );
    // The surface shares the payload's message: no second decode, no copy.
    let history = log.derive_messages();
    assert!(Arc::ptr_eq(&history[0], u.message().unwrap()));
    let again = reread(&log).unwrap();
    assert!(matches!(
        again.events()[0].core(),
        Some(CoreEvent::TurnStart(TurnStart { turn: 1 }))
    ));
    assert!(matches!(
        again.events()[2].core(),
        Some(CoreEvent::UserMessage(m)) if m.0.text() == "hi"
    ));
    assert_eq!(again.derive_messages(), log.derive_messages());
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnBudget {
    steps_left: u64,
    note: Option<String>,
}

impl PluginEvent for TurnBudget {
    const TYPE: &'static str = "dsh/turn-budget";
}

#[test]
fn plugin_events_round_trip_losslessly_and_typed() {
    let mut log = new_log();
    let ev = log
        .append(
            NewEvent::plugin(&TurnBudget {
                steps_left: 3,
                note: None,
            })
            .unwrap(),
        )
        .unwrap();
    assert!(ev.ignorable(), "a plugin's own type is written ignorable");
    assert_eq!(ev.event_kind(), &EventKind::Other("dsh/turn-budget".into()));
    assert!(ev.core().is_none());
    assert_eq!(
        ev.plugin::<TurnBudget>().unwrap().unwrap(),
        TurnBudget {
            steps_left: 3,
            note: None
        }
    );
    // Another writer's extra members survive a read and a write back.
    let line = r#"{"type":"dsh/turn-budget","data":{"stepsLeft":2,"note":"x","future":[1,2.50]},"ignorable":true,"seq":1,"time":7}"#;
    let read = Event::from_line(line, 1).unwrap();
    assert_eq!(read.to_json_line(), line);
    assert_eq!(read.plugin::<TurnBudget>().unwrap().unwrap().steps_left, 2);
    assert!(ev.plugin::<NotMine>().is_none());
}

#[derive(Debug, Serialize, Deserialize)]
struct NotMine {}

impl PluginEvent for NotMine {
    const TYPE: &'static str = "dsh/other";
}

#[test]
fn unknown_closed_set_values_are_kept_and_reported_on_read_and_refused_on_append() {
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    let foreign = json!({"turn": 1, "reason": {"kind": "paused", "until": 5}});
    // dsh never writes an unknown reason.
    let err = log
        .append(NewEvent::new("turn/end", foreign.clone()))
        .unwrap_err();
    assert!(matches!(err.reason, Rejection::Payload(_)), "{err}");
    assert!(err.to_string().contains("paused"));
    // Another writer's log is read, the value kept verbatim and reported.
    let lines = [
        r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":1}"#.to_owned(),
        format!(r#"{{"type":"turn/end","data":{foreign},"seq":1,"time":1}}"#),
        r#"{"type":"turn/start","data":{"turn":2},"seq":2,"time":1}"#.to_owned(),
        r#"{"type":"turn/end","data":{"turn":2,"reason":{"kind":"aborted","reason":{"kind":"timeout"}}},"seq":3,"time":1}"#.to_owned(),
        r#"{"type":"turn/start","data":{"turn":3},"seq":4,"time":1}"#.to_owned(),
        r#"{"type":"step/start","data":{"turn":3,"step":1},"seq":5,"time":1}"#.to_owned(),
        r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"rebase"},"seq":6,"time":1}"#.to_owned(),
    ];
    let events: Vec<Event> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| Event::from_line(l, i as u64).unwrap())
        .collect();
    let read = SessionLog::replay(header("session-test"), events).unwrap();
    let unknown: Vec<_> = read
        .unknown_values()
        .iter()
        .map(|u| (u.seq, u.field, u.value.as_str()))
        .collect();
    assert_eq!(
        unknown,
        [
            (1, "turn/end reason.kind", "paused"),
            (3, "turn/end reason.kind", "aborted/timeout"),
            (6, "request/header reason", "rebase")
        ]
    );
    assert!(matches!(
        read.events()[1].core(),
        Some(CoreEvent::TurnEnd(t)) if matches!(&t.reason, TurnEndReason::Unknown(m) if m["until"] == 5)
    ));
    assert!(matches!(
        read.events()[3].core(),
        Some(CoreEvent::TurnEnd(t)) if matches!(&t.reason, TurnEndReason::Aborted { reason: AbortCause::Unknown(_) })
    ));
    assert!(matches!(
        read.events()[6].core(),
        Some(CoreEvent::RequestHeader(h)) if h.reason == RequestReason::Unknown("rebase".into())
    ));
    for (ev, line) in read.events().iter().zip(&lines) {
        assert_eq!(&ev.to_json_line(), line, "bytes kept");
    }
    assert_eq!(read.tracker().open_turn(), Some(3));
}

#[test]
fn the_inbox_projection_is_typed_and_replayable() {
    let mut log = new_log();
    let splice = |target, start, removed: Option<u64>, ids: &[&str], outcome| {
        NewEvent::core(InboxSpliced {
            target,
            start,
            removed_count: removed,
            inserted: ids.iter().map(|i| user_msg(i, "x")).collect(),
            outcome,
        })
    };
    log.append(splice(Target::NextTurn, 0, None, &["a", "b"], None))
        .unwrap();
    log.append(splice(Target::NextStep, 0, None, &["s"], None))
        .unwrap();
    log.append(splice(
        Target::NextTurn,
        0,
        Some(1),
        &[],
        Some(InboxOutcome::Canceled),
    ))
    .unwrap();
    let inbox = log.inbox().clone();
    assert_eq!(inbox.list(Target::NextTurn)[0].id, "b");
    assert_eq!(inbox.list(Target::NextStep)[0].id, "s");
    assert!(inbox.contains_id("s") && !inbox.contains_id("a"));
    assert_eq!(inbox.len(), 2);
    assert_eq!(Inbox::replay(log.events()), inbox);
    let err = log
        .append(splice(Target::NextStep, 0, None, &["b"], None))
        .unwrap_err();
    assert!(matches!(err.reason, Rejection::Inbox(_)), "{err}");
    // An agent's own copy follows the same rules.
    let mut mine = inbox.clone();
    let removed = mine.splice(Target::NextTurn, 0, 1, Vec::new()).unwrap();
    assert_eq!(removed[0].id, "b");
    assert!(matches!(
        mine.splice(Target::NextTurn, 1, 0, Vec::new()),
        Err(Rejection::Inbox(_))
    ));
    // A target outside the closed set does not decode: the log is refused, not guessed.
    let bad = Event::from_line(
        r#"{"type":"agent/inbox/spliced","data":{"target":"later","start":0,"inserted":[]},"seq":0,"time":1}"#,
        0,
    )
    .unwrap();
    let refused = SessionLog::replay(header("session-test"), vec![bad]).unwrap_err();
    assert!(
        matches!(&refused, LogError::Rejected { error, .. } if matches!(error.reason, Rejection::Decode(_))),
        "{refused}"
    );
}

#[test]
fn refusals_are_told_apart_by_variant() {
    // An unknown type that carries provenance could change what the model sees: refused.
    let first = Event::from_line(
        r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":1}"#,
        0,
    )
    .unwrap();
    let unknown = Event::from_line(
        r#"{"type":"acme/x","data":{},"seq":1,"time":1,"sourceEventSeqs":[0]}"#,
        1,
    )
    .unwrap();
    let err = SessionLog::replay(header("s"), vec![first, unknown]).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    assert!(matches!(
        &err,
        LogError::Rejected { error, .. } if matches!(&error.reason, Rejection::UnknownRequiredType(t) if t == "acme/x")
    ));
    let neg = Event::from_line(
        r#"{"type":"turn/start","data":{"turn":1,"x":-0.0},"seq":0,"time":1}"#,
        0,
    )
    .unwrap();
    let err = SessionLog::replay(header("s"), vec![neg]).unwrap_err();
    assert!(!err.is_unsupported());
    assert!(
        matches!(
            &err,
            LogError::Rejected { error, .. } if matches!(&error.reason, Rejection::NotLossless(j) if j.path == "data/x")
        ),
        "{err}"
    );
    let err =
        Event::from_line(r#"{"type":"turn/start","data":{},"seq":3,"time":1}"#, 2).unwrap_err();
    assert!(matches!(
        err,
        EventError::SeqMismatch {
            seq: 3,
            expected: 2,
            ..
        }
    ));
    let mut log = new_log();
    log.append(turn_start(1)).unwrap();
    let err = log
        .append(NewEvent::core(TurnEnd {
            turn: 2,
            reason: TurnEndReason::Completed,
        }))
        .unwrap_err();
    assert!(matches!(err.reason, Rejection::Structure(_)));
    assert_eq!((err.seq, err.kind.as_str()), (1, "turn/end"));
}

#[test]
fn borrowing_accessors_do_not_copy_the_log() {
    let mut log = new_log();
    full_turn(&mut log, 1);
    full_turn(&mut log, 2);
    let n = log.len();
    assert_eq!(log.events_since(n - 2).len(), 2);
    assert!(log.events_since(n + 5).is_empty());
    assert_eq!(log.last().unwrap().seq(), n - 1);
    assert_eq!(log.last_turn_end(), Some(n - 1));
    assert!(Arc::ptr_eq(log.event(3).unwrap(), &log.events()[3]));
}

/// Issue 21: a newer writer's log-only type (no surfaceOp, no sourceEventSeqs) is admitted from a
/// stored log, kept verbatim and reported by name; a live append of one is still refused.
#[test]
fn a_newer_writers_log_only_type_is_admitted_and_reported() {
    let rows = vec![
        Event::from_line(r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":1}"#, 0).unwrap(),
        Event::from_line(r#"{"type":"acme/progress","seq":1,"time":1,"data":{"pct":5}}"#, 1).unwrap(),
        Event::from_line(r#"{"type":"acme/progress","seq":2,"time":1,"data":{"pct":9}}"#, 2).unwrap(),
        Event::from_line(r#"{"type":"job/registered","seq":3,"time":1,"data":{"jobId":"bash-0123456789abcdef","owner":"s","kind":"bash","label":"ls","startedAt":1}}"#, 3).unwrap(),
    ];
    let mut log = SessionLog::replay(header("s"), rows).unwrap();
    let unknown = dsh_session::UnknownValue::event_types(log.unknown_values());
    assert_eq!(unknown, vec!["acme/progress"]);
    let kept: serde_json::Value = serde_json::from_str(&log.events()[1].to_json_line()).unwrap();
    assert_eq!(
        kept,
        json!({"type":"acme/progress","seq":1,"time":1,"data":{"pct":5}})
    );
    let mut live = NewEvent::new("acme/progress", serde_json::json!({}));
    live.ignorable = false;
    assert!(log.append(live).is_err());
}
