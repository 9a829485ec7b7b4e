//! Result text per `docs/behaviours.md` (BA-5, BA-6, BA-7), on real runs.

use dsh_tools::ToolErrorCode;
use std::path::PathBuf;

use dsh_llm::ContentBlock;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{Harness, SAFETY};

/// The upstream `bash-tool` fixture: the model's exact arguments and the exact result.
#[tokio::test]
async fn upstream_fixture_round_trip() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/upstream-sessions/v3/bash-tool/session.v3.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = rows.iter().find(|r| r["type"] == "tool/call").unwrap();
    let result = rows.iter().find(|r| r["type"] == "tool/result").unwrap();
    let arguments = call["data"]["arguments"].as_str().unwrap();
    let block = &result["data"]["message"]["content"][0];
    let want_text = block["content"][0]["text"].as_str().unwrap();
    let want_error = block["isError"].as_bool().unwrap();

    let h = Harness::new().await;
    let got = h.call_raw(h.request(arguments)).await;
    assert_eq!(got.text(), want_text);
    assert_eq!(got.is_error, want_error);
    assert_eq!(got.content, vec![ContentBlock::text(want_text)]);
    h.dispose().await;
}

#[tokio::test]
async fn stdout_stderr_and_exit_code() {
    let h = Harness::new().await;
    assert_eq!(
        h.ok("echo out; echo err >&2; exit 3").await,
        "out\n[stderr]\nerr\n[exit code: 3]"
    );
    assert_eq!(
        h.ok("printf out; printf err >&2").await,
        "out\n[stderr]\nerr"
    );
    assert_eq!(h.ok("true").await, "(no output)");
    assert_eq!(h.ok("exit 1").await, "(no output)\n[exit code: 1]");
    h.dispose().await;
}

#[tokio::test]
async fn signal_and_timeout_markers_are_not_errors() {
    let h = Harness::new().await;
    assert_eq!(
        h.ok("kill -KILL $$").await,
        "(no output)\n[killed by signal: SIGKILL]"
    );
    // SIGTERM ends the process whether it lands before or after the exec: no race.
    let result = h
        .call(
            json!({"command": "exec sleep 1000", "description": "Wait forever", "timeoutMs": 200}),
        )
        .await;
    assert!(!result.is_error);
    assert_eq!(
        result.text(),
        "(no output)\n[timed out after 200ms]\n[killed by signal: SIGTERM]"
    );
    // Trapping SIGTERM and exiting 0 still shows the timeout (U52). The deadline is generous
    // so the trap is installed long before it passes.
    let result = h
        .call(json!({"command": "trap 'exit 0' TERM; sleep 1000 & wait", "description": "Trap the signal", "timeoutMs": 1000}))
        .await;
    assert!(!result.is_error);
    assert_eq!(result.text(), "(no output)\n[timed out after 1000ms]");
    let meta = result.meta.unwrap();
    assert_eq!(meta["timedOut"], true);
    assert_eq!(meta["exitCode"], 0);
    h.dispose().await;
}

#[tokio::test]
async fn truncated_output_names_the_spill_file() {
    let h = Harness::new().await;
    let text = h
        .ok("head -c 100000 /dev/zero | tr '\\0' x; echo; echo tail-line")
        .await;
    let (body, note) = text.rsplit_once('\n').unwrap();
    assert!(body.ends_with("tail-line\n"), "{body:?}");
    let path = note
        .strip_prefix("[output truncated; full output: ")
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no truncation note in {note:?}"));
    let path = PathBuf::from(path);
    assert!(path.starts_with(h.scratch()), "{}", path.display());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 100_000 + 1 + 10);
    // The kept tail is the cap (64000 bytes) minus a possible cut character.
    assert!(body.len() <= 64_000);
    h.dispose().await;
}

/// The session's spill cap (from the tool request) reaches the shell: past it the output is
/// truncated with a note saying the full output was not saved, and nothing is written.
#[tokio::test]
async fn session_spill_cap_note() {
    let h = Harness::new().await;
    let args = serde_json::json!({
        "command": "head -c 100000 /dev/zero | tr '\\0' x",
        "description": "Print a lot",
    });
    let request = h
        .request(&args.to_string())
        .with_scratch(h.scratch(), Some(50_000));
    let result = h.call_raw(request).await;
    assert!(!result.is_error, "{}", result.text());
    assert!(
        result.text().ends_with(
            "\n[output truncated; full output not saved: this session's spill files reached their cap of 50000 bytes]"
        ),
        "{}",
        &result.text()[result.text().len() - 200..]
    );
    let spilled = std::fs::read_dir(h.scratch()).map_or(0, |d| d.count());
    assert_eq!(spilled, 0);
    h.dispose().await;
}

