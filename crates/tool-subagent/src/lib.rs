//! The model-facing sub-agent tools, over the `subagents` service of `dsh-subagent-api`.
//!
//! - `subagent` (spawn: a fresh context) and `subagent_fork` (fork: the child sees this
//!   conversation's completed turns), arguments `{cwd?, description, prompt}` as the original
//!   0.2.1 declares them. Foreground: the call returns the child's final answer; a child that did
//!   not complete is an error result with the original's text. Parallel-safe, so several calls
//!   of one batch run concurrently.
//! - `list_agents` (`scope?: children|descendants`), `interrupt_agent` (`agent_id`) and
//!   `send_message` (`agent_id`, `message`).
//!
//! [`SubagentToolsPlugin`] (plugin `tool-subagent`) registers them.

mod args;
mod control;
mod delegate;
pub mod display;
mod plugin;

pub use control::{InterruptAgentTool, ListAgentsTool, SendMessageTool};
pub use delegate::{
    BackgroundMode, DelegateTool, FORK_CONTINUABLE_DESCRIPTION, FORK_DESCRIPTION, JOBS_UNAVAILABLE,
    SPAWN_CONTINUABLE_DESCRIPTION, SPAWN_DESCRIPTION, started_text,
};
pub use plugin::{SubagentToolsConfig, SubagentToolsPlugin};
