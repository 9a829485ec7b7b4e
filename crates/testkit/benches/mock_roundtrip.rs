//! How much the mock server costs: request round trips and body throughput over 127.0.0.1.
//! Run with `cargo bench -p dsh-testkit --bench mock_roundtrip`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::{Duration, Instant};

use dsh_testkit::{Completion, MockServer, Reply, Split};
use futures::StreamExt;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let _ = writeln!(
        std::io::stdout(),
        "{name}: median {:?}, p99 {:?} over {} requests",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.len()
    );
}

async fn read_all(resp: reqwest::Response) -> usize {
    let mut stream = resp.bytes_stream();
    let mut n = 0;
    while let Some(frame) = stream.next().await {
        n += frame.unwrap().len();
    }
    n
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().build().unwrap();
    let body =
        r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

    // 1. Small streamed answers, one write per event, over a kept-alive connection.
    let server = MockServer::start().await;
    server.push(
        Completion::new()
            .text("Hello there!")
            .reply_split(&Split::PerEvent),
    );
    server.set_repeat(true);
    let n = 2000;
    let mut client_side = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let resp = client
            .post(server.chat_url())
            .body(body)
            .send()
            .await
            .unwrap();
        read_all(resp).await;
        client_side.push(start.elapsed());
    }
    let reqs = server.wait_for_finished(n).await;
    let server_side: Vec<Duration> = reqs
        .iter()
        .map(|r| r.finished_at.unwrap() - r.arrived_at)
        .collect();
    let gaps: Vec<Duration> = reqs
        .windows(2)
        .map(|w| w[1].arrived_at - w[0].finished_at.unwrap())
        .collect();
    report("round trip, 4-event SSE reply (client)", client_side);
    report("arrival -> last frame (server)", server_side);
    report("last frame -> next arrival (client + loopback)", gaps);
    drop(server);

    // 2. Throughput: 32 MiB in 64 KiB writes.
    let big = vec![b'x'; 32 * 1024 * 1024];
    let server = MockServer::start_with([Reply::sse().split_every(big, 64 * 1024)]).await;
    let start = Instant::now();
    let resp = client
        .post(server.chat_url())
        .body(body)
        .send()
        .await
        .unwrap();
    let got = read_all(resp).await;
    let secs = start.elapsed().as_secs_f64();
    let _ = writeln!(
        std::io::stdout(),
        "throughput, 64 KiB writes: {:.0} MB/s ({got} bytes in {secs:.3} s)",
        got as f64 / secs / 1e6
    );

    // 3. Write rate: 64 KiB one byte at a time.
    let small = vec![b'y'; 64 * 1024];
    let server = MockServer::start_with([Reply::sse().split_every(small, 1)]).await;
    let start = Instant::now();
    let resp = client
        .post(server.chat_url())
        .body(body)
        .send()
        .await
        .unwrap();
    let got = read_all(resp).await;
    let secs = start.elapsed().as_secs_f64();
    let _ = writeln!(
        std::io::stdout(),
        "1-byte writes: {:.0} writes/s ({got} writes in {secs:.3} s)",
        got as f64 / secs
    );
}
