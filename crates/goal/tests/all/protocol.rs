//! Goals as a protocol client sees them: `goalUpdated` from each `goal/change`, `goalRoundEnded`
//! after each round's turn with its tokens, live and replayed from the log alike.

use std::sync::Arc;

use dsh_goal::{GoalConfig, GoalPlugin, Goals, run_goal_command};
use dsh_host::{Host, HostOptions};
use dsh_protocol::{Client, Event, EventMsg, EventStream, GoalPhase, OpenSession, SessionOptions};
use dsh_test_harness::{Script, TestHarness, calls, text, within};
use futures::StreamExt;
use serde_json::json;

async fn until(stream: &mut EventStream, done: impl Fn(&EventMsg) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let ev = within("an event", stream.next())
            .await
            .expect("the stream ended");
        let stop = done(&ev.msg);
        out.push(ev);
        if stop {
            return out;
        }
    }
}

fn complete(m: &EventMsg) -> bool {
    matches!(m, EventMsg::GoalUpdated { goal: Some(g) } if g.phase == GoalPhase::Complete)
}

fn goal_events(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.msg {
            EventMsg::GoalUpdated { goal: Some(g) } => Some(format!(
                "updated {:?} {}/{}",
                g.phase, g.rounds_started, g.max_rounds
            )),
            EventMsg::GoalRoundEnded {
                round,
                max_rounds,
                usage,
                ..
            } => Some(format!(
                "round {round}/{max_rounds} {}+{} tokens",
                usage.input_tokens, usage.output_tokens
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sees_each_goal_change_and_each_rounds_usage() {
    let h = TestHarness::builder()
        .plugin::<GoalPlugin>(GoalConfig::default())
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
    let client: Arc<dyn Client> = host.client();
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
    let mut events = client.subscribe(&id, None).await.unwrap();
    until(&mut events, |m| matches!(m, EventMsg::Snapshot(_))).await;
    let agent = host.agent(&id).unwrap();
    let goals = h.get::<Goals>();
    let goal = goals
        .create(agent.as_ref(), "ship the release", Some(4))
        .unwrap();
    let done = json!({"goal_id": goal.goal().id, "revision": 1, "action": "complete"}).to_string();
    h.llm.push(Script::Chunks(text("round one")));
    h.llm.push(Script::Chunks(calls(&[(
        "c1",
        "update_goal",
        done.as_str(),
    )])));
    h.llm.push(Script::Chunks(text("Shipped.")));
    run_goal_command(&goals, &agent, "resume").unwrap();
    let live = until(&mut events, complete).await;
    let live = [
        live,
        until(&mut events, |m| {
            matches!(m, EventMsg::GoalRoundEnded { .. })
        })
        .await,
    ]
    .concat();
    let expected = [
        "updated Active 0/4",
        "round 1/4 10+1 tokens",
        "updated Complete 2/4",
        // The tool-call step reports no usage; the closing answer does.
        "round 2/4 10+1 tokens",
    ];
    assert_eq!(goal_events(&live), expected);
    // A client that connects later replays the same from the log.
    let mut replay = client.subscribe(&id, None).await.unwrap();
    let replayed = until(&mut replay, |m| matches!(m, EventMsg::Snapshot(_))).await;
    assert_eq!(goal_events(&replayed), expected);
    host.shutdown().await;
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_goal_runs_through_the_command_registry() {
    let h = TestHarness::builder()
        .plugin::<GoalPlugin>(GoalConfig {
            default_max_goal_rounds: 1,
            ..GoalConfig::default()
        })
        .plugin::<dsh_commands::CommandsPlugin>(dsh_kernel::EmptyConfig {})
        .plugin::<dsh_goal::GoalCommandPlugin>(dsh_kernel::EmptyConfig {})
        .script(Script::Chunks(text("Round one.")))
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
    let client: Arc<dyn Client> = host.client();
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
    let listed = client.commands(&id).await.unwrap();
    let goal = listed
        .iter()
        .find(|c| c.name == "goal")
        .expect("/goal listed");
    assert_eq!(
        goal.argument_hint.as_deref(),
        Some("[<objective>|clear|edit <objective>|pause|resume]")
    );
    let mut events = client.subscribe(&id, None).await.unwrap();
    until(&mut events, |m| matches!(m, EventMsg::Snapshot(_))).await;
    let run = |args: &str| dsh_protocol::Op::RunCommand {
        name: "goal".into(),
        args: args.into(),
    };
    let created = client.send(&id, run("ship the release")).await.unwrap();
    let Some(dsh_protocol::CommandOutcome::Done { text }) = created.command else {
        panic!("{created:?}")
    };
    assert!(text.starts_with("Goal created\nStatus: active\nObjective: ship the release\nRounds: 0/1\nActivation: armed"), "{text}");
    // The idle session starts round 1 at once; the limit blocks the goal after it.
    let seen = until(
        &mut events,
        |m| matches!(m, EventMsg::GoalUpdated { goal: Some(g) } if g.phase == GoalPhase::Blocked),
    )
    .await;
    assert!(seen.iter().any(|e| matches!(
        &e.msg,
        EventMsg::GoalRoundEnded {
            round: 1,
            max_rounds: 1,
            ..
        }
    )));
    let shown = client.send(&id, run("")).await.unwrap();
    let Some(dsh_protocol::CommandOutcome::Done { text }) = shown.command else {
        panic!("{shown:?}")
    };
    assert!(
        text.contains("Status: blocked\nBlocker: round-limit: Goal reached its configured limit of 1 rounds.\nObjective: ship the release\nRounds: 1/1"),
        "{text}"
    );
    let refused = client.send(&id, run("another goal")).await.unwrap_err();
    assert!(
        refused.message.contains("A goal is already blocked"),
        "{refused:?}"
    );
    host.shutdown().await;
    h.dispose().await;
}
