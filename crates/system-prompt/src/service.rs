//! The `SystemPrompt` service, its default implementation and the plugin providing it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_kernel::{BoxError, Ctx, Plugin, Registration, ScopeKey, Service};
use dsh_tools::Tools;
use futures::future::BoxFuture;
use parking_lot::RwLock;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::assembly::{
    KernelRefusal, PromptAssembly, RegistrationError, SystemPromptAssemble, SystemPromptError,
    check_tool_order, order_tools, order_tools_hiding,
};
use crate::section::{
    AssembleContext, ContextSection, RenderedSection, Section, SectionContent, order,
};
use crate::template::{Variables, render};

/// dsh's identity line (upstream has its own; §3.1 lets dsh use its own).
pub const HARNESS_IDENTITY: &str = "You are an AI agent powered by dsh, the DeepSeek Harness.";

/// dsh's own coding-agent persona (under 3 KB, byte-stable: no dates, paths or other volatile
/// values, which travel as runtime context). Used when `builtinPersona` is on.
pub const DSH_PERSONA: &str = include_str!("persona.md");

/// The persona of the headless preset: [`DSH_PERSONA`].
pub const HEADLESS_PERSONA: &str = DSH_PERSONA;

/// Name of the identity section.
pub const IDENTITY_SECTION: &str = "identity";
/// Name of the persona section.
pub const PERSONA_SECTION: &str = "persona";

/// The system prompt registry and assembler, as a kernel service.
///
/// Registrations take the caller's `&Ctx` and are effects of its fiber (removed when it unloads,
/// or earlier through the returned [`Registration`]). Through a scope ctx (`ctx.scope_key()` is
/// `Some`) a section is visible only to assemblies of that scope and shadows a global section of
/// the same name.
pub trait SystemPrompt: Send + Sync + 'static {
    /// Registers a prompt section. A second section of the same name in the same scope is an
    /// error naming its owner.
    fn section(&self, ctx: &Ctx, section: Section) -> Result<Registration, SystemPromptError>;

    /// Registers a runtime-context section (rendered into snapshots, never into the prompt).
    /// `complete` is refused here.
    fn runtime_context(
        &self,
        ctx: &Ctx,
        section: Section,
    ) -> Result<Registration, SystemPromptError>;

    /// Runs the `system-prompt/assemble` hook in `context.scope` with
    /// [`default_assembly`](Self::default_assembly) as its terminal. Its output is authoritative.
    /// A panicking listener becomes [`SystemPromptError::Panicked`].
    fn assemble(
        &self,
        context: AssembleContext,
    ) -> BoxFuture<'static, Result<PromptAssembly, SystemPromptError>>;

    /// The assembly without the hook: visible sections rendered strictly and ordered, the tool
    /// schemas visible to the scope (ordered by `toolOrder`), and the runtime context.
    fn default_assembly(
        &self,
        context: &AssembleContext,
    ) -> Result<PromptAssembly, SystemPromptError>;

    /// Only the runtime-context sections, rendered now (the loop refreshes them per attempt
    /// without reassembling the prompt).
    fn render_runtime_context(
        &self,
        context: &AssembleContext,
    ) -> Result<Vec<ContextSection>, SystemPromptError>;
}

impl Service for dyn SystemPrompt {
    const NAME: &'static str = "system-prompt";
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Prompt,
    Context,
}

struct Entry {
    id: u64,
    kind: Kind,
    scope: Option<ScopeKey>,
    owner: String,
    section: Section,
}

#[derive(Default)]
struct Registry {
    entries: RwLock<Vec<Entry>>,
}

impl Registry {
    fn remove(&self, id: u64) {
        self.entries.write().retain(|e| e.id != id);
    }

    /// The sections of `kind` visible to `scope`, scoped ones shadowing global ones by name,
    /// sorted by (order, name).
    fn visible(&self, kind: Kind, scope: Option<&ScopeKey>) -> Vec<Section> {
        let entries = self.entries.read();
        let mut out: Vec<Section> = Vec::new();
        for e in entries.iter().filter(|e| e.kind == kind) {
            match (&e.scope, scope) {
                (None, _) => {
                    let shadowed = scope.is_some_and(|s| {
                        entries.iter().any(|o| {
                            o.kind == kind
                                && o.scope.as_ref() == Some(s)
                                && o.section.name == e.section.name
                        })
                    });
                    if !shadowed {
                        out.push(e.section.clone());
                    }
                }
                (Some(own), Some(s)) if own == s => out.push(e.section.clone()),
                _ => {}
            }
        }
        out.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.name.cmp(&b.name)));
        out
    }
}

