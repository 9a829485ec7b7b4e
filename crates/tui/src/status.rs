//! Token usage, cost and the status line. Usage arrives priced by the host
//! ([`dsh_protocol::Usage`] with its cost); the TUI only folds it per turn and in total.

use std::collections::BTreeMap;

use ratatui::text::{Line, Span};

use crate::theme::Theme;
use crate::wrap;

/// A cost in US dollars.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Cost(pub f64);

impl Cost {
    /// In dollars.
    pub fn usd(self) -> f64 {
        self.0
    }
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, rhs: Cost) {
        self.0 += rhs.0;
    }
}

impl std::fmt::Display for Cost {
    /// `$0.0123` (four decimals; six under a cent so small sessions are not shown as zero).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usd = self.0;
        if usd != 0.0 && usd < 0.01 {
            write!(f, "${usd:.6}")
        } else {
            write!(f, "${usd:.4}")
        }
    }
}

/// Token usage and cost folded over many requests (a turn, a session).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UsageTally {
    /// Uncached input tokens.
    pub cache_miss_input: u64,
    /// Cached input tokens.
    pub cache_hit_input: u64,
    /// Input tokens written to the cache.
    pub cache_write_input: u64,
    /// Output tokens.
    pub output: u64,
    /// Requests that reported usage.
    pub attempts: u64,
    /// Cost of the usage that had prices.
    pub cost: Cost,
    /// Requests without prices (their cost is not in `cost`).
    pub unpriced: u64,
}

impl UsageTally {
    /// Folds one request's usage.
    pub fn add(&mut self, u: &dsh_protocol::Usage) {
        self.cache_miss_input += u.input_tokens;
        self.cache_hit_input += u.cache_read_tokens;
        self.cache_write_input += u.cache_write_tokens;
        self.output += u.output_tokens;
        self.attempts += 1;
        match u.cost_usd {
            Some(c) => self.cost += Cost(c),
            None => self.unpriced += 1,
        }
    }

    /// All input tokens (read from the cache, written to it, and neither).
    pub fn input(&self) -> u64 {
        self.cache_miss_input + self.cache_hit_input + self.cache_write_input
    }

    /// Share of input served from the cache, in `0.0..=1.0` (`None` before any input).
    pub fn cache_hit_ratio(&self) -> Option<f64> {
        let input = self.input();
        (input > 0).then(|| self.cache_hit_input as f64 / input as f64)
    }
}

/// Usage of a session, per turn and in total.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// The whole session.
    pub session: UsageTally,
    /// By turn number.
    pub turns: BTreeMap<u64, UsageTally>,
    /// Tokens of the last request (input + output): what the next request carries at least.
    pub context_used: Option<u64>,
    /// A request's usage as its stream reported it (`usageStreamed`), shown at once until its
    /// committed `usageUpdated` is folded (which replaces it).
    pub streamed: Option<StreamedUsage>,
}

/// A request's usage reported by its stream, not yet committed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StreamedUsage {
    /// The request's usage.
    pub usage: dsh_protocol::Usage,
    /// Its context tokens (input, cached and output).
    pub context_tokens: u64,
}

impl Usage {
    /// Folds a sub-agent's usage into `turn` (it does not change the context size).
    pub fn add_subagent(&mut self, turn: u64, usage: &dsh_protocol::Usage) {
        self.session.add(usage);
        self.turns.entry(turn).or_default().add(usage);
    }

    /// Shows a request's usage as its stream reported it (live, before it commits).
    pub fn stream(&mut self, usage: &dsh_protocol::Usage, context_tokens: u64) {
        self.streamed = Some(StreamedUsage {
            usage: *usage,
            context_tokens,
        });
    }

    /// The session's tally as shown now: the committed requests and the one streamed.
    pub fn session_now(&self) -> UsageTally {
        let mut t = self.session;
        if let Some(s) = &self.streamed {
            t.add(&s.usage);
        }
        t
    }

    /// The context size as shown now.
    pub fn context_now(&self) -> Option<u64> {
        self.streamed
            .as_ref()
            .map(|s| s.context_tokens)
            .or(self.context_used)
    }

    /// Folds one request's usage of `turn` (committed: it replaces the streamed figures).
    pub fn add(&mut self, turn: u64, usage: &dsh_protocol::Usage) {
        self.streamed = None;
        self.session.add(usage);
        self.turns.entry(turn).or_default().add(usage);
        self.context_used =
            Some(usage.input_tokens + usage.cache_read_tokens + usage.output_tokens);
    }
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
    let u = &info.usage.session_now();
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
    let used = info.usage.context_now().unwrap_or(0);
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
