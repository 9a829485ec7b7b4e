//! The interactive UI end to end through an in-process host: a prompt, tool cards, steers,
//! interrupts, the welcome line, resume, resize, the config watcher, approvals, `@` mentions
//! and the resume picker.

use std::time::{Duration, Instant};

use dsh_test_harness::e2e::{Env, request_messages, stalled_text};
use dsh_testkit::{Completion, Gate, Reply};

use crate::pty::{DEADLINE, Tui, text_reply, tool_reply};

#[test]
fn a_prompt_streams_markdown_and_a_bash_card_with_its_output_and_the_cost() {
    let env = Env::new();
    env.server().push_all([
        tool_reply(
            "bash",
            r#"{"command":"echo hello-from-bash; echo second","description":"Say"}"#,
        ),
        text_reply("All **done**: the `echo` ran.\n\n- first item\n- second item\n"),
    ]);
    let tui = Tui::spawn(&env, &["run the echo"], 100, 40);
    let screen = tui.wait_for("second item");
    assert!(screen.contains("› run the echo"), "{screen}");
    assert!(
        screen.contains("● bash echo hello-from-bash; echo second"),
        "{screen}"
    );
    assert!(screen.contains("exit 0"), "{screen}");
    assert!(screen.contains("hello-from-bash"), "{screen}");
    assert!(screen.contains("All done: the echo ran."), "{screen}");
    assert!(screen.contains("- first item"), "{screen}");
    // Status line: tokens, cache and cost of the two requests (list prices).
    let screen = tui.wait_for("cached 1.3k (68%)");
    assert!(screen.contains("$0.000"), "{screen}");
    let out = tui.quit();
    assert!(out.contains("saved · continue with: dsh --resume"), "{out}");
    assert_eq!(env.server().request_count(), 2);
}

