//! `dsh-catalog-api`: the catalog seam. A catalog is a derived index of the stored sessions
//! (never the truth: the logs are), answering three questions fast: which sessions exist
//! ([`Catalog::list`]), where a text was said ([`Catalog::search`]) and what they cost
//! ([`Catalog::stats`]).
//!
//! The embedded implementation is `dsh-catalog` (SQLite + FTS5); front ends look the service
//! up by [`Catalog`] in the kernel and never link SQLite.

mod syntax;

use serde::{Deserialize, Serialize};

pub use syntax::{
    MAX_QUERY_TERMS, QueryTerm, call_text, cut, dir_and_prefix, is_word_alone, query_terms,
};

/// What a listing, a search or a stats query is restricted to. Every member narrows; the
/// default matches every session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Filter {
    /// Sessions whose working directory is this directory or lies under it, or whose project
    /// root is the project root of this directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Sessions updated at or after this time (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
    /// Sessions whose last model is this one (`deepseek-chat`), or whose route is this one
    /// (`deepseek-official`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// At most this many rows (`None`: no limit for lists and stats, 20 for searches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One session as the catalog knows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// Session id.
    pub id: String,
    /// The parent session (subagent children, forks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The latest `session/title`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The header's working directory (empty when the header has none).
    pub cwd: String,
    /// The project root of the working directory (its git root, else the directory itself).
    pub project: String,
    /// The route of the last model reply (`deepseek-official`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model of the last model reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Creation time, epoch ms.
    pub created_ms: i64,
    /// Time of the last event, epoch ms.
    pub updated_ms: i64,
    /// The last turn number.
    pub turns: u64,
    /// Model requests with a reported usage.
    pub requests: u64,
    /// Input tokens, cached ones included.
    pub tokens_in: u64,
    /// Output tokens, reasoning included.
    pub tokens_out: u64,
    /// Input tokens served from the provider's cache.
    pub tokens_cached: u64,
    /// Cost in US dollars, where the route's prices are known.
    pub cost_usd: f64,
    /// How the last turn ended (`completed`, `interrupted`, …), `open` while a turn runs or was
    /// cut off, `-` before the first turn, `unreadable` when the log is refused.
    pub status: String,
    /// The first user prompt.
    pub first_prompt: String,
    /// The last user prompt.
    pub last_prompt: String,
    /// The seq of the last indexed event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
}

/// What a search hit is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HitKind {
    /// A user prompt.
    Prompt,
    /// Text of a model reply.
    Assistant,
    /// A tool call: its name and argument values (commands, paths).
    ToolCall,
    /// The head of a tool result.
    ToolResult,
    /// A session title.
    Title,
}

impl HitKind {
    /// The stable name (`prompt`, `assistant`, `tool-call`, `tool-result`, `title`).
    pub fn as_str(self) -> &'static str {
        match self {
            HitKind::Prompt => "prompt",
            HitKind::Assistant => "assistant",
            HitKind::ToolCall => "tool-call",
            HitKind::ToolResult => "tool-result",
            HitKind::Title => "title",
        }
    }

    /// The kind of a stable name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "prompt" => HitKind::Prompt,
            "assistant" => HitKind::Assistant,
            "tool-call" => HitKind::ToolCall,
            "tool-result" => HitKind::ToolResult,
            "title" => HitKind::Title,
            _ => return None,
        })
    }
}

/// A full-text query: free text where `"a phrase"` is a phrase and `word*` a prefix; every
/// other character is literal (never a syntax error).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchQuery {
    /// The text searched for.
    pub text: String,
    /// The sessions searched.
    #[serde(default)]
    pub filter: Filter,
}

/// One search hit: an indexed text of a session that matches, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The session.
    pub session_id: String,
    /// Its title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The session's working directory.
    pub cwd: String,
    /// The session's last update, epoch ms.
    pub updated_ms: i64,
    /// The turn of the matching event (0 before the first turn).
    pub turn: u64,
    /// The seq of the matching event.
    pub seq: u64,
    /// What matched.
    pub kind: HitKind,
    /// A short excerpt around the match, on one line.
    pub snippet: String,
    /// Byte ranges of `snippet` that matched the query.
    pub highlights: Vec<(usize, usize)>,
    /// Relevance (higher is better).
    pub score: f64,
}

/// How [`Catalog::stats`] groups sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupBy {
    /// By UTC day of the usage (`2026-12-06`).
    #[default]
    Day,
    /// By route and model (`deepseek-official/deepseek-chat`).
    Model,
    /// By project root.
    Project,
    /// Everything in one group, `total` (a session active on several days counts once).
    Total,
}

