//! `dsh-hooks`: command hooks from the files people already have — Claude Code's
//! `.claude/settings.json` / `settings.local.json` / `~/.claude/settings.json`, Codex's
//! `.codex/hooks.json`, and dsh's own `$DSH_HOME/hooks.json` / `.dsh/hooks.json`.
//!
//! - [`config`]: locations, the two dialects, matchers, timeouts.
//! - [`run`]: one handler run (JSON on stdin, deadline, process-group kill) and the protocol
//!   (exit 2 blocks, JSON decisions, merge order).
//! - [`HooksPlugin`]: `PreToolUse` on `tools/pre-execute` (deny, ask, allow, `updatedInput`),
//!   `PostToolUse` on `tools/post-execute` (block, added context), `SessionStart` and
//!   `UserPromptSubmit` on `agent/pre-step`, `Stop` on `agent/turn-stopping` with a loop guard;
//!   for a sub-agent, `SubagentStart` on its first step and `SubagentStop` at its turn's end.
//! - [`events`]: `hook/invoked` / `hook/result`, logged in the open turn of every run.
//!
//! A hook that hangs, crashes or prints garbage never breaks the turn: it times out or is
//! ignored, and the log says so.

pub mod config;
pub mod events;
mod plugin;
pub mod run;

pub use plugin::{HooksConfig, HooksPlugin, claude_tool_name};
