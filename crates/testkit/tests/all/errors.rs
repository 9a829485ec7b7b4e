use dsh_testkit::{MockServer, deepseek};

use crate::common::{fixture, post};

#[tokio::test]
async fn error_helpers_match_the_fixtures() {
    let cases = [
        (deepseek::unauthorized(), 401, "http-401.json"),
        (deepseek::insufficient_balance(), 402, "http-402.json"),
        (deepseek::rate_limited(None), 429, "http-429.json"),
        (deepseek::context_exceeded(), 400, "http-400-context.json"),
    ];
    let server = MockServer::start().await;
    for (reply, _, _) in &cases {
        server.push(reply.clone());
    }
    for (_, status, file) in cases {
        let resp = post(&server.base_url(), "{}").await;
        assert_eq!(resp.status(), status, "{file}");
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert_eq!(resp.headers()["x-ds-trace-id"], deepseek::TRACE_ID);
        assert!(resp.headers().get("retry-after").is_none());
        let body = resp.bytes().await.unwrap();
        assert_eq!(body.to_vec(), fixture(file), "{file}");
    }
}

#[tokio::test]
async fn rate_limit_carries_retry_after() {
    let server = MockServer::start_with([
        deepseek::rate_limited(Some("2")),
        deepseek::rate_limited(Some("Wed, 21 Oct 2015 07:28:00 GMT")),
    ])
    .await;
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "2");
    assert_eq!(
        resp.bytes().await.unwrap().to_vec(),
        fixture("http-429.json")
    );
    let resp = post(&server.base_url(), "{}").await;
    assert_eq!(
        resp.headers()["retry-after"],
        "Wed, 21 Oct 2015 07:28:00 GMT"
    );
}

#[tokio::test]
async fn generic_errors_use_the_envelope() {
    let server = MockServer::start_with([
        deepseek::server_error(),
        deepseek::overloaded(),
        deepseek::invalid_request("bad \"thing\""),
        deepseek::reasoning_not_passed_back(),
    ])
    .await;
    for (status, message) in [
        (500, "Server Error"),
        (503, "Server Overloaded"),
        (400, "bad \"thing\""),
        (
            400,
            "The `reasoning_content` in the thinking mode must be passed back to the API.",
        ),
    ] {
        let resp = post(&server.base_url(), "{}").await;
        assert_eq!(resp.status(), status);
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["message"], message);
        assert_eq!(v["error"]["param"], serde_json::Value::Null);
        let keys: Vec<_> = v["error"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["message", "type", "param", "code"]);
    }
}
