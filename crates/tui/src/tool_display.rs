//! Where the TUI's tool cards come from: a [`Displayer`] turns a logged call (and its result)
//! into the [`ToolDisplay`] the tool itself describes (`dsh_tools::Tools::display`). The cards
//! render the display only: no tool name or argument key is known here.

use std::sync::Arc;

use dsh_kernel::{Ctx, ScopeKey};
use dsh_protocol::ToolDisplay;
use dsh_tools::{DisplayInput, Tools, generic_display};

/// Describes a call for its card.
pub type Displayer = Arc<dyn Fn(&DisplayInput<'_>) -> ToolDisplay + Send + Sync>;

/// The generic display for every call (no `tools` service at hand).
pub fn generic() -> Displayer {
    Arc::new(generic_display)
}

/// Calls described by the tools of `tools` as `scope` sees them (unknown tools: the generic
/// display).
pub fn from_tools(tools: Arc<dyn Tools>, scope: Option<ScopeKey>) -> Displayer {
    Arc::new(move |call| tools.display(scope.as_ref(), call))
}

/// Calls described by the `tools` service reachable from `ctx`, in `ctx`'s scope (an agent's
/// context: its own tools too); the generic display when there is no such service.
pub fn from_ctx(ctx: &Ctx) -> Displayer {
    match ctx.get::<dyn Tools>() {
        Some(tools) => from_tools(tools, ctx.scope_key()),
        None => generic(),
    }
}
