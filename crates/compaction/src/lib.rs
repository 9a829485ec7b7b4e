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

pub mod compact;
pub mod config;
pub mod events;
pub mod meter;
pub mod plugin;
pub mod prune;
pub mod select;
pub mod summary;

pub use compact::{CompactionError, CompactionOutcome, NOTHING_TO_COMPACT};
pub use config::BasicConfig;
pub use meter::{Measure, TokenMeter};
pub use plugin::{Compaction, CompactionBasicPlugin, ToolResultPruner, ToolResultPrunerPlugin};
pub use prune::PrunerConfig;
