//! `dsh-tui`: the interactive terminal UI of dsh.
//!
//! A front end over the agent vocabulary only: it drives an [`Agent`] handle (send, steer,
//! cancel), renders from the typed session events (so a resumed session shows its whole
//! history, and later plugins' events appear through the same feed) and the live `agent/stream`
//! chunks, and uses two agent hooks in the agent's own scope: `agent/pre-step` delivers the
//! steers typed while the agent works (they stay editable until then) and `agent/request`
//! applies `/model` and `/effort`. Never a dependency on the loop or an adapter.
//!
//! - [`app`]: the state and key bindings (pure; drawn on any backend);
//! - [`transcript`]: the fold of events and chunks into scrollback lines;
//! - [`markdown`]: incremental markdown (completed blocks rendered once); [`highlight`]: fenced
//!   code highlighting;
//! - [`cells`]: user/answer/reasoning/tool cards/notices; [`status`]: the status line and cost;
//! - [`composer`]: multi-line input, history per project, collapsed pastes; [`mentions`]: `@`
//!   file completion;
//! - [`approval`]: the inline approval prompt (the TUI's `approval-answerer`);
//! - [`term`]: the inline viewport (scrollback kept), restore on exit/panic/suspend.

pub mod app;
pub mod approval;
pub mod cells;
pub mod composer;
mod fence;
pub mod highlight;
pub mod live_agents;
pub mod markdown;
pub mod mentions;
pub mod picker;
mod runtime;
pub mod status;
pub mod term;
pub mod theme;
pub mod tool_display;
pub mod toolset;
pub mod transcript;
pub mod wrap;

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_kernel::Ctx;

pub use runtime::run;
pub use theme::Theme;

/// What a run needs.
pub struct TuiOptions {
    /// The root scope (services: agents, sessions, llm).
    pub root: Ctx,
    /// The agent to drive first (new or resumed).
    pub agent: Arc<dyn Agent>,
    /// A first prompt to send at once (`dsh "prompt"`).
    pub initial_prompt: Option<String>,
    /// The composer history of this project.
    pub history_file: Option<PathBuf>,
    /// Palette.
    pub theme: Theme,
    /// Open the session picker at once (`dsh --resume` without an id).
    pub open_picker: bool,
    /// The project directory whose files `@` mentions offer (`None`: no mentions).
    pub project_dir: Option<PathBuf>,
    /// Slash commands that plugins expand (custom commands, `/skill` names): `(/name, help)`.
    /// Listed in completion and `/help`; typed, they are sent as a prompt.
    pub extra_commands: Vec<(String, String)>,
}

impl std::fmt::Debug for TuiOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuiOptions")
            .field("agent", &self.agent.id())
            .field("history_file", &self.history_file)
            .finish_non_exhaustive()
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TuiOutcome {
    /// The session shown last (saved).
    pub session_id: String,
}

/// Failures of the TUI.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal refused a mode change or a write.
    #[error("terminal: {0}")]
    Terminal(#[source] std::io::Error),
    /// An agent could not be created, resumed or sent to.
    #[error("{0}")]
    Agent(#[from] dsh_agent::AgentError),
    /// A kernel registration failed.
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
    /// The composition lacks a service the TUI needs.
    #[error("the composition mounts no `{0}` service")]
    MissingService(&'static str),
    /// The UI panicked (the terminal was restored and the session flushed).
    #[error("the terminal UI panicked: {0}")]
    Panicked(String),
}
