//! Snapshots of the plan accept prompt, the live sub-agent cards and nested fenced code.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_protocol::EventMsg;
use dsh_tui::app::App;
use dsh_tui::cells::Cell;
use dsh_tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use crate::support::*;

/// `exit_plan_mode`'s question: the plan as markdown for the scrollback, a one-key prompt
/// (`y` accepts, `a` means nothing, `n` asks for feedback), and the card of each outcome.
#[test]
fn plan_prompt_shows_the_plan_and_takes_accept_or_feedback() {
    use dsh_tui::app::Action;
    use dsh_tui::approval::ApprovalAnswer;
    let plan = "## Steps\n\n1. Replace `old` with **new**\n2. Run the tests";
    let mut app = app(Theme::COLOR);
    app.running = true;
    let prompt = question("p1", "exit_plan_mode", json!({ "plan": plan }));
    assert_eq!(prompt.question.plan.as_deref(), Some(plan));
    let lines = dsh_tui::approval::plan_lines(plan, Theme::COLOR, 60);
    insta::assert_snapshot!("plan_for_review", lines_terminal(lines, 60).backend());
    app.approvals.push_back(prompt);
    insta::assert_snapshot!("plan_prompt", draw(&app, 80, 8).backend());
    assert!(app.key(key(KeyCode::Char('a')), 80).is_empty());
    assert!(app.key(key(KeyCode::Char('n')), 80).is_empty());
    for c in "also docs".chars() {
        app.key(key(KeyCode::Char(c)), 80);
    }
    insta::assert_snapshot!("plan_prompt_feedback", draw(&app, 80, 8).backend());
    assert_eq!(
        app.key(key(KeyCode::Enter), 80),
        [Action::Answer {
            id: "p1".into(),
            answer: ApprovalAnswer::Deny {
                reason: Some("also docs".into())
            }
        }]
    );
    app.approvals
        .push_back(question("p2", "exit_plan_mode", json!({ "plan": plan })));
    assert_eq!(
        app.key(key(KeyCode::Char('y')), 80),
        [Action::Answer {
            id: "p2".into(),
            answer: ApprovalAnswer::AllowOnce
        }]
    );
    let card = |accepted: bool, text: &str| {
        Cell::Tool(tool_card(
            "exit_plan_mode",
            json!({ "plan": plan }),
            Some(ToolOutcome {
                text: text.into(),
                is_error: false,
                error_code: None,
                meta: Some(json!({ "accepted": accepted })),
            }),
        ))
        .render(Theme::COLOR, 80)
    };
    let mut both = card(
        true,
        "The user accepted the plan. Plan mode is off: carry the plan out now.",
    );
    both.extend(card(
        false,
        "The user rejected the plan. Their feedback: also docs Plan mode stays on",
    ));
    insta::assert_snapshot!("plan_cards", lines_terminal(both, 80).backend());
}

