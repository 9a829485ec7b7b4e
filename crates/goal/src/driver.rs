//! The round driver: when a turn of a session with an active, armed goal ends, the next round
//! is queued as that session's next turn, with the original's continuation prompt and source
//! `{"kind":"goal","goalId","revision","round"}`. The decision is made while the ending turn is
//! still the agent's, so the agent goes straight on to the round (it never reports idle in
//! between, and whoever waits for it waits for the rounds).
//!
//! - An interrupted round (cancelled by the user, the parent or a hook) pauses the goal; any other
//!   interrupted turn disarms it, as does a failed or truncated (`max-tokens`) turn.
//! - The round limit (`maxGoalRounds`, and the configured hard cap) blocks the goal
//!   (`round-limit`) instead of starting another round.
//! - A prompt queued for the next turn goes first; the round waits for that turn's end.
//! - A round message whose goal revision or number is no longer the next one is dropped before
//!   its step (`agent/pre-step`).

use std::sync::Arc;

use dsh_agent::events::{AgentDisposed, AgentSessionStart};
use dsh_agent::hooks::PreStep;
use dsh_agent::{Agent, AgentStatus, Agents};
use dsh_goal_api::{BlockedReason, GoalPhase, GoalSource, SOURCE_KIND};
use dsh_kernel::{Ctx, KernelError};
use dsh_llm::{ContentBlock, Message, Role};
use dsh_session::data::AbortCause;
use dsh_session::data::TurnEndReason;
use dsh_session::plugin::SessionEvent;
use dsh_session::{CoreEvent, Event, EventKind};

use crate::service::{Activation, Goals};
use crate::texts;

/// Installs the driver's listeners and its pre-step check in `ctx`.
pub(crate) fn install(ctx: &Ctx, goals: Arc<Goals>) -> Result<(), KernelError> {
    let g = goals.clone();
    let c = ctx.clone();
    ctx.on::<SessionEvent>(move |e| {
        if *e.event.event_kind() != EventKind::TurnEnd {
            return Ok(());
        }
        // Only a live agent's turns (crash repair of a session being opened is not one).
        if let Some(agent) = c.get::<dyn Agents>().and_then(|a| a.get(&e.session_id)) {
            turn_ended(&g, &agent, &e.event);
        }
        Ok(())
    })?;
    let g = goals.clone();
    let c = ctx.clone();
    ctx.on::<AgentSessionStart>(move |e| {
        let Some(agent) = c.get::<dyn Agents>().and_then(|a| a.get(&e.agent_id)) else {
            return Ok(());
        };
        // A session that has a goal (resumed, forked) declares the goal tools.
        g.sync_tools(agent.as_ref());
        if e.resumed
            && g.config.arm_on_resume
            && g.get(agent.as_ref())
                .is_some_and(|v| v.goal().phase == GoalPhase::Active)
        {
            // The next turn's end continues the goal.
            g.set_activation(agent.as_ref(), Activation::Armed);
        }
        Ok(())
    })?;
    let g = goals.clone();
    ctx.on::<AgentDisposed>(move |e| {
        g.forget(&e.agent_id);
        Ok(())
    })?;
    let g = goals;
    ctx.hook::<PreStep, _, _>(move |mut input, next| {
        if input.batch.iter().any(|m| m.source.kind == SOURCE_KIND) {
            let agent = input.agent.clone();
            input.batch.retain(|m| match GoalSource::of(m) {
                None => m.source.kind != SOURCE_KIND,
                Some(s) => admits(&g, agent.as_ref(), &s),
            });
        }
        next.run(input)
    })?;
    Ok(())
}

/// Whether round `s` is the next one of the session's active, armed goal.
fn admits(goals: &Goals, agent: &dyn Agent, s: &GoalSource) -> bool {
    let ok = goals.get(agent).is_some_and(|v| {
        v.drivable()
            && v.goal().id == s.goal_id
            && v.goal().revision == s.revision
            && s.round == v.state.rounds_started + 1
            && s.round <= goals.limit(v.goal().max_goal_rounds)
    });
    if !ok {
        tracing::info!(agent = %agent.id(), round = s.round, "a stale goal round was dropped");
    }
    ok
}

