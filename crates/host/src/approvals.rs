//! Approval questions: the host answers the `approval-answerer` seam by asking its clients.
//!
//! The approval plugin logs `approval/asked` before it asks, so every subscriber sees the
//! request as a projected event; the host keeps the open question until the first client
//! answers ([`dsh_protocol::Op::AnswerApproval`]), the turn ends, or the plugin gives up. A
//! question asked without `approval/asked` (plan mode's) is resolved to the clients here.

use std::collections::HashMap;
use std::sync::Weak;

use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest as AskedRequest};
use dsh_protocol::{
    ApprovalDecision, ApprovalOutcome, ApprovalPurpose, ApprovalRequest, ErrorCode, EventMsg,
    ProtocolError, SandboxMode,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::Inner;

/// Open questions by request id.
#[derive(Default)]
pub(crate) struct Pending {
    open: Mutex<HashMap<String, oneshot::Sender<ApprovalAnswer>>>,
}

impl Pending {
    /// Answers `request_id`; the first answer wins.
    pub fn answer(
        &self,
        request_id: &str,
        decision: ApprovalDecision,
    ) -> Result<(), ProtocolError> {
        let reply = self.open.lock().remove(request_id).ok_or_else(|| {
            ProtocolError::new(
                ErrorCode::UnknownRequest,
                format!("no open approval request `{request_id}` (answered already?)"),
            )
        })?;
        let answer = match decision {
            ApprovalDecision::AllowOnce => ApprovalAnswer::AllowOnce,
            ApprovalDecision::AllowAlways => ApprovalAnswer::AllowAlways,
            ApprovalDecision::Deny { reason } => ApprovalAnswer::Deny { reason },
        };
        // The asker may have given up in between: then nobody waits for the answer.
        let _ = reply.send(answer);
        Ok(())
    }

    fn remove(&self, request_id: &str) {
        self.open.lock().remove(request_id);
    }
}

/// The host's `approval-answerer`.
pub struct HostAnswerer {
    inner: Weak<Inner>,
}

impl std::fmt::Debug for HostAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostAnswerer").finish_non_exhaustive()
    }
}

impl HostAnswerer {
    pub(crate) fn new(inner: Weak<Inner>) -> Self {
        HostAnswerer { inner }
    }
}

/// Closes a question when its asker stops waiting, answered or not (an interrupted turn drops
/// the wait).
struct Open {
    inner: Weak<Inner>,
    session_id: String,
    request_id: String,
    call_id: String,
    /// Asked without `approval/asked` in the log (plan mode's accept question): no
    /// `approval/decided` will be projected, so the close itself tells the clients.
    unlogged: bool,
    /// The answer, once one came; none when the asker stopped waiting first.
    answer: Option<ApprovalAnswer>,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.approvals.remove(&self.request_id);
            if let Some(hub) = inner.hubs.lock().get(&self.session_id) {
                if self.unlogged {
                    let (outcome, reason) = match self.answer.take() {
                        Some(ApprovalAnswer::AllowOnce) => (ApprovalOutcome::AllowedOnce, None),
                        Some(ApprovalAnswer::AllowAlways) => (ApprovalOutcome::AllowedAlways, None),
                        Some(ApprovalAnswer::Deny { reason }) => (ApprovalOutcome::Denied, reason),
                        Some(ApprovalAnswer::Cancelled) | None => {
                            (ApprovalOutcome::Cancelled, None)
                        }
                    };
                    hub.live_event(EventMsg::ApprovalResolved {
                        request_id: self.request_id.clone(),
                        call_id: Some(self.call_id.clone()),
                        outcome,
                        reason,
                    });
                }
                hub.approval_closed(&self.request_id);
            }
        }
    }
}

/// What a request asks: plan mode's review of a submitted plan, or a tool call.
pub(crate) fn purpose_of(request_id: &str) -> ApprovalPurpose {
    if dsh_plan_mode_api::is_review_request(request_id) {
        ApprovalPurpose::PlanReview
    } else {
        ApprovalPurpose::ToolCall
    }
}

fn escalation(m: dsh_sandbox::SandboxMode) -> SandboxMode {
    match m {
        dsh_sandbox::SandboxMode::ReadOnly => SandboxMode::ReadOnly,
        dsh_sandbox::SandboxMode::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        dsh_sandbox::SandboxMode::DangerFullAccess => SandboxMode::DangerFullAccess,
    }
}

impl ApprovalAnswerer for HostAnswerer {
    fn answer<'a>(&'a self, request: &'a AskedRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let Some(inner) = self.inner.upgrade() else {
                return ApprovalAnswer::Cancelled;
            };
            let Some(hub) = inner.hubs.lock().get(&request.session_id).cloned() else {
                // Nobody serves this session: nobody can answer.
                return ApprovalAnswer::Cancelled;
            };
            let display = hub
                .state
                .lock()
                .projector
                .call_display(&request.call_id, &request.tool_name);
            let unlogged = !hub.state.lock().projector.asked.contains(&request.id);
            let (tx, rx) = oneshot::channel();
            inner.approvals.open.lock().insert(request.id.clone(), tx);
            hub.approval_opened(ApprovalRequest {
                request_id: request.id.clone(),
                session_id: request.session_id.clone(),
                call_id: request.call_id.clone(),
                tool_name: request.tool_name.clone(),
                display,
                reason: request.reason.clone(),
                escalation: request.escalation.map(escalation),
                purpose: purpose_of(&request.id),
            });
            let mut open = Open {
                inner: self.inner.clone(),
                session_id: request.session_id.clone(),
                request_id: request.id.clone(),
                call_id: request.call_id.clone(),
                unlogged,
                answer: None,
            };
            drop(inner);
            drop(hub);
            let answer = rx.await.unwrap_or(ApprovalAnswer::Cancelled);
            open.answer = Some(answer.clone());
            answer
        })
    }
}
