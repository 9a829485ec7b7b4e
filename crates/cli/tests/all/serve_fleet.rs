//! Two `dsh serve --store` on one PostgreSQL database forward to each other (issue 39 item 4):
//! an op sent to the server that does not own a session runs on the one that does, the events
//! reach the other server's subscribers from the store with the owner's seqs, an approval is
//! answered through the other server, a killed owner's session is taken over once its lease
//! expired, with notifications off polling alone delivers, and a question the agent asks on
//! the owner and a steer sent through the other server show on the other server's stream, which
//! answers the question. The real binaries against the
//! test cluster (`scripts/postgres-setup`) and the testkit model, driven by the RemoteClient.

use std::sync::Arc;

use dsh_serve::RemoteClient;
use dsh_serve::protocol::{
    ApprovalDecision, ApprovalPolicy, Client, Event, EventMsg, Op, OpenSession, QuestionAnswer,
    SessionOptions, SessionSettings, SessionState, SessionSummary,
};
use dsh_testkit::Completion;
use futures::StreamExt;
use futures::stream::BoxStream;

use dsh_test_harness::postgres::TestCluster;

use crate::pg::{WAIT, database, wait_for};
use crate::serve::{Served, serve};
use crate::support::Env;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn remote(s: &Served) -> Arc<dyn Client> {
    Arc::new(RemoteClient::new(&s.url, None).unwrap())
}

fn submit(text: &str) -> Op {
    Op::Submit {
        text: text.to_owned(),
        attachments: vec![],
    }
}

/// A session created on `owner` and written through to the store (so another server sees it).
async fn created(owner: &dyn Client, cwd: &str, settings: SessionSettings) -> SessionSummary {
    let s = owner
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(cwd.to_owned()),
                settings,
            },
            prompt: None,
        })
        .await
        .unwrap();
    owner.send(&s.id, Op::Persist).await.unwrap();
    s
}

/// The next event, within [`WAIT`] (a stream that stops delivering fails the test).
async fn next(events: &mut BoxStream<'static, Event>) -> Option<Event> {
    tokio::time::timeout(WAIT, events.next())
        .await
        .unwrap_or_else(|_| panic!("no event within {WAIT:?}"))
}

/// The events up to the next turn end.
async fn until_turn_end(events: &mut BoxStream<'static, Event>) -> Vec<Event> {
    let mut seen = Vec::new();
    while let Some(ev) = next(events).await {
        let end = matches!(ev.msg, EventMsg::TurnEnded { .. });
        seen.push(ev);
        if end {
            return seen;
        }
    }
    panic!("the stream ended before the turn did: {seen:?}");
}

