//! An interrupt ends a turn that waits for an approval: the question is resolved as
//! cancelled for every client and the call's result says the turn was interrupted.

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{
    ApprovalDecision, ApprovalOutcome, ErrorCode, Event, EventMsg, EventStream, Op, SessionQuery,
    SessionState, TurnEndReason,
};
use dsh_test_harness::{Script, calls, text, within};
use futures::StreamExt;

use crate::compose::{host, open};

/// Events until one matches `done` (inclusive), each within the harness's bound.
async fn until(stream: &mut EventStream, done: impl Fn(&EventMsg) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let ev = within("no event", stream.next())
            .await
            .expect("the event stream ended");
        let stop = done(&ev.msg);
        out.push(ev);
        if stop {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_ends_a_turn_waiting_for_an_approval() {
    let (h, _host, client) = host(
        vec![
            Script::Chunks(calls(&[("c1", "touch", r#"{"path":"a"}"#)])),
            Script::Chunks(text("never asked")),
        ],
        ApprovalPolicy::Untrusted,
    )
    .await;
    let id = open(&client, &h).await;
    // Two clients watch the session.
    let mut first = client.subscribe(&id, None).await.unwrap();
    let mut second = client.subscribe(&id, None).await.unwrap();
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
    let asked = until(&mut first, |m| matches!(m, EventMsg::ApprovalRequested(_))).await;
    let EventMsg::ApprovalRequested(req) = &asked.last().unwrap().msg else {
        unreachable!()
    };
    let request_id = req.request_id.clone();
    client.send(&id, Op::Interrupt).await.unwrap();

    for stream in [&mut first, &mut second] {
        let seen = until(stream, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
        let resolved = seen
            .iter()
            .find_map(|e| match &e.msg {
                EventMsg::ApprovalResolved {
                    request_id: r,
                    outcome,
                    ..
                } if *r == request_id => Some(*outcome),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no approvalResolved in {seen:?}"));
        assert_eq!(resolved, ApprovalOutcome::Cancelled);
        let (is_error, message) = seen
            .iter()
            .find_map(|e| match &e.msg {
                EventMsg::ToolCallEnded {
                    call_id,
                    is_error,
                    error_message,
                    ..
                } if call_id == "c1" => Some((*is_error, error_message.clone())),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no toolCallEnded in {seen:?}"));
        assert!(is_error);
        let message = message.unwrap_or_default();
        assert!(message.contains("interrupted"), "{message}");
        let EventMsg::TurnEnded { reason, .. } = &seen.last().unwrap().msg else {
            unreachable!()
        };
        assert_eq!(reason, &TurnEndReason::Aborted);
    }
    // The question is closed: a late answer finds nothing to answer.
    let late = client
        .send(
            &id,
            Op::AnswerApproval {
                request_id,
                decision: ApprovalDecision::AllowOnce,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(late.code, ErrorCode::UnknownRequest);
    // The model was asked once: the interrupted call did not lead to a second request.
    assert_eq!(h.llm.requests().len(), 1);
    let list = client.sessions(SessionQuery::default()).await.unwrap();
    let me = list.iter().find(|s| s.id == id).unwrap();
    assert_ne!(me.state, SessionState::WaitingForApproval);
    client.close(&id).await.unwrap();
    h.dispose().await;
}

/// Plan mode's accept question is asked without `approval/asked` in the log: the host itself
/// tells every client it was cancelled when the turn is interrupted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_resolves_an_unlogged_question_as_cancelled() {
    let h = dsh_test_harness::TestHarness::builder()
        .plugin_json::<dsh_plan_mode::PlanModePlugin>(
            serde_json::json!({"startActive": true, "accept": "ask"}),
        )
        .scripts(vec![
            Script::Chunks(calls(&[("p1", "exit_plan_mode", r#"{"plan":"do it"}"#)])),
            Script::Chunks(text("never asked")),
        ])
        .on_disk()
        .build()
        .await;
    let (_host, client) = crate::compose::host_over(&h, true);
    let id = open(&client, &h).await;
    let mut first = client.subscribe(&id, None).await.unwrap();
    let mut second = client.subscribe(&id, None).await.unwrap();
    client
        .send(
            &id,
            Op::Submit {
                text: "plan".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let asked = until(&mut first, |m| matches!(m, EventMsg::ApprovalRequested(_))).await;
    let EventMsg::ApprovalRequested(req) = &asked.last().unwrap().msg else {
        unreachable!()
    };
    let request_id = req.request_id.clone();
    client.send(&id, Op::Interrupt).await.unwrap();
    for stream in [&mut first, &mut second] {
        let seen = until(stream, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
        assert!(
            seen.iter().any(|e| matches!(
                &e.msg,
                EventMsg::ApprovalResolved {
                    request_id: r,
                    outcome: ApprovalOutcome::Cancelled,
                    call_id: Some(c),
                    ..
                } if *r == request_id && c == "p1"
            )),
            "{seen:?}"
        );
        let EventMsg::TurnEnded { reason, .. } = &seen.last().unwrap().msg else {
            unreachable!()
        };
        assert_eq!(reason, &TurnEndReason::Aborted);
    }
    assert_eq!(h.llm.requests().len(), 1);
    client.close(&id).await.unwrap();
    h.dispose().await;
}

/// `interruptDropQueued` also discards what waits for the next turn: a prompt submitted during
/// the turn and a queued steer (withdrawn, told to the clients); the next prompt runs alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_that_drops_queued_input_starts_nothing_after_the_turn() {
    let (h, _host, client) = host(
        vec![
            Script::Chunks(calls(&[("c1", "touch", r#"{"path":"a"}"#)])),
            Script::Chunks(text("after")),
        ],
        ApprovalPolicy::Untrusted,
    )
    .await;
    let id = open(&client, &h).await;
    let mut events = client.subscribe(&id, None).await.unwrap();
    let submit = |text: &str| Op::Submit {
        text: text.into(),
        attachments: vec![],
    };
    client.send(&id, submit("first")).await.unwrap();
    let mut seen = until(&mut events, |m| matches!(m, EventMsg::ApprovalRequested(_))).await;
    let steer_id = client
        .send(
            &id,
            Op::Steer {
                text: "a steer".into(),
            },
        )
        .await
        .unwrap()
        .id
        .unwrap();
    client.send(&id, submit("queued")).await.unwrap();
    client.send(&id, Op::InterruptDropQueued).await.unwrap();
    seen.extend(until(&mut events, |m| matches!(m, EventMsg::TurnEnded { .. })).await);
    assert!(
        seen.iter()
            .any(|e| matches!(&e.msg, EventMsg::SteerWithdrawn { steer_id: s } if *s == steer_id)),
        "{seen:?}"
    );
    let EventMsg::TurnEnded { reason, .. } = &seen.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(reason, &TurnEndReason::Aborted);
    client.send(&id, submit("third")).await.unwrap();
    seen.extend(until(&mut events, |m| matches!(m, EventMsg::TurnEnded { .. })).await);
    let prompts: Vec<&str> = seen
        .iter()
        .filter_map(|e| match &e.msg {
            EventMsg::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(prompts, ["first", "third"], "{seen:?}");
    let EventMsg::TurnEnded { reason, .. } = &seen.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(reason, &TurnEndReason::Completed);
    assert_eq!(h.llm.requests().len(), 2);
    client.close(&id).await.unwrap();
    h.dispose().await;
}
