//! The plugin registry of the binary and the layered composition (preset, user file, --config,
//! --patch).

use std::path::Path;

use anyhow::Context as _;
use dsh_kernel::{Composition, Layer, PluginRegistry};

use crate::home;
use crate::{ComposeArgs, Failure};

/// The built-in `headless` preset as written (tests compare it with its JSON form).
#[cfg(test)]
pub(crate) const HEADLESS_PRESET: &str = include_str!("../presets/headless.yaml");
/// `presets/headless.yaml` as JSON (converted by build.rs): what a start parses.
const HEADLESS_PRESET_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/headless.json"));

/// The built-in `headless` composition (`preset:headless`).
pub(crate) fn headless_preset() -> Result<Layer, Failure> {
    Layer::parse_json("preset:headless", HEADLESS_PRESET_JSON).map_err(Failure::usage)
}

/// Every plugin the binary knows, by name.
pub(crate) fn registry() -> PluginRegistry {
    let mut r = PluginRegistry::new();
    r.register::<dsh_session::plugin::SessionsPlugin>()
        .register::<dsh_session_jsonl::JsonlPlugin>()
        .register::<dsh_session_postgres::PgPlugin>()
        .register::<dsh_session_title::SessionTitlePlugin>()
        .register::<dsh_catalog::CatalogPlugin>()
        .register::<dsh_llm::service::LlmPlugin>()
        .register::<dsh_llm::AttachmentLocalPlugin>()
        .register::<dsh_llm_deepseek::DeepSeekPlugin>()
        .register::<dsh_llm_anthropic::AnthropicPlugin>()
        .register::<dsh_llm_openai::OpenAiPlugin>()
        .register::<dsh_llm_twin::TwinPlugin>()
        .register::<dsh_llm_retry::LlmRetryPlugin>()
        .register::<dsh_system_prompt::SystemPromptPlugin>()
        .register::<dsh_tools::ToolsPlugin>()
        .register::<dsh_tools::ToolTimeoutPlugin>()
        .register::<dsh_bash_local::LocalShellPlugin>()
        .register::<dsh_tool_bash::BashToolPlugin>()
        .register::<dsh_tool_fs::FsToolsPlugin>()
        .register::<dsh_tool_fs::ReadBeforeWritePlugin>()
        .register::<dsh_sandbox_local::SandboxPlugin>()
        .register::<dsh_sandbox_local::SandboxContextPlugin>()
        .register::<dsh_approval::ApprovalPlugin>()
        .register::<dsh_approval::ScriptedAnswererPlugin>()
        .register::<dsh_agent::AgentsPlugin>()
        .register::<dsh_agent_loop::AgentLoopPlugin>()
        .register::<dsh_compaction::ToolResultPrunerPlugin>()
        .register::<dsh_compaction::CompactionBasicPlugin>()
        .register::<dsh_subagent::SubagentsPlugin>()
        .register::<dsh_tool_subagent::SubagentToolsPlugin>()
        .register::<dsh_jobs::JobsPlugin>()
        .register::<dsh_jobs::ToolJobsPlugin>()
        .register::<dsh_context::ContextPlugin>()
        .register::<dsh_hooks::HooksPlugin>()
        .register::<crate::sdk_cmd::SdkServerPlugin>()
        .register::<dsh_mcp_client::McpClientPlugin>()
        .register::<dsh_tool_todo::TodoToolPlugin>()
        .register::<dsh_tool_workdir::WorkingDirectoryToolPlugin>()
        .register::<dsh_plan_mode::PlanModePlugin>()
        .register::<dsh_tool_web::WebToolsPlugin>()
        .register::<dsh_tool_image::ImageToolPlugin>()
        .register::<dsh_mcp_client::McpResourcesPlugin>()
        .register::<dsh_commands::CommandsPlugin>()
        .register::<dsh_compaction::CompactCommandPlugin>()
        .register::<dsh_plan_mode::PlanCommandPlugin>()
        .register::<dsh_goal::GoalPlugin>()
        .register::<dsh_goal::GoalCommandPlugin>()
        .register::<dsh_goal::GoalContextPlugin>()
        .register::<dsh_tool_ask_user::AskUserToolPlugin>()
        .register::<dsh_tool_workflow::WorkflowToolPlugin>()
        .register::<dsh_checkpoint::CheckpointPlugin>()
        .register::<dsh_checkpoint::RewindCommandPlugin>()
        .register::<dsh_context::ContextCommandsPlugin>();
    r
}

fn read_layer(path: &Path) -> Result<Layer, Failure> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(Failure::usage)?;
    Layer::parse(path.display().to_string(), &text).map_err(Failure::usage)
}

/// The layers in order: the preset, `$DSH_HOME/dsh.yaml` if present, the `mcpServers` of
/// `$DSH_HOME/mcp.json` and the project's `.mcp.json`, `--config`, each `--patch`, the store of
/// `--store` / `DSH_STORE`.
pub(crate) fn layers(args: &ComposeArgs) -> Result<Vec<Layer>, Failure> {
    let mut layers = vec![headless_preset()?];
    let user = home::user_file();
    if user.is_file() {
        layers.push(read_layer(&user)?);
    }
    layers.extend(crate::mcp_cmd::layers(args.project_dir.as_deref())?);
    if let Some(c) = &args.config {
        layers.push(read_layer(c)?);
    }
    for p in &args.patch {
        layers.push(read_layer(p)?);
    }
    // `--store URL` / `DSH_STORE`: the PostgreSQL store's row in place of session-jsonl's.
    layers.extend(crate::store_cmd::layer(args.store.as_deref())?);
    Ok(layers)
}

/// The validated composition of `layers` plus command-line overrides.
pub(crate) fn compose(
    args: &ComposeArgs,
    overrides: Option<Layer>,
    registry: &PluginRegistry,
) -> Result<Composition, Failure> {
    let mut layers = layers(args)?;
    if let Some(o) = overrides {
        layers.push(o);
    }
    let mut composition = Composition::compose(&layers, registry).map_err(Failure::usage)?;
    crate::mcp_cmd::require_sandbox(&mut composition);
    Ok(composition)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON a start reads is the YAML's composition, row for row (build.rs converts it).
    #[test]
    fn the_built_in_presets_read_as_json_are_their_yaml() {
        let yaml = Layer::parse("preset:headless", HEADLESS_PRESET).unwrap();
        let json = headless_preset().unwrap();
        assert!(yaml.rows.len() > 20, "{} rows", yaml.rows.len());
        assert_eq!(json, yaml);
        let yaml = Layer::parse("profile:sdk", include_str!("../presets/sdk.yaml")).unwrap();
        let json = Layer::parse_json(
            "profile:sdk",
            include_str!(concat!(env!("OUT_DIR"), "/sdk.json")),
        )
        .unwrap();
        assert!(!yaml.rows.is_empty());
        assert_eq!(json, yaml);
    }
}
