//! The `Tools` service and the plugins that provide and police it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Plugin, Registration, ScopeKey, Service, contain_sync};
use dsh_llm::ToolSpec;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::def::{Concurrency, Tool, ToolResult};
use crate::display::{DisplayInput, generic_display};
use crate::error::ToolError;
use crate::pipeline::run_call;
use crate::registry::{
    FilterEntry, GuardEntry, Registry, ToolEntry, ToolFilter, ToolsError, valid_tool_name,
};
use crate::schema;
use crate::vocab::{ExecuteInput, Guard, ToolRequest, ToolsExecute};
use dsh_protocol::ToolDisplay;

/// Arguments longer than this are not parsed to classify a call: it runs exclusive (its
/// arguments are parsed once, by the pipeline). The pipeline's [`schema::LARGE_ARGUMENTS`].
pub const MAX_CLASSIFIED_ARGUMENTS: usize = schema::LARGE_ARGUMENTS;

/// The tool registry and execution pipeline, as a kernel service.
///
/// Every registration takes the caller's `&Ctx` and is an effect of the caller's fiber: it is
/// removed when that fiber (or scope) unloads. A registration through a scope context
/// (`ctx.scope_key()` is `Some`) is visible only to that scope and shadows a global tool of the
/// same name.
pub trait Tools: Send + Sync + 'static {
    /// Register a tool (name and schema are checked first).
    fn register(&self, ctx: &Ctx, tool: Arc<dyn Tool>) -> Result<(), ToolsError>;

    /// Register a tool like [`Tools::register`], returning the registration so the caller
    /// can withdraw it before its fiber unloads (a plugin whose tool set changes at run time,
    /// such as an MCP server's).
    fn register_removable(
        &self,
        ctx: &Ctx,
        tool: Arc<dyn Tool>,
    ) -> Result<Registration, ToolsError>;

    /// Register a deny-only guard for calls in `ctx`'s scope (all scopes when global).
    fn guard(&self, ctx: &Ctx, guard: Arc<dyn Guard>) -> Result<(), ToolsError>;

    /// Restrict the tools visible in `ctx`'s scope (every scope when global).
    fn restrict(&self, ctx: &Ctx, filter: ToolFilter) -> Result<(), ToolsError>;

    /// The schemas visible to `scope`, in canonical order (configured order first, then
    /// lexicographic), exposing only name, description and parameters. Byte-stable.
    fn schemas(&self, scope: Option<&ScopeKey>) -> Vec<ToolSpec>;

    /// The tool `name` as `scope` sees it.
    fn lookup(&self, scope: Option<&ScopeKey>, name: &str) -> Option<Arc<dyn Tool>>;

    /// Whether a call may run in parallel: only when the tool says so for these arguments;
    /// unknown tools, invalid arguments, arguments over [`MAX_CLASSIFIED_ARGUMENTS`] bytes and
    /// panics give `Exclusive`.
    fn concurrency(&self, scope: Option<&ScopeKey>, name: &str, arguments: &str) -> Concurrency;

    /// Run one call through the pipeline. Never fails: failures are error results.
    fn execute(&self, request: ToolRequest) -> BoxFuture<'static, ToolResult>;

    /// How `call` looks to a person, as the tool `call.name` visible to `scope` describes it
    /// ([`Tool::display`]); the [`generic_display`] for a tool not registered (a resumed
    /// session whose MCP server is gone) or whose `display` panicked.
    fn display(&self, scope: Option<&ScopeKey>, call: &DisplayInput<'_>) -> ToolDisplay {
        match self.lookup(scope, call.name) {
            Some(tool) => {
                contain_sync(|| tool.display(call)).unwrap_or_else(|_| generic_display(call))
            }
            None => generic_display(call),
        }
    }
}

impl Service for dyn Tools {
    const NAME: &'static str = "tools";
}

/// The default implementation behind [`ToolsPlugin`].
pub struct ToolsService {
    ctx: Ctx,
    registry: Arc<Registry>,
    ids: AtomicU64,
}

impl std::fmt::Debug for ToolsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsService").finish_non_exhaustive()
    }
}

impl ToolsService {
    /// A service dispatching its hooks through `ctx`; `order` names tools listed first;
    /// all-text results over `max_inline_bytes` are spilled (0: never).
    pub fn new(ctx: Ctx, order: Vec<String>, max_inline_bytes: usize) -> Self {
        Self {
            ctx,
            registry: Arc::new(Registry::new(order, max_inline_bytes)),
            ids: AtomicU64::new(1),
        }
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }
}

impl Tools for ToolsService {
    fn register(&self, ctx: &Ctx, tool: Arc<dyn Tool>) -> Result<(), ToolsError> {
        self.register_removable(ctx, tool).map(drop)
    }

    fn register_removable(
        &self,
        ctx: &Ctx,
        tool: Arc<dyn Tool>,
    ) -> Result<Registration, ToolsError> {
        let name = tool.name().to_owned();
        if !valid_tool_name(&name) {
            return Err(ToolsError::InvalidName(name));
        }
        let checked = if tool.foreign_schema() {
            schema::check_foreign_schema(tool.parameters())
        } else {
            schema::check_schema(tool.parameters())
        };
        checked.map_err(|source| ToolsError::InvalidSchema {
            name: name.clone(),
            source,
        })?;
        let scope = ctx.scope_key();
        let id = self.next_id();
        {
            let mut tools = self.registry.tools.write();
            if let Some(existing) = tools
                .iter()
                .find(|t| t.scope == scope && t.schema.name == name)
            {
                return Err(ToolsError::Duplicate {
                    name,
                    where_: match &scope {
                        None => "globally".to_owned(),
                        Some(s) => format!("in scope {s}"),
                    },
                    owner: existing.owner.clone(),
                });
            }
            let schema = ToolSpec::new(name.clone(), tool.description(), tool.parameters().clone());
            tools.push(ToolEntry {
                id,
                scope,
                owner: ctx.owner_name().to_owned(),
                tool,
                schema,
            });
        }
        let registry = Arc::downgrade(&self.registry);
        let registration = ctx.on_dispose(move || {
            if let Some(r) = registry.upgrade() {
                r.remove_tool(id);
            }
        })?;
        Ok(registration)
    }

