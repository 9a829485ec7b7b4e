//! Plan mode through the real tools pipeline and agent loop, with a scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};
use dsh_plan_mode::{PlanAccept, PlanMode, PlanModeConfig, PlanModePlugin};
use dsh_session::feature::PlanModeChange;
use dsh_test_harness::TestHarness;
use dsh_tool_fs::FsToolsPlugin;
use dsh_tools::{FnTool, ToolOutput};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::json;

async fn harness(config: PlanModeConfig) -> TestHarness {
    let h = TestHarness::builder()
        .plugin::<FsToolsPlugin>(Default::default())
        .plugin::<PlanModePlugin>(config)
        // A stand-in `bash` that records what it was allowed to run.
        .tool(FnTool::new(
            "bash",
            "Runs a command.",
            json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}),
            |_ctx, args| async move { Ok(ToolOutput::text(format!("ran {}", args["command"]))) },
        ))
        .build()
        .await;
    std::fs::write(h.dir().join("a.txt"), "old\n").unwrap();
    h
}

fn plan_mode(h: &TestHarness) -> Arc<dyn PlanMode> {
    h.get::<dyn PlanMode>()
}

const EDIT: &str = r#"{"file_path":"a.txt","old_string":"old","new_string":"new"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_refused_until_the_plan_is_accepted() {
    let h = harness(PlanModeConfig {
        start_active: true,
        accept: PlanAccept::Accept,
        ..Default::default()
    })
    .await;
    let agent = h.agent().await;
    assert!(plan_mode(&h).is_active(agent.id()));
    let r = h
        .tool_turn(
            &agent,
            &[
                &[
                    ("c1", "read", r#"{"file_path":"a.txt"}"#),
                    ("c2", "edit", EDIT),
                    ("c3", "bash", r#"{"command":"ls -la | wc -l"}"#),
                    ("c4", "bash", r#"{"command":"echo x > a.txt"}"#),
                ],
                &[(
                    "c5",
                    "exit_plan_mode",
                    r#"{"plan":"1. replace old with new"}"#,
                )],
                &[("c6", "edit", EDIT)],
            ],
            "done",
        )
        .await;
    assert!(r[0].contains("1: old"), "read runs: {}", r[0]);
    assert!(
        r[1].contains("plan mode: `edit` is refused") && r[1].contains("exit_plan_mode"),
        "{}",
        r[1]
    );
    assert!(r[2].contains("ran \\\"ls -la | wc -l\\\""), "{}", r[2]);
    assert!(
        r[3].contains("this bash command is refused because it redirects output into a file"),
        "{}",
        r[3]
    );
    assert!(r[4].contains("The user accepted the plan"), "{}", r[4]);
    assert!(!r[5].contains("\"isError\":true"), "{}", r[5]);
    assert_eq!(
        std::fs::read_to_string(h.dir().join("a.txt")).unwrap(),
        "new\n"
    );
    assert!(!plan_mode(&h).is_active(agent.id()));
    // The model was told at the start; the log holds on, then off.
    let first = h.llm.messages(0).join("\n");
    assert!(first.contains("[plan mode on"), "{first}");
    assert!(first.contains(r#""kind":"plan-mode""#), "{first}");
    let changes: Vec<bool> = agent
        .session()
        .events()
        .iter()
        .filter_map(|e| e.plugin::<PlanModeChange>().and_then(Result::ok))
        .map(|c| c.active)
        .collect();
    assert_eq!(changes, vec![true, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_keeps_plan_mode_and_exit_outside_it_is_an_error() {
    let h = harness(PlanModeConfig {
        accept: PlanAccept::Stop,
        ..Default::default()
    })
    .await;
    let agent = h.agent().await;
    let r = h
        .tool_turn(
            &agent,
            &[&[("c1", "exit_plan_mode", r#"{"plan":"x"}"#)]],
            "done",
        )
        .await;
    assert!(r[0].contains("not in plan mode"), "{}", r[0]);
    assert!(r[0].contains("\"isError\":true"), "{}", r[0]);
    // The user turns it on: logged, and the model is told in the next request.
    assert!(plan_mode(&h).set(&agent, true, true).unwrap());
    assert!(!plan_mode(&h).set(&agent, true, true).unwrap(), "no change");
    let r = h
        .tool_turn(
            &agent,
            &[
                &[("c2", "exit_plan_mode", r#"{"plan":"  "}"#)],
                &[("c3", "exit_plan_mode", r#"{"plan":"the plan"}"#)],
                &[("c4", "edit", EDIT)],
            ],
            "done",
        )
        .await;
    assert!(
        r[0].contains("`plan` must be a non-empty string"),
        "{}",
        r[0]
    );
    assert!(r[1].contains("recorded for the user to review"), "{}", r[1]);
    assert!(r[2].contains("plan mode: `edit` is refused"), "{}", r[2]);
    assert!(plan_mode(&h).is_active(agent.id()));
    let second_turn = h.llm.messages(2).join("\n");
    assert!(second_turn.contains("[plan mode on"), "{second_turn}");
}

struct Answers(Mutex<Vec<ApprovalAnswer>>, Mutex<Vec<ApprovalRequest>>);

impl ApprovalAnswerer for Answers {
    fn answer<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.1.lock().push(request.clone());
        let a = self.0.lock().remove(0);
        Box::pin(async move { a })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_goes_to_the_user_and_a_rejection_keeps_plan_mode() {
    let h = harness(PlanModeConfig {
        start_active: true,
        ..Default::default()
    })
    .await;
    let answers = Arc::new(Answers(
        Mutex::new(vec![
            ApprovalAnswer::Deny {
                reason: Some("also update the docs".into()),
            },
            ApprovalAnswer::AllowOnce,
        ]),
        Mutex::new(Vec::new()),
    ));
    h.root()
        .provide::<dyn ApprovalAnswerer>(answers.clone())
        .unwrap();
    let agent = h.agent().await;
    let r = h
        .tool_turn(
            &agent,
            &[
                &[("c1", "exit_plan_mode", r#"{"plan":"v1"}"#)],
                &[("c2", "exit_plan_mode", r#"{"plan":"v2"}"#)],
                &[("c3", "edit", EDIT)],
            ],
            "done",
        )
        .await;
    assert!(
        r[0].contains("The user rejected the plan. Their feedback: also update the docs"),
        "{}",
        r[0]
    );
    assert!(r[1].contains("The user accepted the plan"), "{}", r[1]);
    assert!(!r[2].contains("\"isError\":true"), "{}", r[2]);
    let asked = answers.1.lock();
    assert_eq!(asked.len(), 2);
    assert!(asked[1].reason.ends_with("\n\nv2"), "{}", asked[1].reason);
    assert_eq!(asked[1].tool_name, "exit_plan_mode");
}
