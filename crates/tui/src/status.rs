//! Token usage, cost and the status line. The cost comes from [`dsh_llm::UsageTally`] and the
//! route's [`dsh_llm::ModelPricing`]: the one fold every front end uses.

use std::collections::BTreeMap;

use dsh_llm::{ModelPricing, TokenUsage, UsageTally};
use ratatui::text::{Line, Span};

use crate::theme::Theme;
use crate::wrap;

/// Usage of a session, per turn and in total.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// The whole session.
    pub session: UsageTally,
    /// By turn number.
    pub turns: BTreeMap<u64, UsageTally>,
    /// Tokens of the last request (input + output): what the next request carries at least.
    pub context_used: Option<u64>,
}

impl Usage {
    /// Folds a sub-agent's usage into `turn` (it does not change the context size).
    pub fn add_subagent(&mut self, turn: u64, usage: &TokenUsage, pricing: Option<&ModelPricing>) {
        self.session.add(usage, pricing);
        self.turns.entry(turn).or_default().add(usage, pricing);
    }

    /// Folds one attempt's usage of `turn`.
    pub fn add(&mut self, turn: u64, usage: &TokenUsage, pricing: Option<&ModelPricing>) {
        self.session.add(usage, pricing);
        self.turns.entry(turn).or_default().add(usage, pricing);
        self.context_used =
            Some(usage.input_tokens + usage.cache_read_tokens.unwrap_or(0) + usage.output_tokens);
    }
}

/// The usage a sub-agent's result carries in its `tool/result.meta` (`childSessionId`,
/// `usage`, `model`, written by `dsh-tool-subagent`), with the model that priced it.
pub fn subagent_usage(meta: &serde_json::Value) -> Option<(TokenUsage, Option<String>)> {
    meta.get("childSessionId")?;
    let usage = serde_json::from_value::<TokenUsage>(meta.get("usage")?.clone()).ok()?;
    let model = meta
        .get("model")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    Some((usage, model))
}

/// The usage of a `dsh/subagent-usage` record (`{usage, model?, nested?}`, logged by
/// `dsh-subagent` in the parent when a child's run ends, failed runs too): the child's share
/// and its own children's, each with the model that priced it. Read by shape.
pub fn subagent_record_usage(data: &serde_json::Value) -> Vec<(TokenUsage, Option<String>)> {
    let mut out = Vec::new();
    let Ok(usage) =
        serde_json::from_value::<TokenUsage>(data.get("usage").cloned().unwrap_or_default())
    else {
        return out;
    };
    let model = data
        .get("model")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    out.push((usage, model));
    for n in data
        .get("nested")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
    {
        out.extend(subagent_record_usage(n));
    }
    out
}

/// `950`, `12.3k`, `1.2M`.
pub fn tokens(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        format!("{:.1}M", n as f64 / 1_000_000.0)
    }
}

/// What the status line shows.
#[derive(Clone, Debug)]
pub struct StatusInfo<'a> {
    /// Model id.
    pub model: &'a str,
    /// Reasoning effort, when the route has efforts.
    pub effort: Option<&'a str>,
    /// The route's context window.
    pub context_window: Option<u64>,
    /// Session usage.
    pub usage: &'a Usage,
    /// Whether the route has prices.
    pub priced: bool,
    /// A turn is running.
    pub running: bool,
    /// A transient hint (e.g. "Ctrl-C again to quit").
    pub hint: Option<&'a str>,
}

/// The status line: model · effort · context · tokens · cache · cost. Narrow terminals drop
/// the least important parts first (the cost and the model stay).
pub fn status_line(info: &StatusInfo<'_>, theme: Theme, width: u16) -> Line<'static> {
    let u = &info.usage.session;
    let mut parts: Vec<(u8, Span<'static>)> = Vec::new();
    if info.running {
        parts.push((0, Span::styled("● working", theme.warn())));
    }
    if let Some(h) = info.hint {
        parts.push((0, Span::styled(h.to_owned(), theme.warn())));
    }
    parts.push((0, Span::styled(info.model.to_owned(), theme.tool())));
    if let Some(e) = info.effort {
        parts.push((3, Span::raw(e.to_owned())));
    }
    let used = info.usage.context_used.unwrap_or(0);
    let ctx = match info.context_window {
        Some(w) if w > 0 => format!(
            "ctx {}/{} ({}%)",
            tokens(used),
            tokens(w),
            (used as f64 * 100.0 / w as f64).round() as u64
        ),
        _ => format!("ctx {}", tokens(used)),
    };
    parts.push((2, Span::raw(ctx)));
    parts.push((
        4,
        Span::raw(format!("in {} out {}", tokens(u.input()), tokens(u.output))),
    ));
    let cache = match u.cache_hit_ratio() {
        Some(r) => format!(
            "cached {} ({}%)",
            tokens(u.cache_hit_input),
            (r * 100.0).round() as u64
        ),
        None => "cached 0".to_owned(),
    };
    parts.push((1, Span::styled(cache, theme.ok())));
    if info.priced {
        let mut cost = format!("{}", u.cost);
        if u.unpriced > 0 {
            cost.push('+');
        }
        parts.push((0, Span::styled(cost, theme.heading())));
    }
    // Drop the lowest priorities until it fits.
    let sep = " · ";
    let fits = |parts: &[(u8, Span<'static>)]| {
        let w: usize = parts.iter().map(|(_, s)| s.width()).sum::<usize>()
            + sep.len() * parts.len().saturating_sub(1);
        w <= usize::from(width)
    };
    for level in (1..=4).rev() {
        if fits(&parts) {
            break;
        }
        parts.retain(|(p, _)| *p < level);
    }
    let mut spans = Vec::new();
    for (i, (_, s)) in parts.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(sep, theme.dim()));
        }
        spans.push(s);
    }
    let line = Line::from(spans);
    if line.width() > usize::from(width) {
        Line::from(wrap::truncate(&line.to_string(), usize::from(width)))
    } else {
        line
    }
}

/// The `/cost` table: one row per turn and the session total.
pub fn cost_table(usage: &Usage, priced: bool, theme: Theme) -> Vec<Line<'static>> {
    let head = format!(
        "{:>5}  {:>9}  {:>9}  {:>9}  {:>6}  {:>10}",
        "turn", "miss in", "cached in", "out", "hit%", "cost"
    );
    let mut lines = vec![Line::from(Span::styled(head, theme.heading()))];
    let row = |name: String, t: &UsageTally| {
        let hit = t
            .cache_hit_ratio()
            .map(|r| format!("{}%", (r * 100.0).round() as u64))
            .unwrap_or_else(|| "-".into());
        let cost = if priced {
            format!("{}", t.cost)
        } else {
            "-".into()
        };
        format!(
            "{name:>5}  {:>9}  {:>9}  {:>9}  {hit:>6}  {cost:>10}",
            t.cache_miss_input, t.cache_hit_input, t.output
        )
    };
    for (turn, t) in &usage.turns {
        lines.push(Line::from(row(turn.to_string(), t)));
    }
    lines.push(Line::from(Span::styled(
        row("total".into(), &usage.session),
        theme.heading(),
    )));
    if !priced {
        lines.push(Line::from(Span::styled(
            "(this route has no prices: set `pricing` on its model catalog entry)",
            theme.dim(),
        )));
    }
    lines
}