/// Whether the turn that `end` closes admitted a round of the goal `goal_id` at `revision`.
fn was_round(agent: &dyn Agent, end: &Event, goal_id: &str, revision: u64) -> bool {
    agent.session().with_log(|log| {
        let events = log.events();
        let upto = events.partition_point(|e| e.seq() < end.seq());
        let Some(start) = events[..upto]
            .iter()
            .rposition(|e| *e.event_kind() == EventKind::TurnStart)
        else {
            return false;
        };
        events[start..upto].iter().any(|e| match e.core() {
            Some(CoreEvent::UserMessage(m)) => {
                GoalSource::of(&m.0).is_some_and(|s| s.goal_id == goal_id && s.revision == revision)
            }
            _ => false,
        })
    })
}

fn turn_ended(goals: &Goals, agent: &Arc<dyn Agent>, end: &Event) {
    let Some(CoreEvent::TurnEnd(t)) = end.core() else {
        return;
    };
    let Some(view) = goals.get(agent.as_ref()) else {
        return;
    };
    if !view.drivable() {
        return;
    }
    match &t.reason {
        TurnEndReason::Aborted { reason } => match reason {
            AbortCause::User | AbortCause::Parent | AbortCause::Hook { .. } => {
                let goal = view.goal();
                if was_round(agent.as_ref(), end, &goal.id, goal.revision) {
                    if let Err(e) = goals.pause(agent.as_ref(), &view.goal_ref()) {
                        tracing::warn!(agent = %agent.id(), error = %e, "could not pause the interrupted goal");
                        goals.disarm(agent.as_ref());
                    }
                } else {
                    goals.disarm(agent.as_ref());
                }
            }
            // Teardown: the logged goal stays active for the next process.
            _ => {}
        },
        TurnEndReason::MaxTokens | TurnEndReason::Error { .. } => goals.disarm(agent.as_ref()),
        _ => drive(goals, agent),
    }
}

/// Queues the next round of an active, armed goal (or blocks it at its round limit). Does
/// nothing while a prompt waits for the next turn (its end drives again).
pub(crate) fn drive(goals: &Goals, agent: &Arc<dyn Agent>) {
    if agent.status() == AgentStatus::Disposed {
        return;
    }
    let Some(view) = goals.get(agent.as_ref()) else {
        return;
    };
    if !view.drivable() || !agent.session().inbox().next_turn.is_empty() {
        return;
    }
    let goal = view.goal();
    let limit = goals.limit(goal.max_goal_rounds);
    if view.state.rounds_started >= limit {
        let message = if limit < goal.max_goal_rounds {
            format!("Goal reached the configured hard cap of {limit} rounds.")
        } else {
            format!("Goal reached its configured limit of {limit} rounds.")
        };
        let reason = BlockedReason {
            code: "round-limit".into(),
            message,
        };
        if let Err(e) = goals.block(agent.as_ref(), &view.goal_ref(), reason) {
            tracing::warn!(agent = %agent.id(), error = %e, "could not block the goal at its round limit");
            goals.disarm(agent.as_ref());
        }
        return;
    }
    let round = view.state.rounds_started + 1;
    let source = GoalSource {
        goal_id: goal.id.clone(),
        revision: goal.revision,
        round,
    };
    let message = Message::new(
        "",
        Role::User,
        vec![ContentBlock::text(texts::round_prompt(
            &goal.objective,
            round,
            goal.max_goal_rounds,
        ))],
        source.source(),
    );
    if let Err(e) = agent.followup(message) {
        tracing::warn!(agent = %agent.id(), round, error = %e, "could not queue the goal round");
        let reason = BlockedReason {
            code: "queue-failed".into(),
            message: format!("Could not queue goal round {round}: {e}"),
        };
        if goals
            .block(agent.as_ref(), &view.goal_ref(), reason)
            .is_err()
        {
            goals.disarm(agent.as_ref());
        }
    }
}

/// Starts the next round now when the agent is idle (after `/goal` created or resumed a goal).
pub(crate) fn kick(goals: &Goals, agent: &Arc<dyn Agent>) {
    if agent.status() == AgentStatus::Idle {
        drive(goals, agent);
    }
}
