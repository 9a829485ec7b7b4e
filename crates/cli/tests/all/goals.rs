//! Goals with the real binary: the model creates a goal, rounds run until the process is killed
//! (`kill -9`) in round 2; `dsh exec --resume` continues the goal after its prompt's turn with
//! the next round the log has not counted, and the round that completes it ends the run.

use std::time::Duration;

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

/// The user messages of the log whose source is a goal round: their round numbers.
fn rounds(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["source"]["kind"] == "goal")
        .map(|e| e["data"]["source"]["round"].as_u64().unwrap())
        .collect()
}

fn goal_ops(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "goal/change")
        .map(|e| e["data"]["operation"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_goal_killed_in_round_two_continues_after_resume_and_completes() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "call_goal",
                "create_goal",
                r#"{"objective":"ship the release","max_goal_rounds":5}"#,
            )
            .reply(),
    );
    env.server()
        .push(Completion::new().text("Goal set.").reply());
    env.server()
        .push(Completion::new().text("Round one done.").reply());
    env.server().push(stalled_text("Working on round two"));
    let mut child = env.spawn(&[
        "--session",
        "goal-crash",
        "Keep at it until the release ships",
    ]);
    env.server()
        .wait_for_requests_blocking(4, Duration::from_secs(30))
        .expect("round two's request");
    child.kill().unwrap(); // SIGKILL: no destructor, no signal handler runs
    child.wait().unwrap();

    let events = env.stored_events();
    assert_eq!(goal_ops(&events), ["create"]);
    // Round 1 ended (its turn end is durable); round 2's admission may not have reached the
    // disk before the kill: the resumed goal counts what the log kept.
    let before = rounds(&events);
    assert!(before == [1] || before == [1, 2], "{before:?}");
    let next = before.len() as u64 + 1;
    let change = events.iter().find(|e| e["type"] == "goal/change").unwrap();
    let goal_id = change["data"]["goal"]["id"].as_str().unwrap().to_owned();
    assert_eq!(change["data"]["goal"]["maxGoalRounds"], 5);

    // Resumed: the prompt's turn, then the next round completes the goal and the closing answer ends
    // the run.
    let from = env.server().request_count();
    env.server()
        .push(Completion::new().text("Continuing.").reply());
    let done =
        serde_json::json!({"goal_id": goal_id, "revision": 1, "action": "complete"}).to_string();
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_done", "update_goal", &done)
            .reply(),
    );
    env.server()
        .push(Completion::new().text("The release shipped.").reply());
    let out = env.exec(&["--resume", "goal-crash", "continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("The release shipped."),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        env.server().request_count(),
        from + 3,
        "no round after completion"
    );

    let events = env.stored_events();
    assert_eq!(goal_ops(&events), ["create", "complete"]);
    let mut expected = before.clone();
    expected.push(next);
    assert_eq!(rounds(&events), expected);
    let ends: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].as_str().unwrap())
        .collect();
    // The human turn, round 1, the killed turn (repaired when round 2 reached the log), the
    // resumed prompt's turn, the completing round.
    let killed: &[&str] = if before.len() == 2 {
        &["interrupted"]
    } else {
        &[]
    };
    let expected_ends = [
        &["completed", "completed"][..],
        killed,
        &["completed", "completed"],
    ]
    .concat();
    assert_eq!(ends, expected_ends);
    // The next round's prompt, as the model got it.
    let round3 = request_messages(env.server(), from + 1);
    let prompt = round3
        .iter()
        .filter_map(|m| m["content"].as_str())
        .rfind(|t| t.starts_with("<goal_round>"))
        .expect("the round prompt");
    assert!(
        prompt.starts_with(&format!(
            "<goal_round>\nObjective: \"ship the release\"\nRound: {next}/5\n"
        )),
        "{prompt}"
    );
    // The resumed session declared the goal tools from its first request.
    let body: Value = serde_json::from_slice(&env.server().requests()[from].body).unwrap();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"update_goal") && names.contains(&"get_goal"),
        "{names:?}"
    );
}

/// The model creates a goal of at most two rounds and answers each round without ending it.
fn two_rounds_then_out(env: &Env) {
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "call_goal",
                "create_goal",
                r#"{"objective":"tidy the repo","max_goal_rounds":2}"#,
            )
            .reply(),
    );
    env.server()
        .push(Completion::new().text("Goal set.").reply());
    env.server()
        .push(Completion::new().text("Round one.").reply());
    env.server()
        .push(Completion::new().text("Round two.").reply());
}

#[test]
fn exec_exits_1_when_its_goal_runs_out_of_rounds() {
    let env = Env::new();
    two_rounds_then_out(&env);
    let out = env.exec(&["Tidy the repo until it is clean"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "the goal is blocked: round-limit: Goal reached its configured limit of 2 rounds."
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.server().request_count(), 4, "two rounds, no third");
    let events = env.stored_events();
    assert_eq!(rounds(&events), [1, 2]);
    assert_eq!(goal_ops(&events), ["create", "block"]);
}

#[test]
fn exec_without_a_person_tells_the_model_to_decide_by_itself() {
    let env = Env::new();
    // `declare: always`: dsh exec declares ask_user_question although nobody can answer.
    let patch = env.patch(
        "ask.yaml",
        "plugins:\n  - id: tool-ask-user\n    name: tool-ask-user\n    config:\n      declare: always\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "call_ask",
                "ask_user_question",
                r#"{"questions":[{"id":"db","question":"Which database?","options":[{"label":"Postgres (Recommended)"},{"label":"SQLite"}]}]}"#,
            )
            .reply(),
    );
    env.server()
        .push(Completion::new().text("I chose Postgres.").reply());
    let patch = patch.display().to_string();
    let out = env.exec(&["--patch", &patch, "Set up the service"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let tool = request_messages(env.server(), 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result");
    let text = tool["content"].as_str().unwrap();
    assert!(
        text.starts_with("Error: no user-questions answerer accepted the request")
            && text.contains("Decide by yourself"),
        "{text}"
    );
    // Without the patch the tool is not declared at all (no person in dsh exec).
    let body: Value = serde_json::from_slice(&env.server().requests()[0].body).unwrap();
    assert!(body["tools"].to_string().contains("ask_user_question"));
    env.server().push(Completion::new().text("ok").reply());
    let from = env.server().request_count();
    let out = env.exec(&["hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body: Value = serde_json::from_slice(&env.server().requests()[from].body).unwrap();
    assert!(!body["tools"].to_string().contains("ask_user_question"));
}

/// `dsh exec --server URL`: the goal's rounds run on the server and the exec waits for them,
/// exiting with the goal's end state as a local exec does (1 out of rounds, 0 complete).
#[test]
fn exec_server_runs_the_goal_rounds_and_exits_with_the_goal_s_end_state() {
    let env = Env::new();
    two_rounds_then_out(&env);
    let served = crate::serve::serve(&env, &[]);
    let out = env
        .dsh()
        .args([
            "exec",
            "--server",
            &served.url,
            "Tidy the repo until it is clean",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "the goal is blocked: round-limit: Goal reached its configured limit of 2 rounds."
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.server().request_count(), 4, "two rounds, no third");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Round two.\n");
}
