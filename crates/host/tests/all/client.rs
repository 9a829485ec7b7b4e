//! A client written against `dsh-protocol` and the `Client` trait only (no engine type in
//! sight) drives whole turns: a tool call, an approval, a steer, reconnects.

use std::sync::Arc;

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{
    ApprovalDecision, ApprovalOutcome, Client, ErrorCode, Event, EventMsg, EventStream, Op,
    OpenSession, SessionOptions, SessionQuery, SessionState, ToolKind, TurnEndReason,
};
use dsh_test_harness::{Script, calls, text, within};
use futures::StreamExt;

use crate::compose::host;

async fn next(stream: &mut EventStream) -> Event {
    within("no event", stream.next())
        .await
        .expect("the event stream ended")
}

/// Events until one matches `done` (inclusive).
async fn until(stream: &mut EventStream, done: impl Fn(&EventMsg) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let ev = next(stream).await;
        let stop = done(&ev.msg);
        out.push(ev);
        if stop {
            return out;
        }
    }
}

fn create(cwd: &std::path::Path) -> OpenSession {
    create_with(cwd, None)
}

/// A new session in `cwd`, running `prompt` at once when given.
fn create_with(cwd: &std::path::Path, prompt: Option<&str>) -> OpenSession {
    OpenSession::Create {
        session_id: None,
        options: SessionOptions {
            cwd: Some(cwd.display().to_string()),
            ..Default::default()
        },
        prompt: prompt.map(str::to_owned),
    }
}

fn committed(events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| !e.is_live())
        .map(|e| (e.seq, serde_json::to_string(&e.msg).unwrap()))
        .collect()
}

