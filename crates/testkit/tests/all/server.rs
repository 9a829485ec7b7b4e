use std::time::{Duration, Instant};

use bytes::Bytes;
use dsh_testkit::{Completion, Gate, MockServer, Outcome, Reply, Split};
use futures::StreamExt;

use crate::common::{SAFETY, client, concat, frames, post};

#[tokio::test]
async fn queue_mode_serves_in_order_and_records_requests() {
    let server = MockServer::start_with([
        Reply::text(200, "first"),
        Reply::text(201, "second").header("x-extra", "1"),
    ])
    .await;
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert_eq!(server.url(), server.base_url());
    assert_eq!(server.remaining(), 2);

    let before = Instant::now();
    let r1 = client()
        .post(server.chat_url())
        .header("authorization", "Bearer sk-one")
        .body(r#"{"n":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r1.status(), 200);
    assert_eq!(r1.text().await.unwrap(), "first");
    let r2 = client()
        .post(format!("{}/v1/chat/completions", server.base_url()))
        .body(vec![0u8, 159, 146, 150])
        .send()
        .await
        .unwrap();
    assert_eq!(r2.status(), 201);
    assert_eq!(r2.headers()["x-extra"], "1");
    assert_eq!(r2.text().await.unwrap(), "second");
    assert_eq!(server.remaining(), 0);

    let reqs = server.wait_for_finished(2).await;
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].index, 0);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/chat/completions");
    assert_eq!(reqs[0].header("Authorization"), Some("Bearer sk-one"));
    assert_eq!(reqs[0].bearer(), Some("sk-one"));
    assert_eq!(reqs[0].body_json().unwrap()["n"], 1);
    assert_eq!(reqs[1].path, "/v1/chat/completions");
    assert_eq!(reqs[1].body, Bytes::from_static(&[0, 159, 146, 150]));
    for r in &reqs {
        assert!(r.scripted);
        assert_eq!(r.outcome, Outcome::Completed);
        assert!(r.arrived_at >= before);
        assert!(r.finished_at.unwrap() >= r.arrived_at);
    }
    assert!(reqs[1].arrived_at >= reqs[0].finished_at.unwrap());
}

#[tokio::test]
async fn exhausted_queue_gives_a_clear_500() {
    let server = MockServer::start().await;
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.status(), 500);
    let body = resp.text().await.unwrap();
    assert!(body.contains("no scripted response left"), "{body}");
    let reqs = server.wait_for_requests(1).await;
    assert!(!reqs[0].scripted);
}

