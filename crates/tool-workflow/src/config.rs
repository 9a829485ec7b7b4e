//! The `tool-workflow` plugin's config: the limits every run is held to.

use serde::Deserialize;

/// Config of the `tool-workflow` plugin (every field has a default).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct WorkflowConfig {
    /// Wall time of one run, in milliseconds (default 1,800,000: 30 minutes).
    pub max_wall_ms: u64,
    /// The script's heap, in bytes (default 64 MiB). Sub-agents are not counted.
    pub max_memory_bytes: u64,
    /// The script's stack, in bytes (default 1 MiB): deep recursion is a clear error.
    pub max_stack_bytes: u64,
    /// Sub-agents one run may start (default 50).
    pub max_agents: u64,
    /// Tokens (input and output) the run's sub-agents may use in all (default 5,000,000),
    /// counted as each of their responses ends; past it the run stops (its sub-agents are
    /// cancelled) and no new sub-agent starts.
    pub max_tokens: u64,
    /// Tools the script may call (`tools.<name>(args)`); read-only ones only (default read,
    /// grep, glob).
    pub tools: Vec<String>,
    /// Tools the sub-agents never get (default `workflow`: a workflow's children cannot start
    /// workflows of their own). Empty: they get the caller's tools.
    pub child_deny: Vec<String>,
    /// Accept `run_in_background` (default true): the run becomes a job of the `jobs`
    /// service.
    pub enable_run_in_background: bool,
}

impl Default for WorkflowConfig {
    fn default() -> Self {
        Self {
            max_wall_ms: 30 * 60 * 1000,
            max_memory_bytes: 64 << 20,
            max_stack_bytes: 1 << 20,
            max_agents: 50,
            max_tokens: 5_000_000,
            tools: ["read", "grep", "glob"].map(str::to_owned).to_vec(),
            child_deny: vec!["workflow".to_owned()],
            enable_run_in_background: true,
        }
    }
}

/// The tools a script may never call, whatever the config says (they write files, run
/// processes or reach the network).
pub const NEVER_SCRIPTED: [&str; 8] = [
    "bash",
    "write",
    "edit",
    "web_fetch",
    "web_search",
    "workflow",
    "subagent",
    "subagent_fork",
];
