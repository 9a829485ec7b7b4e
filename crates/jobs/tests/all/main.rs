//! The jobs service and its settlement notices, on the real agent loop with a scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Target;
use dsh_agent::events::InboxInserted;
use dsh_jobs::{JobReport, JobSpec, Jobs, JobsConfig, JobsPlugin, ToolJobsPlugin};
use dsh_session::wire::JobStatus;
use dsh_test_harness::{Script, TestHarness, calls, next, text, user};
use dsh_tools::{FnTool, ToolOutput};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

type Inserted = mpsc::UnboundedReceiver<(Target, String)>;

/// The harness with the jobs plugins, and every inbox insertion.
async fn harness() -> (TestHarness, Inserted) {
    let h = TestHarness::builder()
        .plugin::<JobsPlugin>(JobsConfig::default())
        .plugin::<ToolJobsPlugin>(Default::default())
        .build()
        .await;
    let inserted = h.on::<InboxInserted, _>(|ev| (ev.target, ev.message.text()));
    (h, inserted)
}

/// The next inbox insertion that is not the test's own prompt.
async fn next_notice(inserted: &mut Inserted) -> (Target, String) {
    loop {
        let (target, text) = next(inserted).await;
        if text.starts_with("background job ") {
            return (target, text);
        }
    }
}

/// A job whose producer finishes when the returned sender fires.
fn gated_job(jobs: &Arc<dyn Jobs>, owner: &str, output: &str) -> (String, oneshot::Sender<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let output = output.to_owned();
    let id = jobs
        .start(
            JobSpec {
                owner: owner.to_owned(),
                kind: "subagent".into(),
                label: "Gated".into(),
                tool_call: None,
            },
            Box::new(move |cancel| {
                Box::pin(async move {
                    tokio::select! {
                        _ = rx => JobReport { status: JobStatus::Completed, output, detail: None },
                        () = cancel.cancelled() => JobReport {
                            status: JobStatus::Killed,
                            output: String::new(),
                            detail: Some("stopped".into()),
                        },
                    }
                })
            }),
        )
        .unwrap();
    (id, tx)
}

