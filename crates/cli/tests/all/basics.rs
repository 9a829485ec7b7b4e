//! Version, usage errors, configuration commands.

use crate::support::*;

#[test]
fn version_prints_the_crate_version() {
    let env = Env::new();
    let out = env.dsh().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        format!("dsh {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let env = Env::new();
    let out = env.exec(&["--no-such-flag", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--no-such-flag"), "{}", stderr(&out));
}

#[test]
fn config_dump_shows_the_preset_rows_with_their_layer() {
    let env = Env::new();
    let patch = env.patch("p.yaml", "plugins:\n  - id: agent-loop\n    name: agent-loop\n    config: { maxParallelToolCalls: 3 }\n");
    let out = env
        .dsh()
        .args(["config", "dump", "--patch"])
        .arg(&patch)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("# from preset:headless\n  - id: sessions"),
        "{text}"
    );
    assert!(
        text.contains(&format!("# from {}\n  - id: agent-loop", patch.display())),
        "{text}"
    );
    assert!(text.contains("maxParallelToolCalls: 3"), "{text}");
}

#[test]
fn config_schema_lists_every_plugin() {
    let env = Env::new();
    let out = env.dsh().args(["config", "schema"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in [
        "agent-loop",
        "deepseek",
        "sessions",
        "session-jsonl",
        "tool-bash",
        "tool-fs",
    ] {
        assert!(v.get(name).is_some(), "missing {name}");
    }
    assert_eq!(v["agent-loop"]["additionalProperties"], false);
}

#[test]
fn invalid_yaml_names_the_file_and_line() {
    let env = Env::new();
    let patch = env.patch("bad.yaml", "plugins:\n  - id: x\n    name: [\n");
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("bad.yaml") && err.contains("line"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unknown_plugin_lists_the_known_ones() {
    let env = Env::new();
    let patch = env.patch("p.yaml", "plugins:\n  - name: telepathy\n");
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("unknown plugin `telepathy`") && err.contains("agent-loop"),
        "{err}"
    );
}

#[test]
fn invalid_plugin_config_names_row_and_field() {
    let env = Env::new();
    let patch = env.patch("p.yaml", "plugins:\n  - id: agent-loop\n    name: agent-loop\n    config: { maxParallelToolCalls: many }\n");
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("row `agent-loop`") && err.contains("maxParallelToolCalls"),
        "{err}"
    );
}

#[test]
fn missing_key_names_the_variable() {
    let env = Env::new();
    let out = env
        .dsh()
        .env_remove("DEEPSEEK_API_KEY")
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("DEEPSEEK_API_KEY"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.server().request_count(), 0, "no request without a key");
}

#[test]
fn unreachable_endpoint_names_the_url() {
    let mut env = Env::new();
    let url = env.server().base_url();
    // Stop the server so nothing listens there any more.
    drop(env.server.take());
    let out = env
        .dsh()
        .env("DEEPSEEK_BASE_URL", &url)
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("TRANSPORT") && err.contains("127.0.0.1"),
        "{err}"
    );
    assert!(!err.contains("sk-test-key"), "the key leaked: {err}");
}

/// The preset's command rows need only the registry: a composition without plan mode or
/// compaction starts and runs (their `/plan` and `/compact` are simply not offered).
#[test]
fn exec_runs_with_plan_mode_and_compaction_disabled() {
    let env = Env::new();
    env.server()
        .push(dsh_testkit::Completion::new().text("still here").reply());
    let patch = env.patch(
        "off.yaml",
        "plugins:\n  - { id: plan-mode, name: plan-mode, disabled: true }\n  - { id: compaction-basic, name: compaction-basic, disabled: true }\n  - { id: tool-result-pruner, name: tool-result-pruner, disabled: true }\n",
    );
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "hi"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still here\n");
}
