//! The five fs tools as [`Tool`]s, and the plugin that registers them.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_tools::{
    Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolOutput, Tools,
};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::backend::FileBackends;
use crate::fenced::SandboxedFsTool;
use crate::{edit, glob, grep, read, write};

/// One of the fs tools. Used directly (not through the plugin), `write` and `edit` are not
/// fenced by any sandbox policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsTool {
    /// `read`
    Read,
    /// `write`
    Write,
    /// `edit`
    Edit,
    /// `glob`
    Glob,
    /// `grep`
    Grep,
}

static SCHEMAS: LazyLock<[Value; 5]> = LazyLock::new(|| {
    [
        read::schema(),
        write::schema(),
        edit::schema(),
        glob::schema(),
        grep::schema(),
    ]
});

impl FsTool {
    /// All five, in catalog order.
    pub const ALL: [FsTool; 5] = [
        FsTool::Read,
        FsTool::Write,
        FsTool::Edit,
        FsTool::Glob,
        FsTool::Grep,
    ];

    fn index(self) -> usize {
        match self {
            FsTool::Read => 0,
            FsTool::Write => 1,
            FsTool::Edit => 2,
            FsTool::Glob => 3,
            FsTool::Grep => 4,
        }
    }
}

impl Tool for FsTool {
    fn name(&self) -> &str {
        ["read", "write", "edit", "glob", "grep"][self.index()]
    }

    fn description(&self) -> &str {
        match self {
            FsTool::Read => read::DESCRIPTION,
            FsTool::Write => write::DESCRIPTION,
            FsTool::Edit => edit::DESCRIPTION,
            FsTool::Glob => glob::DESCRIPTION,
            FsTool::Grep => grep::DESCRIPTION,
        }
    }

    fn parameters(&self) -> &Value {
        &SCHEMAS[self.index()]
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        match self {
            FsTool::Read => Box::pin(read::run(ctx, args)),
            FsTool::Write => Box::pin(write::run(ctx, args, None)),
            FsTool::Edit => Box::pin(edit::run(ctx, args, None)),
            FsTool::Glob => Box::pin(glob::run(ctx, args)),
            FsTool::Grep => Box::pin(grep::run(ctx, args)),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        match self {
            FsTool::Glob => Some(glob::TIMEOUT),
            FsTool::Grep => Some(grep::TIMEOUT),
            _ => None,
        }
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        match self {
            FsTool::Read => read::concurrency(),
            _ => Concurrency::Exclusive,
        }
    }

    fn read_only(&self) -> bool {
        matches!(self, FsTool::Read | FsTool::Glob | FsTool::Grep)
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::display(*self, call)
    }
}

/// Registers `read`, `write`, `edit`, `glob` and `grep` on the `Tools` service; `write` and
/// `edit` are fenced by the `sandbox` service's policy when one is mounted. Provides the
/// `fs-backends` service ([`FileBackends`]): a front end routes a session's `read`, `write` and
/// `edit` through its client's files with it.
#[derive(Debug)]
pub struct FsToolsPlugin;

impl Plugin for FsToolsPlugin {
    const NAME: &'static str = "tool-fs";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let backends = Arc::new(FileBackends::default());
        ctx.provide::<FileBackends>(backends.clone())?;
        for tool in FsTool::ALL {
            let fenced = SandboxedFsTool {
                tool,
                ctx: ctx.clone(),
                backends: backends.clone(),
            };
            tools.register(&ctx, Arc::new(fenced))?;
        }
        Ok(())
    }
}