fn notice(id: &str) -> String {
    format!(
        "background job {id} (subagent: Gated) finished [status: completed]. Read its output with job_output."
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_owner_gets_a_new_turn_with_the_notice() {
    let (h, mut inserted) = harness().await;
    let agent = h.agent().await;
    h.llm.push(Script::Chunks(text("hello")));
    agent.followup(user("hi")).unwrap();
    h.llm.wait_requests(1).await;
    agent.when_idle().await;
    let jobs = h.get::<dyn Jobs>();
    let (id, done) = gated_job(&jobs, agent.id(), "the result");
    assert!(
        id.starts_with("subagent-") && id.len() == "subagent-".len() + 16,
        "{id}"
    );
    h.llm.push(Script::Chunks(text("noted")));
    done.send(()).unwrap();
    let (target, text) = next_notice(&mut inserted).await;
    assert_eq!(target, Target::NextTurn);
    assert_eq!(text, notice(&id));
    h.llm.wait_requests(2).await;
    agent.when_idle().await;
    let last = h.llm.messages(1);
    assert!(last.last().unwrap().contains(&notice(&id)), "{last:?}");
    assert!(
        last.last().unwrap().contains(r#""kind":"tool-jobs""#),
        "{last:?}"
    );
    let kinds: Vec<String> = agent
        .session()
        .events()
        .iter()
        .map(|e| e.kind().to_owned())
        .collect();
    let reg = kinds.iter().position(|k| k == "job/registered").unwrap();
    let set = kinds.iter().position(|k| k == "job/settled").unwrap();
    assert!(reg < set);
    assert_eq!(kinds.iter().filter(|k| *k == "turn/end").count(), 2);
    // The result is still there to collect once, then only the status.
    let c = tokio_util::sync::CancellationToken::new();
    assert_eq!(
        jobs.output(agent.id(), &id, None, c.clone()).await.unwrap(),
        "the result\n[status: completed]"
    );
    assert_eq!(
        jobs.output(agent.id(), &id, None, c.clone()).await.unwrap(),
        "(no new output)\n[status: completed]"
    );
    assert_eq!(
        jobs.output("someone-else", &id, None, c)
            .await
            .unwrap_err()
            .to_string(),
        format!("job {id} belongs to another session")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_owner_gets_the_notice_as_a_steer_into_its_turn() {
    let (h, mut inserted) = harness().await;
    let agent = h.agent().await;
    let (entered_tx, mut entered) = mpsc::unbounded_channel::<()>();
    let release = Arc::new(tokio::sync::Notify::new());
    let r = release.clone();
    let tool = FnTool::new(
        "block",
        "Blocks until released.",
        json!({"type": "object", "properties": {}}),
        move |_ctx, _args| {
            let entered_tx = entered_tx.clone();
            let r = r.clone();
            async move {
                let _ = entered_tx.send(());
                r.notified().await;
                Ok(ToolOutput::text("released"))
            }
        },
    );
    h.register_tool(tool);
    let jobs = h.get::<dyn Jobs>();
    let (id, done) = gated_job(&jobs, agent.id(), "busy result");
    h.llm.push(Script::Chunks(calls(&[("c1", "block", "{}")])));
    h.llm.push(Script::Chunks(text("done")));
    agent.followup(user("work")).unwrap();
    entered.recv().await.unwrap();
    done.send(()).unwrap();
    let (target, text) = next_notice(&mut inserted).await;
    assert_eq!(target, Target::NextStep);
    assert_eq!(text, notice(&id));
    release.notify_one();
    h.llm.wait_requests(2).await;
    agent.when_idle().await;
    let second = h.llm.messages(1);
    let tool_at = second.iter().position(|m| m.contains("released")).unwrap();
    let notice_at = second
        .iter()
        .position(|m| m.contains(&notice(&id)))
        .unwrap();
    assert!(tool_at < notice_at, "{second:?}");
    let ends = agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind() == "turn/end")
        .count();
    assert_eq!(ends, 1, "the steer joined the running turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_job_settles_killed_with_the_reason_and_sends_no_notice() {
    let (h, mut inserted) = harness().await;
    let agent = h.agent().await;
    let jobs = h.get::<dyn Jobs>();
    let (id, _done) = gated_job(&jobs, agent.id(), "never");
    assert_eq!(jobs.list(agent.id())[0].status.as_str(), "running");
    jobs.kill(agent.id(), &id, Some("not needed".into()))
        .unwrap();
    let c = tokio_util::sync::CancellationToken::new();
    let out = jobs
        .output(agent.id(), &id, Some(Duration::from_secs(10)), c)
        .await
        .unwrap();
    assert_eq!(out, "(no output)\n[status: killed, stopped; not needed]");
    let settled = agent
        .session()
        .events()
        .iter()
        .find(|e| e.kind() == "job/settled")
        .map(|e| e.data().clone())
        .unwrap();
    assert_eq!(settled["status"], "killed");
    assert_eq!(settled["cause"], "kill");
    assert_eq!(settled["detail"], "stopped; not needed");
    assert!(inserted.try_recv().is_err(), "no notice after a kill");
    assert_eq!(jobs.list(agent.id())[0].status.as_str(), "killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_torn_down_settles_its_running_jobs_with_cause_teardown() {
    let (h, _inserted) = harness().await;
    let agent = h.agent().await;
    let jobs = h.get::<dyn Jobs>();
    let (id, _gate) = gated_job(&jobs, agent.id(), "never");
    assert_eq!(jobs.running(agent.id()), vec![id.clone()]);
    let session = agent.session();
    agent.dispose().await;
    // The record is in the owner's log (written while it was still open), once.
    let settled: Vec<serde_json::Value> = session
        .events()
        .iter()
        .filter(|e| e.kind() == "job/settled")
        .map(|e| e.data_as::<serde_json::Value>().unwrap())
        .collect();
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["jobId"], id.as_str());
    assert_eq!(settled[0]["status"], "killed");
    assert_eq!(settled[0]["cause"], "teardown");
    assert_eq!(settled[0]["producerReported"], false);
    assert_eq!(settled[0]["detail"], dsh_jobs::TEARDOWN_DETAIL);
    assert!(jobs.running(agent.id()).is_empty());
    // Nothing is left to wait for.
    tokio::time::timeout(Duration::from_secs(10), jobs.when_settled(agent.id()))
        .await
        .unwrap();
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_tools_check_their_arguments_and_act_on_them() {
    let (h, _inserted) = harness().await;
    let agent = h.agent().await;
    let jobs = h.get::<dyn Jobs>();
    let (id, _done) = gated_job(&jobs, agent.id(), "never");
    let negative = format!(r#"{{"job_id":"{id}","timeout_ms":-1.5}}"#);
    let kill = format!(r#"{{"job_id":"{id}","reason":"not needed"}}"#);
    let wait = format!(r#"{{"job_id":"{id}","wait":true,"timeout_ms":10000}}"#);
    let r = h
        .tool_turn(
            &agent,
            &[
                &[("c1", "job_output", r#"{"job_id":""}"#)],
                &[("c2", "job_output", &negative)],
                &[("c3", "job_kill", r#"{"job_id":"","reason":"x"}"#)],
                &[("c4", "job_kill", &kill)],
                &[("c5", "job_output", &wait)],
            ],
            "done",
        )
        .await;
    let expect = [
        "invalid job_id: expected a non-empty string",
        "invalid timeout_ms: expected a non-negative number, got -1.5",
        "invalid job_id: expected a non-empty string",
        &format!("requested cancellation of job {id}"),
        "(no output)\\n[status: killed, stopped; not needed]",
    ];
    for (got, want) in r.iter().zip(expect) {
        assert!(got.contains(want), "{got} lacks {want}");
    }
    assert_eq!(jobs.list(agent.id())[0].status.as_str(), "killed");
}
