//! The `goal` plugin: the goals service, the three tools and the round driver.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin, Service};
use dsh_tools::Tools;
use serde::Deserialize;

use crate::service::Goals;
use crate::tools::{GoalTool, GoalToolKind};

/// Config of the `goal` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GoalConfig {
    /// The round limit of a goal created without one (the original's default, 256).
    #[serde(default = "default_max")]
    pub default_max_goal_rounds: u64,
    /// `update_goal blocked` is refused in a goal round before this many rounds (3).
    #[serde(default = "default_blocked_after")]
    pub blocked_after_consecutive_rounds: u64,
    /// A cap on rounds whatever a goal's own limit says (none by default).
    #[serde(default)]
    pub hard_cap_rounds: Option<u64>,
    /// A session opened again with an active goal continues it after its next turn (dsh's
    /// default); `false` keeps the original's rule: it waits for a resume.
    #[serde(default = "yes")]
    pub arm_on_resume: bool,
}

fn default_max() -> u64 {
    256
}

fn default_blocked_after() -> u64 {
    3
}

fn yes() -> bool {
    true
}

impl Default for GoalConfig {
    fn default() -> Self {
        GoalConfig {
            default_max_goal_rounds: default_max(),
            blocked_after_consecutive_rounds: default_blocked_after(),
            hard_cap_rounds: None,
            arm_on_resume: true,
        }
    }
}

/// A config the `goal` plugin refuses.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A round limit is 0.
    #[error("goal: {0} must be at least 1")]
    BelowOne(&'static str),
}

impl Service for Goals {
    const NAME: &'static str = "goals";
}

/// Provides the `goals` service, registers `create_goal`, `get_goal` and `update_goal`, and
/// drives goal rounds.
#[derive(Debug)]
pub struct GoalPlugin;

impl Plugin for GoalPlugin {
    const NAME: &'static str = "goal";
    type Config = GoalConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, config: GoalConfig) -> Result<(), BoxError> {
        for (name, value) in [
            ("defaultMaxGoalRounds", Some(config.default_max_goal_rounds)),
            (
                "blockedAfterConsecutiveRounds",
                Some(config.blocked_after_consecutive_rounds),
            ),
            ("hardCapRounds", config.hard_cap_rounds),
        ] {
            if value == Some(0) {
                return Err(ConfigError::BelowOne(name).into());
            }
        }
        let tools = ctx.dep::<dyn Tools>()?;
        let goals = Arc::new(Goals::new(config));
        ctx.provide::<Goals>(goals.clone())?;
        tools.register(
            &ctx,
            Arc::new(GoalTool::new(
                GoalToolKind::Create,
                ctx.clone(),
                goals.clone(),
            )),
        )?;
        // `get_goal` and `update_goal`: in the scope of each agent whose session has a goal.
        let weak = Arc::downgrade(&goals);
        let c = ctx.clone();
        goals.set_declarer(Box::new(move |agent: &dyn dsh_agent::Agent| {
            let Some(goals) = weak.upgrade() else {
                return Vec::new();
            };
            let mut regs = Vec::new();
            for kind in [GoalToolKind::Get, GoalToolKind::Update] {
                let tool = Arc::new(GoalTool::new(kind, c.clone(), goals.clone()));
                match tools.register_removable(agent.ctx(), tool) {
                    Ok(r) => regs.push(r),
                    Err(e) => {
                        tracing::warn!(agent = %agent.id(), error = %e, "goal tools not declared")
                    }
                }
            }
            regs
        }));
        crate::driver::install(&ctx, goals)?;
        Ok(())
    }
}