/// One group of [`Catalog::stats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatRow {
    /// The group (a day, `route/model`, or a project root).
    pub key: String,
    /// Sessions with usage in the group.
    pub sessions: u64,
    /// Turns of those sessions (a session's turns count in every group it has usage in).
    pub turns: u64,
    /// Model requests.
    pub requests: u64,
    /// Input tokens, cached ones included.
    pub tokens_in: u64,
    /// Output tokens.
    pub tokens_out: u64,
    /// Input tokens served from the cache.
    pub tokens_cached: u64,
    /// Cost in US dollars (routes with known prices).
    pub cost_usd: f64,
}

impl StatRow {
    /// The share of input tokens served from the cache (0 without input).
    pub fn cache_hit_ratio(&self) -> f64 {
        if self.tokens_in == 0 {
            0.0
        } else {
            self.tokens_cached as f64 / self.tokens_in as f64
        }
    }
}

/// What a session's writing process last said of it (the catalog's live table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LiveState {
    /// A turn runs.
    Working,
    /// Open in a process, no turn running.
    Idle,
    /// Its process closed it.
    Ended,
    /// Its process is gone without closing it (killed, crashed): on this host, no process has
    /// its pid any more.
    Gone,
}

impl LiveState {
    /// The stable name (`working`, `idle`, `ended`, `gone`).
    pub fn as_str(self) -> &'static str {
        match self {
            LiveState::Working => "working",
            LiveState::Idle => "idle",
            LiveState::Ended => "ended",
            LiveState::Gone => "gone",
        }
    }

    /// Whether a process holds the session open (working or idle).
    pub fn is_live(self) -> bool {
        matches!(self, LiveState::Working | LiveState::Idle)
    }
}

/// A session as its writing process last reported it: which process holds it and what it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    /// Session id.
    pub id: String,
    /// The writing process.
    pub pid: u32,
    /// The host of that process.
    pub host: String,
    /// The session's working directory.
    pub cwd: String,
    /// When the process opened it, epoch ms.
    pub started_ms: i64,
    /// The last report, epoch ms.
    pub updated_ms: i64,
    /// The current (or last) turn.
    pub turn: u64,
    /// What it is doing.
    pub state: LiveState,
}

/// A failed catalog operation.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The store failed (I/O, SQL, a damaged file); the catalog can be rebuilt from the logs.
    #[error("catalog storage failed: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A query ran past its time budget and was stopped.
    #[error("the catalog query ran past its budget of {budget_ms} ms")]
    Timeout {
        /// The budget.
        budget_ms: u64,
    },
    /// The catalog cannot be written (read-only location).
    #[error("the catalog is read-only")]
    ReadOnly,
}

/// The catalog service (kernel service `catalog`).
pub trait Catalog: Send + Sync + 'static {
    /// Sessions matching the filter, most recently updated first.
    fn list(&self, filter: &Filter) -> Result<Vec<SessionRow>, CatalogError>;
    /// One session's row (`None`: not catalogued).
    fn get(&self, id: &str) -> Result<Option<SessionRow>, CatalogError>;
    /// Full-text hits, best first.
    fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>, CatalogError>;
    /// Usage grouped by day, model or project; groups in key order (days newest first).
    fn stats(&self, by: GroupBy, filter: &Filter) -> Result<Vec<StatRow>, CatalogError>;
    /// Forgets a session (its log was deleted). Deleting an unknown id is not an error.
    fn delete(&self, id: &str) -> Result<(), CatalogError>;
    /// The sessions processes reported open recently (working, idle, ended, gone), most
    /// recently updated first. A catalog without live state lists none.
    fn live(&self) -> Result<Vec<LiveSession>, CatalogError> {
        Ok(Vec::new())
    }
}

impl dsh_kernel::Service for dyn Catalog {
    const NAME: &'static str = "catalog";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_kinds_round_trip_their_names() {
        for k in [
            HitKind::Prompt,
            HitKind::Assistant,
            HitKind::ToolCall,
            HitKind::ToolResult,
            HitKind::Title,
        ] {
            assert_eq!(HitKind::parse(k.as_str()), Some(k));
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::Value::String(k.as_str().into())
            );
        }
        assert_eq!(HitKind::parse("other"), None);
    }

    #[test]
    fn cache_hit_ratio_is_cached_over_input() {
        let row = StatRow {
            tokens_in: 400,
            tokens_cached: 100,
            ..Default::default()
        };
        assert_eq!(row.cache_hit_ratio(), 0.25);
        assert_eq!(StatRow::default().cache_hit_ratio(), 0.0);
    }
}
