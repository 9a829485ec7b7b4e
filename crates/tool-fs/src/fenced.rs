//! The sandbox fence of `write` and `edit`: the policy of the call, looked up softly from the
//! `sandbox` service at call time, and the fenced atomic write. A session with a
//! [`FileBackend`](crate::FileBackend) set has its `read`/`write`/`edit` served by it (the
//! policy still checked by dsh first).

use std::path::Path;
use std::sync::Arc;

use dsh_kernel::Ctx;
use dsh_sandbox::fence::{FenceError, write_atomically};
use dsh_sandbox::{Sandbox, SandboxPolicy};
use dsh_tools::{Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::backend::FileBackends;
use crate::paths::{io_error, resolve_path};
use crate::plugin::FsTool;
use crate::{edit, read, write};

/// Writes `bytes` to `target` (the resolved target of `path`), fenced by `policy` when given.
pub(crate) fn fenced_write(
    policy: Option<&SandboxPolicy>,
    verb: &str,
    path: &Path,
    target: &Path,
    bytes: &[u8],
) -> Result<(), ToolError> {
    write_atomically(policy, target, bytes).map_err(|e| match e {
        FenceError::Sandbox(e) => e.into(),
        FenceError::Io(e) => io_error(verb, path, &e),
    })
}

/// An fs tool as registered by the plugin: `write` and `edit` ask the `sandbox` service (when
/// one is mounted) for the call's policy and are fenced by it; the others delegate as is.
pub(crate) struct SandboxedFsTool {
    pub(crate) tool: FsTool,
    pub(crate) ctx: Ctx,
    /// Sessions whose `read`/`write`/`edit` go through another backend than the local disk.
    pub(crate) backends: Arc<FileBackends>,
}

impl SandboxedFsTool {
    fn policy(&self, ctx: &ToolContext) -> Option<SandboxPolicy> {
        let sandbox: Arc<dyn Sandbox> = self.ctx.get::<dyn Sandbox>()?;
        Some(sandbox.policy(ctx.session_id(), ctx.cwd(), Some(ctx.call_id())))
    }
}

impl Tool for SandboxedFsTool {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn parameters(&self) -> &Value {
        self.tool.parameters()
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        if matches!(self.tool, FsTool::Read | FsTool::Write | FsTool::Edit)
            && let Some(raw) = args.get("file_path").and_then(Value::as_str)
            && let Some(backend) =
                self.backends
                    .for_path(ctx.session_id(), ctx.cwd(), &resolve_path(ctx.cwd(), raw))
        {
            let policy = match self.tool {
                FsTool::Read => None,
                _ => self.policy(&ctx),
            };
            let tool = self.tool;
            return Box::pin(async move {
                match tool {
                    FsTool::Read => read::run_via(ctx, args, &*backend).await,
                    FsTool::Write => write::run_via(ctx, args, policy, &*backend).await,
                    _ => edit::run_via(ctx, args, policy, &*backend).await,
                }
            });
        }
        match self.tool {
            FsTool::Write => {
                let policy = self.policy(&ctx);
                Box::pin(write::run(ctx, args, policy))
            }
            FsTool::Edit => {
                let policy = self.policy(&ctx);
                Box::pin(edit::run(ctx, args, policy))
            }
            _ => self.tool.execute(ctx, args),
        }
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        self.tool.timeout()
    }

    fn concurrency(&self, args: &Value) -> Concurrency {
        self.tool.concurrency(args)
    }

    fn read_only(&self) -> bool {
        self.tool.read_only()
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        self.tool.display(call)
    }
}
