//! A session's own sandbox mode and approval policy, chosen by the client that opens it
//! (`SessionSettings::sandbox` and `approval_policy` of [`dsh_protocol::OpenSession`]).
//!
//! They are logged in the session before its agent starts, as `sandbox/mode` and
//! `approval/policy` with `source: "session"`. The sandbox and approval plugins read them at
//! session start and apply them to this session alone; a later start (a resume, in this
//! process or another) keeps them instead of the composition's defaults. Sessions opened
//! without them get the composition's configuration, as before.

use std::sync::Arc;

use dsh_agent::{Agent, SetupFn};
use dsh_approval_api::events::POLICY_SOURCE_SESSION;
use dsh_kernel::{BoxError, Ctx};
use dsh_protocol::{ApprovalPolicy, ErrorCode, ProtocolError, SandboxMode, SessionSettings};
use dsh_sandbox::{SOURCE_SESSION, Sandbox, SandboxModeEvent};
use dsh_session::feature::ApprovalPolicyEvent;
use dsh_session::wire::ApprovalPolicyName;
use dsh_session::{NewEvent, Session};
use dsh_tools::Approvals;

/// The sandbox mode and approval policy a client chose for one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Chosen {
    sandbox: Option<SandboxMode>,
    approval: Option<ApprovalPolicy>,
}

impl Chosen {
    /// What `settings` choose, refused when this composition cannot apply it (no sandbox, or
    /// no approval policies, mounted): a mode or policy logged but not enforced would lie.
    pub(crate) fn of(root: &Ctx, settings: &SessionSettings) -> Result<Self, ProtocolError> {
        let chosen = Chosen {
            sandbox: settings.sandbox,
            approval: settings.approval_policy,
        };
        if let Some(mode) = chosen.sandbox
            && root.get::<dyn Sandbox>().is_none()
        {
            return Err(ProtocolError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "sandbox: this host mounts no sandbox, so `{}` cannot be enforced (leave \
                     `sandbox` out)",
                    mode.as_str()
                ),
            ));
        }
        if let Some(policy) = chosen.approval
            && root.get::<dyn Approvals>().is_none()
        {
            return Err(ProtocolError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "approvalPolicy: this host mounts no approval policies, so `{}` cannot be \
                     applied (leave `approvalPolicy` out)",
                    policy.as_str()
                ),
            ));
        }
        Ok(chosen)
    }

    /// Whether nothing was chosen.
    pub(crate) fn is_empty(&self) -> bool {
        self.sandbox.is_none() && self.approval.is_none()
    }

    /// The agent setup that logs the choices (before the agent starts, so the plugins' session
    /// start sees them); `None` when nothing was chosen.
    pub(crate) fn setup(self) -> Option<SetupFn> {
        if self.is_empty() {
            return None;
        }
        Some(Box::new(move |_scope: Ctx, agent: Arc<dyn Agent>| {
            Box::pin(async move { self.log(&agent.session()) })
        }))
    }

    /// Appends the pinned events the log does not already end with.
    fn log(self, session: &Session) -> Result<(), BoxError> {
        if let Some(mode) = self.sandbox {
            let event = SandboxModeEvent {
                mode: engine_mode(mode),
                source: Some(SOURCE_SESSION.to_owned()),
            };
            let last = session
                .events()
                .iter()
                .rev()
                .find_map(|e| e.plugin::<SandboxModeEvent>().and_then(Result::ok));
            if last.as_ref() != Some(&event) {
                session.append(NewEvent::plugin(&event)?)?;
            }
        }
        if let Some(policy) = self.approval {
            let event = ApprovalPolicyEvent {
                policy: wire_policy(policy),
                source: Some(POLICY_SOURCE_SESSION.to_owned()),
            };
            let last = session
                .events()
                .iter()
                .rev()
                .find_map(|e| e.plugin::<ApprovalPolicyEvent>().and_then(Result::ok));
            if last.as_ref() != Some(&event) {
                session.append(NewEvent::plugin(&event)?)?;
            }
        }
        Ok(())
    }

    /// Reopening a session this host already serves cannot change its mode or policy (its
    /// turns may be running under them): a different choice is refused, the same one or none
    /// is fine.
    pub(crate) fn check_open(
        &self,
        id: &str,
        current: &SessionSettings,
    ) -> Result<(), ProtocolError> {
        if let Some(mode) = self.sandbox
            && current.sandbox != Some(mode)
        {
            return Err(ProtocolError::new(
                ErrorCode::Conflict,
                format!(
                    "sandbox: session `{id}` is open here with sandbox `{}`; it cannot change to \
                     `{}` while it is open",
                    current.sandbox.map_or("(none)", SandboxMode::as_str),
                    mode.as_str()
                ),
            ));
        }
        if let Some(policy) = self.approval
            && current.approval_policy != Some(policy)
        {
            return Err(ProtocolError::new(
                ErrorCode::Conflict,
                format!(
                    "approvalPolicy: session `{id}` is open here with approval policy `{}`; it \
                     cannot change to `{}` while it is open",
                    current
                        .approval_policy
                        .map_or("(none)", ApprovalPolicy::as_str),
                    policy.as_str()
                ),
            ));
        }
        Ok(())
    }
}

/// The sandbox seam's mode of a protocol mode.
fn engine_mode(mode: SandboxMode) -> dsh_sandbox::SandboxMode {
    match mode {
        SandboxMode::ReadOnly => dsh_sandbox::SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite => dsh_sandbox::SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess => dsh_sandbox::SandboxMode::DangerFullAccess,
    }
}

/// The logged name of a protocol approval policy.
fn wire_policy(policy: ApprovalPolicy) -> ApprovalPolicyName {
    match policy {
        ApprovalPolicy::Untrusted => ApprovalPolicyName::Untrusted,
        ApprovalPolicy::OnRequest => ApprovalPolicyName::OnRequest,
        ApprovalPolicy::OnFailure => ApprovalPolicyName::OnFailure,
        ApprovalPolicy::Never => ApprovalPolicyName::Never,
    }
}
