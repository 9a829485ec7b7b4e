//! The sandbox end to end: the real `dsh exec`, the real bwrap (the preset's default backend),
//! the model's tool calls scripted through the testkit server.

#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::{Env, request_messages, stderr};

/// A workspace and an outside directory under `/var/tmp` (not a writable root), and a home
/// directory there too (so `~/.bashrc` is outside the roots).
struct Outside {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    home: PathBuf,
}

fn outside() -> Outside {
    let root = tempfile::Builder::new()
        .prefix("dsh-cli-sandbox-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    let home = root.path().join("home");
    for d in [&ws, &outside, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    Outside {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        home: home.canonicalize().unwrap(),
        _root: root,
    }
}

fn tool_texts(env: &Env, request: usize) -> Vec<String> {
    request_messages(env.server(), request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn tool_results(env: &Env) -> Vec<Value> {
    env.stored_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/result")
        .collect()
}

fn bash(cmd: &str) -> String {
    serde_json::json!({"command": cmd, "description": "try"}).to_string()
}

fn listing(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn workspace_write_refuses_escapes_through_bash_and_the_file_tools() {
    let env = Env::new();
    let o = outside();
    std::fs::write(o.outside.join("target.txt"), "original\n").unwrap();
    std::os::unix::fs::symlink(o.outside.join("target.txt"), o.ws.join("link.txt")).unwrap();
    let via_proc = format!("/proc/self/root{}/proc.txt", o.outside.display());
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch ../outside/x"))
            .tool_call_with_id("c2", "bash", &bash("echo x > ~/.bashrc"))
            .tool_call_with_id("c3", "bash", &bash("cd / && touch x"))
            .tool_call_with_id("c4", "bash", &bash(&format!("echo x > {via_proc}")))
            .tool_call_with_id("c5", "read", r#"{"file_path":"link.txt"}"#)
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "c6",
                "edit",
                r#"{"file_path":"link.txt","old_string":"original","new_string":"changed"}"#,
            )
            .tool_call_with_id(
                "c7",
                "write",
                &serde_json::json!({"file_path": via_proc, "content": "x"}).to_string(),
            )
            .tool_call_with_id(
                "c8",
                "write",
                r#"{"file_path":"../outside/w.txt","content":"x"}"#,
            )
            .tool_call_with_id(
                "c9",
                "bash",
                &bash("echo ok > in-ws.txt && echo t > /tmp/dsh-sandbox-e2e-$PPID"),
            )
            .tool_call_with_id("c10", "write", r#"{"file_path":"sub/w.txt","content":"w"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .env("HOME", &o.home)
        .args(["exec", "--cwd"])
        .arg(&o.ws)
        .arg("Try to escape")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = tool_texts(&env, 1);
    for (i, text) in first.iter().take(4).enumerate() {
        assert!(
            text.contains("[exit code: "),
            "bash call {i} succeeded: {text}"
        );
        assert!(
            text.contains("[sandbox: file access denied under workspace-write mode]"),
            "{text}"
        );
    }
    let results = tool_results(&env);
    let code = |id: &str| {
        results
            .iter()
            .find(|r| r["data"]["message"]["toolCallId"] == id)
            .and_then(|r| r["data"]["error"]["code"].as_str())
            .map(str::to_owned)
    };
    assert_eq!(
        code("c6").as_deref(),
        Some("FS_SANDBOX_DENIED"),
        "{results:?}"
    );
    assert_eq!(code("c7").as_deref(), Some("FS_SANDBOX_DENIED"));
    assert_eq!(code("c8").as_deref(), Some("FS_SANDBOX_DENIED"));
    assert_eq!(code("c10"), None);
    let second = tool_texts(&env, 2);
    assert!(
        second[5].contains("outside the writable roots"),
        "{}",
        second[5]
    );
    // Nothing left behind outside; the target is untouched; the workspace writes happened.
    assert_eq!(listing(&o.outside), ["target.txt"]);
    assert_eq!(
        std::fs::read_to_string(o.outside.join("target.txt")).unwrap(),
        "original\n"
    );
    assert!(listing(&o.home).is_empty(), "{:?}", listing(&o.home));
    assert!(!Path::new("/x").exists());
    assert_eq!(
        std::fs::read_to_string(o.ws.join("in-ws.txt")).unwrap(),
        "ok\n"
    );
    assert_eq!(
        std::fs::read_to_string(o.ws.join("sub/w.txt")).unwrap(),
        "w"
    );
    // The mode is logged and the model is told it, once.
    let events = env.stored_events();
    let modes: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "sandbox/mode")
        .collect();
    assert_eq!(modes.len(), 1);
    assert_eq!(modes[0]["data"]["mode"], "workspace-write");
    let contexts = |i: usize| {
        request_messages(env.server(), i)
            .iter()
            .filter(|m| {
                m["role"] == "user"
                    && m["content"]
                        .as_str()
                        .is_some_and(|t| t.contains("Sandbox: workspace-write"))
            })
            .count()
    };
    assert_eq!(contexts(0), 1);
    assert_eq!(
        contexts(2),
        1,
        "the runtime context is not re-sent while it is unchanged"
    );
}

#[test]
fn a_tool_cannot_read_the_api_key_and_a_setsid_daemon_dies_with_the_call() {
    let env = Env::new();
    let marker = format!("1000.{}", std::process::id());
    env.server().push(
        Completion::new()
            .tool_call_with_id(
                "c1",
                "bash",
                &bash("cat /proc/$PPID/environ | tr '\\0' '\\n'; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo END"),
            )
            .tool_call_with_id(
                "c2",
                "bash",
                &bash(&format!("setsid sh -c 'sleep {marker}' >/dev/null 2>&1 & echo started")),
            )
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["Look around"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let texts = tool_texts(&env, 1);
    assert!(texts[0].contains("END"), "{}", texts[0]);
    assert!(!texts[0].contains("sk-test-key"), "{}", texts[0]);
    assert!(texts[1].contains("started"), "{}", texts[1]);
    let alive = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(&marker));
    assert!(!alive, "the daemon outlived the call");
}

#[test]
fn read_only_refuses_writes_and_danger_full_access_allows_them() {
    let env = Env::new();
    let o = outside();
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch a.txt"))
            .tool_call_with_id("c2", "write", r#"{"file_path":"b.txt","content":"b"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .args(["exec", "--sandbox", "read-only", "--cwd"])
        .arg(&o.ws)
        .arg("Write")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(listing(&o.ws).is_empty(), "{:?}", listing(&o.ws));
    let texts = tool_texts(&env, 1);
    assert!(texts[0].contains("read-only mode"), "{}", texts[0]);
    assert!(
        texts[1].contains("read-only mode allows no writes"),
        "{}",
        texts[1]
    );
    let context = request_messages(env.server(), 0).iter().any(|m| {
        m["content"]
            .as_str()
            .is_some_and(|t| t.contains("Sandbox: read-only"))
    });
    assert!(context);

    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch ../outside/full.txt"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .args(["exec", "--sandbox", "danger-full-access", "--cwd"])
        .arg(&o.ws)
        .arg("Write")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(o.outside.join("full.txt").exists());
}

#[test]
fn without_a_backend_restricted_calls_are_refused_and_nothing_runs() {
    let env = Env::new();
    let patch = env.patch(
        "nobackend.yaml",
        "plugins:\n  - id: sandbox\n    name: sandbox\n    config: { backends: [] }\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch ran.txt"))
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .arg("exec")
        .arg("--patch")
        .arg(&patch)
        .arg("Run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!env.work.path().join("ran.txt").exists());
    let results = tool_results(&env);
    assert_eq!(
        results[0]["data"]["error"]["code"], "SANDBOX_UNAVAILABLE",
        "{results:?}"
    );
    let text = &tool_texts(&env, 1)[0];
    assert!(text.contains("apt-get install bubblewrap"), "{text}");
    // `dsh sandbox check` says the same.
    let check = env
        .dsh()
        .args(["sandbox", "check", "--patch"])
        .arg(&patch)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("backend: none"), "{text}");
}

#[test]
fn sandbox_check_names_the_backend_and_why_others_were_skipped() {
    let env = Env::new();
    let patch = env.patch(
        "nobwrap.yaml",
        "plugins:\n  - id: sandbox\n    name: sandbox\n    config: { bwrapProgram: /nonexistent/bwrap }\n",
    );
    let out = env
        .dsh()
        .args(["sandbox", "check", "--patch"])
        .arg(&patch)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("skipped bwrap: /nonexistent/bwrap was not found"),
        "{text}"
    );
    // The Landlock path through this very binary (`dsh sandbox landlock-run`).
    if text.contains("backend: landlock") {
        assert!(
            text.contains("files: full") || text.contains("files: partial"),
            "{text}"
        );
    } else {
        eprintln!("SKIPPED the Landlock half: {text}");
    }
    let out = env.dsh().args(["sandbox", "check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("mode: workspace-write") && text.contains("network: off"),
        "{text}"
    );
}

#[test]
fn without_bwrap_the_landlock_backend_of_this_binary_confines_bash() {
    let env = Env::new();
    let o = outside();
    let patch = env.patch(
        "landlock.yaml",
        "plugins:\n  - id: sandbox\n    name: sandbox\n    config: { bwrapProgram: /nonexistent/bwrap }\n",
    );
    let check = env
        .dsh()
        .args(["sandbox", "check", "--patch"])
        .arg(&patch)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout).into_owned();
    if !report.contains("backend: landlock") {
        eprintln!("SKIPPED: Landlock is not usable on this host: {report}");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "bash", &bash("touch ../outside/x"))
            .tool_call_with_id("c2", "bash", &bash("touch in-ws && echo made"))
            .tool_call_with_id(
                "c3",
                "bash",
                &bash(&format!(
                    "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
                )),
            )
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env
        .dsh()
        .args(["exec", "--patch"])
        .arg(&patch)
        .arg("--cwd")
        .arg(&o.ws)
        .arg("Try")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let texts = tool_texts(&env, 1);
    assert!(texts[0].contains("Permission denied"), "{}", texts[0]);
    assert!(texts[1].contains("made"), "{}", texts[1]);
    assert!(!texts[2].contains("connected"), "{}", texts[2]);
    assert!(listing(&o.outside).is_empty());
    assert!(o.ws.join("in-ws").exists());
}
