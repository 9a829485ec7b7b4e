//! The agent hooks (kernel `Hook` waterfalls), dispatched in the agent's scope.

use std::sync::Arc;

use dsh_kernel::{CancellationToken, Hook};
use dsh_llm::service::CallSettings;
use dsh_llm::{LlmFailure, Message};

use crate::Agent;

/// `agent/pre-step`: once per proposed step, before `step/start`.
pub struct PreStep;
impl Hook for PreStep {
    const NAME: &'static str = "agent/pre-step";
    type Input = PreStepInput;
    type Output = PreStepDecision;
}

/// What a pre-step listener sees.
pub struct PreStepInput {
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// Turn number.
    pub turn: u64,
    /// Proposed step number.
    pub step: u64,
    /// The accepted batch: claimed messages, then the runtime-context snapshot (if any).
    pub batch: Vec<Message>,
    /// Whether this step starts a new request series.
    pub starts_request_series: bool,
    /// The turn's cancellation token: a listener that waits (e.g. a compaction's model call)
    /// must stop when it fires.
    pub cancel: CancellationToken,
}

/// A pre-step decision.
#[derive(Debug)]
pub enum PreStepDecision {
    /// Run the step with this batch (an empty batch on the first step ends the turn
    /// `completed` without a model call).
    Enter {
        /// The batch to commit as `user/message`s.
        batch: Vec<Message>,
        /// Start a new request series.
        starts_request_series: bool,
    },
    /// Close the turn `blocked` without a step; the claimed batch stays consumed.
    Reject {
        /// Why (logged).
        reason: String,
    },
}

/// `agent/request`: may change provider, model, effort, max tokens and sampling (not messages).
pub struct AgentRequest;
impl Hook for AgentRequest {
    const NAME: &'static str = "agent/request";
    type Input = RequestInput;
    type Output = CallSettings;
}

/// What an `agent/request` listener sees.
pub struct RequestInput {
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// The proposed call settings (explicit values; `None` fields take adapter defaults).
    pub settings: CallSettings,
}

/// `agent/request-error`: an adapter failure of one attempt (thrown or `finish {error|aborted}`).
/// Return [`RequestErrorDecision::Retry`] without calling `next` to re-request in the same step.
pub struct AgentRequestError;
impl Hook for AgentRequestError {
    const NAME: &'static str = "agent/request-error";
    type Input = RequestErrorInput;
    type Output = RequestErrorDecision;
}

/// What an `agent/request-error` listener sees. Listeners may append events to
/// `agent.session()` (e.g. `llm/retry`) and must stop waiting when `cancel` fires.
pub struct RequestErrorInput {
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// 1 for the first attempt of the step, 2 for the first retry, ...
    pub attempt: u32,
    /// Provider route of the failed attempt.
    pub provider: String,
    /// Model of the failed attempt.
    pub model: String,
    /// The failure.
    pub failure: LlmFailure,
    /// The turn's cancellation token.
    pub cancel: CancellationToken,
}

/// An `agent/request-error` decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestErrorDecision {
    /// End the turn with the failure.
    Fail,
    /// Re-request in the same step.
    Retry,
}

/// `agent/turn-stopping`: the turn is about to close with nothing owed. A listener that steers
/// (`agent.steer(..)`) forces another step; the inbox is checked again afterwards.
pub struct TurnStopping;
impl Hook for TurnStopping {
    const NAME: &'static str = "agent/turn-stopping";
    type Input = TurnStoppingInput;
    type Output = ();
}

/// What an `agent/turn-stopping` listener sees.
pub struct TurnStoppingInput {
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// Turn number.
    pub turn: u64,
    /// The last step.
    pub step: u64,
}

/// `agent/turn-ending`: the turn is about to close, however it ends (completed, aborted,
/// blocked, failed, cut at max-tokens), just before `turn/end` is appended. Listeners may append
/// events to `agent.session()` (they land inside the turn); they must not steer. A listener
/// that waits should be short: the turn's end waits for it.
pub struct TurnEnding;
impl Hook for TurnEnding {
    const NAME: &'static str = "agent/turn-ending";
    type Input = TurnEndingInput;
    type Output = ();
}

/// What an `agent/turn-ending` listener sees.
pub struct TurnEndingInput {
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// Turn number.
    pub turn: u64,
    /// How the turn ends (what `turn/end` will record).
    pub reason: dsh_session::data::TurnEndReason,
}