#[tokio::test]
async fn oversized_output_says_unavailable() {
    let h = Harness::new().await;
    let text = h.ok("head -c 100000000 /dev/zero; exit 4").await;
    assert!(
        text.ends_with("\n[output truncated; full output: (unavailable)]\n[exit code: 4]"),
        "{}",
        &text[text.len().saturating_sub(120)..]
    );
    assert!(text.len() < 64_200, "{}", text.len());
    h.dispose().await;
}

#[tokio::test]
async fn binary_output_becomes_replacement_characters() {
    let h = Harness::new().await;
    assert_eq!(h.ok(r"printf 'a\xffb\x00c'").await, "a\u{FFFD}b\u{0}c");
    h.dispose().await;
}

#[tokio::test]
async fn environment_and_workdir() {
    let h = Harness::new().await;
    assert_eq!(
        h.ok("echo \"$DSH_SESSION_ID:$DSH_SHELL:${DEEPSEEK_API_KEY-unset}\"")
            .await,
        "sess-7:1:unset\n"
    );
    let sub = h.cwd().join("sub dir ü 漢");
    std::fs::create_dir(&sub).unwrap();
    let result = h
        .call(json!({"command": "pwd -P", "description": "Print the directory", "workdir": "sub dir ü 漢"}))
        .await;
    assert_eq!(
        result.text(),
        format!("{}\n", sub.canonicalize().unwrap().display())
    );
    let result = h
        .call(json!({"command": "pwd -P", "description": "Print the directory", "workdir": sub}))
        .await;
    assert_eq!(
        result.text(),
        format!("{}\n", sub.canonicalize().unwrap().display())
    );
    // Every call is a fresh shell: no state carries over.
    h.ok("export CARRY=1; cd /").await;
    assert_eq!(
        h.ok("echo \"${CARRY-none}\"; pwd -P").await,
        format!("none\n{}\n", h.cwd().canonicalize().unwrap().display())
    );
    h.dispose().await;
}

#[tokio::test]
async fn cancellation_is_an_aborted_error() {
    let h = Harness::new().await;
    let fifo = h.dir.path().join("ready.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let cancel = CancellationToken::new();
    let args = json!({
        "command": format!("sleep 1000 & echo $! > '{}'; wait", fifo.display()),
        "description": "Block until cancelled"
    });
    let mut request = h.request(&args.to_string());
    request.cancel = cancel.clone();
    let (result, pid) = tokio::join!(h.call_raw(request), async {
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap());
        let pid: i32 = tokio::time::timeout(SAFETY, read)
            .await
            .unwrap()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        cancel.cancel();
        pid
    });
    assert!(result.is_error);
    assert_eq!(result.code(), Some(&ToolErrorCode::Aborted));
    assert_eq!(result.text(), "Error: tool call aborted");
    // The background sleep died with the run (zombie at most until its reaper collects it).
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .map(|(_, r)| r.trim_start().chars().next());
    assert!(matches!(state, None | Some(Some('Z' | 'X'))), "{stat}");
    h.dispose().await;
}

#[tokio::test]
async fn spawn_failure_is_an_error_result() {
    let h = Harness::with_shell_config(json!({"program": "/nonexistent/bash"})).await;
    let result = h
        .call(json!({"command": "true", "description": "Run nothing"}))
        .await;
    assert!(result.is_error);
    assert_eq!(result.code(), Some(&dsh_tool_bash::SPAWN_FAILED));
    assert!(
        result
            .text()
            .starts_with("Error: failed to start /nonexistent/bash: "),
        "{}",
        result.text()
    );
    h.dispose().await;
}

#[tokio::test]
async fn schema_and_concurrency() {
    let h = Harness::new().await;
    let schemas = h.tools.schemas(None);
    let bash = schemas.iter().find(|s| s.name == "bash").unwrap();
    assert_eq!(bash.description, dsh_tool_bash::DESCRIPTION);
    assert_eq!(*bash.parameters, dsh_tool_bash::args::parameters());
    let keys: Vec<&String> = bash.parameters["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        keys,
        [
            "command",
            "description",
            "timeoutMs",
            "workdir",
            "sandbox_permissions",
            "justification"
        ]
    );
    assert_eq!(
        bash.parameters["required"],
        json!(["command", "description"])
    );
    assert!(bash.parameters.get("additionalProperties").is_none());
    assert_eq!(
        h.tools
            .concurrency(None, "bash", r#"{"command":"ls","description":"List"}"#),
        dsh_tools::Concurrency::Exclusive
    );
    h.dispose().await;
}
