//! `dsh-context`: what a project tells the agent, loaded the way people who come from Claude
//! Code or Codex already write it.
//!
//! - [`instructions`]: `$DSH_HOME/AGENTS.md`, then `AGENTS.md`, `CLAUDE.md` and their
//!   `.local.md` overlays from the project root down to the working directory, injected as one
//!   durable reminder after the first prompt and followed by added / updated / removed notices
//!   (never by rewriting history: the prefix cache survives edits of these files).
//! - [`skills`]: roots and ranks, front-matter validation, the catalog reminder, the `skill`
//!   tool and `/name` invocations.
//! - [`commands`]: custom slash commands with `$ARGUMENTS` and `$1`…`$9`.
//! - [`ContextPlugin`]: all of it on the `agent/pre-step` hook, the `tools/result` notification
//!   and the `Tools` / `SystemPrompt` services; [`report`] for `dsh context`.

mod command;
pub mod commands;
pub mod frontmatter;
pub mod instructions;
mod plugin;
pub use dsh_context_api::project;
pub mod report;
pub mod skills;
pub use command::ContextCommandsPlugin;

pub use dsh_context_api::ProjectPaths;
pub use plugin::{ContextConfig, ContextPlugin, SKILL_DESCRIPTION, SKILL_TOOL, WORKSPACE_SECTION};
