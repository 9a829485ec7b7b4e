use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use dsh_testkit::MockServer;
use dsh_testkit::scenario::{Format, Scenario, ScenarioError};

use crate::common::{client, concat, fixture, frames, payloads, post};

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/example.yaml")
}

#[tokio::test]
async fn example_scenario_serves_its_responses() {
    let scenario = Scenario::load(&example()).unwrap();
    assert_eq!(scenario.replies.len(), 4);
    let server = MockServer::start().await;
    scenario.apply(&server);

    let first = frames(post(&server.base_url(), "{}").await).await;
    assert!(first.iter().all(|f| f.len() <= 16));
    let body = concat(&first);
    assert!(body.starts_with(b": keep-alive\n\n"));
    let p = payloads(&body);
    assert!(p.iter().any(|s| s.contains(r#""name":"read""#)));
    assert!(p[p.len() - 2].contains(r#""finish_reason":"tool_calls""#));

    let limited = post(&server.base_url(), "{}").await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "1");

    let last = frames(post(&server.base_url(), "{}").await).await;
    assert!(last.iter().all(|f| f.ends_with(b"\n\n")));

    let reset = post(&server.base_url(), "{}").await;
    assert!(reset.bytes().await.is_err());
}

#[tokio::test]
async fn json_scenarios_with_files_and_repeat() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/deepseek");
    let json = r#"{
        "repeat": true,
        "responses": [
            {"sseFile": "text.sse", "split": {"sizes": [10, 10]}, "times": 2},
            {"raw": {"status": 418, "headers": {"x-a": "b"}, "contentLength": true,
                     "steps": [{"chunks": {"text": "teapot", "split": {"every": 2}}}]}},
            {"error": {"status": 400, "message": "nope", "code": "c"}, "delayHeadMs": 1}
        ]
    }"#;
    let scenario = Scenario::parse(json, Format::Json, &dir).unwrap();
    assert!(scenario.repeat);
    assert_eq!(scenario.replies.len(), 4);
    let server = MockServer::start().await;
    scenario.apply(&server);
    for _ in 0..2 {
        assert_eq!(
            concat(&frames(post(&server.base_url(), "{}").await).await),
            fixture("text.sse")
        );
    }
    let tea = post(&server.base_url(), "{}").await;
    assert_eq!(tea.status(), 418);
    assert_eq!(tea.headers()["x-a"], "b");
    assert_eq!(tea.headers()["content-length"], "6");
    assert_eq!(tea.text().await.unwrap(), "teapot");
    let err = post(&server.base_url(), "{}").await;
    assert_eq!(err.status(), 400);
    let v: serde_json::Value = err.json().await.unwrap();
    assert_eq!(v["error"]["message"], "nope");
    // repeat: the queue cycles back to the start
    assert_eq!(
        concat(&frames(post(&server.base_url(), "{}").await).await),
        fixture("text.sse")
    );
}

#[test]
fn bad_scenarios_give_clear_errors() {
    let base = Path::new(".");
    let cases = [
        ("responses: [{}]", "response #0: give exactly one of"),
        (
            "responses: [{completion: {text: hi}, error: {kind: serverError}}]",
            "exactly one",
        ),
        (
            "responses: [{completion: {txt: hi}}]",
            "unknown field `txt`",
        ),
        (
            "responses: [{error: {message: x}}]",
            "needs `kind` or `status`",
        ),
        (
            "responses: [{error: {kind: teapot}}]",
            "unknown variant `teapot`",
        ),
        ("responses: [{sseFile: does-not-exist.sse}]", "cannot read"),
        (
            "responses: [{raw: {steps: [{chunks: {split: whole}}]}}]",
            "exactly one of `text`, `file`",
        ),
        ("responses: [{raw: {status: 42}}]", "invalid HTTP status 42"),
        (
            "responses: [{raw: {headers: {x: 1}}}]",
            "header `x` must be a string",
        ),
        ("nothing: here", "unknown field `nothing`"),
        ("responses: [", "invalid scenario"),
    ];
    for (text, expected) in cases {
        let err = Scenario::parse(text, Format::Yaml, base).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(expected), "{text}: {msg}");
    }
    // The same rejections by variant.
    use dsh_testkit::scenario::ResponseError;
    let invalid = |text: &str| match Scenario::parse(text, Format::Yaml, base).unwrap_err() {
        ScenarioError::Invalid { index: 0, source } => source,
        other => panic!("{text}: {other:?}"),
    };
    assert!(matches!(
        invalid("responses: [{}]"),
        ResponseError::NotOneKind
    ));
    assert!(matches!(
        invalid("responses: [{error: {message: x}}]"),
        ResponseError::NoKindOrStatus
    ));
    assert!(matches!(
        invalid("responses: [{raw: {status: 42}}]"),
        ResponseError::InvalidStatus(42)
    ));
    assert!(matches!(
        invalid("responses: [{sseFile: does-not-exist.sse}]"),
        ResponseError::ReadFile { .. }
    ));
    let err = Scenario::load(Path::new("/nonexistent/scenario.yaml")).unwrap_err();
    assert!(matches!(err, ScenarioError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/scenario.yaml"));
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn mock_llm_binary_prints_its_url_and_logs_requests() {
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_dsh-mock-llm"))
            .arg(example())
            .arg("--log-bodies")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    let url = url.trim_end().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");

    // Log lines arrive on stderr, one JSON object per request: read two of them (blocking reads,
    // bounded by the safety timeout).
    let stderr = child.0.stderr.take().unwrap();
    let log_lines = tokio::task::spawn_blocking(move || {
        let mut reader = BufReader::new(stderr);
        let mut lines = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            lines.push(line);
        }
        lines
    });

    let body = concat(&frames(post(&url, r#"{"model":"deepseek-flash"}"#).await).await);
    assert!(body.ends_with(b"data: [DONE]\n\n"));
    let limited = post(&url, "{}").await;
    assert_eq!(limited.status(), 429);

    let lines = tokio::time::timeout(crate::common::SAFETY, log_lines)
        .await
        .unwrap()
        .unwrap();
    let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["index"], 0);
    assert_eq!(first["path"], "/chat/completions");
    assert_eq!(first["status"], 200);
    assert_eq!(first["body"], r#"{"model":"deepseek-flash"}"#);
    let second: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(second["status"], 429);
    assert_eq!(second["bodyBytes"], 2);
}

#[tokio::test]
async fn mock_llm_binary_logs_to_a_file_before_answering() {
    let log = std::env::temp_dir().join(format!("dsh-mock-llm-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_dsh-mock-llm"))
            .arg(example())
            .args(["--log".as_ref(), log.as_os_str(), "--repeat".as_ref()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    })
    .await
    .unwrap();
    let resp = client().get(format!("{url}/nope")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    // The line was written before the response head left the server.
    let text = std::fs::read_to_string(&log).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["path"], "/nope");
    assert_eq!(line["status"], 404);
    assert_eq!(line["scripted"], false);
    assert!(line.get("body").is_none());
    drop(child);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn mock_llm_binary_rejects_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-mock-llm"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing <SCENARIO>"));
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-mock-llm"))
        .arg("/nonexistent.yaml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.yaml"));
}

#[test]
fn terminator_delay_sends_the_body_end_as_its_own_step() {
    use dsh_testkit::Step;
    let json = r#"{"responses": [{"completion": {"text": "hi"}, "terminatorDelayMs": 20}]}"#;
    let scenario = Scenario::parse(json, Format::Json, Path::new(".")).unwrap();
    let reply = &scenario.replies[0];
    let steps = reply.body_steps();
    assert!(
        matches!(steps.last(), Some(Step::Sleep(d)) if d.as_millis() == 20),
        "{steps:?}"
    );
    // The bytes are those of the plain completion: only the end moves.
    assert_eq!(
        reply.body_bytes(),
        dsh_testkit::Completion::new().text("hi").to_bytes()
    );
}
