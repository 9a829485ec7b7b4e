//! The original harness's published Python SDK (`deepseek-harness-sdk==0.2.1rc2` from PyPI,
//! installed by `scripts/test-clients` into a cache venv) drives `dsh --profile sdk` against
//! the testkit model. The driver script is `fixtures/sdk/drive.py`.

#![allow(clippy::print_stderr)] // skip reasons are printed

use std::path::{Path, PathBuf};
use std::process::Command;

use dsh_testkit::Completion;
use serde_json::Value;

use dsh_test_harness::e2e::{Env, dsh_bin, request_messages};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The venv's python, installing the SDK first when needed; `None` (with the reason printed)
/// only when PyPI cannot be reached.
fn python_sdk() -> Option<PathBuf> {
    let out = Command::new(Path::new(ROOT).join("scripts/test-clients"))
        .arg("python")
        .output()
        .expect("run scripts/test-clients");
    match out.status.code() {
        Some(0) => {}
        Some(3) => {
            eprintln!(
                "skipping: the Python SDK cannot be installed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        _ => panic!(
            "scripts/test-clients python failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
    let cache = std::env::var_os("DSH_TEST_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target/test-clients"));
    Some(cache.join("py-sdk/bin/python"))
}

/// Fast retries through the profile's user patch (`$DSH_HOME/profiles/sdk/cordis.patch.yml`).
fn sdk_env() -> Env {
    let env = Env::new();
    let dir = env.home.path().join("profiles/sdk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("cordis.patch.yml"),
        "plugins:\n  - id: llm-retry\n    name: llm-retry\n    config:\n      default: { initialDelayMs: 1, maxDelayMs: 2000 }\n",
    )
    .unwrap();
    env
}

fn drive(python: &Path, env: &Env, scenario: &str) -> Value {
    let out = Command::new(python)
        .arg(Path::new(ROOT).join("fixtures/sdk/drive.py"))
        .arg(scenario)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("DSH_HOME", env.home.path())
        .env("DSH_BIN", dsh_bin())
        .env("WORK", env.cwd())
        .env("DEEPSEEK_BASE_URL", env.server().base_url())
        .current_dir(env.work.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "drive.py {scenario} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "drive.py {scenario} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn contains_text(messages: &[Value], needle: &str) -> bool {
    messages.iter().any(|m| m.to_string().contains(needle))
}

#[test]
fn the_python_sdk_runs_a_bash_turn_continues_and_resumes() {
    let Some(python) = python_sdk() else { return };
    let env = sdk_env();
    std::fs::create_dir(env.work.path().join("sub")).unwrap();
    env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo proof-7391","description":"Echo"}"#,
            )
            .reply(),
    );
    env.server()
        .push(Completion::new().text("proof-7391").reply());
    env.server()
        .push(Completion::new().text("second answer").reply());
    let out = drive(&python, &env, "bash_then_continue");

    let first = &out["first"];
    assert_eq!(first["final_response"], "proof-7391", "{out:#}");
    assert_eq!(first["finish_reason"], "completed");
    assert_eq!(first["session_id"], "sdk-e2e");
    let types: Vec<&str> = first["event_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"agent/inbox/spliced"), "{types:?}");
    assert!(types.contains(&"tool/result"), "{types:?}");
    assert_eq!(types.last(), Some(&"turn/end"), "{types:?}");
    // The run ended at the idle status.
    assert_eq!(
        first["methods"].as_array().unwrap().last().unwrap(),
        "session.status"
    );
    // The bash command really ran: its output went back to the model.
    let second_request = request_messages(env.server(), 1);
    let tool = second_request.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"].as_str().unwrap().contains("proof-7391"),
        "{tool}"
    );

    // The second prompt continues the same session.
    assert_eq!(out["second"]["final_response"], "second answer");
    assert_eq!(out["second"]["finish_reason"], "completed");
    let third = request_messages(env.server(), 2);
    assert!(contains_text(&third, "Run echo proof-7391 with bash"));
    assert!(contains_text(&third, "And again"));

    // Working directory: get, set relative to the current one, get again.
    let work = env.cwd();
    assert_eq!(out["cwd"], work.display().to_string());
    assert_eq!(out["cwd_set"], work.join("sub").display().to_string());
    assert_eq!(out["cwd_after"], work.join("sub").display().to_string());

    // A new runtime resumes the stored session and continues it.
    env.server()
        .push(Completion::new().text("resumed answer").reply());
    let resumed = drive(&python, &env, "resume");
    assert_eq!(resumed["resumed"]["final_response"], "resumed answer");
    assert_eq!(resumed["resumed"]["finish_reason"], "completed");
    let fourth = request_messages(env.server(), 3);
    assert!(contains_text(&fourth, "Run echo proof-7391 with bash"));
    assert!(contains_text(&fourth, "second answer"));
    assert!(contains_text(&fourth, "Continue please"));
}

#[test]
fn the_python_sdk_sees_errors_as_its_exceptions_and_error_turns_as_error() {
    let Some(python) = python_sdk() else { return };
    let env = sdk_env();
    env.server().push(dsh_testkit::deepseek::unauthorized());
    let out = drive(&python, &env, "errors");
    let missing = &out["resume_missing"];
    assert_eq!(missing["code"], -32603, "{out:#}");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("no stored session \"no-such-session\""),
        "{missing}"
    );
    assert_eq!(out["error_turn"]["finish_reason"], "error", "{out:#}");
    assert_eq!(out["error_turn"]["final_response"], "");
    // A bad route fails `initialize` (the SDK closes the runtime and raises).
    assert_eq!(
        out["bad_provider"]["message"], "no adapter registered for provider \"no-such-provider\"",
        "{out:#}"
    );
    let bad = out["bad_max_tokens"]["message"].as_str().unwrap();
    assert!(bad.contains("maxTokens must be a positive"), "{bad}");
}
