//! More of the interactive UI end to end (the harness is `pty`): plan mode's accept prompt,
//! the live sub-agent card, Ctrl-Z and the panic path.

use dsh_test_harness::e2e::{Env, request_messages};

use crate::pty::{Tui, text_reply, tool_reply};

const EDIT: &str = r#"{"file_path":"a.txt","old_string":"old","new_string":"new"}"#;

fn plan_call(plan: &str) -> dsh_testkit::Reply {
    tool_reply(
        "exit_plan_mode",
        &serde_json::json!({ "plan": plan }).to_string(),
    )
}

/// Plan mode in the TUI (Shift+Tab): the `edit` is refused; the plan is printed as markdown and
/// asked about with one key; `n` rejects it with feedback the model reads (plan mode stays on),
/// `y` accepts the revised plan, plan mode ends and the edit runs.
#[test]
fn in_plan_mode_the_plan_is_shown_and_accepted_before_the_edit_runs() {
    let env = Env::new();
    let file = env.work.path().join("a.txt");
    std::fs::write(&file, "old\n").unwrap();
    env.server().push_all([
        tool_reply("read", r#"{"file_path":"a.txt"}"#),
        tool_reply("edit", EDIT),
        plan_call("## Steps\n\n1. Replace `old` with **new** in a.txt"),
        plan_call("## Steps\n\n1. Replace `old` with **new** in a.txt\n2. Read it back"),
        tool_reply("edit", EDIT),
        text_reply("DONE editing."),
    ]);
    let tui = Tui::spawn(&env, &[], 100, 40);
    tui.wait_for("Ask dsh anything");
    tui.send("\x1b[Z");
    tui.wait_for("◇ plan mode on");
    tui.send("Change a.txt\r");
    let screen = tui.wait_screen("the first plan question", |s| {
        s.contains("⚠ accept this plan?") && s.contains("Replace old with new in a.txt")
    });
    assert!(screen.contains("✗ edit"), "{screen}");
    assert!(screen.contains("plan mode: `edit` is refused"), "{screen}");
    assert!(screen.contains("▌ plan for review"), "{screen}");
    assert!(
        screen.contains("y accept  n reject with feedback"),
        "{screen}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
    // `a` (allow always) means nothing for a plan: still asking.
    tui.send("a");
    tui.send("n");
    tui.wait_for("feedback for the model");
    tui.send("read it back too\r");
    let screen = tui.wait_screen("the second plan question", |s| {
        s.contains("⚠ accept this plan?") && s.contains("2. Read it back")
    });
    assert!(
        screen.contains("exit_plan_mode plan not accepted · plan mode stays on"),
        "{screen}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
    tui.send("y");
    let screen = tui.wait_screen("the end of the turn", |s| {
        s.contains("DONE editing.") && !s.contains("● working")
    });
    assert!(
        screen.contains("exit_plan_mode plan accepted · plan mode is off"),
        "{screen}"
    );
    assert!(screen.contains("● edit"), "{screen}");
    tui.quit();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
    // The model read the feedback of the rejection, then the acceptance.
    let tool_text = |i: usize| {
        request_messages(env.server(), i)
            .last()
            .map(|m| m["content"].to_string())
            .unwrap_or_default()
    };
    let rejected = tool_text(3);
    assert!(
        rejected.contains("The user rejected the plan. Their feedback: read it back too"),
        "{rejected}"
    );
    assert!(
        tool_text(4).contains("The user accepted the plan."),
        "{}",
        tool_text(4)
    );
    assert_eq!(env.server().request_count(), 6);
    // Resumed, the plans come from the logged calls, each before its card.
    let tui = Tui::spawn(&env, &["--continue"], 100, 60);
    let screen = tui.wait_screen("the resumed plans", |s| {
        s.contains("plan accepted · plan mode is off") && s.contains("DONE editing.")
    });
    assert_eq!(screen.matches("▌ plan for review").count(), 2, "{screen}");
    let plan = screen.rfind("2. Read it back").unwrap();
    let card = screen.find("plan accepted · plan mode is off").unwrap();
    assert!(plan < card, "{screen}");
    tui.quit();
}

/// A foreground sub-agent is drawn live from its own session events: one collapsed line
/// (label, running, tool count, tokens) while it works; Ctrl+O expands it to its recent
/// activity (its bash call); when it ends the card leaves the viewport and the parent's
/// `subagent` card is in the scrollback.
#[test]
fn a_running_subagent_has_a_live_card_that_ctrl_o_expands() {
    let env = Env::new();
    let gate = dsh_testkit::Gate::new();
    env.server().push_all([
        tool_reply(
            "subagent",
            r#"{"description":"Scan the repo","prompt":"look around"}"#,
        ),
        tool_reply(
            "bash",
            r#"{"command":"echo child-step","description":"Step"}"#,
        ),
        dsh_testkit::Reply::sse().gate(&gate).bytes(
            dsh_testkit::Completion::new()
                .text("child found it")
                .to_bytes(),
        ),
        text_reply("Parent done."),
    ]);
    let tui = Tui::spawn(&env, &["delegate"], 120, 40);
    // The child's bash call is shown as it runs (`▸ bash …`), then the child waits for its
    // next reply.
    let screen = tui.wait_screen("the live child card, its bash done", |s| {
        s.lines()
            .any(|l| l.contains("⧉ Scan the repo") && l.contains("1 tool") && !l.contains("▸"))
    });
    let card = screen
        .lines()
        .find(|l| l.contains("⧉ Scan the repo"))
        .unwrap()
        .to_owned();
    assert!(card.contains("running "), "{card}");
    assert!(card.contains("900 in / 20 out"), "{card}");
    assert!(card.contains("Ctrl+O expands"), "{card}");
    assert!(
        !screen.contains("● bash echo child-step"),
        "collapsed: {screen}"
    );
    tui.send("\x0f");
    let screen = tui.wait_for("    ● bash echo child-step");
    assert!(!screen.contains("Ctrl+O expands"), "{screen}");
    gate.open();
    let screen = tui.wait_screen("the end of the turn", |s| {
        s.contains("Parent done.") && !s.contains("● working")
    });
    assert!(!screen.contains("⧉ Scan the repo"), "{screen}");
    assert!(screen.contains("● subagent Scan the repo"), "{screen}");
    tui.quit();
    assert_eq!(env.server().request_count(), 4);
}

/// The words `stty -a` prints for the line discipline's canonical mode and echo.
const TTY_MODES: &str = "stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo)' | tr '\\n' ' '";

/// Ctrl-Z under a job-control shell: the TUI restores the terminal (cursor shown, bracketed
/// paste off, canonical mode and echo back on) and stops with SIGTSTP (the shell's `jobs -l`
/// says so); `fg` continues it (SIGCONT), it redraws and the composer text survives.
#[test]
fn ctrl_z_restores_the_terminal_and_sigcont_resumes_with_the_composer_text() {
    let env = Env::new();
    env.server().push(text_reply("Resumed fine."));
    let script = format!(
        "set -m; \"$DSH\" --patch \"$TITLES_OFF\"; echo \"dsh stopped: $?\"; jobs -l; \
         echo \"tty: $({TTY_MODES})\"; read -r _; fg; echo \"dsh ended: $?\"; read -r _"
    );
    let tui = Tui::spawn_shell(&env, &script, 100, 30, &[]);
    tui.wait_for("Ask dsh anything");
    let (hidden, alt, paste) = tui.modes();
    assert!(hidden && !alt && paste, "the TUI's own modes are on");
    tui.send("half typed");
    tui.wait_for("› half typed");
    tui.send("\x1a");
    let screen = tui.wait_screen("the shell's report of the stop", |s| {
        s.contains("dsh stopped: 148") && s.contains("tty: ")
    });
    assert!(screen.contains("Stopped"), "{screen}");
    let tty = screen
        .lines()
        .find(|l| l.starts_with("tty: "))
        .unwrap()
        .to_owned();
    assert_eq!(tty.trim_end(), "tty: icanon echo", "{screen}");
    let (hidden, alt, paste) = tui.modes();
    assert!(!hidden, "the cursor is shown while stopped");
    assert!(!alt, "no alternate screen");
    assert!(!paste, "bracketed paste is off while stopped");
    // `fg` sends SIGCONT: the TUI takes the terminal back and redraws with the composer text.
    tui.send("\r");
    tui.wait_screen("the redraw after SIGCONT", |s| {
        s.contains("› half typed") && s.contains("deepseek-flash")
    });
    assert!(tui.modes().0, "the cursor is hidden again");
    tui.send(" and sent\r");
    tui.wait_screen("the answer", |s| {
        s.contains("Resumed fine.") && !s.contains("● working")
    });
    tui.send("\x04");
    tui.wait_for("dsh ended: 0");
    let messages = request_messages(env.server(), 0);
    assert!(
        messages
            .iter()
            .any(|m| m["content"].to_string().contains("half typed and sent")),
        "{messages:#?}"
    );
}

/// A panic inside the UI loop (the debug-build trigger `DSH_TUI_TEST_PANIC`): the terminal is
/// restored (cursor shown, no alternate screen, bracketed paste off, canonical mode and echo),
/// the message names the panic, and the session log is intact: `--continue` shows its history.
#[test]
fn a_panic_in_the_ui_restores_the_terminal_and_keeps_the_session_resumable() {
    let env = Env::new();
    env.server().push(text_reply("Before the panic."));
    let script = format!(
        "\"$DSH\" --patch \"$TITLES_OFF\"; echo \"dsh exited: $?\"; \
         echo \"tty: $({TTY_MODES})\"; read -r _"
    );
    let mut tui = Tui::spawn_shell(&env, &script, 100, 30, &[("DSH_TUI_TEST_PANIC", "boom")]);
    tui.wait_for("Ask dsh anything");
    tui.send("first question\r");
    tui.wait_screen("the first answer", |s| {
        s.contains("Before the panic.") && !s.contains("● working")
    });
    tui.send("boom\r");
    let screen = tui.wait_screen("the shell after the panic", |s| s.contains("tty: "));
    assert!(screen.contains("dsh exited: 1"), "{screen}");
    let raw = tui.raw();
    assert!(
        raw.contains("the terminal UI panicked: DSH_TUI_TEST_PANIC: the UI panicked on purpose"),
        "{screen}"
    );
    let tty = screen
        .lines()
        .find(|l| l.starts_with("tty: "))
        .unwrap()
        .to_owned();
    assert_eq!(tty.trim_end(), "tty: icanon echo", "{screen}");
    let (hidden, alt, paste) = tui.modes();
    assert!(!hidden && !alt && !paste, "restored: {screen}");
    tui.send("\r");
    assert!(tui.wait_exit().success());
    // Nothing was sent for the panicking prompt, and the log resumes whole.
    assert_eq!(env.server().request_count(), 1);
    env.server().push(text_reply("After the panic."));
    let tui = Tui::spawn(&env, &["--continue"], 100, 30);
    tui.wait_screen("the resumed history", |s| {
        s.contains("› first question") && s.contains("Before the panic.")
    });
    tui.send("again\r");
    tui.wait_screen("an answer in the resumed session", |s| {
        s.contains("After the panic.") && !s.contains("● working")
    });
    tui.quit();
}
