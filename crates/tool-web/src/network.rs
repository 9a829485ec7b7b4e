//! The sandbox's network policy over the web tools.
//!
//! `web_fetch` and `web_search` reach the network from the harness itself, not from a confined
//! command, so no sandbox backend can stop them: they ask the `sandbox` service for the call's
//! policy (an approved escalation, else the session's `sandbox/mode`, else the configured mode
//! and network) and refuse when it has no network. The plugin checks this first on
//! `tools/pre-execute` (before any approval question, which would be pointless), and each tool
//! checks again when it runs.

use std::path::Path;
use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, HookOptions, Next};
use dsh_sandbox::{NetworkAccess, Sandbox, SandboxMode};
use dsh_tools::{CallInfo, PreDecision, ToolContext, ToolError, ToolErrorCode, ToolsPreExecute};

/// The session's sandbox policy has no network access: the call was not made.
pub const WEB_NETWORK_DISABLED: ToolErrorCode = ToolErrorCode::tool_defined("WEB_NETWORK_DISABLED");

/// Where the `sandbox` service is looked up at call time (softly: with none mounted nothing is
/// confined, so the network is allowed, as for every other consumer of the seam).
#[derive(Clone, Default)]
pub(crate) struct NetworkPolicy {
    lookup: Option<Ctx>,
}

impl std::fmt::Debug for NetworkPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkPolicy")
            .field("sandbox_lookup", &self.lookup.is_some())
            .finish()
    }
}

impl NetworkPolicy {
    /// Consult the `sandbox` service found through `ctx`.
    pub(crate) fn from_ctx(ctx: Ctx) -> Self {
        Self { lookup: Some(ctx) }
    }

    /// Why `tool` may not reach the network in this call, if it may not.
    pub(crate) fn refusal(
        &self,
        tool: &str,
        session_id: &str,
        cwd: &Path,
        call_id: &str,
    ) -> Option<String> {
        let sandbox: Arc<dyn Sandbox> = self.lookup.as_ref()?.get::<dyn Sandbox>()?;
        let policy = sandbox.policy(session_id, cwd, Some(call_id));
        (!policy.network_allowed()).then(|| refusal_text(tool, policy.mode))
    }

    /// [`NetworkPolicy::refusal`] as the tool's error.
    pub(crate) fn check(&self, tool: &str, ctx: &ToolContext) -> Result<(), ToolError> {
        match self.refusal(tool, ctx.session_id(), ctx.cwd(), ctx.call_id()) {
            Some(text) => Err(ToolError::new(WEB_NETWORK_DISABLED, text)),
            None => Ok(()),
        }
    }
}

/// The refusal the model sees: the setting that forbids it and how the user can allow it.
pub fn refusal_text(tool: &str, mode: SandboxMode) -> String {
    format!(
        "refused: network access is off in this session's sandbox (mode {mode}, network {off}), \
         so {tool} was not run. The user can allow it by starting dsh with `--network on` \
         (config: `network: \"on\"` in the `sandbox` row) or `--sandbox {full}`.",
        off = NetworkAccess::Off,
        full = SandboxMode::DangerFullAccess,
    )
}

/// Puts the network check of `names` first on `tools/pre-execute`: a call the policy refuses
/// is denied before any approval question is asked.
pub(crate) fn hook(ctx: &Ctx, names: Vec<String>, policy: NetworkPolicy) -> Result<(), BoxError> {
    let names: Arc<[String]> = names.into();
    ctx.hook_with::<ToolsPreExecute, _, _>(
        HookOptions { prepend: true },
        move |call: Arc<CallInfo>, next: Next<ToolsPreExecute>| {
            let names = names.clone();
            let policy = policy.clone();
            async move {
                if names.contains(&call.name)
                    && let Some(reason) =
                        policy.refusal(&call.name, &call.session_id, &call.cwd, &call.call_id)
                {
                    return PreDecision::Deny { reason };
                }
                next.run(call).await
            }
        },
    )?;
    Ok(())
}
