//! The API key never shows up in errors, Debug output or log lines.

use std::io::Write;
use std::sync::{Arc, Mutex};

use dsh_llm_deepseek::{DeepSeekAdapter, DeepSeekConfig};
use dsh_testkit::{MockServer, Reply};

use crate::http::{KEY, adapter, config, run};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_key_never_leaks() {
    let logs = Buf::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = MockServer::start().await;
    let mut cfg = config(&server);
    cfg.idle_timeout_ms = Some(200);
    let a = adapter(&cfg);
    let mut messages = Vec::new();
    // A proxy echoing the key back is redacted.
    server.push(Reply::json(
        400,
        format!(r#"{{"error":{{"message":"bad key {KEY} here"}}}}"#),
    ));
    let echoed = run(&a).await.unwrap_err();
    assert_eq!(echoed.message, "bad key [redacted] here");
    messages.push(echoed.to_string());
    server.push(Reply::json(401, crate::common::fixture("http-401.json")));
    messages.push(format!("{:?}", run(&a).await.unwrap_err()));
    server.push(Reply::sse().stall_head());
    messages.push(run(&a).await.unwrap_err().to_string());
    server.push(Reply::sse().bytes("data: {}\n\n").reset());
    messages.push(format!("{:?}", run(&a).await.unwrap()));
    let refused = DeepSeekConfig {
        base_url: Some("http://127.0.0.1:9".into()),
        ..Default::default()
    };
    messages.push(run(&adapter(&refused)).await.unwrap_err().to_string());

    // Debug output of the adapter and of a config holding the key.
    messages.push(format!("{a:?}"));
    let mut with_key = config(&server);
    with_key.api_key = serde_json::from_value(serde_json::json!(KEY)).unwrap();
    messages.push(format!("{with_key:?}"));
    messages.push(format!("{:?}", DeepSeekAdapter::new(&with_key).unwrap()));

    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("DeepSeek request"),
        "no log lines were captured"
    );
    for m in messages.iter().chain(std::iter::once(&logs)) {
        assert!(!m.contains(KEY), "key leaked in: {m}");
        assert!(!m.contains("S3CRETKEY"), "key fragment leaked in: {m}");
    }
    // The request itself did carry it.
    assert_eq!(server.requests()[0].bearer(), Some(KEY));
}
