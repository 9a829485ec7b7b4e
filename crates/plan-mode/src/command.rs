//! `/plan`: the command front ends run through the registry (`dsh-commands`).

use std::sync::Arc;

use dsh_commands::{CommandCall, CommandError, CommandFuture, CommandSpec, Commands};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_plan_mode_api::PlanMode;
use dsh_protocol::CommandOutcome;

/// Plugin `plan-command`: registers `/plan [on|off]` (toggles plan mode without an argument)
/// while both the command registry and the `plan-mode` service are mounted.
#[derive(Debug)]
pub struct PlanCommandPlugin;

impl Plugin for PlanCommandPlugin {
    const NAME: &'static str = "plan-command";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>(), Dep::on::<dyn PlanMode>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        let plan = ctx.dep::<dyn PlanMode>()?;
        let handler = move |call: CommandCall| -> CommandFuture {
            let plan = plan.clone();
            Box::pin(async move {
                let on = match call.args.as_str() {
                    "" => !plan.is_active(call.agent.id()),
                    "on" => true,
                    "off" => false,
                    other => {
                        return Err(CommandError::Usage(format!(
                            "`/plan {other}`: use /plan, /plan on or /plan off"
                        )));
                    }
                };
                plan.set(&call.agent, on, true)
                    .map_err(|e| CommandError::Failed(format!("cannot change plan mode: {e}")))?;
                // The logged `plan/mode` event tells every client what changed.
                Ok(CommandOutcome::Done {
                    text: String::new(),
                })
            })
        };
        commands.register(
            &ctx,
            CommandSpec::new(
                "plan",
                "Plan mode: read-only tools until a plan is accepted",
            )
            .with_argument_hint("[on|off]"),
            Arc::new(handler),
        )?;
        Ok(())
    }
}
