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
mod error;
pub mod events;
mod inprocess;
mod outcome;
mod plugin;
mod repair;
pub mod texts;
mod usage;

pub use error::SubagentError;
pub use inprocess::InProcessSubagents;
pub use outcome::{
    Capabilities, ChildInfo, ChildStatus, StopReason, SubagentCatalog, SubagentDescriptor,
    SubagentMode, SubagentOutcome, SubagentRequest, SubagentUsage, ToolFilterSpec,
};
pub use plugin::{SubagentsConfig, SubagentsPlugin};
pub use repair::repair_children;
pub use usage::{UsageShare, add_usage, session_usage};

use futures::future::BoxFuture;

/// The sub-agent service (kernel name `subagents`).
pub trait Subagents: Send + Sync + 'static {
    /// Starts a child of `request.parent_id` and awaits its outcome. The child is cancelled
    /// (with its tool processes) when `request.cancel` fires; a failing child is an outcome
    /// with a non-completed [`StopReason`], never a panic. With `request.continuable` the
    /// child stays resumable after this run: later messages continue it in the background.
    fn run(
        &self,
        request: SubagentRequest,
    ) -> BoxFuture<'static, Result<SubagentOutcome, SubagentError>>;

    /// Starts a continuable child in the background and returns its id once it is running;
    /// its direct parent gets a settlement notice (`Background subagent <id> …`) whenever
    /// its work ends.
    fn start(&self, request: SubagentRequest) -> BoxFuture<'static, Result<String, SubagentError>>;

    /// The live children of `parent_id` (`descendants`: their children too, depth first).
    fn children(&self, parent_id: &str, descendants: bool) -> Vec<ChildInfo>;

    /// Delivers `text` from `caller_id` to `target_id`: a direct child gets it as its next
    /// turn (a continuable child with no live activation is resumed from its log); the
    /// caller's live parent gets it as a steer (or a new turn when idle). Returns the
    /// model-visible confirmation.
    fn send_message(
        &self,
        caller_id: &str,
        target_id: &str,
        text: &str,
    ) -> BoxFuture<'static, Result<String, SubagentError>>;

    /// Cancels child `child_id` if `caller_id` is one of its live ancestors. `Ok(false)` when
    /// no such child is live (a no-op).
    fn interrupt(&self, caller_id: &str, child_id: &str) -> Result<bool, SubagentError>;

    /// Continuable children of `parent_id` with work in progress (a running turn or waiting
    /// messages): a front end about to end waits for them or says it did not.
    fn busy_children(&self, parent_id: &str) -> usize;

    /// Resolves when `parent_id` has no busy continuable child.
    fn when_children_settled(&self, parent_id: &str) -> BoxFuture<'static, ()>;
}

impl dsh_kernel::Service for dyn Subagents {
    const NAME: &'static str = "subagents";
}
