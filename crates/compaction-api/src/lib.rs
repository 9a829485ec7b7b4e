//! The compaction seam of dsh: the [`Compaction`] service front ends call (`/compact`), the
//! [`ToolResultPruner`] service compaction asks first, their outcome and error, the token
//! estimate both use ([`TokenMeter`]), and the `compaction/*` events of the session log with
//! their one-line descriptions ([`events`]). The implementation (`compaction-basic`,
//! `tool-result-pruner`) is `dsh-compaction`.

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_kernel::{CancellationToken, Service};
use dsh_session::{Session, SessionError};
use futures::future::BoxFuture;

pub mod events;
pub mod meter;

pub use meter::{Measure, TokenMeter};

/// Why a compaction did not replace anything (upstream `ManualCompactionError.code`).
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// Another compaction of this agent is running, or (manual) the agent is not idle.
    #[error("compaction is busy: {0}")]
    Busy(String),
    /// Cancelled; the history is unchanged.
    #[error("compaction cancelled; the history is unchanged")]
    Cancelled,
    /// The history changed while the summary was made; nothing was replaced.
    #[error("the history changed during the compaction; it is unchanged")]
    Changed,
    /// The summary call failed or produced an unusable summary; nothing was replaced.
    #[error("summary failed: {0}; the history is unchanged")]
    Summary(String),
    /// No route to summarise with.
    #[error(
        "no model to summarise with: no request was sent yet and no summarizationProvider/Model is configured"
    )]
    NoTarget,
    /// The log refused the bracket or its replacement.
    #[error("could not commit the compaction: {0}")]
    Commit(#[from] SessionError),
    /// An event payload could not be encoded.
    #[error("could not encode a compaction event: {0}")]
    Encode(#[from] serde_json::Error),
}

impl CompactionError {
    /// The upstream code: `busy | cancelled | changed | summary | commit`.
    pub fn code(&self) -> &'static str {
        match self {
            CompactionError::Busy(_) => "busy",
            CompactionError::Cancelled => "cancelled",
            CompactionError::Changed => "changed",
            CompactionError::Summary(_) | CompactionError::NoTarget => "summary",
            CompactionError::Commit(_) | CompactionError::Encode(_) => "commit",
        }
    }
}

/// A landed compaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionOutcome {
    /// The bracket's id.
    pub compaction_id: String,
    /// Seq of `compaction/summary`.
    pub summary_seq: u64,
    /// Seq of the replacement `user/message`.
    pub replacement_seq: u64,
    /// How many history nodes the checkpoint replaced.
    pub shadowed_nodes: usize,
    /// Their estimated tokens.
    pub shadowed_token_count: u64,
    /// The meter before.
    pub tokens_before: u64,
    /// The meter after.
    pub tokens_after: u64,
}

impl CompactionOutcome {
    /// The `/compact` result line.
    pub fn describe(&self) -> String {
        format!(
            "Compacted {} history items (~{} tokens).",
            self.shadowed_nodes, self.shadowed_token_count
        )
    }
}

/// The `/compact` line when nothing was compactable.
pub const NOTHING_TO_COMPACT: &str = "No compactable history yet.";

/// The tool-result pruner service (plugin `tool-result-pruner`).
pub trait ToolResultPruner: Send + Sync + 'static {
    /// Prunes every old tool result over the threshold; returns how many were replaced.
    fn prune(&self, session: &Session, meter: &TokenMeter) -> Result<usize, SessionError>;
    /// Estimated tokens pruning would save now (nothing is written).
    fn savings(&self, session: &Session, meter: &TokenMeter) -> u64;
}

impl Service for dyn ToolResultPruner {
    const NAME: &'static str = "toolResultPruner";
}

/// The compaction seam front ends call (`/compact` in the TUI).
pub trait Compaction: Send + Sync + 'static {
    /// Compacts an idle agent's history now (retain 0, `turn: null`), then flushes.
    /// `Ok(None)`: nothing compactable, nothing written.
    fn compact_now(
        &self,
        agent: Arc<dyn Agent>,
        cancel: CancellationToken,
        source_command_id: Option<String>,
    ) -> BoxFuture<'static, Result<Option<CompactionOutcome>, CompactionError>>;
}

impl Service for dyn Compaction {
    const NAME: &'static str = "compaction";
}
