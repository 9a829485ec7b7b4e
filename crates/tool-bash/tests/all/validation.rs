//! Invalid arguments: every one is an `INVALID_ARGS` error result the model can act on.

use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::common::Harness;

async fn invalid(h: &Harness, arguments: &str) -> String {
    let result = h.call_raw(h.request(arguments)).await;
    assert!(result.is_error, "{arguments}: {}", result.text());
    assert_eq!(
        result.code(),
        Some(&ToolErrorCode::InvalidArgs),
        "{arguments}: {}",
        result.text()
    );
    result.text()
}

#[tokio::test]
async fn checks_beyond_the_schema() {
    let h = Harness::new().await;
    for (args, want) in [
        (
            json!({"command": "  ", "description": "d"}),
            "Error: invalid command: expected a non-empty string",
        ),
        (
            json!({"command": "ls", "description": ""}),
            "Error: invalid description: expected a non-empty string",
        ),
        (
            json!({"command": "ls", "description": "d", "timeoutMs": 0}),
            "Error: invalid timeoutMs: expected a positive number, got 0",
        ),
        (
            json!({"command": "ls", "description": "d", "timeoutMs": -1.5}),
            "Error: invalid timeoutMs: expected a positive number, got -1.5",
        ),
        (
            json!({"command": "ls\u{0}x", "description": "d"}),
            "Error: invalid command: the command contains a NUL byte",
        ),
    ] {
        assert_eq!(invalid(&h, &args.to_string()).await, want, "{args}");
    }
    let text = invalid(
        &h,
        &json!({"command": "ls", "description": "d", "run_in_background": true}).to_string(),
    )
    .await;
    assert!(text.contains("background jobs are not available"), "{text}");
    let long = json!({"command": format!("echo {}", "y".repeat(200_000)), "description": "d"});
    let text = invalid(&h, &long.to_string()).await;
    assert!(
        text.starts_with("Error: invalid command: the command (200005 bytes) is too long"),
        "{text}"
    );
    let text = invalid(
        &h,
        &json!({"command": "ls", "description": "d", "workdir": "missing dir"}).to_string(),
    )
    .await;
    assert!(
        text.starts_with("Error: invalid workdir: ") && text.contains("missing dir"),
        "{text}"
    );
    h.dispose().await;
}

#[tokio::test]
async fn schema_violations_and_bad_json() {
    let h = Harness::new().await;
    // Whatever the pipeline's exact wording, each names the field at fault.
    for (arguments, field) in [
        (r#"{"description": "d"}"#, "command"),
        (r#"{"command": "ls"}"#, "description"),
        (r#"{"command": 5, "description": "d"}"#, "command"),
        (
            r#"{"command": "ls", "description": "d", "timeoutMs": "100"}"#,
            "timeoutMs",
        ),
        (
            r#"{"command": "ls", "description": "d", "workdir": 7}"#,
            "workdir",
        ),
    ] {
        let text = invalid(&h, arguments).await;
        assert!(text.contains(field), "{arguments}: {text}");
    }
    invalid(&h, "{not json").await;
    invalid(&h, "[]").await;
    invalid(&h, "").await; // "" means {}: both required fields missing
    h.dispose().await;
}

#[tokio::test]
async fn huge_timeout_is_clamped_silently() {
    let h = Harness::new().await;
    let result = h
        .call(json!({"command": "true", "description": "d", "timeoutMs": 1e15}))
        .await;
    assert!(!result.is_error, "{}", result.text());
    assert_eq!(result.meta.unwrap()["timeoutMs"], 600_000);
    h.dispose().await;
}
