//! `/rewind` in the UI: the preview with the unified diff and a y/N question (`n` changes
//! nothing), then `y`: a conversation rewind switches the UI to the forked session (a prompt
//! typed during the switch is held and goes to it, without the dropped turn); the old session
//! resumed later says where it continues and stays shown.

use dsh_test_harness::e2e::{Env, request_messages};

use crate::pty::{Tui, text_reply, tool_reply};

fn idle(tui: &Tui, answer: &str) {
    tui.wait_screen(answer, |s| s.contains(answer) && !s.contains("● working"));
}

#[test]
fn slash_rewind_previews_the_diff_asks_y_n_then_switches_to_the_forked_session() {
    let env = Env::new();
    env.server().push_all([
        tool_reply(
            "bash",
            r#"{"command":"echo one > one.txt","description":"Write"}"#,
        ),
        text_reply("First done."),
    ]);
    let tui = Tui::spawn(&env, &["write one"], 100, 60);
    idle(&tui, "First done.");
    env.server().push_all([
        tool_reply(
            "bash",
            r#"{"command":"echo two > two.txt && echo more >> one.txt","description":"Write"}"#,
        ),
        text_reply("Second done."),
    ]);
    tui.send("write two\r");
    idle(&tui, "Second done.");

    // The preview: files, their diff, how to apply; nothing changed yet.
    tui.send("/rewind 2\r");
    let screen = tui.wait_for("Apply with /rewind 2 both yes");
    assert!(screen.contains("delete    two.txt (+0 -1)"), "{screen}");
    assert!(screen.contains("restore   one.txt (+0 -1)"), "{screen}");
    assert!(screen.contains("+++ /dev/null"), "{screen}");
    assert!(screen.contains("-more"), "{screen}");
    assert!(env.work.path().join("two.txt").exists());

    // The UI asks y/N: `n` keeps everything as it is.
    tui.wait_for("rewind files and conversation to before turn 2?");
    tui.send("n");
    tui.wait_for("rewind not applied: nothing changed");
    assert!(env.work.path().join("two.txt").exists());
    assert!(env.work.path().join("one.txt").exists());

    // Asked again, `y` applies it: the files go back and the UI shows the fork. The next
    // prompt is typed at once, while the UI moves: it is held until the fork's UI is up and
    // goes to the fork (sent at once it would reach the old session, or nowhere).
    tui.send("/rewind 2\r");
    tui.wait_for("rewind files and conversation to before turn 2?");
    let requests = env.server().request_count();
    env.server().push(text_reply("Third done."));
    tui.send("y");
    tui.send("write three\r");
    let screen = tui.wait_screen("the old session saved", |s| {
        s.lines()
            .any(|l| l.contains("session ") && l.trim_end().ends_with(" saved"))
    });
    let old = screen
        .lines()
        .find_map(|l| {
            let l = l.trim_end();
            let rest = l.split("session ").nth(1)?;
            rest.strip_suffix(" saved").map(str::to_owned)
        })
        .unwrap_or_default();
    assert!(!old.is_empty(), "{screen}");
    // The old UI said where the session continues.
    let moved = tui.wait_for("↪ continued in session-");
    let fork = moved
        .split("↪ continued in ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    assert!(!fork.is_empty() && fork != old, "{moved}");
    assert!(
        moved.contains("(rewound to before turn 2, files"),
        "{moved}"
    );
    tui.wait_screen("the fork's header", |s| {
        s.lines().any(|l| {
            l.trim_start().starts_with(&format!("session {fork}"))
                && l.contains(" · /help for commands")
        })
    });
    idle(&tui, "Third done.");
    assert!(!env.work.path().join("two.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.work.path().join("one.txt")).unwrap(),
        "one\n"
    );
    let sent = serde_json::to_string(&request_messages(env.server(), requests)).unwrap();
    assert!(
        sent.contains("write one") && sent.contains("write three"),
        "{sent}"
    );
    assert!(!sent.contains("write two"), "{sent}");
    assert_eq!(
        env.server().request_count(),
        requests + 1,
        "the held prompt ran once, in the fork"
    );
    let out = tui.quit();
    let resume = out
        .split("continue with: dsh --resume ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(resume, fork, "{out}");

    // The old session opened again: its history says where it continues, and the UI stays on
    // it (only a fork made while watching moves the UI).
    let again = Tui::spawn(&env, &["--resume", &old], 100, 60);
    again.wait_for(&format!("↪ continued in {fork}"));
    again.wait_screen("the old session's header", |s| {
        s.lines().any(|l| {
            l.trim_start().starts_with(&format!("session {old}"))
                && l.contains(" · /help for commands")
        })
    });
    let out = again.quit();
    assert!(
        out.contains(&format!("continue with: dsh --resume {old}")),
        "{out}"
    );
}
