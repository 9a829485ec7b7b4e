//! The live card of a running `workflow` call (`workflowProgress`): the script's name, its
//! sub-agents' states and tokens, one line per agent when expanded (Ctrl+O), gone once the
//! run ended.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_protocol::{EventMsg, Usage, WorkflowAgent, WorkflowAgentState, WorkflowStatus};
use dsh_tui::theme::Theme;

use crate::support::*;

fn agent(seq: u64, state: WorkflowAgentState, tokens: Option<u64>) -> WorkflowAgent {
    WorkflowAgent {
        seq,
        label: format!("part {seq}"),
        phase: (seq == 1).then(|| "scan".to_owned()),
        session_id: Some(format!("child-{seq}")),
        state,
        usage: tokens.map(|t| Usage {
            input_tokens: t,
            output_tokens: 100,
            ..Usage::default()
        }),
    }
}

fn progress(status: WorkflowStatus, agents: Vec<WorkflowAgent>) -> EventMsg {
    EventMsg::WorkflowProgress {
        call_id: "call_wf".into(),
        run_id: "wf-call_wf".into(),
        name: "five parts".into(),
        status,
        agents,
    }
}

fn text(app: &dsh_tui::app::App, width: u16) -> Vec<String> {
    app.agents
        .render(Theme::PLAIN, width, std::time::Instant::now())
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

#[test]
fn a_running_workflow_shows_its_agents_and_tokens_and_leaves_when_it_ends() {
    let mut app = app(Theme::PLAIN);
    app.running = true;
    app.agents
        .workflow(&progress(WorkflowStatus::Running, vec![]));
    assert_eq!(text(&app, 100), ["⚙ Workflow five parts · 0 sub-agents"]);
    // Two agents: one ended (its usage), one running (its live card's tokens).
    let t0 = std::time::Instant::now();
    app.agents.started("child-2", "part 2", t0);
    let used = priced(
        &dsh_llm::TokenUsage {
            input_tokens: 400,
            output_tokens: 100,
            total_tokens: None,
            cache_read_tokens: None,
            cache_write_tokens: None,
            reasoning_tokens: None,
        },
        None,
    );
    app.agents.event(
        "child-2",
        &ev(EventMsg::UsageUpdated {
            turn: 1,
            usage: used,
            total: used,
            context_tokens: 500,
        }),
    );
    app.agents.workflow(&progress(
        WorkflowStatus::Running,
        vec![
            agent(1, WorkflowAgentState::Completed, Some(1900)),
            agent(2, WorkflowAgentState::Running, None),
        ],
    ));
    let shown = text(&app, 120);
    assert_eq!(
        shown[0],
        "⚙ Workflow five parts · 2 sub-agents, 1 running, 1 completed · 2.5k tokens · Ctrl+O expands"
    );
    // Ctrl+O: one line per agent.
    let ctrl_o = KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert!(app.key(ctrl_o, 120).is_empty());
    let shown = text(&app, 120);
    assert_eq!(
        shown[..3],
        [
            "⚙ Workflow five parts · 2 sub-agents, 1 running, 1 completed · 2.5k tokens",
            "    ● part 1 [scan] · completed · 2.0k tokens",
            "    ◌ part 2 · running · 500 tokens",
        ]
    );
    // The run ended: its card leaves (the running child's card is its own).
    app.agents.finished("child-2");
    app.agents.workflow(&progress(
        WorkflowStatus::Error,
        vec![
            agent(1, WorkflowAgentState::Completed, Some(1900)),
            agent(2, WorkflowAgentState::Cancelled, Some(10)),
        ],
    ));
    assert!(app.agents.is_empty());
    assert!(text(&app, 120).is_empty());
}
