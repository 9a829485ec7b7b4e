//! `dsh-tui`: the interactive terminal UI of dsh.
//!
//! A front end over the protocol only (`dsh-protocol`): it holds an `Arc<dyn Client>` (the
//! in-process host, or a remote server: the same UI), shows what the session's subscription
//! says (the replayed history, then live deltas, tool cards from the tools' own displays,
//! approval questions, sub-agents from their own sessions) and does everything through ops
//! (prompts, steers, interrupts, answers, commands, model and effort).
//!
//! - [`app`]: the state and key bindings (pure; drawn on any backend);
//! - [`transcript`]: the fold of protocol events into scrollback lines;
//! - [`markdown`]: incremental markdown (completed blocks rendered once); [`highlight`]: fenced
//!   code highlighting;
//! - [`cells`]: user/answer/reasoning/tool cards/notices; [`status`]: the status line and cost;
//! - [`composer`]: multi-line input, history per project, collapsed pastes; [`mentions`]: `@`
//!   file completion;
//! - [`approval`]: the inline approval prompt; [`question`]: the agent's questions, one key per
//!   option;
//! - [`term`]: the inline viewport (scrollback kept), restore on exit/panic/suspend.

pub mod app;
pub mod approval;
pub mod cells;
pub mod composer;
pub mod confirm;
mod fence;
pub mod highlight;
mod hold;
pub mod live_agents;
pub mod markdown;
pub mod mentions;
pub mod picker;
pub mod question;
mod runtime;
pub mod status;
pub mod term;
pub mod theme;
pub mod toolset;
pub mod transcript;
pub mod wrap;

use std::path::PathBuf;
use std::sync::Arc;

use dsh_protocol::{Client, SessionOptions};

pub use runtime::run;
pub use theme::Theme;

/// The session a run opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A new session (with [`TuiOptions::new_session`]).
    New,
    /// A stored session, continued.
    Resume(String),
    /// A session of a host (a server): opened to drive it, watched when another process
    /// holds it.
    Attach(String),
}

/// What a run needs.
pub struct TuiOptions {
    /// The host of the sessions (in-process or remote).
    pub client: Arc<dyn Client>,
    /// The session to show first.
    pub target: Target,
    /// Options of new sessions (the first one when [`Target::New`], and `/new`): the working
    /// directory and the settings the command line chose.
    pub new_session: SessionOptions,
    /// Close the sessions this UI leaves in the host (`/new`, `/resume`, quit): an in-process
    /// host's sessions are flushed and unlocked; a server's are left running for other
    /// clients.
    pub close_on_leave: bool,
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
    /// Slash commands besides the session's own (`(/name, help)`), listed in completion and
    /// `/help`; typed, they are sent as a prompt.
    pub extra_commands: Vec<(String, String)>,
}

impl std::fmt::Debug for TuiOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuiOptions")
            .field("target", &self.target)
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
    /// The host refused to open the session.
    #[error("{}: {}", .0.code, .0.message)]
    Host(#[from] dsh_protocol::ProtocolError),
    /// The UI panicked (the terminal was restored and the session flushed).
    #[error("the terminal UI panicked: {0}")]
    Panicked(String),
    /// The terminal went away (SIGHUP, or it hung up with SIGHUP ignored); the UI left as on
    /// Ctrl-D (a running turn interrupted, what it delivered kept).
    #[error("the terminal hung up")]
    HungUp,
}
