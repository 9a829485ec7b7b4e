//! The `workflow` tool on the real agent loop and sub-agent provider, with a scripted model:
//! fan-out and join, the limits (wall time, memory, number of agents), cancellation, the
//! read-only tools, the records in the calling session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_subagent::{SubagentUsage, SubagentsConfig, SubagentsPlugin};
use dsh_test_harness::{Script, TestHarness, calls, text, within};
use dsh_tool_workflow::events::{
    AgentEnd, AgentOutcome, AgentStart, RunEnd, RunStart, RunStopReason,
};
use dsh_tool_workflow::{WorkflowConfig, WorkflowToolPlugin};
use dsh_tools::{ToolRequest, ToolResult};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn harness(config: WorkflowConfig) -> TestHarness {
    TestHarness::builder()
        .plugin::<SubagentsPlugin>(SubagentsConfig::default())
        .plugin::<dsh_tool_fs::FsToolsPlugin>(Default::default())
        .plugin::<WorkflowToolPlugin>(config)
        .build()
        .await
}

/// Calls `workflow` as agent `parent`'s call `call_id` with `script`.
async fn call(
    h: &TestHarness,
    parent: &Arc<dyn Agent>,
    script: &str,
    cancel: CancellationToken,
) -> ToolResult {
    let args = json!({
        "script": script,
        "meta": {"name": "probe", "description": "a test workflow", "phases": [{"title": "fan out"}]},
        "args": {"n": 5}
    })
    .to_string();
    let mut request = ToolRequest::new("call_wf", "workflow", args, parent.id(), h.dir());
    request.cancel = cancel;
    h.tools().execute(request).await
}

/// Runs `script` as in [`call`] and expects a value: the result and its JSON.
async fn value_of(
    h: &TestHarness,
    parent: &Arc<dyn Agent>,
    what: &str,
    script: &str,
) -> (ToolResult, Value) {
    let result = within(what, call(h, parent, script, CancellationToken::new())).await;
    assert!(!result.is_error, "{}", result.text());
    let value = serde_json::from_str(&result.text()).unwrap();
    (result, value)
}

/// The start of a text answer that never ends (until its request is cancelled).
fn hanging(t: &str) -> Vec<dsh_llm::StreamChunk> {
    let mut chunks = text(t);
    chunks.truncate(2);
    chunks
}

/// The run's records in the parent's log, in order.
#[derive(Debug, Default)]
struct Records {
    runs: Vec<RunStart>,
    starts: Vec<AgentStart>,
    ends: Vec<AgentEnd>,
    run_ends: Vec<RunEnd>,
    usage: Vec<SubagentUsage>,
}

