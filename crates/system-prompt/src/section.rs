//! Prompt sections: named, ordered, static or computed text.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use dsh_kernel::{BoxError, ScopeKey};
use serde::{Deserialize, Serialize};

use crate::template::Variables;

/// Order bands of the standard sections (`behaviours.md` §3.1). Lower comes first; equal
/// orders sort by name.
pub mod order {
    /// The harness identity line.
    pub const IDENTITY: i32 = -100;
    /// The persona (a `{{variable}}` template from the config).
    pub const PERSONA: i32 = 0;
    /// Start of the tool-guidance band (`tool:read` 100 … `tool:bash` 105).
    pub const TOOL_GUIDANCE: i32 = 100;
    /// `tool:read` guidance.
    pub const TOOL_READ: i32 = 100;
    /// `tool:write` guidance.
    pub const TOOL_WRITE: i32 = 101;
    /// `tool:edit` guidance.
    pub const TOOL_EDIT: i32 = 102;
    /// `tool:glob` guidance.
    pub const TOOL_GLOB: i32 = 103;
    /// `tool:grep` guidance.
    pub const TOOL_GREP: i32 = 104;
    /// `tool:bash` guidance.
    pub const TOOL_BASH: i32 = 105;
    /// Runtime context `sandbox:policy`.
    pub const SANDBOX_POLICY: i32 = 110;
    /// Runtime context `approval:policy`.
    pub const APPROVAL_POLICY: i32 = 115;
    /// Runtime context `subagent:delegation`.
    pub const SUBAGENT_DELEGATION: i32 = 120;
    /// Runtime context `goal` (the session's active or paused goal).
    pub const GOAL: i32 = 125;
}

/// What an assembly is for: the agent's scope and the values of the template variables.
///
/// Known variables are `provider`, `model` and `cwd` (upstream has no others) plus whatever the
/// caller adds with [`AssembleContext::with_variable`]. A known variable that is `None` is
/// "valueless": a template using it fails.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssembleContext {
    /// The agent's scope (`ctx.scope_key()` of its scope ctx); `None` sees global sections only.
    pub scope: Option<ScopeKey>,
    /// The agent (session) id, for computed sections and hook listeners.
    pub agent_id: Option<String>,
    /// `{{provider}}`: the provider id of this step's route.
    pub provider: Option<String>,
    /// `{{model}}`: the model id of this step's route.
    pub model: Option<String>,
    /// `{{cwd}}`: the agent's working directory.
    pub cwd: Option<String>,
    /// Extra variables supplied by the caller.
    pub variables: BTreeMap<String, String>,
}

impl AssembleContext {
    /// A context for `provider`/`model` working in `cwd`, in the global scope.
    pub fn new(
        provider: impl Into<String>,
        model: impl Into<String>,
        cwd: impl Into<String>,
    ) -> Self {
        Self {
            provider: Some(provider.into()),
            model: Some(model.into()),
            cwd: Some(cwd.into()),
            ..Self::default()
        }
    }

    /// Sets the scope; builder style.
    pub fn with_scope(mut self, scope: Option<ScopeKey>) -> Self {
        self.scope = scope;
        self
    }

    /// Sets the agent id; builder style.
    pub fn with_agent_id(mut self, id: impl Into<String>) -> Self {
        self.agent_id = Some(id.into());
        self
    }

    /// Adds an extra variable; builder style.
    pub fn with_variable(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.variables.insert(name.into(), value.into());
        self
    }

    /// Every known variable with its value (extras override nothing: the three built-ins win).
    pub fn template_variables(&self) -> Variables {
        let mut vars: Variables = self
            .variables
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        vars.insert("provider".into(), self.provider.clone());
        vars.insert("model".into(), self.model.clone());
        vars.insert("cwd".into(), self.cwd.clone());
        vars
    }
}

/// The function behind a computed section: its text for one assembly.
pub type ComputeFn = Arc<dyn Fn(&AssembleContext) -> Result<String, BoxError> + Send + Sync>;

/// The text of a section.
#[derive(Clone)]
pub enum SectionContent {
    /// Fixed text.
    Static(String),
    /// Text computed at each assembly (an error or a panic fails that assembly).
    Computed(ComputeFn),
}

impl fmt::Debug for SectionContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SectionContent::Static(s) => f.debug_tuple("Static").field(s).finish(),
            SectionContent::Computed(_) => f.write_str("Computed(..)"),
        }
    }
}

/// A named, ordered piece of the system prompt (or of the runtime context).
#[derive(Clone, Debug)]
pub struct Section {
    /// Unique per scope; a scoped section shadows a global one of the same name.
    pub name: String,
    /// Sort key (see [`order`]); ties sort by name.
    pub order: i32,
    /// The text.
    pub content: SectionContent,
    /// When set, this section alone is the whole prompt (two at once is an error). Prompt
    /// sections only.
    pub complete: bool,
    /// Render `{{variables}}` in the text (default). Turn off for text that may contain `{{`.
    pub template: bool,
    /// Include the section only when this tool is among the assembled tools (tool guidance).
    pub requires_tool: Option<String>,
}

impl Section {
    /// A static section at order 0.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            order: 0,
            content: SectionContent::Static(text.into()),
            complete: false,
            template: true,
            requires_tool: None,
        }
    }

    /// A computed section at order 0.
    pub fn computed(
        name: impl Into<String>,
        f: impl Fn(&AssembleContext) -> Result<String, BoxError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            content: SectionContent::Computed(Arc::new(f)),
            ..Self::new(name, String::new())
        }
    }

    /// Sets the order; builder style.
    pub fn with_order(mut self, order: i32) -> Self {
        self.order = order;
        self
    }

    /// Marks the section complete: it replaces the whole prompt; builder style.
    pub fn complete(mut self) -> Self {
        self.complete = true;
        self
    }

    /// Takes the text verbatim, without `{{variable}}` rendering; builder style.
    pub fn raw(mut self) -> Self {
        self.template = false;
        self
    }

    /// Includes the section only when `tool` is offered; builder style.
    pub fn requires_tool(mut self, tool: impl Into<String>) -> Self {
        self.requires_tool = Some(tool.into());
        self
    }
}

/// A rendered prompt section, as carried by a [`crate::PromptAssembly`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedSection {
    /// The section's name.
    pub name: String,
    /// Its order key.
    pub order: i32,
    /// The rendered, non-empty text.
    pub text: String,
}

/// A rendered runtime-context section: `{name, text}` as logged in a snapshot's source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSection {
    /// The section's name, e.g. `sandbox:policy`.
    pub name: String,
    /// The rendered, non-empty text.
    pub text: String,
}

impl ContextSection {
    /// A section with this name and text.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }
}
