//! The RemoteClient drives a turn through the same `Client` trait the host implements, and
//! its event stream survives a dropped connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{
    ApprovalDecision, Client, ErrorCode, Event, EventMsg, EventStream, Op, OpenSession,
    SessionOptions, SessionQuery, TurnEndReason,
};
use dsh_serve::RemoteClient;
use dsh_test_harness::within;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::common::*;

async fn until(stream: &mut EventStream, done: impl Fn(&EventMsg) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let ev = within("no event", stream.next())
            .await
            .expect("the stream ended");
        let stop = done(&ev.msg);
        out.push(ev);
        if stop {
            return out;
        }
    }
}

/// A TCP proxy whose open connections can be cut (a network drop, for real).
struct Proxy {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accepted: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let c = conns.clone();
        let accepted: Arc<AtomicUsize> = Arc::default();
        let n = accepted.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut down, _)) = listener.accept().await else {
                    return;
                };
                n.fetch_add(1, Ordering::SeqCst);
                let handle = tokio::spawn(async move {
                    let Ok(mut up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                });
                c.lock().push(handle);
            }
        });
        Proxy {
            addr,
            conns,
            accepted,
            accept,
        }
    }

    /// Drops every open connection (both sockets close).
    fn cut(&self) {
        for h in self.conns.lock().drain(..) {
            h.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_client_drives_a_turn_and_its_stream_survives_a_dropped_connection() {
    let s = Server::start(tool_turn(), ApprovalPolicy::Untrusted).await;
    // The server's address as the client is told: through the proxy, with the Host the proxy
    // forwards (127.0.0.1:<proxy port>: loopback, accepted).
    let proxy = Proxy::start(s.addr).await;
    let remote: Arc<dyn Client> = Arc::new(
        RemoteClient::new(&format!("http://{}", proxy.addr), None)
            .unwrap()
            .with_retry_delay(std::time::Duration::from_millis(20)),
    );
    let summary = remote
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(s.h.dir().display().to_string()),
                ..Default::default()
            },
            prompt: None,
        })
        .await
        .unwrap();
    let id = summary.id.clone();
    // The in-process host's view, for reference.
    let mut reference = s.client.subscribe(&id, None).await.unwrap();
    until(&mut reference, |m| matches!(m, EventMsg::Snapshot(_))).await;
    let mut events = remote.subscribe(&id, None).await.unwrap();
    until(&mut events, |m| matches!(m, EventMsg::Snapshot(_))).await;
    remote
        .send(
            &id,
            Op::Submit {
                text: "touch a".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let mut seen = until(&mut events, |m| matches!(m, EventMsg::ApprovalRequested(_))).await;
    let EventMsg::ApprovalRequested(req) = &seen.last().unwrap().msg else {
        unreachable!()
    };
    let request_id = req.request_id.clone();
    // The network drops mid-turn; the answer goes in directly meanwhile.
    let connections = proxy.accepted.load(Ordering::SeqCst);
    proxy.cut();
    s.client
        .send(
            &id,
            Op::AnswerApproval {
                request_id,
                decision: ApprovalDecision::AllowOnce,
            },
        )
        .await
        .unwrap();
    seen.extend(until(&mut events, |m| matches!(m, EventMsg::TurnEnded { .. })).await);
    assert!(
        proxy.accepted.load(Ordering::SeqCst) > connections,
        "the stream reconnected"
    );
    let all = until(&mut reference, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert_eq!(
        committed_events(&seen),
        committed_events(&all),
        "every committed event exactly once across the drop"
    );
    let EventMsg::TurnEnded { reason, .. } = &seen.last().unwrap().msg else {
        unreachable!()
    };
    assert_eq!(reason, &TurnEndReason::Completed);
    // The rest of the trait.
    let list = remote.sessions(SessionQuery::default()).await.unwrap();
    assert!(list.iter().any(|x| x.id == id));
    assert_eq!(remote.session(&id).await.unwrap().turns, 1);
    assert_eq!(
        remote.commands(&id).await.unwrap(),
        s.client.commands(&id).await.unwrap()
    );
    let err = remote.send("no-such", Op::Interrupt).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    remote.close(&id).await.unwrap();
    // Closed: the stream ends cleanly (after any live state).
    while let Some(ev) = within("the end", events.next()).await {
        assert!(ev.is_live(), "{ev:?}");
    }
    proxy.accept.abort();
    s.stop().await;
}

/// The session's records as its stored file holds them now (read from disk afresh).
fn stored_lines(h: &dsh_test_harness::TestHarness, id: &str) -> Vec<String> {
    let sessions = h.get::<dyn dsh_session::Sessions>();
    let log = sessions.read(id).unwrap();
    log.events().iter().map(|e| e.to_json_line()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_streams_each_record_once_byte_for_byte_after_it_is_written_and_survives_a_drop() {
    let s = Server::start(tool_turn(), ApprovalPolicy::Untrusted).await;
    let proxy = Proxy::start(s.addr).await;
    let remote: Arc<dyn Client> = Arc::new(
        RemoteClient::new(&format!("http://{}", proxy.addr), None)
            .unwrap()
            .with_retry_delay(std::time::Duration::from_millis(20)),
    );
    let summary = remote
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(s.h.dir().display().to_string()),
                ..Default::default()
            },
            prompt: None,
        })
        .await
        .unwrap();
    let id = summary.id.clone();
    let mut log = remote.log(&id, None).await.unwrap();
    let mut local = s.client.log(&id, None).await.unwrap();
    let mut events = s.client.subscribe(&id, None).await.unwrap();
    s.client
        .send(
            &id,
            Op::Submit {
                text: "touch a".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let mut got: Vec<dsh_protocol::LogRecord> = Vec::new();
    // Up to the approval request: every record yielded is already in the file, as it is there.
    loop {
        let r = within("a record", log.next()).await.unwrap().unwrap();
        let on_disk = stored_lines(&s.h, &id);
        assert_eq!(
            on_disk.get(r.seq as usize).map(String::as_str),
            Some(&*r.line),
            "record {} is in the file before it is yielded, byte for byte",
            r.seq
        );
        let asked = r.line.contains("\"approval/asked\"");
        got.push(r);
        if asked {
            break;
        }
    }
    let EventMsg::ApprovalRequested(req) =
        until(&mut events, |m| matches!(m, EventMsg::ApprovalRequested(_)))
            .await
            .pop()
            .unwrap()
            .msg
    else {
        unreachable!()
    };
    // The network drops; the stream continues after the last seq it yielded.
    let connections = proxy.accepted.load(Ordering::SeqCst);
    proxy.cut();
    s.client
        .send(
            &id,
            Op::AnswerApproval {
                request_id: req.request_id,
                decision: ApprovalDecision::AllowOnce,
            },
        )
        .await
        .unwrap();
    until(&mut events, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    // Closed: the closing records come, then the end.
    s.client.close(&id).await.unwrap();
    while let Some(r) = within("the end of the log", log.next()).await {
        got.push(r.unwrap());
    }
    assert!(
        proxy.accepted.load(Ordering::SeqCst) > connections,
        "the stream reconnected"
    );
    let seqs: Vec<u64> = got.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (0..got.len() as u64).collect::<Vec<_>>(),
        "each seq once, in order"
    );
    let lines: Vec<String> = got.iter().map(|r| r.line.to_string()).collect();
    assert_eq!(
        lines,
        stored_lines(&s.h, &id),
        "the whole log, byte for byte"
    );
    assert!(lines.iter().any(|l| l.contains("\"turn/end\"")));
    // The in-process stream saw the same records.
    let mut direct = Vec::new();
    while let Some(r) = within("the local log", local.next()).await {
        direct.push(r.unwrap());
    }
    assert_eq!(direct, got);
    // A stored session: the records after `after`, then the end.
    let tail: Vec<_> = remote
        .log(&id, Some(2))
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(tail, got[3..].to_vec());
    let err = match remote.log("no-such-session", None).await {
        Err(e) => e,
        Ok(_) => panic!("an unknown session has no log"),
    };
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    proxy.accept.abort();
    s.stop().await;
}
