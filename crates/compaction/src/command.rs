//! `/compact`: the command front ends run through the registry (`dsh-commands`).

use std::sync::Arc;

use dsh_commands::{CommandCall, CommandError, CommandFuture, CommandSpec, Commands};
use dsh_compaction_api::{Compaction, NOTHING_TO_COMPACT};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_protocol::CommandOutcome;

/// Plugin `compact-command`: registers `/compact` (a manual compaction of the session, when it
/// is idle) for every session while both the command registry and a `compaction` service are
/// mounted.
#[derive(Debug)]
pub struct CompactCommandPlugin;

impl Plugin for CompactCommandPlugin {
    const NAME: &'static str = "compact-command";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>(), Dep::on::<dyn Compaction>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        let compaction = ctx.dep::<dyn Compaction>()?;
        let handler = move |call: CommandCall| -> CommandFuture {
            let compaction = compaction.clone();
            Box::pin(async move {
                match compaction.compact_now(call.agent, call.cancel, None).await {
                    Ok(Some(outcome)) => Ok(CommandOutcome::Done {
                        text: outcome.describe(),
                    }),
                    Ok(None) => Ok(CommandOutcome::Done {
                        text: NOTHING_TO_COMPACT.to_owned(),
                    }),
                    Err(e) => Err(CommandError::Failed(format!("compaction failed: {e}"))),
                }
            })
        };
        commands.register(
            &ctx,
            CommandSpec::new("compact", "Summarise the earlier history to free context"),
            Arc::new(handler),
        )?;
        Ok(())
    }
}
