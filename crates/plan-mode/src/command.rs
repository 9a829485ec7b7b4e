//! `/plan`: the command front ends run through the registry (`dsh-commands`).

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_commands::{
    CommandCall, CommandError, CommandFuture, CommandProvider, CommandSpec, Commands,
};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_plan_mode_api::PlanMode;
use dsh_protocol::CommandOutcome;

/// Offers `/plan [on|off]` while the `plan-mode` service is mounted (looked up when the
/// commands are listed or run, so a composition without plan mode simply has no `/plan`).
struct Plan {
    ctx: Ctx,
}

impl CommandProvider for Plan {
    fn commands(&self, _agent: &Arc<dyn Agent>) -> Vec<CommandSpec> {
        match self.ctx.get::<dyn PlanMode>() {
            Some(_) => vec![
                CommandSpec::new(
                    "plan",
                    "Plan mode: read-only tools until a plan is accepted",
                )
                .with_argument_hint("[on|off]"),
            ],
            None => Vec::new(),
        }
    }

    fn run(&self, name: &str, call: CommandCall) -> Option<CommandFuture> {
        if name != "plan" {
            return None;
        }
        let plan = self.ctx.get::<dyn PlanMode>()?;
        Some(Box::pin(async move {
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
        }))
    }
}

/// Plugin `plan-command`: registers `/plan [on|off]` (toggles plan mode without an argument) in
/// the command registry; the command is offered while the `plan-mode` service is mounted.
#[derive(Debug)]
pub struct PlanCommandPlugin;

impl Plugin for PlanCommandPlugin {
    const NAME: &'static str = "plan-command";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        commands.provide(&ctx, Arc::new(Plan { ctx: ctx.clone() }))?;
        Ok(())
    }
}
