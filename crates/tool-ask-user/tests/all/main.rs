//! `ask_user_question` through the real pipeline and agent loop, with a scripted model: answered
//! by a protocol-only client of the in-process host; refused at once without a person.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_host::{Host, HostOptions};
use dsh_protocol::{
    Client, ErrorCode, Event, EventMsg, EventStream, Op, OpenSession, QuestionAnswer,
    SessionOptions,
};
use dsh_test_harness::{Script, TestHarness, calls, idle, text, within};
use dsh_tool_ask_user::{AskUserConfig, AskUserToolPlugin, Declare};
use futures::StreamExt;

const ASK: &str = r#"{"questions":[{"id":"db","header":"Database","question":"Which database should the service use?","options":[{"label":"Postgres (Recommended)","description":"Scales with the team"},{"label":"SQLite"}]},{"id":"name","question":"What should the service be called?"}]}"#;

async fn harness(scripts: Vec<Script>) -> TestHarness {
    harness_with(scripts, Declare::Always).await
}

async fn harness_with(scripts: Vec<Script>, declare: Declare) -> TestHarness {
    TestHarness::builder()
        .plugin::<AskUserToolPlugin>(AskUserConfig { declare })
        .scripts(scripts)
        .build()
        .await
}

async fn next_event(stream: &mut EventStream) -> Event {
    within("an event", stream.next())
        .await
        .expect("the stream ended")
}

async fn until(stream: &mut EventStream, done: impl Fn(&EventMsg) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let ev = next_event(stream).await;
        let stop = done(&ev.msg);
        out.push(ev);
        if stop {
            return out;
        }
    }
}

