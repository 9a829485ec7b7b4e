//! `/goal`: the original's command grammar, run through the command registry.

use std::sync::Arc;

use dsh_agent::{Agent, AgentStatus, CancelCause};
use dsh_commands::{
    CommandCall, CommandError, CommandFuture, CommandProvider, CommandSpec, Commands,
};
use dsh_goal_api::GoalPhase;
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_protocol::CommandOutcome;

use crate::driver;
use crate::service::{Activation, GoalError, GoalView, Goals};
use crate::texts::USAGE;

/// A parsed `/goal` line.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    Show,
    Clear,
    Pause,
    Resume,
    InvalidEdit,
    Edit(String),
    Create(String),
}

fn parse(raw: &str) -> Parsed {
    let input = raw.trim();
    if input.is_empty() {
        return Parsed::Show;
    }
    match input.to_lowercase().as_str() {
        "clear" => return Parsed::Clear,
        "pause" => return Parsed::Pause,
        "resume" => return Parsed::Resume,
        "edit" => return Parsed::InvalidEdit,
        _ => {}
    }
    let mut chars = input.char_indices();
    let head: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
    if head.eq_ignore_ascii_case("edit")
        && let Some((i, c)) = chars.next()
        && c.is_whitespace()
    {
        return Parsed::Edit(input[i..].trim().to_owned());
    }
    Parsed::Create(input.to_owned())
}

fn hint(v: &GoalView) -> &'static str {
    match v.goal().phase {
        GoalPhase::Active if v.activation == Activation::Armed => {
            "/goal edit <objective>, /goal pause, /goal clear"
        }
        GoalPhase::Active | GoalPhase::Paused | GoalPhase::Blocked => {
            "/goal edit <objective>, /goal resume, /goal clear"
        }
        GoalPhase::Complete => "/goal <objective>, /goal clear",
    }
}

/// The original's rendering of a goal for the user.
pub fn render(title: &str, v: &GoalView) -> String {
    let g = v.goal();
    let mut lines = vec![title.to_owned(), format!("Status: {}", g.phase.as_str())];
    if let Some(r) = &g.blocked_reason {
        lines.push(format!("Blocker: {}: {}", r.code, r.message));
    }
    lines.push(format!("Objective: {}", g.objective));
    lines.push(format!(
        "Rounds: {}/{}",
        v.state.rounds_started, g.max_goal_rounds
    ));
    lines.push(format!(
        "Activation: {}",
        match v.activation {
            Activation::Armed => "armed",
            Activation::Disarmed => "disarmed",
        }
    ));
    lines.push(String::new());
    lines.push(format!("Commands: {}", hint(v)));
    lines.join("\n")
}

fn done(text: String) -> Result<CommandOutcome, CommandError> {
    Ok(CommandOutcome::Done { text })
}

fn invalid(_e: GoalError) -> CommandError {
    CommandError::Failed(
        "The goal command is not valid for the current state. Run /goal to view available \
         commands."
            .into(),
    )
}

