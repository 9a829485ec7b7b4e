//! Lines of `dsh sessions show` for the sandbox and approval events.

use dsh_approval::events::{ApprovalAsked, ApprovalDecided, DecidedOutcome};
use dsh_sandbox::SandboxModeEvent;
use dsh_session::Event;

/// The transcript line of a `sandbox/mode`, `approval/asked` or `approval/decided` event.
pub(crate) fn line(e: &Event) -> Option<String> {
    if let Some(Ok(m)) = e.plugin::<SandboxModeEvent>() {
        return Some(format!("sandbox: {}", m.mode));
    }
    if let Some(Ok(a)) = e.plugin::<ApprovalAsked>() {
        let reason = a.reason.map(|r| format!(": {r}")).unwrap_or_default();
        return Some(format!(
            "approval asked ({}) for {}{reason}",
            a.id, a.tool_name
        ));
    }
    if let Some(Ok(d)) = e.plugin::<ApprovalDecided>() {
        let outcome = match d.outcome {
            DecidedOutcome::AllowedOnce if d.always => "allowed always",
            DecidedOutcome::AllowedOnce => "allowed once",
            DecidedOutcome::Rejected => "rejected",
            DecidedOutcome::Cancelled => "cancelled",
            DecidedOutcome::Unavailable => "unavailable (no one to ask): denied",
        };
        let reason = d.reason.map(|r| format!(": {r}")).unwrap_or_default();
        return Some(format!("approval decided ({}): {outcome}{reason}", d.id));
    }
    None
}
