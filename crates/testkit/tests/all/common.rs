use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

/// Generous safety net for waits that should end promptly.
pub const SAFETY: Duration = Duration::from_secs(10);

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().unwrap()
}

pub async fn post(url: &str, body: &str) -> reqwest::Response {
    client()
        .post(format!("{url}/chat/completions"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// Reads the whole body as the list of frames the client saw.
pub async fn frames(resp: reqwest::Response) -> Vec<Bytes> {
    let mut stream = resp.bytes_stream();
    let mut out = Vec::new();
    while let Some(frame) = tokio::time::timeout(SAFETY, stream.next()).await.unwrap() {
        out.push(frame.unwrap());
    }
    out
}

pub fn concat(frames: &[Bytes]) -> Vec<u8> {
    frames.iter().flat_map(|f| f.iter().copied()).collect()
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../fixtures/deepseek/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The `data:` payloads of an SSE byte stream (comments skipped).
pub fn payloads(bytes: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with("\n\n"), "stream must end with a blank line");
    text.split("\n\n")
        .filter(|e| !e.is_empty() && !e.starts_with(':'))
        .map(|e| e.strip_prefix("data: ").unwrap().to_owned())
        .collect()
}
