//! The card of a sub-agent call (`subagent`, `subagent_fork`, or any delegate tool whose result
//! meta names a `childSessionId`): the task label as the subject, a facts line (child id,
//! provider, how it ended, requests, tokens) and the child's answer collapsed to its first
//! lines; `dsh sessions show <child>` shows the child's whole activity.

use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::cells::{ToolCard, sanitize};
use crate::theme::Theme;

/// Lines of the child's answer shown on the card.
pub const ANSWER_LINES: usize = 3;

/// Whether `card` is a sub-agent call.
pub fn is_subagent(card: &ToolCard) -> bool {
    matches!(card.name.as_str(), "subagent" | "subagent_fork")
        || card
            .result
            .as_ref()
            .and_then(|r| r.meta.as_ref())
            .is_some_and(|m| m.get("childSessionId").is_some())
}

/// The card's subject (the `description` label) and body.
pub fn render(card: &ToolCard, args: &Value, theme: Theme) -> (String, Vec<Line<'static>>) {
    let label = args
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut body = Vec::new();
    let Some(r) = &card.result else {
        return (label, body);
    };
    let meta = r.meta.as_ref();
    let text_of = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    let mut facts: Vec<Span<'static>> = Vec::new();
    if let Some(child) = text_of("childSessionId") {
        facts.push(Span::styled(format!("child {child}"), theme.dim()));
    }
    if let Some(p) = text_of("provider") {
        facts.push(Span::styled(p.to_owned(), theme.dim()));
    }
    if let Some(s) = text_of("stopReason") {
        let style = if s == "completed" {
            theme.ok()
        } else {
            theme.error()
        };
        facts.push(Span::styled(s.to_owned(), style));
    }
    if let Some(n) = meta.and_then(|m| m.get("requests")).and_then(Value::as_u64) {
        facts.push(Span::styled(format!("{n} requests"), theme.dim()));
    }
    if let Some(u) = meta.and_then(|m| m.get("usage")) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let input = n("inputTokens") + n("cacheReadTokens");
        facts.push(Span::styled(
            format!("{input} in / {} out", n("outputTokens")),
            theme.dim(),
        ));
    }
    if !facts.is_empty() {
        let mut line = vec![Span::raw("    ")];
        for (i, f) in facts.into_iter().enumerate() {
            if i > 0 {
                line.push(Span::styled(" · ", theme.dim()));
            }
            line.push(f);
        }
        body.push(Line::from(line));
    }
    let text = r.text.trim();
    let mut lines = text.lines();
    for l in lines.by_ref().take(ANSWER_LINES) {
        body.push(Line::from(Span::raw(format!("    {}", sanitize(l)))));
    }
    if lines.next().is_some() {
        body.push(Line::from(Span::styled("    …", theme.dim())));
    }
    (label, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::ToolOutcome;
    use serde_json::json;

    fn flat(lines: &[Line<'static>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn a_finished_child_shows_its_facts_and_a_collapsed_answer() {
        let card = ToolCard {
            name: "subagent".into(),
            arguments: r#"{"description":"Count files","prompt":"…"}"#.into(),
            result: Some(ToolOutcome {
                text: "one\ntwo\nthree\nfour".into(),
                is_error: false,
                error_code: None,
                meta: Some(json!({
                    "childSessionId": "session-kid",
                    "provider": "spawn",
                    "stopReason": "completed",
                    "requests": 2,
                    "usage": {"inputTokens": 20, "outputTokens": 7, "cacheReadTokens": 100}
                })),
            }),
        };
        assert!(is_subagent(&card));
        let args: Value = serde_json::from_str(&card.arguments).unwrap();
        let (subject, body) = render(&card, &args, Theme::PLAIN);
        assert_eq!(subject, "Count files");
        assert_eq!(
            flat(&body),
            [
                "    child session-kid · spawn · completed · 2 requests · 120 in / 7 out",
                "    one",
                "    two",
                "    three",
                "    …"
            ]
        );
    }
}
