//! Storage comes first: the write path is tested before any token is spent, and `--json`
//! prints only what is on disk.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn an_unwritable_home_fails_before_any_request() {
    let env = Env::new();
    // Root ignores permission bits, so make the sessions directory impossible instead: a file
    // where the directory must be.
    std::fs::write(env.home.path().join("sessions"), "not a directory").unwrap();
    env.server()
        .push(Completion::new().text("never sent").reply());
    let out = env.exec(&["hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("nothing was sent to the model"), "{err}");
    assert!(err.contains("sessions"), "the error names the path: {err}");
    assert_eq!(env.server().request_count(), 0);
}

#[test]
fn the_loser_of_a_race_to_create_a_session_sends_nothing() {
    let env = Env::new();
    // The winner's request hangs, so it holds the session for the whole test.
    env.server().push(stalled_text("thinking"));
    let mut winner = env.spawn(&["--session", "contested", "first"]);
    env.server()
        .wait_for_requests_blocking(1, WAIT)
        .expect("the winner's request arrived");
    let out = env.exec(&["--session", "contested", "second"]);
    winner.kill().unwrap();
    winner.wait().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("SESSION_LOCKED"), "{}", stderr(&out));
    assert_eq!(env.server().request_count(), 1, "the loser sent no request");
}

#[test]
fn every_event_printed_by_json_is_on_disk_at_a_kill() {
    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo one","description":"Print"}"#)
            .reply(),
    );
    // The next request hangs: nothing else writes the log while dsh waits on it.
    env.server().push(stalled_text("never finished"));
    let mut child = env.spawn(&["--json", "go"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed: Vec<Value> = Vec::new();
    loop {
        let line = lines.next().expect("dsh exited early").unwrap();
        let row: Value = serde_json::from_str(&line).unwrap();
        let done = row["type"] == "step/end";
        printed.push(row);
        if done {
            break;
        }
    }
    env.server()
        .wait_for_requests_blocking(2, WAIT)
        .expect("the second request arrived");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(kinds(&printed).contains(&"tool/result".to_owned()));
    let stored = env.stored_events();
    for row in &printed {
        let seq = row["seq"].as_u64().unwrap() as usize;
        assert_eq!(
            stored.get(seq),
            Some(row),
            "printed event {seq} ({}) is not on disk",
            row["type"]
        );
    }
    // The consumer's view survives a resume: the result it saw is the result the model gets.
    env.server().push(Completion::new().text("resumed").reply());
    let id = env.session_id();
    let out = env.exec(&["--resume", &id, "again"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results: Vec<Value> = env
        .stored_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results.len(), 1);
    assert!(results[0]["data"].get("error").is_none(), "{}", results[0]);
}

#[test]
fn empty_and_reused_tool_call_ids_keep_the_session_resumable() {
    let env = Env::new();
    let call = r#"{"command":"echo ran >> ran.txt","description":"Append"}"#;
    env.server().push(
        Completion::new()
            .tool_call_with_id("", "bash", call)
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_same", "bash", call)
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_same", "bash", call)
            .reply(),
    );
    env.server().push(Completion::new().text("done").reply());
    let out = env.exec(&["go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
    // Every call ran once, and every result answers its own, distinct id.
    let ran = std::fs::read_to_string(env.work.path().join("ran.txt")).unwrap();
    assert_eq!(ran.lines().count(), 3);
    let events = env.stored_events();
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e["data"]["message"]["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.iter().all(|id| !id.is_empty()), "{ids:?}");
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 3, "{ids:?}");
    // The last request carries the ids the log holds, each call answered.
    let last = request_messages(env.server(), 3);
    let sent: Vec<&str> = last
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ids);
    // And the session resumes.
    env.server().push(Completion::new().text("again").reply());
    let id = env.session_id();
    let out = env.exec(&["--resume", &id, "more"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "again\n");
}

#[test]
fn a_corrupt_row_inside_the_last_turn_is_refused_then_repaired_without_loss() {
    let env = Env::new();
    // Repair works on plain logs (it refuses zstd ones).
    std::fs::write(
        env.home.path().join("dsh.yaml"),
        "plugins:\n  - id: session-jsonl\n    name: session-jsonl\n    config:\n      compression: none\n",
    )
    .unwrap();
    env.server().push(Completion::new().text("first").reply());
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo hi","description":"Say hi"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("second").reply());
    assert_eq!(env.exec(&["one"]).status.code(), Some(0));
    let id = env.session_id();
    assert_eq!(env.exec(&["--resume", &id, "two"]).status.code(), Some(0));
    let files = session_files(&env.home.path().join("sessions"));
    let path = files[0].clone();
    // Drop the final `turn/end` (a crash before it) and break a row in the middle of turn 2.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines.pop().unwrap().contains("\"turn/end\""));
    let bad = lines
        .iter()
        .rposition(|l| l.contains("\"tool/call\""))
        .unwrap();
    lines[bad] = lines[bad].replacen("\"seq\":", "\"seq\":9", 1);
    let broken = lines.join("\n") + "\n";
    std::fs::write(&path, &broken).unwrap();

    // Resume refuses, naming the file and the line, and changes nothing.
    let out = env.exec(&["--resume", &id, "three"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains(&format!("line {}", bad + 1)), "{err}");
    assert!(err.contains("dsh sessions repair"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    assert_eq!(env.server().request_count(), 3);

    // Without a terminal, repair needs --yes.
    let out = env
        .dsh()
        .args(["sessions", "repair", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);

    // The repair moves the damaged part aside: kept + moved are the original bytes.
    let out = env
        .dsh()
        .args(["sessions", "repair", &id, "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let kept = std::fs::read(&path).unwrap();
    let side: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect();
    assert_eq!(side.len(), 1, "{side:?}");
    let moved = std::fs::read(&side[0]).unwrap();
    assert_eq!([kept.clone(), moved].concat(), broken.as_bytes());
    assert_eq!(
        kept.iter().filter(|b| **b == b'\n').count(),
        bad,
        "the valid prefix is kept (header and rows before the bad line)"
    );

    // And the session resumes from the kept prefix.
    env.server().push(Completion::new().text("third").reply());
    let out = env.exec(&["--resume", &id, "three"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "third\n");
}

#[test]
fn spill_files_live_in_the_session_directory() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"head -c 300000 /dev/zero | tr '\\0' a","description":"Big"}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("ok").reply());
    let out = env
        .dsh()
        .env("TMPDIR", tmp.path())
        .args(["exec", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = env
        .stored_events()
        .into_iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    let spill = result["data"]["meta"]["stdoutSpill"]
        .as_str()
        .unwrap_or_else(|| panic!("no spill path in {}", result["data"]["meta"]))
        .to_owned();
    let log = &session_files(&env.home.path().join("sessions"))[0];
    let session_dir = log.parent().unwrap();
    assert!(
        std::path::Path::new(&spill).starts_with(session_dir),
        "{spill} is outside {}",
        session_dir.display()
    );
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 300_000);
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing left in TMPDIR"
    );
}
