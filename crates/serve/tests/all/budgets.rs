//! The budgets of issue 34, measured and printed (not asserted: timings vary by machine).
//! Run with `cargo test -p dsh-serve --release -- --ignored budget --nocapture`.

use std::time::{Duration, Instant};

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{EventMsg, Op, OpenSession, SessionOptions};
use dsh_test_harness::{Script, calls, text, within};
use futures::StreamExt;
use serde_json::json;

use crate::common::*;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// An op whose event is sent at once (`setEffort` → `sessionConfigured`), round after round:
/// the time from the op's event being published to its arrival in an SSE client over
/// loopback, measured against an in-process subscriber of the same host.
#[ignore = "a measurement: run with --ignored --nocapture"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_event_delivery_to_an_sse_client() {
    let s = Server::start(vec![], ApprovalPolicy::Never).await;
    let id = s.create(json!({})).await;
    let mut sse = s.events(&id, None, None).await;
    sse.until(is_snapshot).await;
    let mut local = s.client.subscribe(&id, None).await.unwrap();
    while !matches!(local.next().await.unwrap().msg, EventMsg::Snapshot(_)) {}
    let rounds = 2000;
    let mut delivery = Vec::with_capacity(rounds);
    let mut round_trip = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let effort = if i % 2 == 0 { "low" } else { "high" };
        let t0 = Instant::now();
        let client = s.client.clone();
        let id2 = id.clone();
        let send = tokio::spawn(async move {
            client
                .send(
                    &id2,
                    Op::SetEffort {
                        effort: dsh_protocol::Effort::parse(effort).unwrap(),
                    },
                )
                .await
                .unwrap();
        });
        // The in-process subscriber sees it when the hub publishes it.
        let published = loop {
            let ev = within("local", local.next()).await.unwrap();
            if matches!(ev.msg, EventMsg::SessionConfigured { .. }) {
                break Instant::now();
            }
        };
        let r = sse.next().await.unwrap();
        let arrived = Instant::now();
        assert!(matches!(r.event.msg, EventMsg::SessionConfigured { .. }));
        send.await.unwrap();
        delivery.push(arrived.saturating_duration_since(published));
        round_trip.push(arrived - t0);
    }
    delivery.sort();
    round_trip.sort();
    println!(
        "BUDGET event delivery server->SSE client (loopback, {rounds} events): p50 {:?} p90 {:?} p99 {:?}; op->SSE arrival p50 {:?}",
        percentile(&delivery, 0.5),
        percentile(&delivery, 0.9),
        percentile(&delivery, 0.99),
        percentile(&round_trip, 0.5),
    );
    s.stop().await;
}

fn steps(n: usize) -> Vec<Script> {
    let mut v: Vec<Script> = (0..n)
        .map(|i| {
            Script::Chunks(calls(&[(
                &format!("c{i}"),
                "touch",
                &format!(r#"{{"path":"p{i}"}}"#),
            )]))
        })
        .collect();
    v.push(Script::Chunks(text("done")));
    v
}

/// A turn of many tool steps watched in-process vs through the server (POST + SSE to the
/// turn's end): the difference per step is the server's overhead.
#[ignore = "a measurement: run with --ignored --nocapture"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_per_step_overhead_through_the_server() {
    let n = 200;
    let mut per_step = Vec::new();
    for round in 0..3 {
        // In-process.
        let s = Server::start(steps(n), ApprovalPolicy::Never).await;
        let summary = s
            .client
            .open(OpenSession::Create {
                session_id: None,
                options: SessionOptions {
                    cwd: Some(s.h.dir().display().to_string()),
                    ..Default::default()
                },
                prompt: None,
            })
            .await
            .unwrap();
        let mut local = s.client.subscribe(&summary.id, None).await.unwrap();
        while !matches!(local.next().await.unwrap().msg, EventMsg::Snapshot(_)) {}
        let t0 = Instant::now();
        s.client
            .send(
                &summary.id,
                Op::Submit {
                    text: "go".into(),
                    attachments: vec![],
                },
            )
            .await
            .unwrap();
        while !matches!(
            within("turn", local.next()).await.unwrap().msg,
            EventMsg::TurnEnded { .. }
        ) {}
        let inproc = t0.elapsed();
        s.stop().await;
        // Through HTTP.
        let s = Server::start(steps(n), ApprovalPolicy::Never).await;
        let id = s.create(json!({})).await;
        let mut sse = s.events(&id, None, None).await;
        sse.until(is_snapshot).await;
        let t0 = Instant::now();
        assert_eq!(
            s.op(&id, json!({"type": "submit", "text": "go"})).await.0,
            202
        );
        sse.until(is_turn_end).await;
        let http = t0.elapsed();
        s.stop().await;
        let d = (http.as_secs_f64() - inproc.as_secs_f64()) / n as f64;
        println!(
            "BUDGET round {round}: {n} steps in-process {inproc:?} ({:?}/step), through the server {http:?} ({:?}/step): overhead {:.1} µs/step",
            inproc / n as u32,
            http / n as u32,
            d * 1e6
        );
        per_step.push(d);
    }
    per_step.sort_by(f64::total_cmp);
    println!(
        "BUDGET per-step overhead through the server (median of 3): {:.1} µs",
        per_step[1] * 1e6
    );
}