#[tokio::test]
async fn unknown_paths_and_methods_are_rejected_clearly() {
    let server = MockServer::start_with([Reply::text(200, "unused")]).await;
    let resp = client()
        .post(format!("{}/nope", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let body = resp.text().await.unwrap();
    assert!(body.contains("no route for POST /nope"), "{body}");
    assert!(body.contains("/chat/completions"), "{body}");

    let resp = client().get(server.chat_url()).send().await.unwrap();
    assert_eq!(resp.status(), 405);

    let resp = client()
        .get(format!("{}/models", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("deepseek-flash"));

    // None of these consumed the scripted reply; all were recorded.
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn chunk_splits_are_separate_frames_on_the_client() {
    let data = Completion::new()
        .reasoning("Think about it.")
        .text("Answer.")
        .to_bytes();
    let sizes = [1, 2, 3, 50, 7, 100, 1];
    let server = MockServer::start_with([Reply::sse().chunks(data.clone(), &sizes)]).await;
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    assert_eq!(resp.headers()["transfer-encoding"], "chunked");
    let got = frames(resp).await;
    assert_eq!(concat(&got), data.to_vec());

    // Every server write boundary is a boundary the client observed: chunks never merge.
    let mut server_cuts = Vec::new();
    let mut at = 0;
    for s in sizes {
        at += s;
        server_cuts.push(at);
    }
    let mut client_cuts = std::collections::BTreeSet::new();
    let mut at = 0;
    for f in &got {
        at += f.len();
        client_cuts.insert(at);
    }
    for cut in server_cuts {
        assert!(
            client_cuts.contains(&cut),
            "boundary {cut} merged: {client_cuts:?}"
        );
    }
}

#[tokio::test]
async fn split_every_byte_and_per_event() {
    let data = Completion::new().text("Hi").to_bytes();
    let server = MockServer::start_with([
        Completion::new().text("Hi").reply_split(&Split::Every(1)),
        Completion::new().text("Hi").reply_split(&Split::PerEvent),
    ])
    .await;
    let one = frames(post(&server.base_url(), "{}").await).await;
    assert_eq!(one.len(), data.len());
    assert!(one.iter().all(|f| f.len() == 1));
    let per_event = frames(post(&server.base_url(), "{}").await).await;
    assert_eq!(concat(&per_event), data.to_vec());
    assert!(per_event.iter().all(|f| f.ends_with(b"\n\n")));
    assert_eq!(per_event.len(), 4); // first delta, text, finish, [DONE]
}

#[tokio::test]
async fn gate_holds_the_rest_of_the_body() {
    let gate = Gate::new();
    let server = MockServer::start_with([Reply::sse()
        .bytes("part one|")
        .gate(&gate)
        .bytes("part two")])
    .await;
    let resp = post(&server.base_url(), "{}").await;
    let mut stream = resp.bytes_stream();
    let mut got = Vec::new();
    while got.len() < 9 {
        got.extend_from_slice(&stream.next().await.unwrap().unwrap());
    }
    assert_eq!(got, b"part one|");
    gate.wait_reached(1).await;
    assert!(!gate.is_open());
    gate.open();
    let mut rest = Vec::new();
    while let Some(frame) = stream.next().await {
        rest.extend_from_slice(&frame.unwrap());
    }
    assert_eq!(rest, b"part two");
}

#[tokio::test]
async fn keep_alives_arrive_as_comments() {
    let server = MockServer::start_with([Reply::sse()
        .keep_alive()
        .keep_alive()
        .bytes("data: [DONE]\n\n")])
    .await;
    let got = frames(post(&server.base_url(), "{}").await).await;
    assert_eq!(
        concat(&got),
        b": keep-alive\n\n: keep-alive\n\ndata: [DONE]\n\n".to_vec()
    );
    assert_eq!(got[0], Bytes::from_static(b": keep-alive\n\n"));
}

#[tokio::test]
async fn reset_mid_body_is_a_client_error() {
    let server = MockServer::start_with([Reply::sse().bytes("data: {\"partial\":").reset()]).await;
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut got = Vec::new();
    let err = loop {
        match tokio::time::timeout(SAFETY, stream.next()).await.unwrap() {
            Some(Ok(frame)) => got.extend_from_slice(&frame),
            Some(Err(err)) => break err,
            None => panic!("reset must not look like a clean end"),
        }
    };
    assert_eq!(got, b"data: {\"partial\":");
    assert!(
        err.is_body() || err.is_decode() || err.is_request(),
        "{err:?}"
    );
    let reqs = server.wait_for_finished(1).await;
    assert_eq!(reqs[0].outcome, Outcome::Reset);
}

#[tokio::test]
async fn reset_with_content_length_is_a_client_error() {
    let server = MockServer::start_with([Reply::sse()
        .bytes("data: abc")
        .reset()
        .bytes("never sent")
        .content_length()])
    .await;
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.headers()["content-length"], "19");
    let err = resp.bytes().await.unwrap_err();
    assert!(err.is_body() || err.is_decode(), "{err:?}");
}

#[tokio::test]
async fn reset_before_head_fails_the_request() {
    let server = MockServer::start_with([Reply::sse().reset_head()]).await;
    let err = client()
        .post(server.chat_url())
        .body("{}")
        .send()
        .await
        .unwrap_err();
    assert!(err.is_request() || err.is_connect(), "{err:?}");
    let reqs = server.wait_for_finished(1).await;
    assert_eq!(reqs[0].outcome, Outcome::Reset);
}

#[tokio::test]
async fn stall_never_completes_and_ends_when_the_client_leaves() {
    let server = MockServer::start_with([Reply::sse().bytes("data: x\n\n").stall()]).await;
    let resp = post(&server.base_url(), "{}").await;
    let mut stream = resp.bytes_stream();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        Bytes::from_static(b"data: x\n\n")
    );
    // Watchdog assertion: nothing more arrives.
    let next = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(next.is_err(), "a stalled body must not progress: {next:?}");
    assert_eq!(server.requests()[0].outcome, Outcome::Pending);
    drop(stream);
    let reqs = tokio::time::timeout(SAFETY, server.wait_for_finished(1))
        .await
        .expect("the server notices the client went away");
    assert_eq!(reqs[0].outcome, Outcome::Dropped);
}

#[tokio::test]
async fn dropping_the_server_ends_stalled_connections() {
    let server = MockServer::start_with([Reply::sse().bytes("data: x\n\n").stall()]).await;
    let resp = post(&server.base_url(), "{}").await;
    let mut stream = resp.bytes_stream();
    stream.next().await.unwrap().unwrap();
    drop(server);
    // The connection task was aborted: the client sees the connection end (an error, since the
    // chunked body never terminated), not an eternal stall.
    let end = tokio::time::timeout(SAFETY, stream.next()).await.unwrap();
    assert!(matches!(end, Some(Err(_))), "{end:?}");
}

#[tokio::test]
async fn stall_before_head_never_answers() {
    let server = MockServer::start_with([Reply::sse().stall_head()]).await;
    let url = server.chat_url();
    let send = client().post(url).body("{}").send();
    let res = tokio::time::timeout(Duration::from_millis(300), send).await;
    assert!(res.is_err(), "no head must arrive");
    let reqs = server.wait_for_requests(1).await;
    assert_eq!(reqs[0].body, Bytes::from_static(b"{}"));
}

#[tokio::test]
async fn sleep_and_delay_head_are_played() {
    let server = MockServer::start_with([Reply::sse()
        .delay_head(Duration::from_millis(30))
        .bytes("a")
        .sleep(Duration::from_millis(30))
        .bytes("b")])
    .await;
    let start = Instant::now();
    let got = frames(post(&server.base_url(), "{}").await).await;
    assert_eq!(concat(&got), b"ab".to_vec());
    assert!(start.elapsed() >= Duration::from_millis(60));
}

#[tokio::test]
async fn responder_mode_picks_replies_from_the_request() {
    let server = MockServer::start().await;
    server.push(Reply::text(200, "queued, ignored while a responder is set"));
    server.set_responder(|req| {
        let body = req.body_json().unwrap();
        let n = body["messages"].as_array().map_or(0, Vec::len);
        if n < 2 {
            Completion::new()
                .tool_call("read", r#"{"file_path":"a"}"#)
                .reply()
        } else {
            Completion::new()
                .text(&format!("done after {n} (#{})", req.index))
                .reply()
        }
    });
    let first = frames(post(&server.base_url(), r#"{"messages":[1]}"#).await).await;
    assert!(
        String::from_utf8(concat(&first))
            .unwrap()
            .contains("\"tool_calls\"")
    );
    let second = frames(post(&server.base_url(), r#"{"messages":[1,2,3]}"#).await).await;
    assert!(
        String::from_utf8(concat(&second))
            .unwrap()
            .contains("done after 3 (#1)")
    );
    assert_eq!(server.remaining(), 1);
    server.clear_responder();
    let third = post(&server.base_url(), "{}").await;
    assert_eq!(
        third.text().await.unwrap(),
        "queued, ignored while a responder is set"
    );
}

#[tokio::test]
async fn wait_for_requests_wakes_on_arrival() {
    let server = std::sync::Arc::new(MockServer::start_with([Reply::text(200, "ok")]).await);
    let waiter = {
        let server = server.clone();
        tokio::spawn(async move { server.wait_for_requests(1).await })
    };
    let base = server.base_url();
    let resp = post(&base, r#"{"hello":true}"#).await;
    assert_eq!(resp.text().await.unwrap(), "ok");
    let reqs = tokio::time::timeout(SAFETY, waiter).await.unwrap().unwrap();
    assert_eq!(reqs[0].body_text(), r#"{"hello":true}"#);
}

#[tokio::test]
async fn repeat_mode_cycles_the_queue() {
    let server = MockServer::start_with([Reply::text(200, "a"), Reply::text(200, "b")]).await;
    server.set_repeat(true);
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(post(&server.base_url(), "{}").await.text().await.unwrap());
    }
    assert_eq!(got, ["a", "b", "a", "b", "a"]);
}

#[tokio::test]
async fn require_api_key_answers_wrong_keys_with_401() {
    let server = MockServer::start_with([Reply::text(200, "ok")]).await;
    server.require_api_key("sk-good");
    let bad = client()
        .post(server.chat_url())
        .header("authorization", "Bearer sk-bad")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    assert!(bad.text().await.unwrap().contains("Authentication Fails"));
    let good = client()
        .post(server.chat_url())
        .header("authorization", "Bearer sk-good")
        .send()
        .await
        .unwrap();
    assert_eq!(good.text().await.unwrap(), "ok");
}

#[tokio::test]
async fn invalid_scripted_headers_give_a_clear_500() {
    let server = MockServer::start_with([Reply::status(200).header("bad header", "x")]).await;
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.status(), 500);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("invalid scripted header")
    );
}

#[tokio::test]
async fn keep_alive_connections_serve_several_requests() {
    let server = MockServer::start_with([
        Completion::new().text("one").reply(),
        Completion::new().text("two").reply_split(&Split::Every(5)),
    ])
    .await;
    let c = client();
    for expected in ["one", "two"] {
        let resp = c.post(server.chat_url()).body("{}").send().await.unwrap();
        let text = resp.text().await.unwrap();
        assert!(text.contains(expected));
    }
}

#[tokio::test]
async fn connection_count_counts_accepted_connections() {
    let server = MockServer::start_with([
        Completion::new().text("one").reply(),
        Completion::new().text("two").reply(),
        Completion::new().text("three").reply(),
    ])
    .await;
    assert_eq!(server.connection_count(), 0);
    let c = client();
    for _ in 0..2 {
        let resp = c.post(server.chat_url()).body("{}").send().await.unwrap();
        resp.text().await.unwrap();
    }
    assert_eq!(
        server.connection_count(),
        1,
        "one pooled client, one connection"
    );
    let other = client();
    let resp = other
        .post(server.chat_url())
        .body("{}")
        .send()
        .await
        .unwrap();
    resp.text().await.unwrap();
    assert_eq!(server.connection_count(), 2);
}

#[tokio::test]
async fn a_panicking_responder_gives_a_500_not_a_hang() {
    let server = MockServer::start().await;
    server.set_responder(|_| panic!("boom in responder"));
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.status(), 500);
    assert!(resp.text().await.unwrap().contains("boom in responder"));
    let reqs = server.wait_for_finished(1).await;
    assert_eq!(reqs[0].status, 500);
    assert!(!reqs[0].scripted);
}

#[tokio::test]
async fn endless_keep_alives_keep_coming_until_the_client_leaves() {
    let server = MockServer::start_with([Reply::sse()
        .bytes("data: {}\n\n")
        .keep_alive_every(Duration::from_millis(5))])
    .await;
    let resp = post(&server.base_url(), "{}").await;
    let mut stream = resp.bytes_stream();
    let mut got = Vec::new();
    while got.len() < 10 + 14 * 5 {
        got.extend_from_slice(&stream.next().await.unwrap().unwrap());
    }
    let text = String::from_utf8(got).unwrap();
    assert!(
        text.starts_with("data: {}\n\n: keep-alive\n\n: keep-alive\n\n"),
        "{text:?}"
    );
    assert_eq!(server.requests()[0].outcome, Outcome::Pending);
    drop(stream);
    let reqs = tokio::time::timeout(SAFETY, server.wait_for_finished(1))
        .await
        .unwrap();
    assert_eq!(reqs[0].outcome, Outcome::Dropped);
}

#[test]
fn blocking_server_serves_synchronous_clients() {
    use std::io::{Read, Write};
    let server = MockServer::start_blocking();
    server.push(Completion::new().text("sync").reply_split(&Split::PerEvent));
    let mut sock = std::net::TcpStream::connect(server.addr()).unwrap();
    sock.write_all(
        b"POST /chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
    )
    .unwrap();
    let mut response = String::new();
    sock.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        response.contains("transfer-encoding: chunked"),
        "{response}"
    );
    assert!(response.contains("\"content\":\"sync\""));
    assert!(
        response.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"),
        "{response:?}"
    );

    let reqs = server.wait_for_requests_blocking(1, SAFETY).unwrap();
    assert_eq!(reqs[0].body_text(), "{}");
    let reqs = server.wait_for_finished_blocking(1, SAFETY).unwrap();
    assert_eq!(reqs[0].outcome, Outcome::Completed);
    assert!(
        server
            .wait_for_requests_blocking(2, Duration::from_millis(50))
            .is_none()
    );

    // Dropping joins the server thread (its runtime and connection tasks are gone).
    drop(server);
}

#[tokio::test]
async fn on_request_sees_each_request_before_its_response() {
    let server = MockServer::start_with([Reply::text(201, "ok")]).await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    server.on_request(move |req| sink.lock().unwrap().push((req.path.clone(), req.status)));
    let resp = post(&server.base_url(), "{}").await;
    // Recorded before the head was sent, so it is visible as soon as the status is.
    assert_eq!(resp.status(), 201);
    assert_eq!(
        *seen.lock().unwrap(),
        [("/chat/completions".to_owned(), 201)]
    );
}
