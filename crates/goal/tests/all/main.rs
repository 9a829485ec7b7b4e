//! Goals through the real tools pipeline and agent loop, with a scripted model: rounds until
//! complete, blocked, out of rounds; an interrupted round pauses; the log's `goal/change` rows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod context;
mod protocol;

use std::sync::Arc;

use dsh_agent::{Agent, CancelCause};
use dsh_goal::{GoalConfig, GoalPlugin, Goals, run_goal_command};
use dsh_goal_api::GoalPhase;
use dsh_test_harness::{Script, TestHarness, calls, data_of, idle, text, within};
use serde_json::{Value, json};

async fn harness(config: GoalConfig) -> TestHarness {
    TestHarness::builder()
        .plugin::<GoalPlugin>(config)
        .build()
        .await
}

/// The text of the last message of request `i` whose text starts with `prefix`.
fn user_text(h: &TestHarness, i: usize, prefix: &str) -> Option<String> {
    h.llm.requests()[i]
        .messages
        .iter()
        .rev()
        .map(|m| m.text())
        .find(|t| t.starts_with(prefix))
}

/// Sources of the session's user messages of kind `goal`.
fn round_sources(agent: &Arc<dyn Agent>) -> Vec<Value> {
    data_of(agent, "user/message")
        .into_iter()
        .filter(|m| m["source"]["kind"] == "goal")
        .map(|m| m["source"].clone())
        .collect()
}

fn update(id: &str, action: &str, extra: Value) -> String {
    let mut args = json!({"goal_id": id, "revision": 1, "action": action});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    args.to_string()
}