/// A running sub-agent's live card: one line collapsed (label, elapsed, tools, tokens, the
/// tool running now), its recent activity expanded (Ctrl+O), gone when it ends.
#[test]
fn live_subagent_card_collapsed_expanded_and_finished() {
    let t0 = std::time::Instant::now();
    let mut app = app(Theme::COLOR);
    app.running = true;
    app.agents.started("child-1", "Scan the repo", t0);
    let msg = |text: &str| {
        ev(EventMsg::AssistantMessage {
            turn: 1,
            text: text.into(),
            reasoning: None,
            interrupted: false,
            model: Some("deepseek-flash".into()),
        })
    };
    let used = {
        let u = priced(
            &dsh_llm::TokenUsage {
                input_tokens: 1200,
                output_tokens: 40,
                total_tokens: None,
                cache_read_tokens: Some(800),
                cache_write_tokens: None,
                reasoning_tokens: None,
            },
            None,
        );
        ev(EventMsg::UsageUpdated {
            turn: 1,
            usage: u,
            total: u,
            context_tokens: 2040,
        })
    };
    let call = |id: &str, name: &str, args: serde_json::Value| {
        ev(EventMsg::ToolCallBegan {
            call_id: id.into(),
            tool_name: name.into(),
            display: display(name, &args, None),
        })
    };
    let result = |id: &str, name: &str, args: serde_json::Value, error: bool| {
        let outcome = ToolOutcome {
            text: "ok".into(),
            is_error: error,
            error_code: None,
            meta: None,
        };
        ev(EventMsg::ToolCallEnded {
            call_id: id.into(),
            tool_name: name.into(),
            display: display(name, &args, Some(&outcome)),
            is_error: error,
            error_code: None,
            error_message: error.then(|| "ok".to_owned()),
        })
    };
    let glob = json!({"pattern": "**/*.rs"});
    let bash = json!({"command": "cargo test -q"});
    let evs = [
        msg("Looking at the layout first.\nthen more"),
        used,
        call("c1", "glob", glob.clone()),
        result("c1", "glob", glob, false),
        call("c2", "bash", bash.clone()),
    ];
    for e in &evs {
        app.agents.event("child-1", e);
    }
    // Events of another session are not this card's.
    app.agents.event("other", &evs[2]);
    assert_eq!(app.agents.children()[0].tools, 2);
    let at = |secs: u64| t0 + std::time::Duration::from_secs(secs);
    let frame = |app: &App, width: u16, secs: u64| {
        let mut term = Terminal::new(TestBackend::new(width, 12)).unwrap();
        term.draw(|f| app.draw_at(f, at(secs))).unwrap();
        term
    };
    insta::assert_snapshot!("live_subagent_collapsed", frame(&app, 100, 3).backend());
    insta::assert_snapshot!("live_subagent_collapsed_40", frame(&app, 40, 75).backend());
    // Ctrl+O expands the live cards (not the reasoning) and collapses them again.
    let ctrl_o = KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert!(app.key(ctrl_o, 100).is_empty());
    assert!(app.agents.expanded);
    app.agents
        .event("child-1", &result("c2", "bash", bash, true));
    insta::assert_snapshot!("live_subagent_expanded", frame(&app, 100, 9).backend());
    app.key(ctrl_o, 100);
    assert!(!app.agents.expanded);
    app.agents.finished("child-1");
    assert!(app.agents.is_empty());
    assert!(app.agents.render(Theme::COLOR, 100, at(10)).is_empty());
}

/// Fenced code nested in a block quote or a list item is highlighted like top-level code
/// (quote marks and the item's indentation kept), streamed or whole.
#[test]
fn nested_fenced_code_is_highlighted() {
    let text = "> Quoted:\n>\n> ```rust\n> fn one() -> u32 { 1 }\n> ```\n\n1. Run it:\n   ```sh\n   echo hi # greet\n\n   echo bye\n   ```\n2. ```python\n   def f(): return 'x'\n   ```\n\n- ```nosuchlang\n  plain words\n  ```\n\nAfter.\n";
    let whole = dsh_tui::markdown::render_all(text, Theme::COLOR, 60);
    insta::assert_snapshot!("nested_code_highlighted", spans_with_colours(&whole));
    insta::assert_snapshot!(
        "nested_code_layout",
        lines_terminal(whole.clone(), 60).backend()
    );
    let shown = spans_with_colours(&whole);
    // `fn` (storage) cyan, the function name blue, the number yellow, in the quote.
    assert!(shown.contains("\"fn\" Cyan"), "{shown}");
    assert!(shown.contains("\"1\" Yellow"), "{shown}");
    let mut stream = dsh_tui::markdown::MarkdownStream::new();
    let mut r = dsh_tui::markdown::PieceRenderer::new(Theme::COLOR, 60);
    let mut streamed = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    for chunk in chars.chunks(3) {
        let s: String = chunk.iter().collect();
        for p in stream.push(&s) {
            streamed.extend(r.piece(&p));
        }
    }
    for p in stream.finish() {
        streamed.extend(r.piece(&p));
    }
    assert_eq!(spans_with_colours(&streamed), shown);
}

/// A tool the TUI has never heard of, describing its own calls.
struct Deploy {
    parameters: serde_json::Value,
}

