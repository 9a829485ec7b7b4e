//! Helpers shared by the snapshot test files.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_llm::{ModelPricing, UsdPerMTok};
use dsh_tui::app::App;
use dsh_tui::composer::Composer;
use dsh_tui::theme::Theme;
use dsh_tui::tool_display::Displayer;
use dsh_tui::transcript::Transcript;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use serde_json::json;

pub const PRICES: ModelPricing = ModelPricing::new(
    UsdPerMTok::from_micros(28_000),
    UsdPerMTok::from_micros(280_000),
    UsdPerMTok::from_micros(420_000),
);

pub fn lines_terminal(lines: Vec<Line<'static>>, width: u16) -> Terminal<TestBackend> {
    let h = lines.len().max(1) as u16;
    let mut t = Terminal::new(TestBackend::new(width, h)).unwrap();
    t.draw(|f| f.render_widget(Paragraph::new(lines), f.area()))
        .unwrap();
    t
}

/// The displays of the tools the snapshots show, as their crates describe them (the test's
/// stand-in for a session's `tools` service); any other tool gets the generic display.
pub fn displayer() -> Displayer {
    use dsh_tools::Tool;
    std::sync::Arc::new(|call| {
        let fs = dsh_tool_fs::FsTool::ALL
            .into_iter()
            .find(|t| t.name() == call.name);
        match (call.name, fs) {
            (_, Some(fs)) => fs.display(call),
            ("bash", _) => dsh_tool_bash::display(call),
            ("exit_plan_mode", _) => dsh_plan_mode::display(call),
            ("todo_write", _) => dsh_tool_todo::display(call),
            _ => dsh_tools::generic_display(call),
        }
    })
}

/// The card of a call of `name` with `args`, and its result when it ended.
pub fn tool_card(
    name: &str,
    args: serde_json::Value,
    result: Option<dsh_tui::cells::ToolOutcome>,
) -> dsh_tui::cells::ToolCard {
    dsh_tui::cells::ToolCard::ended(name, args.to_string().into(), result, &displayer())
}

pub fn app(theme: Theme) -> App {
    let mut transcript = Transcript::new(theme, Box::new(|_| Some(PRICES)));
    transcript.set_displayer(displayer());
    let mut app = App::new(theme, transcript, Composer::new(None));
    app.agents.set_displayer(displayer());
    app.model = "deepseek-flash".into();
    app.effort = Some("high".into());
    app.context_window = Some(1_000_000);
    app.priced = true;
    app
}

pub fn draw(app: &App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    t
}

pub fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

pub fn question(
    id: &str,
    tool: &str,
    args: serde_json::Value,
) -> dsh_tui::approval::ApprovalPrompt {
    let request = dsh_approval_api::ApprovalRequest {
        id: id.into(),
        session_id: "s".into(),
        call_id: "c".into(),
        tool_name: tool.into(),
        arguments: args,
        reason: format!("tool \"{tool}\" is not read-only and the approval policy is untrusted"),
        escalation: None,
    };
    let display = dsh_tui::approval::request_display(&request, &displayer());
    dsh_tui::approval::ApprovalPrompt::new(dsh_tui::approval::Question::from_request(
        &request, &display,
    ))
}

/// Each span of rendered lines as `text` plus its colour (`-` for none).
pub fn spans_with_colours(lines: &[Line<'static>]) -> String {
    let mut out = String::new();
    for line in lines {
        for s in &line.spans {
            if s.content.trim().is_empty() {
                continue;
            }
            let fg = s.style.fg.map_or("-".to_owned(), |c| format!("{c:?}"));
            let dim = if s.style.add_modifier.contains(ratatui::style::Modifier::DIM) {
                " dim"
            } else {
                ""
            };
            out.push_str(&format!("{:?} {fg}{dim}\n", s.content));
        }
        out.push_str("⏎\n");
    }
    out
}

pub fn event(seq: u64, kind: &str, data: serde_json::Value) -> dsh_session::Event {
    dsh_session::Event::from_json(
        json!({"type": kind, "data": data, "seq": seq, "time": 1_790_000_000_000i64}),
        seq,
    )
    .unwrap()
}