/// Creates a goal through the service (the id is known before the model is scripted), then
/// `/goal resume` starts its first round on the idle agent.
fn start(h: &TestHarness, agent: &Arc<dyn Agent>, max: Option<u64>) -> (Arc<Goals>, String) {
    let goals = h.get::<Goals>();
    let v = goals
        .create(agent.as_ref(), "ship the release", max)
        .unwrap();
    (goals, v.goal().id.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_runs_three_rounds_and_completes() {
    let h = harness(GoalConfig::default()).await;
    let agent = h.agent().await;
    let (goals, id) = start(&h, &agent, None);
    h.llm.push(Script::Chunks(text("round one done")));
    h.llm.push(Script::Chunks(text("round two done")));
    let args = update(&id, "complete", json!({}));
    h.llm.push(Script::Chunks(calls(&[(
        "c1",
        "update_goal",
        args.as_str(),
    )])));
    h.llm
        .push(Script::Chunks(text("All done: the release shipped.")));
    let out = run_goal_command(&goals, &agent, "resume").unwrap();
    assert!(format!("{out:?}").contains("Goal resumed"), "{out:?}");
    within("the rounds", async {
        h.llm.wait_requests(4).await;
        idle(&agent).await;
    })
    .await;
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().phase, GoalPhase::Complete);
    assert_eq!(v.state.rounds_started, 3);
    // Each round is its own turn with the original's prompt and source.
    let sources = round_sources(&agent);
    assert_eq!(sources.len(), 3);
    for (i, s) in sources.iter().enumerate() {
        assert_eq!(
            *s,
            json!({"kind": "goal", "goalId": id, "revision": 1, "round": i as u64 + 1})
        );
    }
    let first = user_text(&h, 0, "<goal_round>").unwrap();
    assert!(
        first.starts_with("<goal_round>\nObjective: \"ship the release\"\nRound: 1/256\n\nContinue working toward the objective in this same session."),
        "{first}"
    );
    let turns = data_of(&agent, "turn/start").len();
    assert_eq!(turns, 3, "three rounds, three turns");
    // The completing round got the result JSON and then the closing instruction.
    let last = &h.llm.requests()[3];
    let texts: Vec<String> = last.messages.iter().map(|m| m.text()).collect();
    let result = texts
        .iter()
        .find(|t| t.starts_with("{\"goal\""))
        .expect("the tool result");
    let expected = format!(
        "{{\"goal\":{{\"id\":\"{id}\",\"revision\":2,\"objective\":\"ship the release\",\"phase\":\"complete\",\"roundsStarted\":3,\"maxGoalRounds\":256}},\"activation\":\"disarmed\"}}"
    );
    assert_eq!(result, &expected);
    assert!(
        texts
            .last()
            .unwrap()
            .starts_with("<goal_complete>\nObjective: \"ship the release\"\n"),
        "{texts:?}"
    );
    // The log: create, resume? no (armed at create), complete.
    let ops: Vec<String> = data_of(&agent, "goal/change")
        .iter()
        .map(|c| c["operation"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ops, ["create", "complete"]);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_blocked_in_round_three_stops_and_earlier_is_refused() {
    let h = harness(GoalConfig::default()).await;
    let agent = h.agent().await;
    let (goals, id) = start(&h, &agent, Some(10));
    let blocked = update(
        &id,
        "blocked",
        json!({"blocked_reason": "the API key is missing"}),
    );
    h.llm.push(Script::Chunks(text("round one")));
    h.llm.push(Script::Chunks(calls(&[(
        "c2",
        "update_goal",
        blocked.as_str(),
    )])));
    h.llm.push(Script::Chunks(text("still trying")));
    h.llm.push(Script::Chunks(calls(&[(
        "c3",
        "update_goal",
        blocked.as_str(),
    )])));
    h.llm.push(Script::Chunks(text(
        "I am blocked: the API key is missing.",
    )));
    run_goal_command(&goals, &agent, "resume").unwrap();
    within("the rounds", async {
        h.llm.wait_requests(5).await;
        idle(&agent).await;
    })
    .await;
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().phase, GoalPhase::Blocked);
    assert_eq!(v.state.rounds_started, 3);
    let reason = v.goal().blocked_reason.clone().unwrap();
    assert_eq!(reason.code, "model-reported");
    assert_eq!(reason.message, "the API key is missing");
    // Round 2: refused by the threshold.
    let refused = h.llm.messages(2).join("\n");
    assert!(
        refused.contains("blocked requires at least 3 consecutive goal rounds; current round is 2"),
        "{refused}"
    );
    let last = h.llm.messages(4).join("\n");
    assert!(last.contains("<goal_blocked>"), "{last}");
    assert_eq!(round_sources(&agent).len(), 3);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_the_model_creates_is_cut_by_max_goal_rounds() {
    let h = harness(GoalConfig::default()).await;
    let agent = h.agent().await;
    h.llm.push(Script::Chunks(calls(&[(
        "c1",
        "create_goal",
        r#"{"objective":"  tidy the repo ","max_goal_rounds":2}"#,
    )])));
    h.llm.push(Script::Chunks(text("I set a goal.")));
    h.llm.push(Script::Chunks(text("round one")));
    h.llm.push(Script::Chunks(text("round two")));
    h.prompt(&agent, "Keep tidying the repo until it is clean")
        .await;
    within("the rounds", async {
        h.llm.wait_requests(4).await;
        idle(&agent).await;
    })
    .await;
    let goals = h.get::<Goals>();
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().objective, "tidy the repo");
    assert_eq!(v.goal().phase, GoalPhase::Blocked);
    assert_eq!(v.state.rounds_started, 2);
    let reason = v.goal().blocked_reason.clone().unwrap();
    assert_eq!(reason.code, "round-limit");
    assert_eq!(
        reason.message,
        "Goal reached its configured limit of 2 rounds."
    );
    assert_eq!(h.llm.request_count(), 4, "no third round");
    // get_goal and update_goal are declared once the session has a goal.
    let names = |i: usize| -> Vec<String> {
        h.llm.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert!(names(0).contains(&"create_goal".to_owned()));
    assert!(
        !names(0).contains(&"update_goal".to_owned()),
        "{:?}",
        names(0)
    );
    assert!(!names(0).contains(&"get_goal".to_owned()));
    assert!(
        names(2).contains(&"update_goal".to_owned()),
        "{:?}",
        names(2)
    );
    assert!(names(2).contains(&"get_goal".to_owned()));
    // The create result as the model saw it.
    let created = user_text(&h, 1, "{\"goal\"").unwrap();
    assert!(
        created.contains(r#""objective":"tidy the repo","phase":"active","roundsStarted":0,"maxGoalRounds":2},"activation":"armed"}"#),
        "{created}"
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_cap_stops_rounds_below_the_goals_limit() {
    let h = harness(GoalConfig {
        hard_cap_rounds: Some(1),
        ..GoalConfig::default()
    })
    .await;
    let agent = h.agent().await;
    let (goals, _) = start(&h, &agent, None);
    h.llm.push(Script::Chunks(text("round one")));
    run_goal_command(&goals, &agent, "resume").unwrap();
    within("the round", async {
        h.llm.wait_requests(1).await;
        idle(&agent).await;
    })
    .await;
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().phase, GoalPhase::Blocked);
    assert_eq!(
        v.goal().blocked_reason.as_ref().unwrap().message,
        "Goal reached the configured hard cap of 1 rounds."
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_round_pauses_the_goal() {
    let h = harness(GoalConfig::default()).await;
    let agent = h.agent().await;
    let (goals, _) = start(&h, &agent, None);
    h.llm.push(Script::ChunksThenHang(Vec::new()));
    run_goal_command(&goals, &agent, "resume").unwrap();
    h.llm.wait_requests(1).await;
    agent.cancel(CancelCause::User, false);
    idle(&agent).await;
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().phase, GoalPhase::Paused);
    assert_eq!(h.llm.request_count(), 1, "no round after the interrupt");
    let shown = run_goal_command(&goals, &agent, "").unwrap();
    let shown = format!("{shown:?}");
    assert!(
        shown.contains("Status: paused") && shown.contains("Rounds: 1/256"),
        "{shown}"
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goal_changes_are_logged_as_the_original_writes_them() {
    let h = harness(GoalConfig::default()).await;
    let agent = h.agent().await;
    let goals = h.get::<Goals>();
    let out = run_goal_command(&goals, &agent, "").unwrap();
    assert!(format!("{out:?}").contains("No goal is currently set."));
    let v = goals.create(agent.as_ref(), "first", Some(5)).unwrap();
    let r = v.goal_ref();
    goals.pause(agent.as_ref(), &r).unwrap();
    let edited = run_goal_command(&goals, &agent, "edit second").unwrap();
    assert!(format!("{edited:?}").contains("Objective: second"));
    run_goal_command(&goals, &agent, "clear").unwrap();
    let rows = data_of(&agent, "goal/change");
    assert_eq!(rows.len(), 4);
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(&rows[0]),
        [
            "kind",
            "version",
            "operation",
            "goal",
            "roundsStarted",
            "createdAt",
            "updatedAt"
        ]
    );
    assert_eq!(
        keys(&rows[0]["goal"]),
        ["id", "revision", "objective", "phase", "maxGoalRounds"]
    );
    assert_eq!(rows[1]["goal"]["phase"], "paused");
    assert_eq!(rows[2]["operation"], "edit");
    assert_eq!(rows[2]["goal"]["objective"], "second");
    assert_eq!(rows[2]["goal"]["revision"], 3);
    assert_eq!(
        keys(&rows[3]),
        ["kind", "version", "operation", "cleared", "clearedAt"]
    );
    assert_eq!(rows[3]["cleared"]["revision"], 4);
    assert!(goals.get(agent.as_ref()).is_none());
    assert!(goals.failure(agent.as_ref()).is_none());
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_again_with_an_active_goal_continues_it_after_its_next_turn() {
    let h = TestHarness::builder()
        .plugin::<GoalPlugin>(GoalConfig::default())
        .on_disk()
        .build()
        .await;
    let agent = h.agent().await;
    let (goals, id) = start(&h, &agent, None);
    let session = agent.id().to_owned();
    agent.dispose().await;
    let agent = h.resume(&session).await;
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().phase, GoalPhase::Active);
    assert_eq!(v.activation, dsh_goal::Activation::Armed);
    let done = update(&id, "complete", json!({}));
    h.llm.push(Script::Chunks(text("Continuing.")));
    h.llm.push(Script::Chunks(calls(&[(
        "c1",
        "update_goal",
        done.as_str(),
    )])));
    h.llm.push(Script::Chunks(text("Done.")));
    h.prompt(&agent, "continue").await;
    within("the round", async {
        h.llm.wait_requests(3).await;
        idle(&agent).await;
    })
    .await;
    let v = goals.get(agent.as_ref()).unwrap();
    assert_eq!(v.goal().phase, GoalPhase::Complete);
    assert_eq!(v.state.rounds_started, 1);
    // The reopened session declares the goal tools from its first request.
    assert!(
        h.llm.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "update_goal")
    );
    h.dispose().await;
}