/// A new session in `cwd` that runs the prompt "hi" to its end, then is closed (stored only);
/// its id and the events its turn streamed.
async fn one_turn_then_closed(
    client: &Arc<dyn Client>,
    cwd: &std::path::Path,
) -> (String, Vec<Event>) {
    let summary = client.open(create_with(cwd, Some("hi"))).await.unwrap();
    let id = summary.id;
    let mut live = client.subscribe(&id, None).await.unwrap();
    let events = until(&mut live, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    client.close(&id).await.unwrap();
    (id, events)
}

/// The whole turn, as a front end that knows only the protocol would drive it.
async fn drive(client: Arc<dyn Client>, cwd: &std::path::Path) -> (String, Vec<Event>) {
    let summary = client.open(create(cwd)).await.unwrap();
    let id = summary.id.clone();
    assert_eq!(summary.state, SessionState::Idle);
    let mut events = client.subscribe(&id, None).await.unwrap();
    // A fresh session: straight to the snapshot.
    let first = until(&mut events, |m| matches!(m, EventMsg::Snapshot(_))).await;
    let EventMsg::Snapshot(snap) = &first.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(snap.session.id, id);
    assert!(snap.session.settings.model.is_some(), "{snap:?}");

    client
        .send(
            &id,
            Op::Submit {
                text: "touch a".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let mut seen = until(&mut events, |m| matches!(m, EventMsg::ApprovalRequested(_))).await;
    let EventMsg::ApprovalRequested(req) = &seen.last().unwrap().msg else {
        unreachable!()
    };
    // The tool's own display reached the client, and the approval carries it.
    assert_eq!(req.display.kind, ToolKind::Write);
    assert_eq!(req.display.title, "Touch");
    assert_eq!(req.display.subject.as_deref(), Some("a"));
    let request_id = req.request_id.clone();
    // While the turn waits: a steer, which joins the next step.
    let steer = client
        .send(
            &id,
            Op::Steer {
                text: "and then say done".into(),
            },
        )
        .await
        .unwrap();
    let steer_id = steer.id.unwrap();
    assert!(steer_id.starts_with("steer-"));
    client
        .send(
            &id,
            Op::AnswerApproval {
                request_id: request_id.clone(),
                decision: ApprovalDecision::AllowOnce,
            },
        )
        .await
        .unwrap();
    // A second answer finds the question closed.
    let again = client
        .send(
            &id,
            Op::AnswerApproval {
                request_id: request_id.clone(),
                decision: ApprovalDecision::AllowOnce,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::UnknownRequest);
    seen.extend(until(&mut events, |m| matches!(m, EventMsg::TurnEnded { .. })).await);
    assert!(seen.iter().any(|e| matches!(
        &e.msg,
        EventMsg::SteerDelivered { steer_id: s } if *s == steer_id
    )));
    (id, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_client_drives_a_turn_with_a_tool_an_approval_and_a_steer() {
    let (h, _host, client) = host(
        vec![
            Script::Chunks(calls(&[("c1", "touch", r#"{"path":"a"}"#)])),
            Script::Chunks(text("done")),
        ],
        ApprovalPolicy::Untrusted,
    )
    .await;
    let (id, seen) = drive(client.clone(), h.dir()).await;
    let kinds: Vec<&str> = seen
        .iter()
        .map(|e| match &e.msg {
            EventMsg::TurnStarted { .. } => "turnStarted",
            EventMsg::UserMessage { .. } => "userMessage",
            EventMsg::ToolCallBegan { .. } => "toolCallBegan",
            EventMsg::ApprovalRequested(_) => "approvalRequested",
            EventMsg::ApprovalResolved { .. } => "approvalResolved",
            EventMsg::ToolCallEnded { .. } => "toolCallEnded",
            EventMsg::SteerQueued { .. } => "steerQueued",
            EventMsg::SteerDelivered { .. } => "steerDelivered",
            EventMsg::TextDelta { .. } => "textDelta",
            EventMsg::AssistantMessage { .. } => "assistantMessage",
            EventMsg::TurnEnded { .. } => "turnEnded",
            _ => "",
        })
        .filter(|k| !k.is_empty())
        .collect();
    let pos = |k: &str| {
        kinds
            .iter()
            .position(|x| *x == k)
            .unwrap_or_else(|| panic!("no {k} in {kinds:?}"))
    };
    assert!(pos("turnStarted") < pos("toolCallBegan"), "{kinds:?}");
    assert!(pos("toolCallBegan") < pos("approvalRequested"), "{kinds:?}");
    assert!(pos("approvalResolved") < pos("toolCallEnded"), "{kinds:?}");
    assert!(pos("steerQueued") < pos("steerDelivered"), "{kinds:?}");
    assert!(pos("toolCallEnded") < pos("steerDelivered"), "{kinds:?}");
    let last_answer = kinds
        .iter()
        .rposition(|x| *x == "assistantMessage")
        .unwrap();
    assert!(pos("textDelta") < last_answer, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"turnEnded"));
    // The approval resolved as answered, the call ended with the tool's own summary.
    assert!(seen.iter().any(|e| matches!(
        &e.msg,
        EventMsg::ApprovalResolved {
            outcome: ApprovalOutcome::AllowedOnce,
            ..
        }
    )));
    let ended = seen
        .iter()
        .find_map(|e| match &e.msg {
            EventMsg::ToolCallEnded {
                display, is_error, ..
            } => Some((display, *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(!ended.1);
    assert_eq!(
        ended.0.output.as_ref().and_then(|o| o.headline.as_deref()),
        Some("touched a")
    );
    let EventMsg::TurnEnded { reason, .. } = &seen.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(reason, &TurnEndReason::Completed);
    // The steer reached the model in the second request, as a user message.
    let second = h.llm.requests();
    assert_eq!(second.len(), 2);
    let last_user = second[1]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == dsh_llm::Role::User)
        .unwrap()
        .text();
    assert_eq!(last_user, "and then say done");
    // Every committed event's seq is unique and increasing.
    let seqs: Vec<u64> = seen
        .iter()
        .filter(|e| !e.is_live())
        .map(|e| e.seq)
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    // The session lists as open and idle.
    let list = client.sessions(SessionQuery::default()).await.unwrap();
    let me = list.iter().find(|s| s.id == id).unwrap();
    assert_eq!(me.turns, 1);
    client.close(&id).await.unwrap();
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_continues_after_its_last_seq_with_no_gap_and_no_duplicate() {
    let (h, _host, client) = host(
        vec![
            Script::Chunks(calls(&[("c1", "touch", r#"{"path":"a"}"#)])),
            Script::Chunks(text("done")),
        ],
        ApprovalPolicy::Never,
    )
    .await;
    let summary = client.open(create(h.dir())).await.unwrap();
    let id = summary.id;
    let mut all = client.subscribe(&id, None).await.unwrap();
    until(&mut all, |m| matches!(m, EventMsg::Snapshot(_))).await;
    client
        .send(
            &id,
            Op::Submit {
                text: "go".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    // A second client drops after the tool call began and comes back after its last seq.
    let mut second = client.subscribe(&id, None).await.unwrap();
    let before = until(&mut second, |m| matches!(m, EventMsg::ToolCallBegan { .. })).await;
    let last = before
        .iter()
        .filter(|e| !e.is_live())
        .map(|e| e.seq)
        .max()
        .unwrap();
    drop(second);
    let whole = until(&mut all, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let mut back = client.subscribe(&id, Some(last)).await.unwrap();
    let after = until(&mut back, |m| matches!(m, EventMsg::Snapshot(_))).await;
    // Before + after (committed ones) = the whole, exactly.
    let mut joined = committed(&before);
    // `before` may include snapshot-free replay of the start; keep only what `whole` has.
    joined.extend(committed(&after));
    let whole_c = committed(&whole);
    let joined: Vec<_> = joined
        .into_iter()
        .filter(|(s, _)| whole_c.iter().any(|(w, _)| w == s))
        .collect();
    assert_eq!(joined, whole_c);
    // Nothing committed twice.
    let mut seqs = committed(&after);
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(n, seqs.len());
    assert!(committed(&after).iter().all(|(s, _)| *s > last));
    client.close(&id).await.unwrap();
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_session_replays_from_its_log_and_ops_on_unknown_sessions_are_refused() {
    let (h, _host, client) = host(
        vec![Script::Chunks(text("hello")), Script::Chunks(text("again"))],
        ApprovalPolicy::Never,
    )
    .await;
    let (id, live_events) = one_turn_then_closed(&client, h.dir()).await;
    // Closed: served from the stored log, the same committed events, then a snapshot, then
    // the end.
    let stored: Vec<Event> = client.subscribe(&id, None).await.unwrap().collect().await;
    let EventMsg::Snapshot(snap) = &stored.last().unwrap().msg else {
        panic!("no snapshot at the end: {stored:?}")
    };
    assert_eq!(snap.session.state, SessionState::Ended);
    assert_eq!(snap.session.turns, 1);
    let stored_c = committed(&stored);
    for c in committed(&live_events) {
        assert!(
            stored_c.contains(&c),
            "{c:?} missing from the stored replay"
        );
    }
    // An op to the stored session opens it again (its write lock taken) and acts.
    client
        .send(
            &id,
            Op::Submit {
                text: "once more".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let mut again = client
        .subscribe(&id, stored_c.last().map(|(s, _)| *s))
        .await
        .unwrap();
    let more = until(&mut again, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert!(more.iter().any(|e| matches!(
        &e.msg,
        EventMsg::AssistantMessage { text, .. } if text == "again"
    )));
    // A settings change reaches a subscriber that joined after the last commit.
    client
        .send(
            &id,
            Op::SetEffort {
                effort: dsh_protocol::Effort::High,
            },
        )
        .await
        .unwrap();
    let changed = until(&mut again, |m| {
        matches!(m, EventMsg::SessionConfigured { .. })
    })
    .await;
    let EventMsg::SessionConfigured { settings, .. } = &changed.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(settings.effort, Some(dsh_protocol::Effort::High));
    client.close(&id).await.unwrap();
    let err = client
        .send("no-such-session", Op::Interrupt)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    let err = client
        .subscribe("no-such-session", None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    h.dispose().await;
}

/// Two clients following one fork resume the same stored session at once: both are served
/// the one session opened for them, neither is refused with `SESSION_LOCKED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_resuming_one_stored_session_at_once_all_join_it() {
    let (h, _host, client) = host(vec![Script::Chunks(text("hello"))], ApprovalPolicy::Never).await;
    let (id, _) = one_turn_then_closed(&client, h.dir()).await;
    let resume = || {
        let client = client.clone();
        let id = id.clone();
        tokio::spawn(async move {
            client
                .open(OpenSession::Resume {
                    session_id: id,
                    options: SessionOptions::default(),
                })
                .await
        })
    };
    let opened = futures::future::join_all((0..8).map(|_| resume())).await;
    for o in opened {
        let summary = o
            .unwrap()
            .unwrap_or_else(|e| panic!("a resume was refused: {e:?}"));
        assert_eq!(summary.id, id);
    }
    client.close(&id).await.unwrap();
    h.dispose().await;
}
