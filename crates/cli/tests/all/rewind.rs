//! `dsh rewind` end to end: turns whose bash calls change a real git repository, checkpoints
//! in the log, rewinds of files and conversation, the user's edits detected, undo and redo,
//! and the user's git state untouched.

use std::path::Path;
use std::process::{Command, Output};

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`{script}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One turn: the model runs `command` with bash, then answers.
fn turn(env: &Env, args: &[&str], command: &str) -> Output {
    let call = serde_json::json!({"command": command, "description": "change files"}).to_string();
    env.server()
        .push(Completion::new().tool_call("bash", &call).reply());
    env.server().push(Completion::new().text("done").reply());
    let out = env.exec(args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

fn rewind(env: &Env, args: &[&str]) -> Output {
    env.dsh().arg("rewind").args(args).output().unwrap()
}

fn read(env: &Env, rel: &str) -> Option<String> {
    std::fs::read(env.cwd().join(rel))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn checkpoints(events: &[Value]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "dsh/checkpoint")
        .map(|e| {
            (
                e["data"]["turn"].as_u64().unwrap(),
                e["data"]["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn git_state(dir: &Path) -> String {
    sh(
        dir,
        "git status --porcelain=v1 --ignored; echo ---; git ls-files --stage; echo ---; \
         git stash list; echo ---; git for-each-ref",
    )
}

#[test]
fn bash_changes_are_rewound_turn_by_turn_then_undone_and_git_is_untouched() {
    let env = Env::new();
    let ws = env.cwd();
    sh(
        &ws,
        "git init -q && git config user.email t@example.invalid && git config user.name t \
         && echo base > a.txt && echo bee > b.txt && echo sea > c.txt \
         && printf '\\000\\001\\002' > data.bin && ln -s a.txt link && echo '*.log' > .gitignore \
         && git add -A && git commit -qm init && echo wip >> b.txt && git stash -q \
         && echo staged > staged.txt && git add staged.txt && echo log-before > run.log",
    );
    let git_before = git_state(&ws);
    turn(
        &env,
        &["--session", "s1", "turn one"],
        "echo one >> a.txt && rm b.txt && mv c.txt d.txt && chmod +x d.txt \
         && printf '\\377\\376' > data.bin && ln -sfn d.txt link && mkdir -p new && echo n > new/f \
         && echo log-during >> run.log",
    );
    turn(&env, &["--resume", "s1", "turn two"], "echo two >> a.txt");
    let events = env.stored_events();
    assert_eq!(
        checkpoints(&events),
        [
            (1, "before".to_owned()),
            (1, "after".to_owned()),
            (2, "before".to_owned()),
            (2, "after".to_owned())
        ]
    );
    // The user edits a file no turn touched: it is not dsh's to restore.
    std::fs::write(ws.join("staged.txt"), "user edit\n").unwrap();
    sh(&ws, "git add staged.txt");

    // Files only, to before turn 2.
    let out = rewind(&env, &["s1", "--to", "2", "--code", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("restore   a.txt"), "{}", stdout(&out));
    assert_eq!(read(&env, "a.txt").as_deref(), Some("base\none\n"));
    assert_eq!(read(&env, "staged.txt").as_deref(), Some("user edit\n"));

    // Both, to before turn 1: every change of turn 1 goes back.
    let out = rewind(&env, &["s1", "--to", "1", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("delete    d.txt"), "{text}");
    assert!(text.contains("re-create b.txt"), "{text}");
    assert!(text.contains("start a new session instead"), "{text}");
    assert_eq!(read(&env, "a.txt").as_deref(), Some("base\n"));
    assert_eq!(read(&env, "b.txt").as_deref(), Some("bee\n"));
    assert_eq!(read(&env, "c.txt").as_deref(), Some("sea\n"));
    assert!(read(&env, "d.txt").is_none());
    assert!(!ws.join("new").exists());
    assert_eq!(
        std::fs::read(ws.join("data.bin")).unwrap(),
        [0u8, 1, 2].to_vec()
    );
    assert_eq!(
        std::fs::read_link(ws.join("link")).unwrap(),
        Path::new("a.txt")
    );
    assert_eq!(
        read(&env, "run.log").as_deref(),
        Some("log-before\nlog-during\n"),
        "ignored files are untouched"
    );
    assert_eq!(
        sh(&ws, "git status --porcelain=v1 --ignored"),
        "A  staged.txt\n!! run.log\n",
        "only the user's own staged file differs from the commit"
    );

    // Undo the last rewind: turn 1's changes come back; undo again: gone again.
    let out = rewind(&env, &["s1", "--undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&env, "a.txt").as_deref(), Some("base\none\n"));
    assert_eq!(read(&env, "d.txt").as_deref(), Some("sea\n"));
    assert!(read(&env, "b.txt").is_none());
    let out = rewind(&env, &["s1", "--undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&env, "a.txt").as_deref(), Some("base\n"));
    assert!(read(&env, "d.txt").is_none());
    // Back to where the user stood before the session, apart from the user's own edit.
    std::fs::write(ws.join("staged.txt"), "staged\n").unwrap();
    sh(&ws, "git add staged.txt");
    assert_eq!(git_state(&ws), git_before);

    let out = env.dsh().args(["checkpoints", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("s1"), "{}", stdout(&out));
}

#[test]
fn an_edit_outside_dsh_is_refused_without_force_in_a_plain_directory() {
    let env = Env::new();
    std::fs::write(env.cwd().join("notes.md"), "v0\n").unwrap();
    turn(
        &env,
        &["--session", "s1", "edit the notes"],
        "echo agent >> notes.md",
    );
    std::fs::write(env.cwd().join("notes.md"), "v0\nagent\nuser\n").unwrap();
    let out = rewind(&env, &["s1", "--to", "1", "--code", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("changed outside dsh"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&env, "notes.md").as_deref(), Some("v0\nagent\nuser\n"));
    // Without --yes and without a terminal: refused, nothing changed.
    let out = rewind(&env, &["s1", "--to", "1", "--code", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(read(&env, "notes.md").as_deref(), Some("v0\nagent\nuser\n"));
    let out = rewind(&env, &["s1", "--to", "1", "--code", "--yes", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&env, "notes.md").as_deref(), Some("v0\n"));
    // The overwritten edit is in the backup: undo brings it back.
    let out = rewind(&env, &["s1", "--undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&env, "notes.md").as_deref(), Some("v0\nagent\nuser\n"));
}

#[test]
fn a_conversation_rewind_forks_the_log_and_the_next_request_extends_an_earlier_prefix() {
    let env = Env::new();
    turn(&env, &["--session", "s1", "first task"], "echo 1 > one");
    turn(&env, &["--resume", "s1", "second task"], "echo 2 > two");
    let requests_before = env.server().requests().len();
    // Turn 2's first request (after turn 1's two requests).
    let earlier = request_messages(env.server(), 2);
    let out = rewind(&env, &["s1", "--to", "2", "--conversation", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let child = text
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .unwrap()
        .to_owned();
    assert!(
        read(&env, "two").is_some(),
        "files stay on a conversation rewind"
    );
    env.server().push(Completion::new().text("again").reply());
    let out = env.exec(&["--resume", &child, "another second task"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let now = request_messages(env.server(), requests_before);
    let texts = |m: &[Value]| m.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let (now, earlier) = (texts(&now), texts(&earlier));
    let shared = now.iter().zip(&earlier).take_while(|(a, b)| a == b).count();
    assert!(
        shared >= earlier.len() - 1 && shared >= now.len() - 1,
        "the request after the rewind diverges at message {shared}:\nnow {now:#?}\nearlier {earlier:#?}"
    );
    assert!(now.last().unwrap().contains("another second task"));
    assert!(
        !now.iter()
            .any(|m| m.contains("second task\"") && !m.contains("another"))
    );
    // The old branch is unchanged and readable, and says where it continues (dsh/forked).
    let out = env.dsh().args(["sessions", "show", "s1"]).output().unwrap();
    assert!(
        stdout(&out).contains("user: second task"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains(&format!("continued in {child} (rewound to before turn 2)")),
        "{}",
        stdout(&out)
    );
    let out = env
        .dsh()
        .args(["sessions", "show", &child])
        .output()
        .unwrap();
    assert!(
        !stdout(&out).contains("user: second task"),
        "{}",
        stdout(&out)
    );
}

const WINDOW: &str = "plugins:\n  - { id: tool-result-pruner, name: tool-result-pruner, disabled: true }\n  - id: deepseek\n    name: deepseek\n    config:\n      models:\n        - { id: deepseek-flash, contextWindow: 32000, defaultMaxTokens: 4096 }\n";

const SUMMARY: &str = "1. Primary Request and Intent\n- write the files\n2. Key Technical Concepts\n- (none)\n3. Files and Code\n- one\n4. Errors and Fixes\n- (none)\n5. Pending Jobs\n- (none)\n6. Current Work\n- done\n7. Next Step\n- wait\n8. Critical Context\n- (none)";

fn is_summary(req: &dsh_testkit::RecordedRequest) -> bool {
    let body = req.body_json().unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .last()
        .is_some_and(|m| {
            m.to_string()
                .contains("You are now acting as a compaction engine")
        })
}

#[test]
fn a_rewind_across_a_compaction_restores_files_and_forks_the_compacted_history() {
    let env = Env::new();
    let window = env.patch("window.yaml", WINDOW);
    let window = window.to_str().unwrap();
    // A prompt names its file: the first call writes it, and in turn 1 nine more calls print
    // 12 KB each, so the history outgrows the window and compacts.
    env.server().set_responder(|req| {
        let body = req.body_json().unwrap();
        let msgs = body["messages"].as_array().unwrap();
        let usage = dsh_testkit::Usage::new(req.body.len() as u64 / 4, 30);
        if is_summary(req) {
            return Completion::new().text(SUMMARY).usage(usage).reply();
        }
        let prompt = msgs
            .iter()
            .rev()
            .find(|m| m["role"] == "user" && m.to_string().contains("write "))
            .map(|m| m.to_string())
            .unwrap_or_default();
        let file = ["alpha", "beta", "gamma"]
            .into_iter()
            .find(|f| prompt.contains(&format!("write {f}")))
            .unwrap_or("none");
        let calls = msgs
            .iter()
            .rev()
            .take_while(|m| m["role"] != "user")
            .filter(|m| m["role"] == "tool")
            .count();
        let wanted = if file == "alpha" { 10 } else { 1 };
        if calls >= wanted {
            return Completion::new().text("done").usage(usage).reply();
        }
        let command = if calls == 0 {
            format!("echo {file} > {file}")
        } else {
            format!("head -c 12000 /dev/zero | tr '\\0' 'y'; echo {calls}")
        };
        let call = serde_json::json!({"command": command, "description": "write"}).to_string();
        Completion::new()
            .tool_call("bash", &call)
            .usage(usage)
            .reply()
    });
    for (i, file) in ["alpha", "beta"].iter().enumerate() {
        let prompt = format!("write {file}");
        let mut args = vec!["--patch", window];
        if i == 0 {
            args.extend(["--session", "s1"]);
        } else {
            args.extend(["--resume", "s1"]);
        }
        args.push(&prompt);
        let out = env.exec(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let events = env.stored_events();
    let compactions = events
        .iter()
        .filter(|e| e["type"] == "compaction/summary")
        .count();
    assert!(compactions >= 1, "no compaction: {:?}", kinds(&events));
    assert_eq!(read(&env, "beta").as_deref(), Some("beta\n"));

    let out = rewind(&env, &["s1", "--to", "2", "--yes", "--patch-ignored"]);
    assert_eq!(out.status.code(), Some(2), "unknown flags are usage errors");
    let out = rewind(&env, &["s1", "--to", "2", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(read(&env, "beta").is_none());
    assert_eq!(read(&env, "alpha").as_deref(), Some("alpha\n"));
    let text = stdout(&out);
    let child = text
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .unwrap()
        .to_owned();
    // The branch continues from the compacted history of turn 1.
    let before = env.server().requests().len();
    let out = env.exec(&["--patch", window, "--resume", &child, "write gamma"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = env.server().request(before).unwrap().body_json().unwrap();
    let body = first["messages"].to_string();
    assert!(body.contains("Primary Request and Intent"), "{body}");
    assert!(!body.contains("write beta"), "{body}");
    assert_eq!(read(&env, "gamma").as_deref(), Some("gamma\n"));
    // The new branch rewinds on its own checkpoints, across the seeded ones.
    let out = rewind(&env, &[&child, "--to", "1", "--code", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(read(&env, "gamma").is_none());
    assert!(read(&env, "alpha").is_none());
}

/// The model's bash call appends to notes.md, then reports through a FIFO and sleeps: the
/// test knows the file was written while the turn still runs.
fn start_a_turn_that_writes_then_waits(env: &Env) -> std::process::Child {
    std::fs::write(env.cwd().join("notes.md"), "v0\n").unwrap();
    std::fs::write(env.cwd().join("other.md"), "o0\n").unwrap();
    let fifo = env.work.path().join("wrote.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let command = format!(
        "echo agent >> notes.md && echo wrote > {} && sleep 30",
        fifo.display()
    );
    let call = serde_json::json!({"command": command, "description": "edit"}).to_string();
    env.server()
        .push(Completion::new().tool_call("bash", &call).reply());
    let child = env.spawn(&["--session", "s1", "edit the notes"]);
    assert_eq!(wait_fifo(&fifo).trim(), "wrote");
    child
}

#[test]
fn an_interrupted_turn_gets_its_end_checkpoint_so_later_user_edits_are_told_apart() {
    let env = Env::new();
    let child = start_a_turn_that_writes_then_waits(&env);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let events = env.stored_events();
    assert_eq!(
        checkpoints(&events),
        [(1, "before".to_owned()), (1, "after".to_owned())]
    );
    let end = events.iter().rfind(|e| e["type"] == "turn/end").unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "aborted");

    // After the interrupted turn the user edits the agent's file and another one.
    std::fs::write(env.cwd().join("notes.md"), "v0\nagent\nuser\n").unwrap();
    std::fs::write(env.cwd().join("other.md"), "o1\n").unwrap();
    let out = rewind(&env, &["s1", "--to", "1", "--code", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("changed outside dsh"), "{err}");
    assert!(
        err.contains("notes.md") && !err.contains("other.md"),
        "{err}"
    );
    let out = rewind(&env, &["s1", "--to", "1", "--code", "--yes", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&env, "notes.md").as_deref(), Some("v0\n"));
    assert_eq!(
        read(&env, "other.md").as_deref(),
        Some("o1\n"),
        "a file the turn never touched keeps the user's edit"
    );
}

#[test]
fn a_turn_killed_mid_way_gets_its_end_checkpoint_when_the_session_is_resumed() {
    let env = Env::new();
    let mut child = start_a_turn_that_writes_then_waits(&env);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        checkpoints(&env.stored_events()),
        [(1, "before".to_owned())]
    );

    // Resumed: the crash repair takes the missing end checkpoint before the next turn.
    env.server().push(Completion::new().text("ok").reply());
    let out = env.exec(&["--resume", "s1", "what happened?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = env.stored_events();
    assert_eq!(
        checkpoints(&events),
        [(1, "before".to_owned()), (1, "after".to_owned())]
    );
    let ends: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(ends, ["interrupted", "completed"]);

    // The user edits another file; the rewind restores the killed turn's change only.
    std::fs::write(env.cwd().join("other.md"), "o1\n").unwrap();
    let out = rewind(&env, &["s1", "--to", "1", "--code", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("restore   notes.md"), "{text}");
    assert!(
        text.contains("--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1 @@\n v0\n-agent\n"),
        "the unified diff is printed with --yes: {text}"
    );
    assert_eq!(read(&env, "notes.md").as_deref(), Some("v0\n"));
    assert_eq!(read(&env, "other.md").as_deref(), Some("o1\n"));
}
