//! The sub-agent seam of dsh: the [`Subagents`] kernel service (run, start, list, message and
//! interrupt children), a delegation's request and outcome, the records children leave in the
//! session log (`subagent/descriptor`, `subagent/catalog`, `subagent/usage`), the
//! `subagent/start` / `subagent/end` notifications front ends observe ([`events`]), and the
//! seam's error. The in-process spawn/fork provider is `dsh-subagent`.

mod error;
pub mod events;
mod outcome;
pub mod texts;

pub use error::SubagentError;
pub use outcome::{
    Capabilities, ChildInfo, ChildStatus, StopReason, SubagentCatalog, SubagentDescriptor,
    SubagentMode, SubagentOutcome, SubagentRequest, SubagentUsage, ToolFilterSpec,
};

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
