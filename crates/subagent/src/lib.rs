//! `dsh-subagent`: the model delegates work to child agents.
//!
//! - The **seam**: the [`Subagents`] service (kernel name `subagents`): [`Subagents::run`] starts
//!   a child for a [`SubagentRequest`] and awaits its [`SubagentOutcome`]; [`Subagents::children`]
//!   lists the live children of an agent; [`Subagents::interrupt`] stops one.
//! - The **in-process provider** ([`InProcessSubagents`], mounted by [`SubagentsPlugin`]): a
//!   child is an ordinary agent created through the `agents` service on an ordinary session whose
//!   header says `parentSession`, `origin: "subagent"` and `delegationDepth` = parent + 1.
//!   [`SubagentMode::Spawn`] starts from an empty history; [`SubagentMode::Fork`] seeds the child
//!   with the parent's log up to its last `turn/end` (a one-time snapshot), so the child's first
//!   request starts with the bytes of the parent's shared prefix and is billed as cache hits.
//! - **Limits**: depth (default 3; [`texts::depth_exceeded`]) and concurrent children per parent
//!   (default 8; further calls wait for a slot).
//! - **Delegated policy**: the child inherits the parent's sandbox mode, logged in the child as
//!   `sandbox/mode {source: "delegation"}`.
//!
//! - **Continuable children** ([`Subagents::start`], or [`Subagents::run`] with
//!   `continuable`): one durable session that every later `send_message` continues with a new
//!   turn, cold-resumed from its log when it has no live activation; the parent gets a
//!   settlement notice when the child's work ends, and the child has the `report` tool.
//! - **Capabilities** ([`Capabilities`]): persona, tool filter, structured output
//!   (`structured_output` tool validated against the `outputSchema`).
//! - **Usage**: every run logs `dsh/subagent-usage` in the parent, so [`session_usage`] folds a
//!   session's own and its children's tokens (failed runs too).
//! - **Crash repair**: when a parent is resumed, its stored descendants that a crash left inside
//!   a turn are repaired (opened once and closed) before the parent's first step.
//!
//! Nothing here depends on the agent loop: any driver behind `dsh_agent::Agents` works.

pub mod child_tools;
mod continuable;
mod inprocess;
mod plugin;
mod repair;
mod usage;

/// The seam's vocabulary, owned by `dsh-subagent-api` (re-exported for the composition root).
pub use dsh_subagent_api::{
    Capabilities, ChildInfo, ChildStatus, StopReason, SubagentCatalog, SubagentDescriptor,
    SubagentError, SubagentMode, SubagentOutcome, SubagentRequest, SubagentUsage, Subagents,
    ToolFilterSpec, events, texts,
};
pub use inprocess::InProcessSubagents;
pub use plugin::{SubagentsConfig, SubagentsPlugin};
pub use repair::repair_children;
pub use usage::{UsageShare, add_usage, session_usage};
