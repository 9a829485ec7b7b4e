//! Sessions as a client lists and opens them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::settings::SessionSettings;
use crate::usage::Usage;

/// What a session is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    /// Open, no turn running.
    #[default]
    Idle,
    /// A turn is running.
    Working,
    /// A turn waits for a person (an approval or a question).
    WaitingForApproval,
    /// Not open in this host (stored only, or closed).
    Ended,
}

/// A session in a list or on open.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The parent session of a sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// The title, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The working directory.
    pub cwd: String,
    /// Created, ms since the Unix epoch.
    pub created_ms: i64,
    /// Last event, ms since the Unix epoch.
    pub updated_ms: i64,
    /// What it is doing.
    pub state: SessionState,
    /// Turns so far.
    pub turns: u64,
    /// The last committed sequence number (`None`: an empty log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// The settings in force.
    #[serde(default)]
    pub settings: SessionSettings,
    /// Tokens and cost so far, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The part of `usage` spent by sub-agents (any depth), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_usage: Option<Usage>,
    /// The first prompt a person wrote, when the log was read (pickers show it when there is
    /// no title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
    /// How the last turn ended, when the log was read and a turn ended (`None` with `turns`
    /// above zero: a turn is open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn_end: Option<crate::event::TurnEndReason>,
    /// Where the session matched a list's full-text query (`SessionQuery::q`, through the
    /// host's catalog): its best hit. Absent otherwise (and for a title or id match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<SearchMatch>,
}

/// A session's best full-text hit ([`SessionSummary::matched`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatch {
    /// A short excerpt around the match, on one line: plain text (a client escapes it).
    pub snippet: String,
    /// Byte ranges `[start, end)` of `snippet` (UTF-8) that matched the query.
    pub highlights: Vec<(u64, u64)>,
    /// The turn of the matching event (0 before the first turn).
    pub turn: u64,
    /// The seq of the matching event.
    pub seq: u64,
}

/// Options of a new or reopened session; each `None` keeps the composition's default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionOptions {
    /// The working directory (a new session; a resumed one keeps its own unless given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Route, model, effort, sandbox mode, approval policy.
    #[serde(default, flatten)]
    pub settings: SessionSettings,
}

/// Opens a session: create a new one, resume a stored one, or fork one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum OpenSession {
    /// A new session.
    #[serde(rename_all = "camelCase")]
    Create {
        /// An exact id (created if new); `None` for a fresh one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        /// Options.
        #[serde(default, flatten)]
        options: SessionOptions,
        /// A first prompt, submitted at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
    },
    /// A stored session, continued (crash repair runs first).
    #[serde(rename_all = "camelCase")]
    Resume {
        /// The session.
        session_id: String,
        /// Options.
        #[serde(default, flatten)]
        options: SessionOptions,
    },
    /// A new session seeded with another's completed turns.
    #[serde(rename_all = "camelCase")]
    Fork {
        /// The session forked.
        session_id: String,
        /// Keep the turns before this one (1-based); `None`: every completed turn.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before_turn: Option<u64>,
        /// Options.
        #[serde(default, flatten)]
        options: SessionOptions,
    },
}

/// Filters of a session list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionQuery {
    /// Only sessions of this working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// At most this many (newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Full-text query (when the host has a catalog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
}
