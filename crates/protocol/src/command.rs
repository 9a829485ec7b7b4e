//! Slash commands as a client lists them (completion, `/help`) and what running one gives.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who provides a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CommandSource {
    /// The host itself (`/model`, `/effort`, `/cost`, `/new`).
    Builtin,
    /// A plugin (`/compact`, `/plan`).
    Plugin,
    /// A skill (`/skill-name`).
    Skill,
    /// A custom command file (`.dsh/commands`, `.claude/commands`).
    Custom,
}

/// One slash command of a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    /// The name without the slash (`compact`).
    pub name: String,
    /// One line for completion and `/help`.
    pub description: String,
    /// What the arguments look like (`[instructions]`), if it takes any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// Who provides it.
    pub source: CommandSource,
}

/// What a command did, as the client is told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum CommandOutcome {
    /// It finished; `text` is for the user (may be empty).
    Done {
        /// Output for the user (markdown).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
    },
    /// It expanded into a prompt that was submitted (skills, custom commands).
    Submitted {
        /// The prompt sent.
        prompt: String,
    },
    /// It started work that reports through later events (a compaction).
    Started,
}
