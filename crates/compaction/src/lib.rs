//! `dsh-compaction`: long sessions keep going and stay cheap.
//!
//! - [`events`]: the typed `compaction/*` log events (`session-format.md` §14).
//! - [`meter`]: the token meter (provider usage first, a byte estimate for the unsent part).
//! - [`select`]: span selection (never splits a tool call from its result, never the head).
//! - [`prune`]: the tool-result pruner (head + marker + tail, content-only replacement).
//! - [`compact`]: one summary compaction as a durable bracket, with a cache-reusing request.
//! - [`plugin`]: plugins `tool-result-pruner` and `compaction-basic`, and the [`Compaction`]
//!   service front ends call for `/compact`.
//!
//! One crate for seam and backend until a second backend exists (ARCHITECTURE §1.5).

pub mod command;
pub mod compact;
pub mod config;
pub mod plugin;
pub mod prune;
pub mod select;
pub mod summary;

pub use command::CompactCommandPlugin;
pub use config::BasicConfig;
/// The seam's vocabulary, owned by `dsh-compaction-api` (re-exported for the composition root).
pub use dsh_compaction_api::{
    Compaction, CompactionError, CompactionOutcome, Measure, NOTHING_TO_COMPACT, TokenMeter,
    ToolResultPruner, events, meter,
};
pub use plugin::{CompactionBasicPlugin, ToolResultPrunerPlugin};
pub use prune::PrunerConfig;
