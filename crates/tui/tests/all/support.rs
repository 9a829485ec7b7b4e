//! Helpers shared by the snapshot test files.

#![allow(dead_code)]

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_llm::{ModelPricing, TokenUsage, UsdPerMTok};
use dsh_protocol::{Event, EventMsg, ToolDisplay};
use dsh_tui::app::App;
use dsh_tui::composer::Composer;
use dsh_tui::theme::Theme;
use dsh_tui::transcript::Transcript;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

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

/// Describes a call (the host's job: the tools fill in their displays).
pub type Displayer = std::sync::Arc<dyn Fn(&dsh_tools::DisplayInput<'_>) -> ToolDisplay>;

/// A tool call's result as a test writes it; the card is described from it (as the host does)
/// and shows what the protocol carries.
#[derive(Clone, Debug)]
pub struct ToolOutcome {
    pub text: String,
    pub is_error: bool,
    pub error_code: Option<String>,
    pub meta: Option<serde_json::Value>,
}

/// The displays of the tools the snapshots show, as their crates describe them (the test's
/// stand-in for the host's `tools` service); any other tool gets the generic display.
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

/// The display of a call of `name` with `args` (and its result when it ended).
pub fn display(name: &str, args: &serde_json::Value, result: Option<&ToolOutcome>) -> ToolDisplay {
    let args = args.to_string();
    let input = dsh_tools::DisplayInput::new(name, &args);
    let d = displayer();
    match result {
        None => d(&input),
        Some(r) => d(&input.with_result(dsh_tools::DisplayResult {
            text: &r.text,
            is_error: r.is_error,
            error_code: r.error_code.as_deref(),
            meta: r.meta.as_ref(),
        })),
    }
}

/// The card of a call of `name` with `args`, and its result when it ended.
pub fn tool_card(
    name: &str,
    args: serde_json::Value,
    result: Option<ToolOutcome>,
) -> dsh_tui::cells::ToolCard {
    let d = display(name, &args, result.as_ref());
    dsh_tui::cells::ToolCard::ended(
        d,
        result.map(|r| dsh_tui::cells::ToolOutcome {
            text: if r.is_error {
                r.text.lines().next().unwrap_or("").to_owned()
            } else {
                String::new()
            },
            is_error: r.is_error,
            error_code: r.error_code,
        }),
    )
}

/// Usage priced as the host prices it.
pub fn priced(u: &TokenUsage, pricing: Option<&ModelPricing>) -> dsh_protocol::Usage {
    dsh_protocol::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens.unwrap_or(0),
        cache_write_tokens: u.cache_write_tokens.unwrap_or(0),
        reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
        cost_usd: pricing.map(|p| p.cost(u).usd()),
        requests: 1,
        unpriced_requests: u64::from(pricing.is_none()),
    }
}

/// An event of the shown session.
pub fn ev(msg: EventMsg) -> Event {
    Event::new(1, msg)
}

pub fn app(theme: Theme) -> App {
    let transcript = Transcript::new(theme);
    let mut app = App::new(theme, transcript, Composer::new(None));
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
    let request = dsh_protocol::ApprovalRequest {
        request_id: id.into(),
        session_id: "s".into(),
        call_id: "c".into(),
        tool_name: tool.into(),
        display: display(tool, &args, None),
        reason: format!("tool \"{tool}\" is not read-only and the approval policy is untrusted"),
        escalation: None,
        purpose: dsh_protocol::ApprovalPurpose::ToolCall,
    };
    dsh_tui::approval::ApprovalPrompt::new(dsh_tui::approval::Question::from_request(&request))
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