struct Inner {
    ctx: Ctx,
    registry: Registry,
    tool_order: Vec<String>,
    ids: AtomicU64,
}

/// The default [`SystemPrompt`] implementation behind [`SystemPromptPlugin`].
#[derive(Clone)]
pub struct SystemPromptService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SystemPromptService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemPromptService")
            .field("tool_order", &self.inner.tool_order)
            .finish_non_exhaustive()
    }
}

impl SystemPromptService {
    /// A service dispatching its hook and finding the `Tools` service through `ctx`, ordering
    /// tools by `tool_order` (may be empty).
    pub fn new(ctx: Ctx, tool_order: Vec<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                ctx,
                registry: Registry::default(),
                tool_order,
                ids: AtomicU64::new(1),
            }),
        }
    }

    fn register(
        &self,
        ctx: &Ctx,
        kind: Kind,
        section: Section,
    ) -> Result<Registration, SystemPromptError> {
        if section.name.trim().is_empty() {
            return Err(RegistrationError::EmptyName.into());
        }
        if kind == Kind::Context && section.complete {
            return Err(RegistrationError::CompleteContext(section.name).into());
        }
        let scope = ctx.scope_key();
        let id = self.inner.ids.fetch_add(1, Ordering::Relaxed);
        {
            let mut entries = self.inner.registry.entries.write();
            if let Some(existing) = entries
                .iter()
                .find(|e| e.kind == kind && e.scope == scope && e.section.name == section.name)
            {
                let where_ = match &scope {
                    None => "globally".to_owned(),
                    Some(s) => format!("in scope {s}"),
                };
                return Err(RegistrationError::Duplicate {
                    section: section.name,
                    where_,
                    owner: existing.owner.clone(),
                }
                .into());
            }
            entries.push(Entry {
                id,
                kind,
                scope,
                owner: ctx.owner_name().to_owned(),
                section,
            });
        }
        let weak = Arc::downgrade(&self.inner);
        ctx.on_dispose(move || {
            if let Some(inner) = weak.upgrade() {
                inner.registry.remove(id);
            }
        })
        .map_err(|e| RegistrationError::Kernel(KernelRefusal(Arc::new(e))).into())
    }
}

/// Renders one section; `Ok("")`-like results are dropped by the caller.
fn render_section(
    section: &Section,
    context: &AssembleContext,
    vars: &Variables,
) -> Result<String, SystemPromptError> {
    let text = match &section.content {
        SectionContent::Static(s) => s.clone(),
        SectionContent::Computed(f) => match dsh_kernel::contain_sync(|| f(context)) {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => {
                return Err(SystemPromptError::Section {
                    section: section.name.clone(),
                    message: e.to_string(),
                });
            }
            Err(panicked) => {
                return Err(SystemPromptError::Section {
                    section: section.name.clone(),
                    message: panicked.to_string(),
                });
            }
        },
    };
    if !section.template {
        return Ok(text);
    }
    render(&text, vars).map_err(|error| SystemPromptError::Template {
        section: section.name.clone(),
        error,
    })
}

impl Inner {
    fn runtime_context(
        &self,
        context: &AssembleContext,
        vars: &Variables,
    ) -> Result<Vec<ContextSection>, SystemPromptError> {
        let mut out = Vec::new();
        for s in self.registry.visible(Kind::Context, context.scope.as_ref()) {
            let text = render_section(&s, context, vars)?;
            if !text.trim().is_empty() {
                out.push(ContextSection::new(s.name, text));
            }
        }
        Ok(out)
    }

    fn default_assembly(
        &self,
        context: &AssembleContext,
    ) -> Result<PromptAssembly, SystemPromptError> {
        let scope = context.scope.as_ref();
        let tools = match self.ctx.get::<dyn Tools>() {
            Some(t) if scope.is_some() && !self.tool_order.is_empty() => {
                // A listed tool that this agent's filters hide is skipped, not an error.
                let global: BTreeSet<String> =
                    t.schemas(None).into_iter().map(|s| s.name).collect();
                order_tools_hiding(t.schemas(scope), &self.tool_order, &|n| global.contains(n))?
            }
            Some(t) => order_tools(t.schemas(scope), &self.tool_order)?,
            None if self.tool_order.is_empty() => Vec::new(),
            None => order_tools(Vec::new(), &self.tool_order)?,
        };
        let mut sections: Vec<Section> = self
            .registry
            .visible(Kind::Prompt, scope)
            .into_iter()
            .filter(|s| {
                s.requires_tool
                    .as_ref()
                    .is_none_or(|t| tools.iter().any(|schema| &schema.name == t))
            })
            .collect();
        let mut complete = sections.iter().filter(|s| s.complete);
        if let Some(first) = complete.next() {
            if let Some(second) = complete.next() {
                return Err(SystemPromptError::MultipleComplete {
                    first: first.name.clone(),
                    second: second.name.clone(),
                });
            }
            let first = first.clone();
            sections = vec![first];
        }
        let vars = context.template_variables();
        let mut rendered = Vec::with_capacity(sections.len());
        for s in &sections {
            let text = render_section(s, context, &vars)?;
            if !text.trim().is_empty() {
                rendered.push(RenderedSection {
                    name: s.name.clone(),
                    order: s.order,
                    text,
                });
            }
        }
        let runtime_context = self.runtime_context(context, &vars)?;
        Ok(PromptAssembly {
            sections: rendered,
            tools,
            runtime_context,
        })
    }
}

