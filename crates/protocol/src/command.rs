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
    /// What a rewind would do (`/rewind N`), not done yet: show it, then run
    /// [`RewindPreview::confirm`] to apply it.
    RewindPreview(RewindPreview),
    /// It made a session the client should show from now on (a conversation rewind forks the
    /// log): resume `session_id`; the shown one stays as it was.
    #[serde(rename_all = "camelCase")]
    SwitchSession {
        /// The session to resume.
        session_id: String,
        /// Output for the user (markdown).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
    },
}

/// What a rewind restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RewindMode {
    /// Files and conversation.
    Both,
    /// Files only.
    Code,
    /// The conversation only (a forked session).
    Conversation,
}

/// What a rewind does to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RewindFileChange {
    /// Written again (the turns deleted it).
    Recreate,
    /// Put back as it was.
    Restore,
    /// Deleted (the turns created it).
    Delete,
}

/// One file of a [`RewindPreview`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindFile {
    /// Workspace-relative path.
    pub path: String,
    /// What the rewind does to it.
    pub change: RewindFileChange,
    /// Binary (or too large to diff): named in the diff, no lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// Lines the rewind adds.
    pub added: u64,
    /// Lines the rewind removes.
    pub removed: u64,
}

/// The preview of a rewind to before turn `to_turn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindPreview {
    /// The state before this turn is restored.
    pub to_turn: u64,
    /// Files, conversation or both.
    pub mode: RewindMode,
    /// The files the restore touches (empty for a conversation rewind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<RewindFile>,
    /// Their unified diff (from the workspace now, `a/`, to the restore, `b/`), cut at a line
    /// budget: `omitted_lines` counts the rest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff: String,
    /// Diff lines left out of `diff`.
    #[serde(default)]
    pub omitted_lines: u64,
    /// Files changed outside dsh since the checkpoint: applying needs `force` (they go into the
    /// backup first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// Files over the size limit the restore leaves as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<String>,
    /// The arguments of the `rewind` command that applies this preview (`3 code yes`).
    pub confirm: String,
}