impl dsh_tools::Tool for Deploy {
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> &str {
        "Deploy a version."
    }
    fn parameters(&self) -> &serde_json::Value {
        &self.parameters
    }
    fn execute<'a>(
        &'a self,
        _ctx: dsh_tools::ToolContext,
        _args: serde_json::Value,
    ) -> futures::future::BoxFuture<'a, Result<dsh_tools::ToolOutput, dsh_tools::ToolError>> {
        Box::pin(async { Ok(dsh_tools::ToolOutput::text("deployed")) })
    }
    fn display(&self, call: &dsh_tools::DisplayInput<'_>) -> dsh_tools::ToolDisplay {
        use dsh_tools::{ExitStatus, OutputSummary, ToolDisplay, ToolKind};
        #[derive(serde::Deserialize)]
        struct Args {
            env: String,
            version: String,
        }
        let mut d = ToolDisplay::new(ToolKind::Shell, "deploy");
        if let Some(a) = call.parse::<Args>() {
            d = d.with_subject(a.env).with_field("version", a.version);
        }
        if let Some(r) = call.succeeded() {
            let hosts = call
                .meta_field("hosts")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            d = d.with_output(OutputSummary {
                text: r.text.lines().take(2).collect::<Vec<_>>().join("\n"),
                truncated: r.text.lines().count() > 2,
                exit: Some(ExitStatus::Exited { code: 0 }),
                headline: Some(format!("{hosts} hosts")),
                ..Default::default()
            });
        }
        d
    }
}

fn flat(lines: &[ratatui::text::Line<'static>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

/// A tool defined here shows on its card as it describes itself, with no edit to the TUI; a
/// tool no `tools` service knows (an MCP tool whose server is gone) gets the generic card.
#[tokio::test]
async fn a_tool_defined_in_a_test_shows_as_it_describes_itself() {
    use dsh_tools::{Tools, ToolsConfig, ToolsPlugin};
    let mut reg = dsh_kernel::PluginRegistry::new();
    reg.register::<ToolsPlugin>();
    let kernel = dsh_kernel::Kernel::new(reg);
    kernel
        .mount_plugin::<ToolsPlugin>(ToolsConfig::default())
        .unwrap()
        .ready()
        .await
        .unwrap();
    let root = kernel.root();
    let tools = root.get::<dyn Tools>().unwrap();
    let parameters = json!({"type": "object", "properties": {
        "env": {"type": "string"}, "version": {"type": "string"}}});
    tools
        .register(&root, std::sync::Arc::new(Deploy { parameters }))
        .unwrap();
    // The host describes each call with the session's tools; the TUI draws what it is sent.
    let described =
        |name: &str, args: &serde_json::Value, result: Option<(&str, serde_json::Value)>| {
            let args = args.to_string();
            let input = dsh_tools::DisplayInput::new(name, &args);
            match &result {
                None => tools.display(None, &input),
                Some((text, meta)) => tools.display(
                    None,
                    &input.with_result(dsh_tools::DisplayResult {
                        text,
                        is_error: false,
                        error_code: None,
                        meta: Some(meta),
                    }),
                ),
            }
        };
    let mut t = dsh_tui::transcript::Transcript::new(Theme::COLOR);
    let mut lines = Vec::new();
    for (id, name, args, text, meta) in [
        (
            "c1",
            "deploy",
            json!({"env": "staging", "version": "1.4.2"}),
            "host-a ok\nhost-b ok\nhost-c ok",
            json!({"hosts": 3}),
        ),
        (
            "c2",
            "mcp__gone__lookup",
            json!({"q": "hi"}),
            "answer",
            json!({}),
        ),
    ] {
        let began = EventMsg::ToolCallBegan {
            call_id: id.into(),
            tool_name: name.into(),
            display: described(name, &args, None),
        };
        let ended = EventMsg::ToolCallEnded {
            call_id: id.into(),
            tool_name: name.into(),
            display: described(name, &args, Some((text, meta))),
            is_error: false,
            error_code: None,
            error_message: None,
        };
        lines.extend(t.on_event(&ev(began), 60));
        lines.extend(t.on_event(&ev(ended), 60));
    }
    assert_eq!(
        flat(&lines),
        [
            "● deploy staging (3 hosts)",
            "    exit 0 · version: 1.4.2",
            "    host-a ok",
            "    host-b ok",
            "    …",
            r#"● mcp__gone__lookup {"q":"hi"}"#,
            "    answer",
        ]
    );
    kernel.dispose().await;
}