    fn guard(&self, ctx: &Ctx, guard: Arc<dyn Guard>) -> Result<(), ToolsError> {
        let id = self.next_id();
        self.registry.guards.write().push(GuardEntry {
            id,
            scope: ctx.scope_key(),
            guard,
        });
        let registry = Arc::downgrade(&self.registry);
        ctx.on_dispose(move || {
            if let Some(r) = registry.upgrade() {
                r.remove_guard(id);
            }
        })?;
        Ok(())
    }

    fn restrict(&self, ctx: &Ctx, filter: ToolFilter) -> Result<(), ToolsError> {
        let id = self.next_id();
        self.registry.filters.write().push(FilterEntry {
            id,
            scope: ctx.scope_key(),
            filter,
        });
        let registry = Arc::downgrade(&self.registry);
        ctx.on_dispose(move || {
            if let Some(r) = registry.upgrade() {
                r.remove_filter(id);
            }
        })?;
        Ok(())
    }

    fn schemas(&self, scope: Option<&ScopeKey>) -> Vec<ToolSpec> {
        self.registry.schemas(scope)
    }

    fn lookup(&self, scope: Option<&ScopeKey>, name: &str) -> Option<Arc<dyn Tool>> {
        self.registry.resolve(scope, name)
    }

    fn concurrency(&self, scope: Option<&ScopeKey>, name: &str, arguments: &str) -> Concurrency {
        let Some(tool) = self.registry.resolve(scope, name) else {
            return Concurrency::Exclusive;
        };
        if arguments.len() > MAX_CLASSIFIED_ARGUMENTS {
            // Exclusive is always safe, and megabyte arguments are not parsed twice.
            return Concurrency::Exclusive;
        }
        let args = schema::parse_arguments(arguments);
        if !tool.foreign_schema() && !schema::validate(tool.parameters(), &args).is_empty() {
            return Concurrency::Exclusive;
        }
        contain_sync(|| tool.concurrency(&args)).unwrap_or(Concurrency::Exclusive)
    }

    fn execute(&self, request: ToolRequest) -> BoxFuture<'static, ToolResult> {
        Box::pin(run_call(self.ctx.clone(), self.registry.clone(), request))
    }
}

/// Config of [`ToolsPlugin`].
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolsConfig {
    /// Tool names listed first in `schemas()`, in this order; the rest follow sorted by name.
    #[serde(default)]
    pub order: Vec<String>,
    /// Inline byte cap of an accepted all-text result before it is spilled to a file and
    /// replaced by a head+tail preview (default 50000; 0 disables). Never applied to `read`.
    #[serde(default)]
    pub max_inline_bytes: Option<usize>,
}

/// Default of [`ToolsConfig::max_inline_bytes`].
pub const DEFAULT_MAX_INLINE_BYTES: usize = 50_000;

/// Provides the [`Tools`] service.
#[derive(Debug)]
pub struct ToolsPlugin;

impl Plugin for ToolsPlugin {
    const NAME: &'static str = "tools";
    type Config = ToolsConfig;

    async fn apply(ctx: Ctx, config: ToolsConfig) -> Result<(), BoxError> {
        let cap = config.max_inline_bytes.unwrap_or(DEFAULT_MAX_INLINE_BYTES);
        let service = ToolsService::new(ctx.clone(), config.order, cap);
        ctx.provide::<dyn Tools>(Arc::new(service) as Arc<dyn Tools>)?;
        Ok(())
    }
}

/// Config of [`ToolTimeoutPlugin`].
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolTimeoutConfig {
    /// Budget for tools that declare none (milliseconds); absent: no limit for them.
    #[serde(default)]
    pub default_ms: Option<u64>,
}

/// The timeout policy on `tools/execute`: arms the tool's deadline; when it passes, cancels
/// the body's token, awaits the body, and answers `TOOL_TIMEOUT`.
#[derive(Debug)]
pub struct ToolTimeoutPlugin;

impl Plugin for ToolTimeoutPlugin {
    const NAME: &'static str = "tool-timeout";
    type Config = ToolTimeoutConfig;

    async fn apply(ctx: Ctx, config: ToolTimeoutConfig) -> Result<(), BoxError> {
        let default = config.default_ms.map(Duration::from_millis);
        ctx.hook::<ToolsExecute, _, _>(move |input: ExecuteInput, next| async move {
            let Some(budget) = input.timeout.or(default) else {
                return next.run(input).await;
            };
            let token = input.ctx.cancel_token().clone();
            let mut inner = next.run(input);
            tokio::select! {
                out = &mut inner => out,
                () = tokio::time::sleep(budget) => {
                    token.cancel();
                    // Never abandon the body: await it, then report the timeout.
                    let _ = inner.await;
                    Err(ToolError::timeout(budget.as_millis()))
                }
            }
        })?;
        Ok(())
    }
}
