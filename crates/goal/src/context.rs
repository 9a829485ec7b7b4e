//! Plugin `goal-context`: the goal's section of what the model is told, as a runtime-context
//! section (`goal`) of the agent whose session has an active or paused goal.
//!
//! Runtime context, not a system-prompt section: the prompt is the head of every request and the
//! provider's cached prefix, so a goal set, edited, paused or ended mid-session must not change
//! it. A runtime-context change is appended as a new snapshot message at the next step (the
//! earlier request bytes stay as they were); a session without a goal carries nothing.

use std::sync::Arc;

use dsh_agent::Agents;
use dsh_goal_api::GoalPhase;
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_system_prompt::{Section, SystemPrompt, order};

use crate::service::Goals;
use crate::texts;

/// The runtime-context section's name.
pub const SECTION: &str = "goal";

/// Registers the `goal` runtime-context section while the `goals` and `system-prompt` services
/// are mounted.
#[derive(Debug)]
pub struct GoalContextPlugin;

impl Plugin for GoalContextPlugin {
    const NAME: &'static str = "goal-context";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<Goals>(), Dep::on::<dyn SystemPrompt>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let goals = ctx.dep::<Goals>()?;
        let prompt = ctx.dep::<dyn SystemPrompt>()?;
        let weak = Arc::downgrade(&goals);
        let c = ctx.clone();
        let section = Section::computed(SECTION, move |assembly| {
            let (Some(goals), Some(id)) = (weak.upgrade(), assembly.agent_id.as_deref()) else {
                return Ok(String::new());
            };
            let Some(agent) = c.get::<dyn Agents>().and_then(|a| a.get(id)) else {
                return Ok(String::new());
            };
            let Some(view) = goals.get(agent.as_ref()) else {
                return Ok(String::new());
            };
            let goal = view.goal();
            Ok(match goal.phase {
                GoalPhase::Active => texts::context_active(
                    &goal.objective,
                    goals.config.blocked_after_consecutive_rounds,
                ),
                GoalPhase::Paused => texts::context_paused(&goal.objective),
                // Ended: nothing more to steer (get_goal still reads it).
                GoalPhase::Blocked | GoalPhase::Complete => String::new(),
            })
        })
        .with_order(order::GOAL)
        .raw();
        prompt.runtime_context(&ctx, section)?;
        Ok(())
    }
}
