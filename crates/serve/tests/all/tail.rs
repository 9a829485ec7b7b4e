//! The events route's tail start (`?tailTurns=N`) and pages of earlier turns (`?before=SEQ`):
//! together they give every committed event of a full replay once, with the same ids; a
//! reconnect from a tail continues with no gap and no repeat.

use dsh_approval::ApprovalPolicy;
use dsh_protocol::EventMsg;
use dsh_test_harness::{Script, text};
use serde_json::{Value, json};

use crate::common::*;

/// Committed events with their SSE ids.
fn with_ids(events: &[Received]) -> Vec<(String, u64, String)> {
    events
        .iter()
        .filter(|r| !r.event.is_live())
        .map(|r| {
            (
                r.msg.id.clone().expect("a committed event has an id"),
                r.event.seq,
                serde_json::to_string(&r.event.msg).unwrap(),
            )
        })
        .collect()
}

/// Reads a finite stream (a page) to its end.
async fn to_end(mut sse: Sse) -> Vec<Received> {
    let mut out = Vec::new();
    while let Some(r) = sse.next().await {
        assert!(
            !matches!(r.event.msg, EventMsg::Snapshot(_)),
            "a page carries no snapshot"
        );
        out.push(r);
    }
    out
}

fn is_turn_started(m: &EventMsg) -> bool {
    matches!(m, EventMsg::TurnStarted { .. })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_and_its_earlier_pages_are_the_full_replay_and_a_reconnect_has_no_gap() {
    let s = Server::start(
        vec![
            Script::Chunks(text("one")),
            Script::Chunks(text("two")),
            Script::Chunks(text("three")),
            Script::Chunks(text("four")),
        ],
        ApprovalPolicy::Never,
    )
    .await;
    let id = s.create(json!({})).await;
    let mut watch = s.events(&id, None, None).await;
    watch.until(is_snapshot).await;
    for prompt in ["first", "second", "third"] {
        let (status, body) = s.op(&id, json!({"type": "submit", "text": prompt})).await;
        assert_eq!(status, 202, "{body}");
        watch.until(is_turn_end).await;
    }
    let full = with_ids(&s.events(&id, None, None).await.until(is_snapshot).await);

    // The last turn only, positioned as in the full replay, then the snapshot.
    let mut tail_sse = s.events_query(&id, "tailTurns=1", None).await;
    let tail_got = tail_sse.until(is_snapshot).await;
    let tail = with_ids(&tail_got);
    let first = tail_got
        .iter()
        .find(|r| !r.event.is_live())
        .expect("the tail has committed events");
    assert!(
        is_turn_started(&first.event.msg),
        "the tail starts at a turn: {:?}",
        first.event.msg
    );
    assert!(
        tail.iter().any(|(_, _, j)| j.contains("three")),
        "the last turn's answer is in the tail"
    );
    assert!(!tail.iter().any(|(_, _, j)| j.contains("two")), "{tail:?}");
    assert_eq!(&full[full.len() - tail.len()..], &tail[..]);

    // The turn before it, a finite page; then everything before that.
    let before = first.event.seq;
    let page = to_end(
        s.events_query(&id, &format!("before={before}&tailTurns=1"), None)
            .await,
    )
    .await;
    let page = with_ids(&page);
    assert!(page.iter().any(|(_, _, j)| j.contains("two")), "{page:?}");
    let page_start = page[0].1;
    let rest = with_ids(
        &to_end(
            s.events_query(&id, &format!("before={page_start}"), None)
                .await,
        )
        .await,
    );
    let mut joined = rest.clone();
    joined.extend(page);
    joined.extend(tail.clone());
    assert_eq!(joined, full, "the pages and the tail are the full replay");

    // More turns than the session has: every event.
    let all = with_ids(
        &s.events_query(&id, "tailTurns=100", None)
            .await
            .until(is_snapshot)
            .await,
    );
    assert_eq!(all, full);

    // A reconnect of the tail's URL with Last-Event-ID continues after that event, and live
    // events follow.
    let (mid_id, ..) = tail[tail.len() / 2].clone();
    let mut back = s.events_query(&id, "tailTurns=1", Some(&mid_id)).await;
    let resumed = with_ids(&back.until(is_snapshot).await);
    assert_eq!(&tail[tail.len() / 2 + 1..], &resumed[..]);
    let (status, _) = s.op(&id, json!({"type": "submit", "text": "fourth"})).await;
    assert_eq!(status, 202);
    let live = with_ids(&tail_sse.until(is_turn_end).await);
    let again = with_ids(&back.until(is_turn_end).await);
    assert!(live.iter().any(|(_, _, j)| j.contains("four")), "{live:?}");
    assert_eq!(
        live, again,
        "the tail stream and the resumed one carry the same new events"
    );
    let full = with_ids(&s.events(&id, None, None).await.until(is_snapshot).await);
    assert_eq!(&full[full.len() - live.len()..], &live[..]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tail_queries_are_refused_naming_the_problem() {
    let s = Server::start(vec![], ApprovalPolicy::Never).await;
    let id = s.create(json!({})).await;
    for (query, says) in [
        ("tailTurns=0", "tailTurns"),
        ("before=0", "before"),
        ("after=1&tailTurns=2", "after"),
        ("after=1&before=2", "after"),
        ("tailTurns=-1", "tailTurns"),
        ("before=x", "before"),
    ] {
        let r = s
            .http
            .get(s.url(&format!("/v1/sessions/{id}/events?{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{query}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "INVALID_REQUEST", "{query}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(says),
            "{query}: {body}"
        );
    }
    s.stop().await;
}