/// The last tool message's text of request `i`.
fn tool_result(h: &TestHarness, i: usize) -> String {
    h.llm.requests()[i]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == dsh_llm::Role::Tool)
        .map(|m| m.text())
        .expect("a tool result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_through_the_protocol_and_the_model_gets_the_answers() {
    let h = harness_with(
        vec![
            Script::Chunks(calls(&[("c1", "ask_user_question", ASK)])),
            Script::Chunks(text("Using SQLite for orders-api.")),
        ],
        Declare::WithPerson,
    )
    .await;
    let host = Host::new(
        h.root(),
        HostOptions {
            defaults: h.options(),
            answer_approvals: true,
        },
    )
    .unwrap();
    let client: Arc<dyn Client> = host.client();
    let summary = client
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(h.dir().display().to_string()),
                ..Default::default()
            },
            prompt: None,
        })
        .await
        .unwrap();
    let id = summary.id;
    let mut events = client.subscribe(&id, None).await.unwrap();
    until(&mut events, |m| matches!(m, EventMsg::Snapshot(_))).await;
    client
        .send(
            &id,
            Op::Submit {
                text: "Set up the service".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let seen = until(&mut events, |m| matches!(m, EventMsg::QuestionAsked(_))).await;
    let EventMsg::QuestionAsked(asked) = &seen.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(asked.questions.len(), 2);
    assert_eq!(asked.questions[0].header.as_deref(), Some("Database"));
    assert_eq!(
        asked.questions[0].options[0].label,
        "Postgres (Recommended)"
    );
    assert_eq!(
        asked.questions[0].options[0].description.as_deref(),
        Some("Scales with the team")
    );
    assert!(asked.questions[1].options.is_empty());
    let request_id = asked.request_id.clone();
    // A client that subscribes now finds the open question in its snapshot.
    let mut late = client.subscribe(&id, None).await.unwrap();
    let snap = until(&mut late, |m| matches!(m, EventMsg::Snapshot(_))).await;
    let EventMsg::Snapshot(snap) = &snap.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(snap.pending_questions.len(), 1);
    assert_eq!(
        snap.session.state,
        dsh_protocol::SessionState::WaitingForApproval
    );
    // An answer for another request is refused; the real one settles the question.
    let wrong = client
        .send(
            &id,
            Op::AnswerQuestion {
                request_id: "question-nope".into(),
                answers: vec![],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(wrong.code, ErrorCode::UnknownRequest);
    client
        .send(
            &id,
            Op::AnswerQuestion {
                request_id: request_id.clone(),
                answers: vec![
                    QuestionAnswer {
                        question_id: "db".into(),
                        selected: vec!["SQLite".into()],
                        text: None,
                    },
                    QuestionAnswer {
                        question_id: "name".into(),
                        selected: vec![],
                        text: Some("orders-api".into()),
                    },
                ],
            },
        )
        .await
        .unwrap();
    let rest = until(&mut events, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert!(rest.iter().any(|e| matches!(
        &e.msg,
        EventMsg::QuestionAnswered { request_id: r, answers } if *r == request_id && answers.len() == 2
    )));
    assert!(
        h.llm.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "ask_user_question")
    );
    assert_eq!(
        tool_result(&h, 1),
        r#"{"answers":[{"id":"db","selected":["SQLite"]},{"id":"name","selected":[],"custom":"orders-api"}]}"#
    );
    host.shutdown().await;
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_person_the_model_is_told_to_decide_by_itself() {
    let h = harness(vec![
        Script::Chunks(calls(&[("c1", "ask_user_question", ASK)])),
        Script::Chunks(text("I chose Postgres.")),
    ])
    .await;
    let agent = h.agent().await;
    h.prompt(&agent, "Set up the service").await;
    idle(&agent).await;
    let result = tool_result(&h, 1);
    assert!(
        result.starts_with("Error: no user-questions answerer accepted the request")
            && result.contains("Decide by yourself"),
        "{result}"
    );
    let results = dsh_test_harness::data_of(&agent, "tool/result");
    assert_eq!(results[0]["error"]["code"], "NO_PROVIDER");
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_and_duplicate_questions_are_refused() {
    let h = harness(vec![
        Script::Chunks(calls(&[
            ("c1", "ask_user_question", r#"{"questions":[]}"#),
            (
                "c2",
                "ask_user_question",
                r#"{"questions":[{"id":"a","question":"x"},{"id":"a","question":"y"}]}"#,
            ),
        ])),
        Script::Chunks(text("ok")),
    ])
    .await;
    let agent = h.agent().await;
    h.prompt(&agent, "go").await;
    let texts = h.llm.messages(1).join("\n");
    assert!(
        texts.contains("ask_user_question requires at least one question"),
        "{texts}"
    );
    assert!(
        texts.contains("question id \\\"a\\\" must be unique within this call"),
        "{texts}"
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_agent_gets_delegated_caller() {
    let h = harness(vec![
        Script::Chunks(calls(&[("c1", "ask_user_question", ASK)])),
        Script::Chunks(text("I will report the question to my parent.")),
    ])
    .await;
    let parent = h.agent().await;
    let child = h
        .agents()
        .create_seeded(
            &h.root(),
            dsh_agent::CreateAgent {
                options: h.options(),
                ..Default::default()
            },
            dsh_agent::SessionSeed::Create(dsh_session::CreateOptions {
                parent_session: Some(parent.id().to_owned()),
                origin: Some("subagent".into()),
                delegation_depth: 1,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    h.prompt(&child, "Set up the service").await;
    let result = tool_result(&h, 1);
    assert!(
        result.starts_with("Error: human interaction is unavailable while the calling agent is owned by another live agent"),
        "{result}"
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_tool_is_declared_only_where_a_person_can_answer() {
    let h = harness_with(vec![Script::Chunks(text("hi"))], Declare::WithPerson).await;
    let agent = h.agent().await;
    h.prompt(&agent, "hello").await;
    let names: Vec<String> = h.llm.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        !names.contains(&"ask_user_question".to_owned()),
        "{names:?}"
    );
    h.dispose().await;
}
