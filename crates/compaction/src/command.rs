//! `/compact`: the command front ends run through the registry (`dsh-commands`).

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_commands::{
    CommandCall, CommandError, CommandFuture, CommandProvider, CommandSpec, Commands,
};
use dsh_compaction_api::{Compaction, NOTHING_TO_COMPACT};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_protocol::CommandOutcome;

/// Offers `/compact` while a `compaction` service is mounted (looked up when the commands are
/// listed or run, so a composition without compaction simply has no `/compact`).
struct Compact {
    ctx: Ctx,
}

impl Compact {
    fn spec() -> CommandSpec {
        CommandSpec::new("compact", "Summarise the earlier history to free context")
    }
}

impl CommandProvider for Compact {
    fn commands(&self, _agent: &Arc<dyn Agent>) -> Vec<CommandSpec> {
        match self.ctx.get::<dyn Compaction>() {
            Some(_) => vec![Self::spec()],
            None => Vec::new(),
        }
    }

    fn run(&self, name: &str, call: CommandCall) -> Option<CommandFuture> {
        if name != "compact" {
            return None;
        }
        let compaction = self.ctx.get::<dyn Compaction>()?;
        Some(Box::pin(async move {
            match compaction.compact_now(call.agent, call.cancel, None).await {
                Ok(Some(outcome)) => Ok(CommandOutcome::Done {
                    text: outcome.describe(),
                }),
                Ok(None) => Ok(CommandOutcome::Done {
                    text: NOTHING_TO_COMPACT.to_owned(),
                }),
                Err(e) => Err(CommandError::Failed(format!("compaction failed: {e}"))),
            }
        }))
    }
}

/// Plugin `compact-command`: registers `/compact` (a manual compaction of the session, when it
/// is idle) in the command registry; the command is offered while a `compaction` service is
/// mounted.
#[derive(Debug)]
pub struct CompactCommandPlugin;

impl Plugin for CompactCommandPlugin {
    const NAME: &'static str = "compact-command";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        commands.provide(&ctx, Arc::new(Compact { ctx: ctx.clone() }))?;
        Ok(())
    }
}