impl SystemPrompt for SystemPromptService {
    fn section(&self, ctx: &Ctx, section: Section) -> Result<Registration, SystemPromptError> {
        self.register(ctx, Kind::Prompt, section)
    }

    fn runtime_context(
        &self,
        ctx: &Ctx,
        section: Section,
    ) -> Result<Registration, SystemPromptError> {
        self.register(ctx, Kind::Context, section)
    }

    fn assemble(
        &self,
        context: AssembleContext,
    ) -> BoxFuture<'static, Result<PromptAssembly, SystemPromptError>> {
        let inner = self.inner.clone();
        let scope = context.scope.clone();
        let fut = self.inner.ctx.call_in::<SystemPromptAssemble, _, _>(
            scope.as_ref(),
            context,
            move |c| async move { inner.default_assembly(&c) },
        );
        Box::pin(async move {
            match dsh_kernel::contain(fut).await {
                Ok(out) => out,
                Err(panicked) => Err(SystemPromptError::Panicked(panicked.message)),
            }
        })
    }

    fn default_assembly(
        &self,
        context: &AssembleContext,
    ) -> Result<PromptAssembly, SystemPromptError> {
        self.inner.default_assembly(context)
    }

    fn render_runtime_context(
        &self,
        context: &AssembleContext,
    ) -> Result<Vec<ContextSection>, SystemPromptError> {
        self.inner
            .runtime_context(context, &context.template_variables())
    }
}

fn yes() -> bool {
    true
}

/// Config of [`SystemPromptPlugin`].
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SystemPromptConfig {
    /// The persona, a `{{variable}}` template (`provider`, `model`, `cwd`), section `persona`
    /// at order 0. Absent or empty: no persona.
    #[serde(default)]
    pub persona: Option<String>,
    /// Without a `persona`: use dsh's own [`DSH_PERSONA`] (raw text, not a template). Default
    /// false.
    #[serde(default)]
    pub builtin_persona: bool,
    /// Include dsh's identity line (section `identity`, order −100). Default true.
    #[serde(default = "yes")]
    pub include_harness_identity: bool,
    /// Canonical tool order: these names first, `<unlisted-tools>` marking where the rest go
    /// (at the end when absent). Naming a tool that is not registered fails the assembly.
    #[serde(default)]
    pub tool_order: Vec<String>,
}

impl Default for SystemPromptConfig {
    fn default() -> Self {
        Self {
            persona: None,
            builtin_persona: false,
            include_harness_identity: true,
            tool_order: Vec::new(),
        }
    }
}

/// Provides the [`SystemPrompt`] service, with the identity and persona sections from its config.
#[derive(Debug)]
pub struct SystemPromptPlugin;

impl Plugin for SystemPromptPlugin {
    const NAME: &'static str = "system-prompt";
    type Config = SystemPromptConfig;

    async fn apply(ctx: Ctx, config: SystemPromptConfig) -> Result<(), BoxError> {
        check_tool_order(&config.tool_order)?;
        let service = SystemPromptService::new(ctx.clone(), config.tool_order);
        if config.include_harness_identity {
            service.section(
                &ctx,
                Section::new(IDENTITY_SECTION, HARNESS_IDENTITY)
                    .with_order(order::IDENTITY)
                    .raw(),
            )?;
        }
        if let Some(persona) = config.persona.filter(|p| !p.trim().is_empty()) {
            service.section(
                &ctx,
                Section::new(PERSONA_SECTION, persona).with_order(order::PERSONA),
            )?;
        } else if config.builtin_persona {
            service.section(
                &ctx,
                Section::new(PERSONA_SECTION, DSH_PERSONA.trim_end())
                    .with_order(order::PERSONA)
                    .raw(),
            )?;
        }
        ctx.provide::<dyn SystemPrompt>(Arc::new(service) as Arc<dyn SystemPrompt>)?;
        Ok(())
    }
}
