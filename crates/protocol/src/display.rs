//! How a tool call looks to a person: filled in by the tool itself, rendered by every front end.
//!
//! A front end never matches tool names or reads argument keys: the tool (or the host's generic
//! fallback for MCP and plugin tools) describes its call as a [`ToolDisplay`] and the front end
//! draws the kind it knows. The display is derived from the logged call and result, so a
//! resumed session shows its history the same way.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What kind of action a tool call is (icons, colours, ACP's tool kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ToolKind {
    /// Runs a shell command.
    Shell,
    /// Edits part of a file.
    Edit,
    /// Writes a whole file.
    Write,
    /// Reads a file or resource.
    Read,
    /// Searches files or names (grep, glob).
    Search,
    /// Fetches from the network.
    Fetch,
    /// Delegates to another agent.
    Agent,
    /// Updates the task list.
    Todo,
    /// Proposes or changes a plan.
    Plan,
    /// A tool of an MCP server.
    Mcp,
    /// Anything else.
    #[default]
    Other,
}

/// A change to one file, as old and new text (front ends draw the diff).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    /// The file, as the tool named it.
    pub path: String,
    /// The text replaced (`None`: a new file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// The new text.
    pub new_text: String,
}

/// One labelled value of a call (shown as `label: value`), for details that fit no other field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisplayField {
    /// Short label.
    pub label: String,
    /// The value.
    pub value: String,
}

/// A place in a file the call touches (editors follow along).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// The file.
    pub path: String,
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// How a shell command ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ExitStatus {
    /// It exited with this code.
    Exited {
        /// The code.
        code: i32,
    },
    /// A signal ended it.
    Signaled {
        /// The signal's name (`SIGKILL`).
        signal: String,
    },
    /// Its time budget ran out.
    TimedOut,
}

/// A summary of what the call produced, for the card (the model saw the full result).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputSummary {
    /// The head of the output the card shows (a few lines; the tool chooses).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Lines of output in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// Bytes of output in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Whether `text` leaves out part of the output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Whether `text` is the end of the output (a command's last lines: what was left out
    /// comes before it) rather than its head.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tail: bool,
    /// How long the call ran, in milliseconds, when the tool measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How a command ended (shell tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitStatus>,
    /// A one-line result (`12 matches`, `created`, `plan accepted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
}

/// One entry of a task list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TodoItem {
    /// The task.
    pub content: String,
    /// Its state.
    pub status: TodoStatus,
}

/// The state of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// The display of one tool call: what a card shows before, while and after it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolDisplay {
    /// The kind of action.
    pub kind: ToolKind,
    /// A short title (`Bash`, `Edit`, `Read`, the MCP tool's name).
    pub title: String,
    /// What the call acts on: the command, the path, the URL, the pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// A change to a file (edit, write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<FileDiff>,
    /// A task list (todo tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<Vec<TodoItem>>,
    /// A plan in markdown (plan tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Other details worth a line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<DisplayField>,
    /// Files the call touches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<Location>,
    /// The output summary, once the call ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSummary>,
}

impl ToolDisplay {
    /// A display of `kind` titled `title`.
    pub fn new(kind: ToolKind, title: impl Into<String>) -> Self {
        ToolDisplay {
            kind,
            title: title.into(),
            ..Default::default()
        }
    }

    /// With the subject (command, path, URL, pattern).
    pub fn with_subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// With a labelled detail.
    pub fn with_field(mut self, label: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.push(DisplayField {
            label: label.into(),
            value: value.into(),
        });
        self
    }

    /// With a file location.
    pub fn with_location(mut self, path: impl Into<String>, line: Option<u64>) -> Self {
        self.locations.push(Location {
            path: path.into(),
            line,
        });
        self
    }

    /// With a diff.
    pub fn with_diff(mut self, diff: FileDiff) -> Self {
        self.diff = Some(diff);
        self
    }

    /// With an output summary.
    pub fn with_output(mut self, output: OutputSummary) -> Self {
        self.output = Some(output);
        self
    }
}
