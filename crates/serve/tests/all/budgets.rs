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

/// Turn after turn, the first event of each turn (`turnStarted`, after an idle moment): the
/// time from its arrival at an in-process subscriber of the host (when the hub publishes it) to
/// its arrival in an SSE client over loopback.
#[ignore = "a measurement: run with --ignored --nocapture"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_event_delivery_to_an_sse_client() {
    let rounds = 300;
    let scripts = (0..rounds).map(|_| Script::Chunks(text("x"))).collect();
    let s = Server::start(scripts, ApprovalPolicy::Never).await;
    let id = s.create(json!({})).await;
    let mut sse = s.events(&id, None, None).await;
    sse.until(is_snapshot).await;
    let mut local = s.client.subscribe(&id, None).await.unwrap();
    while !matches!(local.next().await.unwrap().msg, EventMsg::Snapshot(_)) {}
    let mut delivery = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        s.client
            .send(
                &id,
                Op::Submit {
                    text: "go".into(),
                    attachments: vec![],
                },
            )
            .await
            .unwrap();
        let published = loop {
            let ev = within("local", local.next()).await.unwrap();
            if matches!(ev.msg, EventMsg::TurnStarted { .. }) {
                break Instant::now();
            }
        };
        loop {
            let r = sse.next().await.unwrap();
            if matches!(r.event.msg, EventMsg::TurnStarted { .. }) {
                delivery.push(Instant::now().saturating_duration_since(published));
                break;
            }
        }
        while !matches!(
            within("local", local.next()).await.unwrap().msg,
            EventMsg::TurnEnded { .. }
        ) {}
        sse.until(is_turn_end).await;
        // Idle again before the next prompt.
        sse.until(|m| matches!(m, EventMsg::State { state } if *state == dsh_protocol::SessionState::Idle))
            .await;
    }
    delivery.sort();
    println!(
        "BUDGET event delivery server->SSE client (loopback, {rounds} turns, first event of each): p50 {:?} p90 {:?} p99 {:?}",
        percentile(&delivery, 0.5),
        percentile(&delivery, 0.9),
        percentile(&delivery, 0.99),
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