#[test]
fn an_edit_shows_a_coloured_diff() {
    let env = Env::new();
    let file = env.work.path().join("notes.txt");
    std::fs::write(&file, "alpha\nold line\nomega\n").unwrap();
    let path = file.display().to_string();
    env.server().push_all([
        tool_reply("read", &format!(r#"{{"file_path":"{path}"}}"#)),
        tool_reply(
            "edit",
            &format!(r#"{{"file_path":"{path}","old_string":"old line","new_string":"new line"}}"#),
        ),
        text_reply("Edited."),
    ]);
    let tui = Tui::spawn(&env, &["change it"], 100, 40);
    let screen = tui.wait_for("Edited.");
    assert!(screen.contains(&format!("● read {path} (")), "{screen}");
    assert!(screen.contains(&format!("● edit {path}")), "{screen}");
    assert!(screen.contains("-old line"), "{screen}");
    assert!(screen.contains("+new line"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nnew line\nomega\n"
    );
    tui.quit();
}

#[test]
fn a_steer_typed_mid_turn_is_shown_queued_and_reaches_the_next_request() {
    let env = Env::new();
    let gate = Gate::new();
    env.server().push_all([
        Reply::sse().gate(&gate).bytes(
            Completion::new()
                .tool_call("bash", r#"{"command":"echo step-one","description":"One"}"#)
                .to_bytes(),
        ),
        text_reply("Steered answer."),
    ]);
    let tui = Tui::spawn(&env, &["start"], 100, 40);
    tui.wait_for("● working");
    tui.send("focus on the tests\r");
    tui.wait_for("queued: focus on the tests");
    gate.open();
    let screen = tui.wait_screen("the answer after the steer", |s| {
        s.contains("Steered answer.") && !s.contains("● working")
    });
    assert!(screen.contains("› focus on the tests"), "{screen}");
    assert!(!screen.contains("queued:"), "{screen}");
    let messages = request_messages(env.server(), 1);
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{messages:?}");
    assert!(
        last["content"].to_string().contains("focus on the tests"),
        "{last}"
    );
    tui.quit();
}

#[test]
fn esc_interrupts_and_keeps_the_delivered_text() {
    let env = Env::new();
    env.server()
        .push(stalled_text("A partial answer that stalls"));
    let tui = Tui::spawn(&env, &["talk"], 100, 40);
    tui.wait_for("A partial answer that stalls");
    tui.send("\x1b");
    let screen = tui.wait_for("interrupted (the delivered text is kept)");
    assert!(screen.contains("A partial answer that stalls"), "{screen}");
    tui.wait_screen("the turn to end", |s| !s.contains("● working"));
    tui.quit();
    let events = env.stored_events();
    let msg = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .expect("an assistant message");
    assert_eq!(msg["data"]["interrupted"], true);
    assert!(
        msg["data"]["message"]["content"]
            .to_string()
            .contains("A partial answer that stalls")
    );
}

/// A session opens with a welcome line (model, effort, directory, sandbox mode, approval
/// policy) and the log's bookkeeping events never reach the screen as raw event kinds.
#[test]
fn a_session_opens_with_a_welcome_line_and_no_raw_event_kind() {
    let env = Env::new();
    env.server().push(text_reply("Hi."));
    let tui = Tui::spawn(&env, &["hello"], 120, 40);
    let screen = tui.wait_for("Hi.");
    let welcome = screen
        .lines()
        .find(|l| l.contains("dsh · "))
        .unwrap_or_else(|| panic!("no welcome line: {screen}"));
    assert!(welcome.contains("sandbox "), "{welcome}");
    assert!(welcome.contains("approvals "), "{welcome}");
    assert!(welcome.contains(" · /"), "the directory: {welcome}");
    for raw in [
        "sandbox/mode",
        "approval/policy",
        "permission/preset",
        "session/title",
    ] {
        assert!(!screen.contains(raw), "{raw} reached the screen: {screen}");
    }
    tui.quit();
}

#[test]
fn quit_then_continue_shows_the_history() {
    let env = Env::new();
    env.server().push(text_reply("The first answer."));
    let tui = Tui::spawn(&env, &["first question"], 100, 40);
    tui.wait_screen("the end of the turn", |s| {
        s.contains("The first answer.") && !s.contains("● working")
    });
    tui.quit();
    let tui = Tui::spawn(&env, &["--continue"], 100, 40);
    // The history goes up after the first frame; the resumed session's usage is in the status
    // line, from the log.
    tui.wait_screen("the history and its usage", |s| {
        s.contains("› first question")
            && s.contains("The first answer.")
            && s.contains("cached 800")
    });
    tui.quit();
}

// The key is typed as soon as the screen is resized (vt100 truncates the old rule to 40 `─`
// at once), so it often reaches dsh in the same wakeup as the SIGWINCH: the case crossterm's
// default (edge-triggered) input source lost.
#[test]
fn a_resize_mid_stream_keeps_working_at_forty_columns() {
    let env = Env::new();
    env.server()
        .push(stalled_text("Streaming along before the resize"));
    let tui = Tui::spawn(&env, &["go"], 100, 30);
    tui.wait_for("Streaming along before the resize");
    tui.resize(40, 20);
    tui.wait_screen("the redraw at 40 columns", |s| {
        s.lines().any(|l| l.trim_end() == "─".repeat(40))
    });
    tui.send("a steer typed narrow\r");
    let screen = tui.wait_for("queued: a steer typed narrow");
    for line in screen.lines() {
        assert!(
            line.chars().count() <= 40,
            "line wider than 40 columns: {line:?}"
        );
    }
    // Ctrl-C on the empty composer interrupts the turn (and arms the quit); the steer that was
    // never delivered comes back to the composer, so nothing typed is lost.
    tui.send("\x03");
    let screen = tui.wait_screen("the interrupted turn", |s| {
        s.contains("Ctrl-C again to quit") && s.contains("› a steer typed narrow")
    });
    assert!(
        screen.contains("Streaming along before the resize"),
        "{screen}"
    );
    tui.send("\x03");
    tui.wait_exit_ok();
}

/// Every line of `$DSH_HOME/tui.log` that says the configuration was reloaded.
fn reloads(env: &Env) -> Vec<String> {
    std::fs::read_to_string(env.home.path().join("tui.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("configuration reloaded"))
        .map(str::to_owned)
        .collect()
}

/// The user's `$DSH_HOME/dsh.yaml` is watched. Opening it (any reader, and the reload itself)
/// once set off a reload every 100 ms for the rest of the run; now only a change of its
/// contents reloads, once, and the session goes on: tool cards, answers, the status line.
#[test]
fn a_user_config_is_read_without_reloading_and_a_real_edit_reloads_once() {
    let env = Env::new();
    let user = env.home.path().join("dsh.yaml");
    let original = std::fs::read_to_string(&user).unwrap();
    assert!(original.contains("llm-retry"), "{original}");
    env.server().push_all([
        tool_reply(
            "bash",
            r#"{"command":"echo from-bash","description":"Say"}"#,
        ),
        text_reply("First done."),
        tool_reply(
            "bash",
            r#"{"command":"echo again-bash","description":"Say"}"#,
        ),
        text_reply("Second done."),
    ]);
    let tui = Tui::spawn_with(&env, &[], 100, 40, &[("DSH_LOG", "dsh=info")]);
    tui.wait_for("Ask dsh anything");
    // Something opens the file (an editor, `cat`, another dsh): contents unchanged.
    assert_eq!(std::fs::read_to_string(&user).unwrap(), original);
    tui.send("first\r");
    let screen = tui.wait_screen("the first turn", |s| {
        s.contains("First done.") && !s.contains("● working")
    });
    assert!(screen.contains("● bash echo from-bash"), "{screen}");
    assert!(screen.contains("exit 0"), "{screen}");
    // A real edit: one reload, with the changed row.
    std::fs::write(
        &user,
        original.replace("initialDelayMs: 1,", "initialDelayMs: 2,"),
    )
    .unwrap();
    let deadline = Instant::now() + DEADLINE;
    while reloads(&env).is_empty() {
        assert!(Instant::now() < deadline, "no reload after the edit");
        std::thread::sleep(Duration::from_millis(20));
    }
    tui.send("second\r");
    let screen = tui.wait_screen("the second turn", |s| {
        s.contains("Second done.") && !s.contains("● working")
    });
    assert!(screen.contains("● bash echo again-bash"), "{screen}");
    assert!(screen.contains("again-bash"), "{screen}");
    tui.quit();
    let lines = reloads(&env);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("updated=[\"llm-retry\"]"), "{lines:#?}");
    assert_eq!(env.server().request_count(), 4);
}

/// `--ask-for-approval untrusted`: each call that is not read-only is asked about inline and
/// takes one key. `y` runs it once, `a` runs it and stores a rule (the same call then runs
/// without a question), `n` plus a reason denies it and the model reads the reason.
#[test]
fn approval_prompts_allow_once_allow_always_and_deny_with_a_reason() {
    let env = Env::new();
    let target = env.work.path().join("notes.txt");
    env.server().push_all([
        tool_reply("bash", r#"{"command":"echo once-ok","description":"One"}"#),
        tool_reply(
            "bash",
            r#"{"command":"echo always-ok","description":"Two"}"#,
        ),
        tool_reply(
            "bash",
            r#"{"command":"echo always-ok","description":"Three"}"#,
        ),
        tool_reply(
            "write",
            &serde_json::json!({"file_path": target.display().to_string(), "content": "x\n"})
                .to_string(),
        ),
        text_reply("Done asking."),
    ]);
    let tui = Tui::spawn(&env, &["--ask-for-approval", "untrusted", "go"], 100, 40);
    let screen = tui.wait_screen("the first question", |s| {
        s.contains("⚠ allow bash?") && s.contains("  echo once-ok")
    });
    assert!(
        screen.contains("y allow once  a allow always  n deny"),
        "{screen}"
    );
    tui.send("y");
    tui.wait_for("✓ bash allowed once");
    tui.wait_screen("the second question", |s| {
        s.contains("⚠ allow bash?") && s.contains("  echo always-ok")
    });
    tui.send("a");
    tui.wait_for("✓ bash allowed always");
    // The third call is covered by the stored rule: the next question is the write's.
    let screen = tui.wait_for("⚠ allow write?");
    assert_eq!(
        screen.matches("● bash echo always-ok").count(),
        2,
        "{screen}"
    );
    assert_eq!(screen.matches("allowed always").count(), 1, "{screen}");
    tui.send("n");
    tui.wait_for("reason for the model");
    tui.send("not that file\r");
    let screen = tui.wait_screen("the end of the turn", |s| {
        s.contains("Done asking.") && !s.contains("● working")
    });
    assert!(screen.contains("✗ write denied: not that file"), "{screen}");
    assert!(!target.exists());
    tui.quit();
    // The rule is stored for this project; the model read the user's reason.
    let rules = std::fs::read_to_string(env.home.path().join("permissions.json")).unwrap();
    assert!(rules.contains("echo"), "{rules}");
    let messages = request_messages(env.server(), 4);
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "tool", "{messages:?}");
    assert!(
        last["content"].to_string().contains("not that file"),
        "{last}"
    );
    assert_eq!(env.server().request_count(), 5);
}

/// `@` offers the project's files (not the gitignored ones); Tab completes the path, which the
/// prompt carries as text (the model reads the file with its `read` tool).
#[test]
fn an_at_mention_completes_a_project_file_into_the_prompt() {
    let env = Env::new();
    let work = env.work.path();
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::create_dir_all(work.join("build")).unwrap();
    std::fs::write(work.join(".gitignore"), "build/\n").unwrap();
    std::fs::write(work.join("src/parser.rs"), "fn parse() {}\n").unwrap();
    std::fs::write(work.join("build/parser_gen.rs"), "// generated\n").unwrap();
    env.server().push(text_reply("Read it."));
    let tui = Tui::spawn(&env, &[], 100, 30);
    tui.wait_for("Ask dsh anything");
    tui.send("explain @parser");
    let screen = tui.wait_for("@src/parser.rs");
    assert!(!screen.contains("parser_gen"), "{screen}");
    tui.send("\t");
    tui.wait_for("› explain @src/parser.rs");
    tui.send("please\r");
    tui.wait_screen("the answer", |s| {
        s.contains("Read it.") && !s.contains("● working")
    });
    tui.quit();
    let messages = request_messages(env.server(), 0);
    assert!(
        messages.iter().any(|m| m["role"] == "user"
            && m["content"]
                .to_string()
                .contains("explain @src/parser.rs please")),
        "{messages:#?}"
    );
}

/// `dsh --resume` without an id: the picker rows carry the title, the working directory, the
/// age, the turns and the last turn's status, read from each log; Enter resumes the row.
#[test]
fn the_resume_picker_shows_title_turns_and_status() {
    let env = Env::new();
    env.server().push(text_reply("The first answer."));
    let tui = Tui::spawn(&env, &["where is the parser"], 100, 40);
    tui.wait_screen("the end of the turn", |s| {
        s.contains("The first answer.") && !s.contains("● working")
    });
    tui.quit();
    let tui = Tui::spawn(&env, &["--resume"], 100, 40);
    let screen = tui.wait_for("resume ›");
    let screen = if screen.contains("1 turn · completed") {
        screen
    } else {
        tui.wait_for("1 turn · completed")
    };
    assert!(screen.contains("  where is the parser"), "{screen}");
    let cwd = env.cwd().display().to_string();
    assert!(screen.contains(&cwd), "{screen}");
    assert!(screen.contains("s ago · 1 turn · completed"), "{screen}");
    tui.send("parser\r");
    tui.wait_screen("the resumed history", |s| {
        s.contains("› where is the parser") && s.contains("The first answer.")
    });
    tui.quit();
}

/// The resume picker searches the full text as it is typed: a word said only in a model reply
/// finds its session through the host's catalog (the list call's `q`), as a prefix.
#[test]
fn the_resume_picker_searches_the_full_text_as_it_is_typed() {
    let env = Env::new();
    env.server()
        .push(text_reply("The öxölötl lives in the lake."));
    let tui = Tui::spawn(&env, &["where is the parser"], 100, 40);
    tui.wait_screen("the end of the first turn", |s| {
        s.contains("lives in the lake") && !s.contains("● working")
    });
    tui.quit();
    env.server().push(text_reply("Noted."));
    let tui = Tui::spawn(&env, &["another session"], 100, 40);
    tui.wait_screen("the end of the second turn", |s| {
        s.contains("Noted.") && !s.contains("● working")
    });
    tui.quit();
    let tui = Tui::spawn(&env, &["--resume"], 100, 40);
    tui.wait_screen("both sessions listed", |s| {
        s.contains("resume ›") && s.contains("where is the parser") && s.contains("another session")
    });
    // No title, directory or id holds an `ö`: only the reply's text can match.
    tui.send("öxölö");
    tui.wait_screen("the full-text hit alone", |s| {
        s.contains("resume › öxölö")
            && s.contains("where is the parser")
            && !s.contains("another session")
    });
    tui.send("\r");
    tui.wait_screen("the resumed history", |s| {
        s.contains("› where is the parser") && s.contains("lives in the lake")
    });
    tui.quit();
}

/// The terminal goes away mid-turn (its window closed): reads and writes on it fail from then
/// on, with SIGHUP ignored (`nohup`, some multiplexers) or not. dsh ends without a panic, with
/// the exit code of a failure, and the log keeps the turn: the prompt and the text delivered so
/// far.
#[test]
fn a_terminal_hung_up_mid_turn_ends_dsh_without_a_panic_and_keeps_the_turn() {
    for trap in ["trap '' HUP;", ""] {
        let env = Env::new();
        env.server()
            .push(stalled_text("A partial answer that stalls"));
        let tui = Tui::spawn_shell(
            &env,
            &format!(r#"{trap} exec "$DSH" --patch "$TITLES_OFF" talk"#),
            100,
            40,
            &[],
        );
        tui.wait_for("A partial answer that stalls");
        let status = tui.hang_up();
        assert_eq!(status.exit_code(), 1, "{trap}: {status:?}");
        let events = env.stored_events();
        let user = events.iter().find(|e| e["type"] == "user/message");
        assert!(
            user.is_some_and(|u| u.to_string().contains("talk")),
            "{trap}: {events:?}"
        );
        let msg = events
            .iter()
            .find(|e| e["type"] == "assistant/message")
            .expect("the delivered text is committed");
        assert_eq!(msg["data"]["interrupted"], true, "{trap}");
        assert!(
            msg["data"]["message"]["content"]
                .to_string()
                .contains("A partial answer that stalls"),
            "{trap}"
        );
    }
}
