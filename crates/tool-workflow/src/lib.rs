//! The `workflow` tool of dsh (plugin `tool-workflow`): the model writes a JavaScript script
//! that orchestrates sub-agents (fan out, join, branch on their results) and returns a value,
//! which is the call's result, as the original 0.2.1 declares it: `script`, `meta {name,
//! description, whenToUse?, phases?}`, `args?`, `run_in_background?`.
//!
//! The script runs in an embedded QuickJS engine ([`engine`]) on a thread of its own, with no
//! file, process or network access of its own. Its API: `agent(opts)` / `fork(opts)` start a
//! sub-agent at once (an ordinary child session through the `subagents` seam: visible,
//! resumable, counted in cost); `await run`, `Promise.all`/`race`/`any`/`allSettled`, or the
//! blocking `wait(run)` and `waitAll(runs)` give `{seq, label, ok, childId, stopReason, text,
//! value, error}`; `tools.read`, `tools.grep`, `tools.glob` call the read-only tools through
//! the tools pipeline. A run is bounded by wall
//! time, heap, stack, number of sub-agents and their tokens ([`WorkflowConfig`]), ends when the
//! call is cancelled, and records `tool-workflow/*` events ([`events`]) in the calling session.

pub mod config;
pub mod display;
pub mod engine;
mod error;
pub mod events;
mod plugin;
pub mod run;
mod tool;

pub use config::WorkflowConfig;
pub use error::{ConfigError, HostError, WorkflowError};
pub use plugin::WorkflowToolPlugin;
pub use tool::{
    DESCRIPTION, JOBS_UNAVAILABLE, Meta, NAME, Phase, WorkflowArgs, WorkflowTool, started_text,
};