/// Runs `/goal <args>` for `agent`.
pub fn run(
    goals: &Goals,
    agent: &Arc<dyn Agent>,
    args: &str,
) -> Result<CommandOutcome, CommandError> {
    let current = goals.get(agent.as_ref());
    let a = agent.as_ref();
    let missing = |what: &str| {
        Err(CommandError::Usage(format!(
            "No goal is currently set; /goal {what} requires one. {USAGE}"
        )))
    };
    match parse(args) {
        Parsed::Show => match current {
            None => done(format!("No goal is currently set.\n{USAGE}")),
            Some(v) => done(render("Goal", &v)),
        },
        Parsed::InvalidEdit => Err(CommandError::Usage(format!(
            "Goal editing requires a replacement objective.\n{USAGE}"
        ))),
        Parsed::Create(objective) => {
            if let Some(c) = &current
                && c.goal().phase != GoalPhase::Complete
            {
                return Err(CommandError::Failed(format!(
                    "A goal is already {}. Use /goal edit <objective> to change it or /goal clear \
                     before replacing it.",
                    c.goal().phase.as_str()
                )));
            }
            let v = goals.create(a, &objective, None).map_err(invalid)?;
            driver::kick(goals, agent);
            done(render("Goal created", &v))
        }
        Parsed::Edit(objective) => match current {
            None => missing("edit"),
            Some(c) if c.goal().phase == GoalPhase::Complete => {
                let v = goals.create(a, &objective, None).map_err(invalid)?;
                driver::kick(goals, agent);
                done(render("Goal created", &v))
            }
            Some(c) => {
                let v = goals
                    .edit(a, &c.goal_ref(), Some(&objective), None)
                    .map_err(invalid)?;
                done(render("Goal updated", &v))
            }
        },
        Parsed::Pause => match current {
            None => missing("pause"),
            Some(c) => {
                let v = goals.pause(a, &c.goal_ref()).map_err(invalid)?;
                if agent.status() == AgentStatus::Running {
                    // The round in progress stops; what is queued stays.
                    agent.cancel(CancelCause::User, true);
                }
                done(render("Goal paused", &v))
            }
        },
        Parsed::Resume => match current {
            None => missing("resume"),
            Some(c) if c.drivable() => {
                // Already armed (a resumed session): start its next round now.
                driver::kick(goals, agent);
                done(render("Goal resumed", &c))
            }
            Some(c) => {
                let v = goals.resume(a, &c.goal_ref()).map_err(invalid)?;
                driver::kick(goals, agent);
                done(render("Goal resumed", &v))
            }
        },
        Parsed::Clear => match current {
            None => done("No goal to clear.".into()),
            Some(c) => {
                goals.clear(a, &c.goal_ref()).map_err(invalid)?;
                done("Goal cleared.".into())
            }
        },
    }
}

/// Offers `/goal` while the `goals` service is mounted.
struct GoalCommand {
    ctx: Ctx,
}

impl CommandProvider for GoalCommand {
    fn commands(&self, _agent: &Arc<dyn Agent>) -> Vec<CommandSpec> {
        match self.ctx.get::<Goals>() {
            Some(_) => vec![
                CommandSpec::new("goal", "Set or view the goal for a long-running task")
                    .with_argument_hint("[<objective>|clear|edit <objective>|pause|resume]"),
            ],
            None => Vec::new(),
        }
    }

    fn run(&self, name: &str, call: CommandCall) -> Option<CommandFuture> {
        if name != "goal" {
            return None;
        }
        let goals = self.ctx.get::<Goals>()?;
        Some(Box::pin(
            async move { run(&goals, &call.agent, &call.args) },
        ))
    }
}

/// Plugin `goal-command`: `/goal [<objective>|clear|edit <objective>|pause|resume]` in the
/// command registry, offered while the `goal` plugin's service is mounted.
#[derive(Debug)]
pub struct GoalCommandPlugin;

impl Plugin for GoalCommandPlugin {
    const NAME: &'static str = "goal-command";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        commands.provide(&ctx, Arc::new(GoalCommand { ctx: ctx.clone() }))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_is_the_originals() {
        assert_eq!(parse("  "), Parsed::Show);
        assert_eq!(parse("PAUSE"), Parsed::Pause);
        assert_eq!(parse("resume"), Parsed::Resume);
        assert_eq!(parse("clear"), Parsed::Clear);
        assert_eq!(parse("edit"), Parsed::InvalidEdit);
        assert_eq!(
            parse("Edit  make it fast "),
            Parsed::Edit("make it fast".into())
        );
        assert_eq!(
            parse("editor support"),
            Parsed::Create("editor support".into())
        );
        assert_eq!(
            parse("ship the release"),
            Parsed::Create("ship the release".into())
        );
    }
}