fn records(parent: &Arc<dyn Agent>) -> Records {
    let mut r = Records::default();
    for e in parent.session().events().iter() {
        if let Some(Ok(v)) = e.plugin::<RunStart>() {
            r.runs.push(v);
        } else if let Some(Ok(v)) = e.plugin::<AgentStart>() {
            assert_eq!(r.runs.len(), 1, "agent-start before run-start");
            r.starts.push(v);
        } else if let Some(Ok(v)) = e.plugin::<AgentEnd>() {
            r.ends.push(v);
        } else if let Some(Ok(v)) = e.plugin::<RunEnd>() {
            r.run_ends.push(v);
        } else if let Some(Ok(v)) = e.plugin::<SubagentUsage>() {
            r.usage.push(v);
        }
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sub_agents_fan_out_and_their_results_are_joined() {
    let h = harness(WorkflowConfig::default()).await;
    let parent = h.agent().await;
    for i in 1..=5 {
        h.llm.push(Script::Chunks(text(&format!("answer {i}"))));
    }
    let script = r#"
        const runs = [];
        for (let i = 1; i <= args.n; i++) {
            runs.push(agent({ prompt: `part ${i}`, label: `part ${i}`, phase: meta.phases[0].title }));
        }
        const results = await Promise.all(runs);
        return {
            ok: results.every((r) => r.ok),
            texts: results.map((r) => r.text).sort(),
            children: results.map((r) => r.childId),
        };
    "#;
    let (result, value) = value_of(&h, &parent, "the workflow", script).await;
    assert_eq!(value["ok"], true);
    assert_eq!(
        value["texts"],
        json!(["answer 1", "answer 2", "answer 3", "answer 4", "answer 5"])
    );
    // Five children, each asked its own part.
    let prompts: BTreeSet<String> = (0..h.llm.request_count())
        .map(|i| h.llm.messages(i).join("\n"))
        .collect();
    for i in 1..=5 {
        assert!(
            prompts.iter().any(|p| p.contains(&format!("part {i}"))),
            "no child was asked part {i}"
        );
    }
    // The records: run-start, an agent-start and a completed agent-end per child, run-end.
    let r = records(&parent);
    assert_eq!(r.runs.len(), 1);
    assert_eq!(r.runs[0].name, "probe");
    let run_id = r.runs[0].run_id.clone();
    assert_eq!(r.starts.len(), 5);
    assert_eq!(r.ends.len(), 5);
    assert!(
        r.starts
            .iter()
            .all(|s| s.run_id == run_id && s.phase.as_deref() == Some("fan out"))
    );
    assert!(r.ends.iter().all(|e| e.outcome == AgentOutcome::Completed));
    let seqs: BTreeSet<u64> = r.starts.iter().map(|s| s.seq).collect();
    assert_eq!(seqs, (1..=5).collect());
    let children: BTreeSet<&str> = value["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let started: BTreeSet<&str> = r.starts.iter().map(|s| s.child_id.as_str()).collect();
    assert_eq!(
        children, started,
        "agent-start names the children's sessions"
    );
    assert_eq!(r.run_ends.len(), 1);
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Completed);
    // Every child is an ordinary child session whose usage is counted in the parent.
    let usage: BTreeSet<&str> = r.usage.iter().map(|u| u.child_id.as_str()).collect();
    assert_eq!(usage, started);
    // The result's meta lists the sub-agents for the display.
    let meta = result.meta.unwrap();
    assert_eq!(meta["agents"].as_array().unwrap().len(), 5);
    assert_eq!(meta["stopReason"], "completed");
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_call_cancels_every_sub_agent_in_flight() {
    let h = harness(WorkflowConfig::default()).await;
    let parent = h.agent().await;
    // Every child hangs after its first chunk: all five requests in flight at once show the
    // fan-out is concurrent (one at a time would never send the second).
    for _ in 0..5 {
        h.llm.push(Script::ChunksThenHang(hanging("working")));
    }
    let cancel = CancellationToken::new();
    let script = r#"
        const runs = [1, 2, 3, 4, 5].map((i) => agent(`hang ${i}`));
        return waitAll(runs).map((r) => r.ok);
    "#;
    let running = tokio::spawn({
        let (h_tools, parent_id, dir, cancel) = (
            h.tools(),
            parent.id().to_owned(),
            h.dir().to_path_buf(),
            cancel.clone(),
        );
        async move {
            let args = json!({"script": script, "meta": {"name": "hang", "description": "d"}});
            let mut request =
                ToolRequest::new("call_hang", "workflow", args.to_string(), parent_id, dir);
            request.cancel = cancel;
            h_tools.execute(request).await
        }
    });
    within("five requests in flight", h.llm.wait_requests(5)).await;
    cancel.cancel();
    let result = within("the cancelled workflow", running).await.unwrap();
    assert!(result.is_error);
    assert_eq!(
        result.code().map(|c| c.as_str().to_owned()).as_deref(),
        Some("ABORTED"),
        "{}",
        result.text()
    );
    let r = records(&parent);
    assert_eq!(r.starts.len(), 5);
    assert_eq!(r.ends.len(), 5);
    assert!(
        r.ends.iter().all(|e| e.outcome == AgentOutcome::Cancelled),
        "{:?}",
        r.ends
    );
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Cancelled);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promise_race_and_any_give_the_first_sub_agent_to_end_while_another_still_runs() {
    let h = harness(WorkflowConfig::default()).await;
    let parent = h.agent().await;
    // Whichever child asks first answers; the other never ends on its own: the race must not
    // wait for it (awaiting the handles one by one would hang here).
    h.llm.push(Script::Chunks(text("fast")));
    h.llm.push(Script::ChunksThenHang(hanging("slow")));
    let script = r#"
        const runs = [agent({ prompt: "one", label: "a" }), agent({ prompt: "two", label: "b" })];
        // Both orders: awaiting the handles one by one would block on the slow one in one of them.
        const first = await Promise.race(runs);
        const reversed = await Promise.race([...runs].reverse());
        const any = await Promise.any([...runs].reverse());
        return { first: first.text, ok: first.ok, any: any.text,
                 same: any.seq === first.seq && reversed.seq === first.seq };
    "#;
    let (result, value) = value_of(&h, &parent, "the race", script).await;
    assert_eq!(
        value,
        json!({"first": "fast", "ok": true, "any": "fast", "same": true})
    );
    // The loser was still running (or not yet asking) when the script returned: the run's end
    // cancelled it.
    let meta = result.meta.unwrap();
    let outcomes: BTreeSet<&str> = meta["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["cancelled", "completed"].into());
    let r = records(&parent);
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Completed);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_settled_awaits_in_any_order_and_a_failed_child_resolves_not_ok() {
    let h = harness(WorkflowConfig::default()).await;
    let parent = h.agent().await;
    h.llm.push(Script::Chunks(text("first")));
    h.llm.push(Script::Fail(dsh_llm::LlmFailure::new(
        "INVALID_REQUEST",
        "refused by the mock",
    )));
    h.llm.push(Script::Chunks(text("third")));
    let script = r#"
        const runs = [1, 2, 3].map((i) => agent(`part ${i}`));
        const settled = await Promise.allSettled(runs);
        const reversed = [];
        for (const r of [...runs].reverse()) reversed.push((await r).seq);
        const again = wait(runs[0]);
        const all = await Promise.all(runs);
        return {
            statuses: settled.map((s) => s.status),
            ok: settled.map((s) => s.value.ok).sort(),
            reversed,
            again: again.seq === all[0].seq && again.text === all[0].text,
            failed: all.filter((r) => !r.ok).map((r) => typeof r.error),
        };
    "#;
    let (_, value) = value_of(&h, &parent, "the join", script).await;
    assert_eq!(
        value,
        json!({
            "statuses": ["fulfilled", "fulfilled", "fulfilled"],
            "ok": [false, true, true],
            "reversed": [3, 2, 1],
            "again": true,
            "failed": ["string"],
        })
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_awaiting_what_never_resolves_ends_with_a_clear_error() {
    let h = harness(WorkflowConfig::default()).await;
    let parent = h.agent().await;
    h.llm.push(Script::Chunks(text("done")));
    // The engine waits for the child (its end could settle the await), then knows nothing
    // else can.
    let script = "agent('answer'); await new Promise(() => {}); return 1;";
    let result = within(
        "the stuck workflow",
        call(&h, &parent, script, CancellationToken::new()),
    )
    .await;
    assert!(result.is_error);
    assert!(
        result.text().contains("its result never settled"),
        "{}",
        result.text()
    );
    h.dispose().await;
}

async fn runaway(config: WorkflowConfig, script: &str) -> (ToolResult, Records) {
    let h = harness(config).await;
    let parent = h.agent().await;
    for _ in 0..3 {
        h.llm.push(Script::ChunksThenHang(hanging("busy")));
    }
    let result = within(
        "the runaway workflow",
        call(&h, &parent, script, CancellationToken::new()),
    )
    .await;
    let r = records(&parent);
    h.dispose().await;
    (result, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_is_stopped_at_the_wall_time_limit() {
    let config = WorkflowConfig {
        max_wall_ms: 300,
        ..Default::default()
    };
    let (result, r) = runaway(config, "agent('spin along'); while (true) {}").await;
    assert!(result.is_error);
    assert!(
        result
            .text()
            .contains("workflow stopped: it ran past its wall-time limit of 300 ms (maxWallMs)"),
        "{}",
        result.text()
    );
    // The child it started was cancelled when the run ended.
    assert_eq!(r.ends.len(), r.starts.len());
    assert!(r.ends.iter().all(|e| e.outcome == AgentOutcome::Cancelled));
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_is_stopped_at_the_memory_limit() {
    let config = WorkflowConfig {
        max_memory_bytes: 16 << 20,
        ..Default::default()
    };
    let script = r#"
        const hoard = [];
        while (true) { hoard.push("x".repeat(1 << 20) + hoard.length); }
    "#;
    let (result, r) = runaway(config, script).await;
    assert!(result.is_error);
    assert!(
        result.text().contains(
            "workflow stopped: the script ran out of memory (limit 16777216 bytes, maxMemoryBytes)"
        ),
        "{}",
        result.text()
    );
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_agents_stop_at_the_agent_limit() {
    let config = WorkflowConfig {
        max_agents: 3,
        ..Default::default()
    };
    let script = r#"
        const runs = [];
        for (let i = 0; i < 10000; i++) {
            try { runs.push(agent(`task ${i}`)); } catch (e) { /* swallowed: the limit still holds */ }
        }
        return runs.length;
    "#;
    let (result, r) = runaway(config, script).await;
    assert!(result.is_error);
    assert!(
        result
            .text()
            .contains("workflow stopped: it tried to start more than 3 sub-agents (maxAgents)"),
        "{}",
        result.text()
    );
    assert!(r.starts.len() <= 3, "{} children started", r.starts.len());
    assert_eq!(r.ends.len(), r.starts.len());
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_count_as_each_response_ends_and_stop_a_run_whose_child_still_runs() {
    let config = WorkflowConfig {
        max_tokens: 500,
        ..Default::default()
    };
    let h = harness(config).await;
    let parent = h.agent().await;
    // The child's first response (a tool call) reports 1,010 tokens; its next one never ends:
    // counted only at the child's end, the run would wait for ever.
    let mut first = calls(&[("c1", "glob", r#"{"pattern":"*.none"}"#)]);
    first.insert(
        first.len() - 1,
        dsh_llm::StreamChunk::Usage {
            usage: dsh_llm::TokenUsage {
                input_tokens: 1000,
                output_tokens: 10,
                ..Default::default()
            },
        },
    );
    h.llm.push(Script::Chunks(first));
    h.llm.push(Script::ChunksThenHang(hanging("still going")));
    let result = within(
        "the run past its tokens",
        call(
            &h,
            &parent,
            "const r = await agent('work'); return r.text;",
            CancellationToken::new(),
        ),
    )
    .await;
    assert!(result.is_error);
    assert!(
        result.text().contains(
            "workflow stopped: its sub-agents used 1010 tokens, over the limit of 500 (maxTokens)"
        ),
        "{}",
        result.text()
    );
    let r = records(&parent);
    assert_eq!(r.ends.len(), 1);
    assert_eq!(r.ends[0].outcome, AgentOutcome::Cancelled);
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Error);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_and_thrown_errors_are_clear_script_errors() {
    let (result, _) = runaway(
        WorkflowConfig::default(),
        "function f(n) { return f(n + 1) + 1; } return f(0);",
    )
    .await;
    assert!(result.is_error);
    assert!(
        result
            .text()
            .contains("workflow script failed: RangeError: Maximum call stack size exceeded")
            && result.text().contains("more frames"),
        "{}",
        result.text()
    );
    let (result, _) = runaway(WorkflowConfig::default(), "throw new Error('no plan');").await;
    assert!(
        result
            .text()
            .contains("workflow script failed: Error: no plan"),
        "{}",
        result.text()
    );
    let (result, _) = runaway(WorkflowConfig::default(), "return (").await;
    assert!(result.text().contains("SyntaxError"), "{}", result.text());
    let (result, _) = runaway(
        WorkflowConfig::default(),
        "agent({ prompt: 'x', colour: 1 })",
    )
    .await;
    assert!(
        result
            .text()
            .contains("agent(options): unknown field `colour`"),
        "{}",
        result.text()
    );
}

/// A read-only tool that answers only when its call is cancelled.
struct Never;

impl dsh_tools::Tool for Never {
    fn name(&self) -> &str {
        "never"
    }
    fn description(&self) -> &str {
        "Never answers."
    }
    fn parameters(&self) -> &Value {
        static P: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        P.get_or_init(|| json!({"type": "object", "properties": {}}))
    }
    fn read_only(&self) -> bool {
        true
    }
    fn execute<'a>(
        &'a self,
        tc: dsh_tools::ToolContext,
        _args: Value,
    ) -> futures::future::BoxFuture<'a, Result<dsh_tools::ToolOutput, dsh_tools::ToolError>> {
        Box::pin(async move {
            tc.cancel_token().cancelled().await;
            Err(dsh_tools::ToolError::aborted())
        })
    }
}

/// `tools.*` calls do not block the script: a sub-agent ends, and the script sees it, while
/// a tool call it started still runs (it is cancelled when the script returns). With calls
/// that blocked the engine, this run waited for the tool until its wall time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_in_flight_does_not_block_the_script() {
    let h = TestHarness::builder()
        .plugin::<SubagentsPlugin>(SubagentsConfig::default())
        .plugin::<WorkflowToolPlugin>(WorkflowConfig {
            tools: vec!["never".to_owned()],
            max_wall_ms: 60_000,
            ..WorkflowConfig::default()
        })
        .tool(Never)
        .build()
        .await;
    h.llm.push(Script::Chunks(text("child done")));
    let parent = h.agent().await;
    let script = r#"
        const pending = tools.never({});
        const child = await agent({ prompt: "quick", label: "quick" });
        return { child: child.text, promise: pending instanceof Promise };
    "#;
    let (_, value) = value_of(&h, &parent, "the run with a tool in flight", script).await;
    assert_eq!(value, json!({"child": "child done", "promise": true}));
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_call_read_only_tools_and_nothing_else() {
    let h = harness(WorkflowConfig::default()).await;
    std::fs::write(h.dir().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let parent = h.agent().await;
    let script = r#"
        const text = await tools.read({ file_path: "notes.txt" });
        let refused = null;
        try { await tools.read({ file_path: "missing.txt" }); } catch (e) { refused = e.message; }
        return {
            read: text.includes("beta"),
            refused: refused !== null,
            bash: typeof tools.bash,
            require: typeof require,
            process: typeof process,
            fetch: typeof fetch,
        };
    "#;
    let (_, value) = value_of(&h, &parent, "the tool workflow", script).await;
    assert_eq!(
        value,
        json!({"read": true, "refused": true, "bash": "undefined", "require": "undefined",
               "process": "undefined", "fetch": "undefined"})
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_in_background_makes_the_run_a_job_with_the_script_value_as_its_output() {
    let h = TestHarness::builder()
        .plugin::<SubagentsPlugin>(SubagentsConfig::default())
        .plugin::<dsh_jobs::JobsPlugin>(Default::default())
        .plugin::<WorkflowToolPlugin>(WorkflowConfig::default())
        .build()
        .await;
    let parent = h.agent().await;
    h.llm.push(Script::Chunks(text("background answer")));
    // The parent may be told when the job settles: one answer for that turn too.
    h.llm.push(Script::Chunks(text("noted")));
    let args = json!({
        "script": "const r = await agent('in the background'); return { text: r.text };",
        "meta": {"name": "bg", "description": "a background run"},
        "run_in_background": true
    })
    .to_string();
    let request = ToolRequest::new("call_bg", "workflow", args, parent.id(), h.dir());
    let result = within("the background start", h.tools().execute(request)).await;
    assert!(!result.is_error, "{}", result.text());
    let id = result.meta.as_ref().unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        result.text(),
        dsh_tool_workflow::started_text(&id),
        "the call returns at once"
    );
    let jobs = h.get::<dyn dsh_jobs_api::Jobs>();
    within("the job settles", jobs.when_settled(parent.id())).await;
    let output = within(
        "the job's output",
        jobs.output(parent.id(), &id, None, CancellationToken::new()),
    )
    .await
    .unwrap();
    assert!(
        output.contains(r#"{"text":"background answer"}"#) && output.contains("completed"),
        "{output}"
    );
    let r = records(&parent);
    assert_eq!(r.run_ends.len(), 1);
    assert_eq!(r.run_ends[0].stop_reason, RunStopReason::Completed);
    h.dispose().await;
}
