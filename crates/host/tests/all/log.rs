//! `Client::log`: a session's raw records as their exact session-format lines, from the log,
//! never lost to a slow reader, ending when the session closes.

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{ErrorCode, LogRecord, Op};
use dsh_test_harness::{Script, calls, text, within};
use futures::StreamExt;

use crate::compose::{host, open};

async fn rest(mut log: dsh_protocol::LogStream) -> Vec<LogRecord> {
    let mut out = Vec::new();
    while let Some(r) = within("the end of the log", log.next()).await {
        out.push(r.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_yields_every_record_once_as_its_line_then_ends_when_the_session_closes() {
    let (h, _host, client) = host(
        vec![
            Script::Chunks(calls(&[("c1", "touch", r#"{"path":"a"}"#)])),
            Script::Chunks(text("done")),
        ],
        ApprovalPolicy::Never,
    )
    .await;
    let id = open(&client, &h).await;
    // Opened before the turn, read only after it (a reader that stalls loses nothing)...
    let stalled = client.log(&id, None).await.unwrap();
    // ...and one that follows along.
    let mut follower = client.log(&id, None).await.unwrap();
    client
        .send(
            &id,
            Op::Submit {
                text: "touch a".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let mut followed = Vec::new();
    loop {
        let r = within("a record", follower.next()).await.unwrap().unwrap();
        let end = r.line.starts_with(r#"{"type":"turn/end""#);
        followed.push(r);
        if end {
            break;
        }
    }
    // The session, as the engine holds it.
    let agent = h.agents().get(&id).unwrap();
    let lines: Vec<(u64, String)> = agent
        .session()
        .events()
        .iter()
        .map(|e| (e.seq(), e.to_json_line()))
        .collect();
    client.close(&id).await.unwrap();
    followed.extend(rest(follower).await);
    let stalled = rest(stalled).await;
    assert_eq!(stalled, followed, "both readers saw the same records");
    let got: Vec<(u64, String)> = followed
        .iter()
        .map(|r| (r.seq, r.line.to_string()))
        .collect();
    // Every record of the turn, byte for byte, then what closing the session committed.
    assert_eq!(got[..lines.len()], lines[..]);
    let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    // Closed: its stored records after `after`, then the end; the same lines.
    let tail = rest(client.log(&id, Some(1)).await.unwrap()).await;
    assert_eq!(tail, followed[2..].to_vec());
    // Unknown sessions are refused.
    match client.log("no-such-session", None).await {
        Err(e) => assert_eq!(e.code, ErrorCode::SessionNotFound),
        Ok(_) => panic!("an unknown session has a log"),
    }
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_opened_after_a_seq_starts_right_after_it_and_follows_live() {
    let (h, _host, client) = host(
        vec![Script::Chunks(text("one")), Script::Chunks(text("two"))],
        ApprovalPolicy::Never,
    )
    .await;
    let id = open(&client, &h).await;
    let mut all = client.log(&id, None).await.unwrap();
    let submit = |t: &str| Op::Submit {
        text: t.into(),
        attachments: vec![],
    };
    client.send(&id, submit("first")).await.unwrap();
    let mut first = Vec::new();
    loop {
        let r = within("a record", all.next()).await.unwrap().unwrap();
        let end = r.line.starts_with(r#"{"type":"turn/end""#);
        first.push(r);
        if end {
            break;
        }
    }
    let last = first.last().unwrap().seq;
    let mut later = client.log(&id, Some(last)).await.unwrap();
    client.send(&id, submit("second")).await.unwrap();
    let r = within("a live record", later.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.seq, last + 1, "no gap, no repeat");
    let mut second = vec![r];
    while !second
        .last()
        .unwrap()
        .line
        .starts_with(r#"{"type":"turn/end""#)
    {
        second.push(
            within("a live record", later.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    client.close(&id).await.unwrap();
    second.extend(rest(later).await);
    // The first reader continues with exactly the same records.
    assert_eq!(rest(all).await, second);
    h.dispose().await;
}

/// A session open in storage without an agent yet (how a sub-agent's session exists when it is
/// announced) is followed live: what it commits later is yielded as it commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_open_without_an_agent_is_followed_live() {
    use dsh_session::feature::WorkingDirectoryChange;
    use dsh_session::{CreateOptions, NewEvent, Sessions};

    let (h, _host, client) = host(vec![], ApprovalPolicy::Never).await;
    let sessions = h.root().get::<dyn Sessions>().unwrap();
    let session = sessions
        .create(CreateOptions {
            cwd: Some(h.dir().display().to_string()),
            ..Default::default()
        })
        .unwrap();
    let id = session.id().to_owned();
    assert!(h.agents().get(&id).is_none());
    let before = session.events().len();
    let mut log = client.log(&id, None).await.unwrap();
    for _ in 0..before {
        within("a stored record", log.next())
            .await
            .unwrap()
            .unwrap();
    }
    session
        .append(
            NewEvent::plugin(&WorkingDirectoryChange {
                cwd: "/elsewhere".into(),
            })
            .unwrap(),
        )
        .unwrap();
    let r = within("the live record", log.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.seq, before as u64);
    assert!(
        r.line.starts_with(r#"{"type":"working-directory/change""#),
        "{}",
        r.line
    );
    drop(log);
    sessions.close(&id).await.unwrap();
}
