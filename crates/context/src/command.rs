//! The project's custom commands and user-invocable skills as registry commands
//! (`dsh-commands`), so every front end lists and runs them the same way.

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_commands::{CommandCall, CommandFuture, CommandProvider, CommandSpec, Commands};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_llm::Message;
use dsh_protocol::{CommandOutcome, CommandSource};

use crate::{ContextConfig, ProjectPaths, report};

/// Lists a session's custom commands and skills from its working directory; running one sends
/// `/name args` as the prompt, which the `context` plugin expands when the turn starts.
struct ProjectCommands {
    config: ContextConfig,
}

impl ProjectCommands {
    fn specs(&self, agent: &Arc<dyn Agent>) -> Vec<CommandSpec> {
        let cwd = agent.options().cwd;
        let report = report::load(
            ProjectPaths::discover(&cwd, &self.config.instructions.project_root_markers),
            &self.config.instructions,
            &self.config.custom_skill_dirs,
        );
        let mut out: Vec<CommandSpec> = report
            .commands
            .commands
            .iter()
            .map(|c| CommandSpec {
                name: c.name.clone(),
                description: c.description.clone(),
                argument_hint: c.argument_hint.clone(),
                source: CommandSource::Custom,
            })
            .collect();
        for s in report.skills.skills.iter().filter(|s| s.user_invocable) {
            if !out.iter().any(|c| c.name == s.name) {
                out.push(
                    CommandSpec::new(s.name.clone(), s.description.clone())
                        .with_source(CommandSource::Skill),
                );
            }
        }
        out
    }
}

impl CommandProvider for ProjectCommands {
    fn commands(&self, agent: &Arc<dyn Agent>) -> Vec<CommandSpec> {
        self.specs(agent)
    }

    fn run(&self, name: &str, call: CommandCall) -> Option<CommandFuture> {
        if !self.specs(&call.agent).iter().any(|c| c.name == name) {
            return None;
        }
        let prompt = if call.args.is_empty() {
            format!("/{name}")
        } else {
            format!("/{name} {}", call.args)
        };
        Some(Box::pin(async move {
            call.agent
                .followup(Message::user_text(
                    dsh_session::ids::message_id(),
                    prompt.clone(),
                ))
                .map_err(|e| dsh_commands::CommandError::Failed(e.to_string()))?;
            Ok(CommandOutcome::Submitted { prompt })
        }))
    }
}

/// Plugin `context-commands`: offers every session its project's custom commands
/// (`.dsh/commands`, `.claude/commands`, …) and user-invocable skills through the command
/// registry, found with the default context settings.
#[derive(Debug)]
pub struct ContextCommandsPlugin;

impl Plugin for ContextCommandsPlugin {
    const NAME: &'static str = "context-commands";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        commands.provide(
            &ctx,
            Arc::new(ProjectCommands {
                config: ContextConfig::default(),
            }),
        )?;
        Ok(())
    }
}
