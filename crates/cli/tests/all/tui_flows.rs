//! More of the interactive UI end to end (the harness is `tui`'s): plan mode's accept prompt,
//! the live sub-agent card, Ctrl-Z and the panic path.

use crate::support::{Env, request_messages};
use crate::tui::{Tui, text_reply, tool_reply};

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
