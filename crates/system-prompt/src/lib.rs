//! `dsh-system-prompt`: what the model is told at each step.
//!
//! - [`Section`]s: named, ordered (order key, then name), static or computed text registered
//!   through the [`SystemPrompt`] service with the caller's `&Ctx` (scoped to an agent when
//!   registered through its scope ctx). A *complete* section replaces the whole prompt.
//! - Strict [`template`] rendering of `{{provider}}`, `{{model}}`, `{{cwd}}` and caller-supplied
//!   variables: an unknown or valueless variable fails the assembly (the turn), never the loop.
//! - Tool schemas from the `Tools` service of `dsh-tools`, visible to the agent's scope, in
//!   canonical order (`toolOrder`, [`order_tools`]).
//! - Runtime-context sections, rendered into snapshots that travel as a `user/message`
//!   ([`runtime_context`]: the pure §10.3 projection the loop calls).
//! - The `system-prompt/assemble` hook ([`SystemPromptAssemble`]) whose output is authoritative.
//!
//! The reconciliation of the rendered prompt with the log's `system/message` nodes
//! (`session-format.md` §10.2) is the loop's job.

mod assembly;
pub mod runtime_context;
mod section;
mod service;
pub mod template;

pub use assembly::{
    KernelRefusal, PromptAssembly, RegistrationError, SystemPromptAssemble, SystemPromptError,
    ToolOrderError, UNLISTED_TOOLS, check_tool_order, order_tools, order_tools_hiding,
};
pub use runtime_context::{OwnedContextMessage, RetainedContext, RuntimeContextProposal};
pub use section::{
    AssembleContext, ComputeFn, ContextSection, RenderedSection, Section, SectionContent, order,
};
pub use service::{
    DSH_PERSONA, HARNESS_IDENTITY, HEADLESS_PERSONA, IDENTITY_SECTION, PERSONA_SECTION,
    SystemPrompt, SystemPromptConfig, SystemPromptPlugin, SystemPromptService,
};
pub use template::{TemplateError, Variables};
