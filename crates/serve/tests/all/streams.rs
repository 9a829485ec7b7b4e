//! Event streams over HTTP: a turn to its end, reconnects, several subscribers, approvals.

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{ApprovalOutcome, ErrorCode, EventMsg, TurnEndReason};
use dsh_test_harness::{Script, text};
use serde_json::{Value, json};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_with_a_prompt_streams_its_turn_to_the_end() {
    let s = Server::start(
        vec![Script::Chunks(text("hello there"))],
        ApprovalPolicy::Never,
    )
    .await;
    let id = s.create(json!({"prompt": "hi"})).await;
    let mut sse = s.events(&id, None, None).await;
    let got = sse.until(is_turn_end).await;
    let kinds: Vec<&str> = got.iter().filter_map(|r| r.msg.event.as_deref()).collect();
    assert!(kinds.contains(&"turnStarted"), "{kinds:?}");
    assert!(kinds.contains(&"assistantMessage"), "{kinds:?}");
    let EventMsg::TurnEnded { reason, .. } = &got.last().unwrap().event.msg else {
        unreachable!()
    };
    assert_eq!(reason, &TurnEndReason::Completed);
    // Every committed event's id is its position: the seq, `seq.k` for the next ones of a seq.
    let mut prev: Option<(u64, u32)> = None;
    for r in got.iter().filter(|r| !r.event.is_live()) {
        let id = r.msg.id.as_deref().expect("a committed event has an id");
        let (seq, k) = match id.split_once('.') {
            Some((s, k)) => (s.parse::<u64>().unwrap(), k.parse::<u32>().unwrap()),
            None => (id.parse::<u64>().unwrap(), 0),
        };
        assert_eq!(seq, r.event.seq);
        match prev {
            Some((ps, pk)) if ps == seq => assert_eq!(k, pk + 1, "{id}"),
            _ => assert_eq!(k, 0, "{id}"),
        }
        prev = Some((seq, k));
    }
    // The session goes idle (a live `state` event), lists newest first, reads back idle.
    // (Or the snapshot says so, when the turn ended before the subscription.)
    sse.until(|m| match m {
        EventMsg::State { state } => *state == dsh_protocol::SessionState::Idle,
        EventMsg::Snapshot(s) => s.session.state == dsh_protocol::SessionState::Idle,
        _ => false,
    })
    .await;
    let list: Value = s
        .http
        .get(s.url("/v1/sessions?limit=5"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    let one: Value = s
        .http
        .get(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["state"], "idle");
    assert_eq!(one["turns"], 1);
    let commands = s
        .http
        .get(s.url(&format!("/v1/sessions/{id}/commands")))
        .send()
        .await
        .unwrap();
    assert_eq!(commands.status(), 200);
    // Closing ends the stream (a clean end) and the session reads as ended.
    let r = s
        .http
        .delete(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    loop {
        match sse.next().await {
            None => break,
            Some(r) => assert!(r.event.is_live(), "{:?}", r.event),
        }
    }
    let one: Value = s
        .http
        .get(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["state"], "ended");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_mid_turn_and_reconnects_with_last_event_id_gets_every_committed_event_once()
 {
    let s = Server::start(tool_turn(), ApprovalPolicy::Untrusted).await;
    let id = s.create(json!({})).await;
    let mut whole = s.events(&id, None, None).await;
    whole.until(is_snapshot).await;
    let mut dropper = s.events(&id, None, None).await;
    dropper.until(is_snapshot).await;
    let (status, accepted) = s
        .op(&id, json!({"type": "submit", "text": "touch a"}))
        .await;
    assert_eq!(status, 202, "{accepted}");
    // The dropper reads to the approval request (mid-turn) and goes away.
    let before = dropper.until(is_approval).await;
    let last_id = before
        .iter()
        .rev()
        .find_map(|r| r.msg.id.clone())
        .expect("an id before the approval");
    drop(dropper);
    let EventMsg::ApprovalRequested(req) = &before.last().unwrap().event.msg else {
        unreachable!()
    };
    let (status, _) = s
        .op(
            &id,
            json!({"type": "answerApproval", "requestId": req.request_id,
                   "decision": {"type": "allowOnce"}}),
        )
        .await;
    assert_eq!(status, 202);
    let mut all = whole.until(is_approval).await;
    all.extend(whole.until(is_turn_end).await);
    // Back with the last id it saw: the rest, then the snapshot.
    let mut back = s.events(&id, None, Some(&last_id)).await;
    let after = back.until(is_snapshot).await;
    let mut joined = committed(&before);
    joined.extend(committed(&after));
    assert_eq!(
        joined,
        committed(&all),
        "every committed event exactly once"
    );
    // `after` wins over Last-Event-ID.
    let mut both = s.events(&id, Some(u64::MAX - 1), Some("0")).await;
    let only_snapshot = both.until(is_snapshot).await;
    assert_eq!(committed(&only_snapshot), vec![]);

    // A reconnect inside a group of events of one seq resumes inside it.
    let committed_all: Vec<&Received> = all.iter().filter(|r| !r.event.is_live()).collect();
    let group = committed_all
        .windows(2)
        .position(|w| w[0].event.seq == w[1].event.seq)
        .expect("a log event projected into two protocol events");
    let first = committed_all[group];
    let mut inside = s.events(&id, None, first.msg.id.as_deref()).await;
    let rest = inside.until(is_snapshot).await;
    let expect: Vec<(u64, String)> = committed(&all)
        .into_iter()
        .skip_while(|c| {
            *c != (
                first.event.seq,
                serde_json::to_string(&first.event.msg).unwrap(),
            )
        })
        .skip(1)
        .collect();
    assert_eq!(committed(&rest), expect);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_see_the_same_events_and_an_approval_answered_by_one_resolves_for_both() {
    let s = Server::start(tool_turn(), ApprovalPolicy::Untrusted).await;
    let id = s.create(json!({})).await;
    let mut a = s.events(&id, None, None).await;
    let mut b = s.events(&id, None, None).await;
    a.until(is_snapshot).await;
    b.until(is_snapshot).await;
    s.op(&id, json!({"type": "submit", "text": "touch a"}))
        .await;
    let mut seen_a = a.until(is_approval).await;
    let mut seen_b = b.until(is_approval).await;
    let EventMsg::ApprovalRequested(req) = &seen_b.last().unwrap().event.msg else {
        unreachable!()
    };
    // The session reads as waiting for a person.
    let one: Value = s
        .http
        .get(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["state"], "waiting-for-approval");
    // B's client answers; A sees it resolved.
    let answer = json!({"type": "answerApproval", "requestId": req.request_id,
                        "decision": {"type": "allowOnce"}});
    assert_eq!(s.op(&id, answer.clone()).await.0, 202);
    // A second answer (A's, late) finds it closed: first answer wins.
    let (status, body) = s.op(&id, answer).await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "UNKNOWN_REQUEST");
    seen_a.extend(a.until(is_turn_end).await);
    seen_b.extend(b.until(is_turn_end).await);
    assert!(seen_a.iter().any(|r| matches!(
        r.event.msg,
        EventMsg::ApprovalResolved {
            outcome: ApprovalOutcome::AllowedOnce,
            ..
        }
    )));
    assert_eq!(committed(&seen_a), committed(&seen_b));
    assert!(!committed(&seen_a).is_empty());
    s.stop().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_app_serves_a_unix_socket() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = Server::start(vec![], ApprovalPolicy::Never).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dsh.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let client = s.client.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        dsh_serve::serve_unix(
            listener,
            client,
            dsh_serve::ServeConfig::new(dsh_serve::Bound::Unix),
            async move {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
    });
    let mut conn = tokio::net::UnixStream::connect(&path).await.unwrap();
    conn.write_all(b"GET /v1/sessions HTTP/1.1\r\nHost: anything\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("[]"), "{answer}");
    stop.send(()).unwrap();
    task.await.unwrap();
    s.stop().await;
}

/// 100 sessions running at once, two SSE subscribers each: every pair sees the same committed
/// events, every turn ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_sessions_with_two_subscribers_each() {
    let n = 100;
    let scripts = (0..n).map(|i| Script::Chunks(text(&format!("answer {i}"))));
    let s = Server::start(scripts.collect(), ApprovalPolicy::Never).await;
    let mut ids = Vec::new();
    let mut pairs = Vec::new();
    for _ in 0..n {
        let id = s.create(json!({})).await;
        let mut a = s.events(&id, None, None).await;
        let mut b = s.events(&id, None, None).await;
        a.until(is_snapshot).await;
        b.until(is_snapshot).await;
        ids.push(id);
        pairs.push((a, b));
    }
    for id in &ids {
        assert_eq!(
            s.op(id, json!({"type": "submit", "text": "go"})).await.0,
            202
        );
    }
    let mut answers = Vec::new();
    let tasks: Vec<_> = pairs
        .into_iter()
        .map(|(mut a, mut b)| {
            tokio::spawn(async move {
                let ea = a.until(is_turn_end).await;
                let eb = b.until(is_turn_end).await;
                (committed(&ea), committed(&eb))
            })
        })
        .collect();
    for t in tasks {
        let (a, b) = t.await.unwrap();
        assert_eq!(a, b);
        let answer = a
            .iter()
            .find(|(_, json)| json.contains("assistantMessage"))
            .map(|(_, json)| json.clone())
            .unwrap();
        answers.push(answer);
    }
    // Every script was answered exactly once, each in one session.
    for i in 0..n {
        let needle = format!("answer {i}\"");
        assert_eq!(
            answers.iter().filter(|a| a.contains(&needle)).count(),
            1,
            "{needle}"
        );
    }
    s.stop().await;
}

/// An answer streamed as `n` deltas of `size` bytes.
fn many_deltas(n: usize, size: usize) -> Vec<dsh_llm::StreamChunk> {
    use dsh_llm::{BlockKind, ContentBlock, FinishReason, StreamChunk, TokenUsage};
    let piece = "x".repeat(size);
    let mut out = vec![StreamChunk::BlockStart {
        index: 0,
        block_type: BlockKind::Text,
    }];
    out.extend((0..n).map(|_| StreamChunk::TextDelta {
        index: 0,
        text: piece.clone(),
    }));
    out.push(StreamChunk::BlockEnd {
        index: 0,
        block: ContentBlock::text(piece.repeat(n)),
    });
    out.push(StreamChunk::Usage {
        usage: TokenUsage {
            input_tokens: 10,
            output_tokens: n as u64,
            ..Default::default()
        },
    });
    out.push(StreamChunk::finish(FinishReason::Stop));
    out
}

/// A client that stops reading never slows the session: the turn ends while it reads nothing;
/// the host cuts it off for lagging, the server resubscribes it from the log, and once it reads
/// again it gets every committed event exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_client_never_slows_the_session_and_catches_up_from_the_log() {
    // 14,000 deltas of 512 bytes (~8 MB of SSE): more than loopback socket buffers (4 MB at most
    // here) hold plus the host's lag bound of 4,096 events.
    let s = Server::start(
        vec![Script::Chunks(many_deltas(14_000, 512))],
        ApprovalPolicy::Never,
    )
    .await;
    let id = s.create(json!({})).await;
    let mut stalled = s.events(&id, None, None).await;
    stalled.until(is_snapshot).await;
    let mut local = s.client.subscribe(&id, None).await.unwrap();
    let mut reference: Vec<dsh_protocol::Event> = Vec::new();
    loop {
        let ev = dsh_test_harness::within("local", futures::StreamExt::next(&mut local))
            .await
            .unwrap();
        if matches!(ev.msg, EventMsg::Snapshot(_)) {
            break;
        }
    }
    assert_eq!(
        s.op(&id, json!({"type": "submit", "text": "go"})).await.0,
        202
    );
    // The turn ends while the stalled client reads nothing. The in-process reference reader
    // is a client like any other: on a loaded machine it may lag behind the 14,000 deltas too,
    // and then it resubscribes after the last committed event it saw, as clients do.
    loop {
        let Some(ev) =
            dsh_test_harness::within("local", futures::StreamExt::next(&mut local)).await
        else {
            let after = reference.iter().rev().find(|e| !e.is_live()).map(|e| e.seq);
            local = s.client.subscribe(&id, after).await.unwrap();
            continue;
        };
        if matches!(&ev.msg, EventMsg::Error(e) if e.code == ErrorCode::SubscriberLagged) {
            continue;
        }
        let end = is_turn_end(&ev.msg);
        reference.push(ev);
        if end {
            break;
        }
    }
    // Now it reads: every committed event once, in order.
    let caught_up = stalled.until(is_turn_end).await;
    assert_eq!(committed(&caught_up), committed_events(&reference));
    // It was cut off (the deltas it missed are not replayed: they are live) and resubscribed
    // from the log: a fresh snapshot follows the replay (before the turn's end when the
    // resubscription came mid-turn, right after it otherwise).
    let deltas = caught_up
        .iter()
        .filter(|r| matches!(r.event.msg, EventMsg::TextDelta { .. }))
        .count();
    assert!(
        deltas < 14_000,
        "{deltas} deltas: the client was never cut off"
    );
    if !caught_up.iter().any(|r| is_snapshot(&r.event.msg)) {
        let next = stalled.next().await.unwrap();
        assert!(is_snapshot(&next.event.msg), "{:?}", next.event);
    }
    s.stop().await;
}
