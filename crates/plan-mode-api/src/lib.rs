//! The plan-mode seam of dsh: the [`PlanMode`] kernel service (is a session in plan mode; turn
//! it on or off), its acceptance policy ([`PlanAccept`]) and errors. The `plan/mode` event itself
//! is session vocabulary (`dsh_session::feature::PlanModeChange`). The implementation (the
//! guard, the `exit_plan_mode` tool) is `dsh-plan-mode`.

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_kernel::Service;
use serde::Deserialize;

/// The `source.kind` of the messages plan mode queues for the model.
pub const SOURCE_KIND: &str = "plan-mode";

/// The approval request id of a plan submitted with `exit_plan_mode` for review (call
/// `call_id`): a host tells a plan review from an ordinary approval by [`is_review_request`]
/// (the protocol's `ApprovalPurpose::PlanReview`).
pub fn review_request_id(call_id: &str) -> String {
    format!("plan-{call_id}")
}

/// Whether an approval request id is a plan review's ([`review_request_id`]).
pub fn is_review_request(request_id: &str) -> bool {
    request_id.starts_with("plan-")
}

/// What happens to a plan submitted with `exit_plan_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PlanAccept {
    /// Ask the user through the approval seam; nobody to ask → as `stop`.
    #[default]
    Ask,
    /// Accept it: plan mode ends and the agent carries the plan out.
    Accept,
    /// Record it for review: plan mode stays on and the agent is told to end its turn.
    Stop,
}

/// Errors of the plan-mode service.
#[derive(Debug, thiserror::Error)]
pub enum PlanModeError {
    /// The change could not be logged.
    #[error("cannot record the plan-mode change: {0}")]
    Session(#[from] dsh_session::SessionError),
    /// The change could not be encoded.
    #[error("cannot encode the plan-mode change: {0}")]
    Encode(#[from] serde_json::Error),
    /// The notice could not be queued for the model.
    #[error("cannot tell the agent: {0}")]
    Agent(#[from] dsh_agent::AgentError),
}

/// Plan mode per session, as a kernel service.
pub trait PlanMode: Send + Sync + 'static {
    /// Whether `session_id` is in plan mode.
    fn is_active(&self, session_id: &str) -> bool;

    /// Turns plan mode on or off for `agent`; logs `plan/mode` and, with `notify`, queues a
    /// one-line notice for the model's next request. Returns whether anything changed.
    fn set(
        &self,
        agent: &Arc<dyn Agent>,
        active: bool,
        notify: bool,
    ) -> Result<bool, PlanModeError>;

    /// The configured acceptance policy.
    fn accept_policy(&self) -> PlanAccept;
}

impl Service for dyn PlanMode {
    const NAME: &'static str = "plan-mode";
}