/// The committed events as (seq, type): what two subscribers of one log must agree on.
fn committed(events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| !e.is_live())
        .map(|e| {
            let v = serde_json::to_value(&e.msg).unwrap();
            (e.seq, v["type"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| serde_json::to_string(&e.msg).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lease owner of `id` names the process `pid` (owner ids are `host:pid:nonce`).
fn owned_by(c: &TestCluster, url: &str, id: &str, pid: u32) -> bool {
    let owner = c.psql(
        url,
        &format!("SELECT owner FROM dsh_sessions WHERE id = '{id}'"),
    );
    owner.contains(&format!(":{pid}:"))
}

/// A prompt sent to B for a session A owns runs on A; B's subscriber sees the turn's committed
/// events with A's seqs; the lease never moves.
fn a_prompt_through_the_other_server(test: &str, a_args: &[&str], b_args: &[&str]) {
    let Some((c, url)) = database(test) else {
        return;
    };
    let env = Env::new();
    env.server()
        .push(Completion::new().text("the answer from a").reply());
    let mut a_args: Vec<String> = a_args.iter().map(|s| s.replace("URL", &url)).collect();
    let mut b_args: Vec<String> = b_args.iter().map(|s| s.replace("URL", &url)).collect();
    let config = env.home.path().join("polling.yaml");
    std::fs::write(&config, polling_config(&url)).unwrap();
    for a in a_args.iter_mut().chain(b_args.iter_mut()) {
        *a = a.replace("CONFIG", &config.display().to_string());
    }
    let a = serve(&env, &a_args.iter().map(String::as_str).collect::<Vec<_>>());
    let b = serve(&env, &b_args.iter().map(String::as_str).collect::<Vec<_>>());
    let cwd = env.cwd().display().to_string();
    runtime().block_on(async {
        let (ra, rb) = (remote(&a), remote(&b));
        let s = created(&*ra, &cwd, SessionSettings::default()).await;
        // B shows and lists it as another host's open session (idle), not as ended.
        let shown = rb.session(&s.id).await.unwrap();
        assert_eq!(shown.state, SessionState::Idle);
        let listed = rb.sessions(Default::default()).await.unwrap();
        assert!(
            listed
                .iter()
                .any(|l| l.id == s.id && l.state == SessionState::Idle),
            "{listed:?}"
        );
        let start = shown.last_seq;
        let mut on_a = ra.subscribe(&s.id, start).await.unwrap();
        let mut on_b = rb.subscribe(&s.id, start).await.unwrap();
        // B says the session is another host's (idle), not ended.
        let first = next(&mut on_b).await.unwrap();
        match &first.msg {
            EventMsg::Snapshot(snap) => assert_eq!(snap.session.state, SessionState::Idle),
            other => panic!("B's stream began with {other:?}"),
        }
        let accepted = rb.send(&s.id, submit("ask a")).await.unwrap();
        assert!(accepted.id.is_some(), "{accepted:?}");
        let seen_a = until_turn_end(&mut on_a).await;
        let seen_b = until_turn_end(&mut on_b).await;
        assert!(
            text_of(&seen_b).contains("the answer from a"),
            "{}",
            text_of(&seen_b)
        );
        let (ca, cb) = (committed(&seen_a), committed(&seen_b));
        assert!(ca.len() >= 4, "{ca:?}");
        assert_eq!(ca, cb, "B's committed events differ from A's");
        assert!(cb.windows(2).all(|w| w[0].0 <= w[1].0), "{cb:?}");
        assert!(start.is_none_or(|s| cb[0].0 > s), "{cb:?}");
        // B's raw log of it: every record after the start once, without a gap.
        let stored: u64 = c
            .psql(
                &url,
                &format!("SELECT next_seq FROM dsh_sessions WHERE id = '{}'", s.id),
            )
            .parse()
            .unwrap();
        let from = start.map_or(0, |s| s + 1);
        let records: Vec<u64> = rb
            .log(&s.id, start)
            .await
            .unwrap()
            .take((stored - from) as usize)
            .map(|r| r.unwrap().seq)
            .collect()
            .await;
        assert_eq!(records, (from..stored).collect::<Vec<_>>());
    });
    assert_eq!(env.server().request_count(), 1);
    // Run by A: A still holds the lease, B never took it.
    let id = c.psql(&url, "SELECT id FROM dsh_sessions");
    assert!(owned_by(&c, &url, &id, a.child.id()), "not A's");
    assert_eq!(c.psql(&url, "SELECT count(*) FROM dsh_ops"), "0");
}

/// The rows `--store` gives, with notifications off and a short poll.
fn polling_config(url: &str) -> String {
    let url = serde_json::to_string(url).unwrap();
    format!(
        "plugins:\n  - id: session-jsonl\n    name: session-jsonl\n    disabled: true\n  - id: catalog\n    name: catalog\n    disabled: true\n  - id: session-postgres\n    name: session-postgres\n    group: sessions\n    config:\n      url: {url}\n      catalog: true\n      notifications: false\n      pollSeconds: 0.2\n"
    )
}

#[test]
fn a_prompt_sent_to_another_server_runs_on_the_owner_and_both_see_the_same_seqs() {
    a_prompt_through_the_other_server(
        "a_prompt_sent_to_another_server_runs_on_the_owner_and_both_see_the_same_seqs",
        &["--store", "URL"],
        &["--store", "URL"],
    );
}

#[test]
fn with_notifications_off_polling_alone_forwards_and_delivers() {
    a_prompt_through_the_other_server(
        "with_notifications_off_polling_alone_forwards_and_delivers",
        &["--config", "CONFIG"],
        &["--config", "CONFIG"],
    );
}

#[test]
fn an_approval_asked_on_the_owner_is_answered_through_the_other_server() {
    let Some((_c, url)) =
        database("an_approval_asked_on_the_owner_is_answered_through_the_other_server")
    else {
        return;
    };
    let env = Env::new();
    env.server().push_all([
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"touch approved-through-b","description":"Touch"}"#,
            )
            .reply(),
        Completion::new().text("touched").reply(),
    ]);
    let a = serve(&env, &["--store", &url]);
    let b = serve(&env, &["--store", &url]);
    let cwd = env.cwd().display().to_string();
    runtime().block_on(async {
        let (ra, rb) = (remote(&a), remote(&b));
        let settings = SessionSettings {
            approval_policy: Some(ApprovalPolicy::Untrusted),
            ..Default::default()
        };
        let s = created(&*ra, &cwd, settings).await;
        let start = rb.session(&s.id).await.unwrap().last_seq;
        let mut on_b = rb.subscribe(&s.id, start).await.unwrap();
        rb.send(&s.id, submit("touch it")).await.unwrap();
        let request = loop {
            match next(&mut on_b).await.expect("B's stream ended").msg {
                EventMsg::ApprovalRequested(r) => break r,
                EventMsg::TurnEnded { .. } => panic!("the turn ended without asking"),
                _ => {}
            }
        };
        assert_eq!(request.tool_name, "bash");
        // Not run before the answer.
        assert!(!env.cwd().join("approved-through-b").exists());
        let answered = rb
            .send(
                &s.id,
                Op::AnswerApproval {
                    request_id: request.request_id.clone(),
                    decision: ApprovalDecision::AllowOnce,
                },
            )
            .await
            .unwrap();
        assert_eq!(answered.id.as_deref(), Some(request.request_id.as_str()));
        let seen = until_turn_end(&mut on_b).await;
        let text = text_of(&seen);
        assert!(text.contains("approvalResolved"), "{text}");
        assert!(text.contains("touched"), "{text}");
        // An unknown request id is the owner's refusal, passed back as it is.
        let err = rb
            .send(
                &s.id,
                Op::AnswerApproval {
                    request_id: "no-such-request".into(),
                    decision: ApprovalDecision::AllowOnce,
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.code.as_str(), "UNKNOWN_REQUEST", "{err}");
    });
    assert!(env.cwd().join("approved-through-b").exists());
    assert_eq!(env.server().request_count(), 2);
}

#[test]
fn a_killed_owner_s_session_is_taken_over_by_the_other_server_after_its_lease() {
    let Some((c, url)) =
        database("a_killed_owner_s_session_is_taken_over_by_the_other_server_after_its_lease")
    else {
        return;
    };
    let env = Env::new();
    env.server().push_all([
        Completion::new().text("first answer").reply(),
        Completion::new().text("second answer").reply(),
    ]);
    let mut a = serve(&env, &["--store", &url]);
    let b = serve(&env, &["--store", &url]);
    let cwd = env.cwd().display().to_string();
    let rt = runtime();
    let id = rt.block_on(async {
        let ra = remote(&a);
        let s = created(&*ra, &cwd, SessionSettings::default()).await;
        let mut on_a = ra.subscribe(&s.id, None).await.unwrap();
        ra.send(&s.id, submit("first")).await.unwrap();
        until_turn_end(&mut on_a).await;
        s.id
    });
    // kill -9: A's lease and its row in dsh_peers stay until they expire.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let b_url = b.url.clone();
    let sid = id.clone();
    let sent = std::thread::spawn(move || {
        runtime().block_on(async {
            let rb: Arc<dyn Client> = Arc::new(RemoteClient::new(&b_url, None).unwrap());
            rb.send(&sid, submit("second")).await
        })
    });
    // B forwarded it to A, which will never answer.
    wait_for("the op forwarded to the dead owner", || {
        assert!(!sent.is_finished(), "B answered without forwarding");
        c.psql(&url, "SELECT count(*) FROM dsh_ops WHERE state = 'pending'") == "1"
    });
    // The lease expires (as 30 s after the kill would): B withdraws the op and takes over.
    c.psql(
        &url,
        &format!("UPDATE dsh_sessions SET expires_at = now() WHERE id = '{id}'"),
    );
    wait_for(
        "B to answer the op (withdrawn from the dead owner, run by B)",
        || sent.is_finished(),
    );
    let accepted = sent.join().unwrap().unwrap();
    assert!(accepted.id.is_some());
    rt.block_on(async {
        let rb = remote(&b);
        let mut all = rb.subscribe(&id, None).await.unwrap();
        let mut seen = until_turn_end(&mut all).await;
        seen.extend(until_turn_end(&mut all).await);
        let text = text_of(&seen);
        assert!(text.contains("first answer"), "{text}");
        assert!(text.contains("second answer"), "{text}");
        // Every record once, without a gap, the second turn's after the first's.
        let stored: u64 = c
            .psql(
                &url,
                &format!("SELECT next_seq FROM dsh_sessions WHERE id = '{id}'"),
            )
            .parse()
            .unwrap();
        let records: Vec<u64> = rb
            .log(&id, None)
            .await
            .unwrap()
            .take(stored as usize)
            .map(|r| r.unwrap().seq)
            .collect()
            .await;
        assert_eq!(records, (0..stored).collect::<Vec<_>>());
    });
    assert!(owned_by(&c, &url, &id, b.child.id()), "not taken over by B");
    assert_eq!(c.psql(&url, "SELECT count(*) FROM dsh_ops"), "0");
    assert_eq!(env.server().request_count(), 2);
}

/// What cannot be forwarded says why: a session a non-server holds (a `dsh exec`: no row in
/// `dsh_peers`) answers `SESSION_LOCKED` at once; an op its owner took and then lost the lease
/// on answers `SESSION_OWNER_LOST` (it may or may not have been applied). The owner here is
/// played with SQL: its lease, its heartbeat row, its claim.
#[test]
fn an_op_that_cannot_be_forwarded_says_why() {
    let Some((c, url)) = database("an_op_that_cannot_be_forwarded_says_why") else {
        return;
    };
    let env = Env::new();
    let b = serve(&env, &["--store", &url]);
    let cwd = env.cwd().display().to_string();
    let rt = runtime();
    let id = rt.block_on(async {
        let rb = remote(&b);
        let s = created(&*rb, &cwd, SessionSettings::default()).await;
        rb.close(&s.id).await.unwrap();
        s.id
    });
    let hold = format!(
        "UPDATE dsh_sessions SET owner = 'ghost:1:x', epoch = epoch + 1, \
         expires_at = now() + interval '1 hour' WHERE id = '{id}'"
    );
    c.psql(&url, &hold);
    let err = rt
        .block_on(async { remote(&b).send(&id, submit("hello")).await })
        .unwrap_err();
    assert_eq!(err.code.as_str(), "SESSION_LOCKED", "{err}");
    assert!(err.message.contains("ghost:1:x"), "{err}");
    assert!(err.message.contains("takes no forwarded ops"), "{err}");

    // Now the holder says it takes forwarded ops; it claims the op and dies.
    c.psql(
        &url,
        "INSERT INTO dsh_peers VALUES ('ghost:1:x', now() + interval '1 hour')",
    );
    let b_url = b.url.clone();
    let sid = id.clone();
    let sent = std::thread::spawn(move || {
        runtime().block_on(async {
            let rb: Arc<dyn Client> = Arc::new(RemoteClient::new(&b_url, None).unwrap());
            rb.send(&sid, submit("hello")).await
        })
    });
    wait_for("the forwarded op", || {
        c.psql(
            &url,
            "SELECT count(*) FROM dsh_ops WHERE target = 'ghost:1:x'",
        ) == "1"
    });
    c.psql(&url, "UPDATE dsh_ops SET state = 'running'");
    c.psql(
        &url,
        &format!("UPDATE dsh_sessions SET expires_at = now() WHERE id = '{id}'"),
    );
    wait_for("B to give the op up", || sent.is_finished());
    let err = sent.join().unwrap().unwrap_err();
    assert_eq!(err.code.as_str(), "SESSION_OWNER_LOST", "{err}");
    assert!(err.message.contains("ghost:1:x"), "{err}");
    assert!(err.message.contains("may or may not"), "{err}");
    assert_eq!(c.psql(&url, "SELECT count(*) FROM dsh_ops"), "0");
    // Nothing ran: the model was never asked.
    assert_eq!(env.server().request_count(), 0);
}

/// What is live only on the owner reaches a watcher on the other server: a question the agent
/// asks (`ask_user_question`) is shown on B's stream and in a later watcher's snapshot, and
/// answered through B; a steer sent through B shows as queued and then delivered there.
#[test]
fn a_question_asked_on_the_owner_is_shown_and_answered_through_the_other_server() {
    let Some((_c, url)) =
        database("a_question_asked_on_the_owner_is_shown_and_answered_through_the_other_server")
    else {
        return;
    };
    let env = Env::new();
    let ask = serde_json::json!({"questions": [{
        "id": "colour",
        "question": "Which colour?",
        "options": [{"label": "red"}, {"label": "blue"}],
    }]});
    env.server().push_all([
        Completion::new()
            .tool_call("ask_user_question", &ask.to_string())
            .reply(),
        Completion::new().text("you chose blue").reply(),
    ]);
    let a = serve(&env, &["--store", &url]);
    let b = serve(&env, &["--store", &url]);
    let cwd = env.cwd().display().to_string();
    runtime().block_on(async {
        let (ra, rb) = (remote(&a), remote(&b));
        let s = created(&*ra, &cwd, SessionSettings::default()).await;
        let start = rb.session(&s.id).await.unwrap().last_seq;
        let mut on_b = rb.subscribe(&s.id, start).await.unwrap();
        rb.send(&s.id, submit("ask me")).await.unwrap();
        let asked = loop {
            match next(&mut on_b).await.expect("B's stream ended").msg {
                EventMsg::QuestionAsked(q) => break q,
                EventMsg::TurnEnded { .. } => panic!("the turn ended without asking"),
                _ => {}
            }
        };
        assert_eq!(asked.questions[0].question, "Which colour?");
        // A watcher that starts now finds it pending in its snapshot.
        let mut late = rb.subscribe(&s.id, None).await.unwrap();
        let snap = loop {
            if let EventMsg::Snapshot(snap) = next(&mut late).await.expect("no snapshot").msg {
                break snap;
            }
        };
        assert_eq!(snap.session.state, SessionState::WaitingForApproval);
        assert_eq!(
            snap.pending_questions
                .iter()
                .map(|q| q.request_id.as_str())
                .collect::<Vec<_>>(),
            [asked.request_id.as_str()]
        );
        // A steer sent through B while the turn waits shows as queued on B.
        let steer = rb
            .send(
                &s.id,
                Op::Steer {
                    text: "and say why".into(),
                },
            )
            .await
            .unwrap()
            .id
            .unwrap();
        loop {
            match next(&mut on_b).await.expect("B's stream ended").msg {
                EventMsg::SteerQueued { steer_id, text } if steer_id == steer => {
                    assert_eq!(text, "and say why");
                    break;
                }
                EventMsg::TurnEnded { .. } => panic!("the turn ended before the steer showed"),
                _ => {}
            }
        }
        rb.send(
            &s.id,
            Op::AnswerQuestion {
                request_id: asked.request_id.clone(),
                answers: vec![QuestionAnswer {
                    question_id: "colour".into(),
                    selected: vec!["blue".into()],
                    text: None,
                }],
            },
        )
        .await
        .unwrap();
        let mut seen = until_turn_end(&mut on_b).await;
        assert!(
            text_of(&seen).contains("you chose blue"),
            "{}",
            text_of(&seen)
        );
        // The owner publishes the answer and the steer's delivery as they happen; they may come
        // after the turn's committed end when the turn outran the publishing.
        let (mut answered, mut delivered) = (false, false);
        let mut i = 0;
        while !(answered && delivered) {
            if i == seen.len() {
                seen.push(next(&mut on_b).await.expect("B's stream ended"));
            }
            match &seen[i].msg {
                EventMsg::QuestionAnswered { request_id, .. } => {
                    assert_eq!(*request_id, asked.request_id);
                    answered = true;
                }
                EventMsg::SteerDelivered { steer_id } => {
                    assert_eq!(*steer_id, steer);
                    delivered = true;
                }
                _ => {}
            }
            i += 1;
        }
    });
    // The answer reached the model through A's tool result.
    let requests = env.server().requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body_text().contains("blue"));
    assert!(requests[1].body_text().contains("and say why"));
}
