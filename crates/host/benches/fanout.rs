//! The host's costs: fan-out of one live event to a subscriber, and the subscription snapshot
//! of a 10,000-event session (replay of the projected log, then the live state).
//! Run with `cargo bench -p dsh-host`. Budgets (issue 32): fan-out under 50 µs per event;
//! snapshot of a 10,000-event session under 20 ms.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use dsh_agent::events::AgentStreamChunk;
use dsh_host::{Host, HostOptions};
use dsh_llm::StreamChunk;
use dsh_protocol::{EventMsg, OpenSession, SessionOptions};
use dsh_test_harness::{Script, TestHarness, calls, text};
use dsh_tools::{FnTool, ToolOutput};
use futures::StreamExt;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let h = TestHarness::builder()
            .tool(FnTool::new(
                "noop",
                "Does nothing.",
                serde_json::json!({"type": "object", "properties": {}}),
                |_ctx, _args| async { Ok(ToolOutput::text("ok")) },
            ))
            .build()
            .await;
        let host = Host::new(
            h.root(),
            HostOptions {
                defaults: h.options(),
                answer_approvals: false,
            },
        )
        .unwrap();
        let client = host.client();
        let id = client
            .open(OpenSession::Create {
                session_id: None,
                options: SessionOptions {
                    cwd: Some(h.dir().display().to_string()),
                    ..Default::default()
                },
                prompt: None,
            })
            .await
            .unwrap()
            .id;
        let agent = host.agent(&id).unwrap();

        // Fan-out: a live delta emitted on the kernel bus until the subscriber holds it.
        let mut events = client.subscribe(&id, None).await.unwrap();
        while let Some(ev) = events.next().await {
            if matches!(ev.msg, EventMsg::Snapshot(_)) {
                break;
            }
        }
        const N: usize = 2_000;
        let mut per_event = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            for _ in 0..N {
                h.root().emit(&AgentStreamChunk {
                    agent_id: id.clone(),
                    turn: 1,
                    step: 1,
                    chunk: StreamChunk::TextDelta {
                        index: 0,
                        text: "token ".into(),
                    },
                });
                let ev = events.next().await.unwrap();
                assert!(matches!(ev.msg, EventMsg::TextDelta { .. }));
            }
            per_event.push(t.elapsed().as_secs_f64() * 1e6 / N as f64);
        }
        println!(
            "fan-out, emit to subscriber: {:.2} µs per event (median of 15 × {N}; budget 50 µs)",
            median(per_event)
        );
        drop(events);

        // A 10,000-event session: tool turns through the real loop.
        let mut turns = 0;
        while agent.session().len() < 10_000 {
            h.llm.push(Script::Chunks(calls(&[("c1", "noop", "{}")])));
            h.llm.push(Script::Chunks(text("done")));
            h.prompt(&agent, "go").await;
            turns += 1;
        }
        let n = agent.session().len();
        let mut snapshot = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            let mut s = client.subscribe(&id, None).await.unwrap();
            let mut count = 0;
            while let Some(ev) = s.next().await {
                count += 1;
                if matches!(ev.msg, EventMsg::Snapshot(_)) {
                    break;
                }
            }
            snapshot.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(count > 1000);
        }
        println!(
            "subscribe to a {n}-event session ({turns} tool turns) until its snapshot: {:.2} ms \
             (median of 15; budget 20 ms)",
            median(snapshot)
        );
        client.close(&id).await.unwrap();
        h.dispose().await;
    });
}
