//! The result of an assembly, its hook, its errors, and tool ordering.

use dsh_kernel::Hook;
use dsh_llm::ToolSpec;

use crate::section::{AssembleContext, ContextSection, RenderedSection};
use crate::template::TemplateError;

/// The `toolOrder` entry that stands for every tool not listed by name.
pub const UNLISTED_TOOLS: &str = "<unlisted-tools>";

/// What the model is told for one step: the prompt sections, the tool schemas and the runtime
/// context. The output of the `system-prompt/assemble` hook is authoritative.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptAssembly {
    /// The rendered, non-empty prompt sections in order (one when a complete section won).
    pub sections: Vec<RenderedSection>,
    /// The tool schemas offered to the model, in canonical order.
    pub tools: Vec<ToolSpec>,
    /// The rendered runtime-context sections, in order (see [`crate::runtime_context`]).
    pub runtime_context: Vec<ContextSection>,
}

impl PromptAssembly {
    /// The system prompt: the section texts joined with one blank line (`""` when none).
    pub fn prompt(&self) -> String {
        let mut out = String::new();
        for s in &self.sections {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&s.text);
        }
        out
    }

    /// The names of the offered tools, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }
}

/// Why an assembly failed. The loop fails the turn with it; the loop keeps serving.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SystemPromptError {
    /// A section's template used an unknown or valueless variable.
    #[error("system prompt section `{section}`: {error}")]
    Template {
        /// The section.
        section: String,
        /// What was wrong.
        error: TemplateError,
    },
    /// A computed section returned an error or panicked.
    #[error("system prompt section `{section}` failed: {message}")]
    Section {
        /// The section.
        section: String,
        /// The error text.
        message: String,
    },
    /// Two complete sections are active at once.
    #[error("two complete system prompt sections are active: `{first}` and `{second}`")]
    MultipleComplete {
        /// The first (in order).
        first: String,
        /// The second.
        second: String,
    },
    /// `toolOrder` names a tool that is not registered (neither offered to this agent nor
    /// hidden from it by a filter).
    #[error("toolOrder names `{0}`, which is not a registered tool")]
    UnknownToolInOrder(String),
    /// A hook listener of `system-prompt/assemble` panicked.
    #[error("a system-prompt/assemble listener panicked: {0}")]
    Panicked(String),
    /// A registration was refused.
    #[error(transparent)]
    Registration(#[from] RegistrationError),
}

/// Why a section registration was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    /// The section's name is empty or blank.
    #[error("a system prompt section needs a non-empty name")]
    EmptyName,
    /// A runtime-context section was marked complete.
    #[error("runtime-context section `{0}` cannot be complete")]
    CompleteContext(String),
    /// A section of that name is already registered in the same scope.
    #[error("system prompt section `{section}` is already registered {where_} by `{owner}`")]
    Duplicate {
        /// The section.
        section: String,
        /// `globally` or `in scope <key>`.
        where_: String,
        /// The plugin that registered it first.
        owner: String,
    },
    /// The kernel refused the effect (e.g. the registering fiber is unloading).
    #[error(transparent)]
    Kernel(KernelRefusal),
}

/// A kernel error inside a cloneable, comparable [`RegistrationError`] (the kernel's error is
/// neither): shared, compared by its text, its causes kept as its source chain.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct KernelRefusal(pub std::sync::Arc<dsh_kernel::KernelError>);

impl PartialEq for KernelRefusal {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for KernelRefusal {}

impl SystemPromptError {
    /// The machine code a failed turn records.
    pub fn code(&self) -> &'static str {
        "SYSTEM_PROMPT"
    }
}

/// The `system-prompt/assemble` waterfall. The input is the assembly context (listeners may
/// rewrite it before `next.run`); the terminal is the default assembly; listeners may edit the
/// output (add or drop sections or tools) or replace it. Dispatched in the context's scope.
#[derive(Debug)]
pub struct SystemPromptAssemble;

impl Hook for SystemPromptAssemble {
    const NAME: &'static str = "system-prompt/assemble";
    type Input = AssembleContext;
    type Output = Result<PromptAssembly, SystemPromptError>;
}

/// Applies a `toolOrder` to `tools` (already in the Tools service's canonical order): listed
/// names first in the listed order, with the rest (in their given order) at the position of
/// [`UNLISTED_TOOLS`], or at the end when it is absent. A listed name that is not among `tools`
/// is an error.
pub fn order_tools(
    tools: Vec<ToolSpec>,
    tool_order: &[String],
) -> Result<Vec<ToolSpec>, SystemPromptError> {
    order_tools_hiding(tools, tool_order, &|_| false)
}

/// [`order_tools`], where a listed name missing from `tools` is skipped when `hidden(name)`
/// (a registered tool that this agent's filters hide) instead of failing.
pub fn order_tools_hiding(
    tools: Vec<ToolSpec>,
    tool_order: &[String],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<Vec<ToolSpec>, SystemPromptError> {
    if tool_order.is_empty() {
        return Ok(tools);
    }
    let mut slots: Vec<Option<ToolSpec>> = tools.into_iter().map(Some).collect();
    let mut head = Vec::with_capacity(slots.len());
    let mut tail = Vec::new();
    let mut seen_rest = false;
    for name in tool_order {
        if name == UNLISTED_TOOLS {
            seen_rest = true;
            continue;
        }
        let Some(found) = slots
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|t| &t.name == name))
            .and_then(Option::take)
        else {
            if hidden(name) {
                continue;
            }
            return Err(SystemPromptError::UnknownToolInOrder(name.clone()));
        };
        if seen_rest {
            tail.push(found);
        } else {
            head.push(found);
        }
    }
    head.extend(slots.into_iter().flatten());
    head.extend(tail);
    Ok(head)
}

/// Why a `toolOrder` config was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolOrderError {
    /// An entry is empty or blank.
    #[error("toolOrder[{index}]: empty tool name")]
    EmptyName {
        /// Position in the list.
        index: usize,
    },
    /// A name (or [`UNLISTED_TOOLS`]) appears twice.
    #[error("toolOrder[{index}]: `{name}` is listed twice")]
    Duplicate {
        /// Position of the second occurrence.
        index: usize,
        /// The name.
        name: String,
    },
}

/// Checks a `toolOrder` config: no empty or duplicate names, at most one [`UNLISTED_TOOLS`].
pub fn check_tool_order(tool_order: &[String]) -> Result<(), ToolOrderError> {
    let mut seen = std::collections::BTreeSet::new();
    for (index, name) in tool_order.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(ToolOrderError::EmptyName { index });
        }
        if !seen.insert(name.as_str()) {
            return Err(ToolOrderError::Duplicate {
                index,
                name: name.clone(),
            });
        }
    }
    Ok(())
}
