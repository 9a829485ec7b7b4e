//! The goal service: each session's goal folded from its log, its process-local activation, and
//! the mutations (each one `goal/change` event, as the original's `GoalService`).

use std::collections::HashMap;

use dsh_agent::Agent;
use dsh_goal_api::{
    BlockedReason, Goal, GoalChange, GoalFold, GoalOperation, GoalPhase, GoalRef, GoalState,
};
use dsh_kernel::Registration;
use dsh_session::{NewEvent, Session};
use parking_lot::{Mutex, ReentrantMutex};
use serde::Serialize;

use crate::GoalConfig;

/// Whether the driver may start rounds of a session's active goal. Not logged: a process that
/// opens a session starts disarmed (the original's rule), unless `armOnResume` arms it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// Rounds may start.
    Armed,
    /// No rounds until a resume.
    #[default]
    Disarmed,
}

/// The goal with its activation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoalView {
    /// The logged state.
    pub state: GoalState,
    /// Whether rounds may start.
    pub activation: Activation,
}

impl GoalView {
    /// The goal.
    pub fn goal(&self) -> &Goal {
        &self.state.goal
    }

    /// Whether the driver starts its next round.
    pub fn drivable(&self) -> bool {
        self.state.goal.phase == GoalPhase::Active && self.activation == Activation::Armed
    }

    /// Its identity.
    pub fn goal_ref(&self) -> GoalRef {
        GoalRef {
            id: self.state.goal.id.clone(),
            revision: self.state.goal.revision,
        }
    }
}

/// A refused goal operation (the original's `GoalError` codes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoalError {
    /// A goal that is not complete exists.
    #[error("goal \"{id}\" already exists with phase \"{phase}\"")]
    AlreadyExists {
        /// Its id.
        id: String,
        /// Its phase.
        phase: &'static str,
    },
    /// No goal.
    #[error("no current goal")]
    NotFound,
    /// The caller's revision is not the current one.
    #[error(
        "stale goal ref \"{id}\" revision {revision}; current is \"{current_id}\" revision {current_revision}"
    )]
    Stale {
        /// The id given.
        id: String,
        /// The revision given.
        revision: u64,
        /// The current id.
        current_id: String,
        /// The current revision.
        current_revision: u64,
    },
    /// Not allowed from the current phase (or activation, or round budget).
    #[error("{0}")]
    InvalidTransition(String),
    /// An edit that changes nothing.
    #[error("goal edit requires objective and/or maxGoalRounds")]
    InvalidEdit,
    /// A round limit below 1.
    #[error("maxGoalRounds must be a positive safe integer")]
    InvalidMaxRounds,
    /// An empty objective.
    #[error("goal objective must be a non-empty string")]
    InvalidObjective,
    /// The log's goal events break the format; the goal cannot change.
    #[error("{0}")]
    Replay(String),
    /// The change could not be logged.
    #[error("cannot record the goal change: {0}")]
    Record(String),
}

impl GoalError {
    /// The original's code.
    pub fn code(&self) -> &'static str {
        match self {
            GoalError::AlreadyExists { .. } => "GOAL_ALREADY_EXISTS",
            GoalError::NotFound => "GOAL_NOT_FOUND",
            GoalError::Stale { .. } => "GOAL_STALE_REVISION",
            GoalError::InvalidTransition(_) => "GOAL_INVALID_TRANSITION",
            GoalError::InvalidEdit => "GOAL_INVALID_EDIT",
            GoalError::InvalidMaxRounds => "GOAL_INVALID_MAX_ROUNDS",
            GoalError::InvalidObjective => "GOAL_INVALID_OBJECTIVE",
            GoalError::Replay(_) => "GOAL_REPLAY_FAILED",
            GoalError::Record(_) => "GOAL_RECORD_FAILED",
        }
    }
}

#[derive(Default)]
struct Entry {
    fold: GoalFold,
    /// The last seq folded.
    through: Option<u64>,
    activation: Activation,
    /// `get_goal` and `update_goal` in the agent's scope, while the session has a goal.
    tools: Vec<Registration>,
}

/// Declares the tools a session with a goal gets, in its agent's scope.
pub(crate) type Declarer = Box<dyn Fn(&dyn Agent) -> Vec<Registration> + Send + Sync>;

/// Goals of every live session.
pub struct Goals {
    pub(crate) config: GoalConfig,
    entries: Mutex<HashMap<String, Entry>>,
    /// Serialises mutations (re-entrant: a listener of a change's commit may mutate too).
    mutating: ReentrantMutex<()>,
    declarer: std::sync::OnceLock<Declarer>,
}

impl std::fmt::Debug for Goals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Goals")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn now() -> u64 {
    u64::try_from(dsh_session::now_ms()).unwrap_or(0)
}

fn phase_name(g: &Goal) -> &'static str {
    g.phase.as_str()
}

impl Goals {
    /// The service with `config`.
    pub fn new(config: GoalConfig) -> Self {
        Goals {
            config,
            entries: Mutex::new(HashMap::new()),
            mutating: ReentrantMutex::new(()),
            declarer: std::sync::OnceLock::new(),
        }
    }

    /// Sets what declares `get_goal` and `update_goal` for a session with a goal (once).
    pub(crate) fn set_declarer(&self, declarer: Declarer) {
        let _ = self.declarer.set(declarer);
    }

    /// Declares `get_goal` and `update_goal` to the agent while its session has a goal, and
    /// withdraws them when it has none (the tool set only grows when a goal exists, so a
    /// session without one pays no schema bytes for them).
    pub fn sync_tools(&self, agent: &dyn Agent) {
        let session = agent.session();
        let (has_goal, declared) = self.with_entry(&session, |e| {
            (e.fold.current.is_some(), !e.tools.is_empty())
        });
        if has_goal && !declared {
            let Some(declare) = self.declarer.get() else {
                return;
            };
            let regs = declare(agent);
            self.with_entry(&session, |e| e.tools.extend(regs));
        } else if !has_goal && declared {
            let regs = self.with_entry(&session, |e| std::mem::take(&mut e.tools));
            for r in regs {
                r.dispose();
            }
        }
    }

    /// Folds what `session` logged since the last look; runs `f` on its entry.
    fn with_entry<R>(&self, session: &Session, f: impl FnOnce(&mut Entry) -> R) -> R {
        let mut map = self.entries.lock();
        let e = map.entry(session.id().to_owned()).or_default();
        session.with_log(|log| {
            let events = log.events();
            let start = e
                .through
                .map_or(0, |t| events.partition_point(|ev| ev.seq() <= t));
            for ev in &events[start..] {
                e.fold.apply(ev);
            }
            if let Some(last) = events.last() {
                e.through = Some(last.seq());
            }
        });
        f(e)
    }

    /// The most rounds a goal with limit `max` runs: `max`, or the hard cap when lower.
    pub fn limit(&self, max: u64) -> u64 {
        self.config.hard_cap_rounds.map_or(max, |cap| cap.min(max))
    }

    /// The session's goal (`None`: none, or cleared).
    pub fn get(&self, agent: &dyn Agent) -> Option<GoalView> {
        self.view_of(&agent.session())
    }

    fn view_of(&self, session: &Session) -> Option<GoalView> {
        self.with_entry(session, |e| {
            e.fold.current.clone().map(|state| GoalView {
                state,
                activation: e.activation,
            })
        })
    }

    /// The first replay failure of the session's goal events, if any.
    pub fn failure(&self, agent: &dyn Agent) -> Option<String> {
        self.with_entry(&agent.session(), |e| e.fold.failure.clone())
    }

    /// Sets the activation (no event: it is process-local).
    pub fn set_activation(&self, agent: &dyn Agent, activation: Activation) {
        self.with_entry(&agent.session(), |e| e.activation = activation);
    }

    /// Stops automatic rounds without changing the logged goal.
    pub fn disarm(&self, agent: &dyn Agent) {
        self.set_activation(agent, Activation::Disarmed);
    }

    /// Forgets a session (its agent was disposed).
    pub fn forget(&self, session_id: &str) {
        self.entries.lock().remove(session_id);
    }

    /// Runs one mutation: `f` proposes the change from the current state; it is logged, then the
    /// activation is set.
    fn mutate(
        &self,
        agent: &dyn Agent,
        f: impl FnOnce(Option<&GoalState>) -> Result<(GoalChange, Activation), GoalError>,
    ) -> Result<Option<GoalView>, GoalError> {
        let _serial = self.mutating.lock();
        let session = agent.session();
        let (current, failure) = self.with_entry(&session, |e| {
            (e.fold.current.clone(), e.fold.failure.clone())
        });
        if let Some(why) = failure {
            return Err(GoalError::Replay(why));
        }
        let (change, activation) = f(current.as_ref())?;
        let event = NewEvent::plugin(&change).map_err(|e| GoalError::Record(e.to_string()))?;
        session
            .append(event)
            .map_err(|e| GoalError::Record(e.to_string()))?;
        self.with_entry(&session, |e| e.activation = activation);
        tracing::debug!(session = %session.id(), ?change, "goal changed");
        self.sync_tools(agent);
        Ok(self.view_of(&session))
    }

    fn current_at<'a>(
        current: Option<&'a GoalState>,
        r: &GoalRef,
    ) -> Result<&'a GoalState, GoalError> {
        let cur = current.ok_or(GoalError::NotFound)?;
        if cur.goal.id != r.id || cur.goal.revision != r.revision {
            return Err(GoalError::Stale {
                id: r.id.clone(),
                revision: r.revision,
                current_id: cur.goal.id.clone(),
                current_revision: cur.goal.revision,
            });
        }
        Ok(cur)
    }

    fn snapshot(cur: &GoalState, operation: GoalOperation, goal: Goal) -> GoalChange {
        GoalChange::Snapshot {
            operation,
            goal,
            rounds_started: cur.rounds_started,
            created_at: cur.created_at,
            updated_at: now().max(cur.updated_at),
        }
    }

    fn with_phase(cur: &Goal, phase: GoalPhase) -> Goal {
        Goal {
            id: cur.id.clone(),
            revision: cur.revision + 1,
            objective: cur.objective.clone(),
            phase,
            max_goal_rounds: cur.max_goal_rounds,
            blocked_reason: None,
        }
    }

    fn transition_error(cur: &Goal, op: &str, allowed: &[GoalPhase]) -> GoalError {
        let allowed: Vec<&str> = allowed.iter().map(|p| p.as_str()).collect();
        GoalError::InvalidTransition(format!(
            "cannot {op} goal \"{}\" from phase \"{}\"; expected {}",
            cur.id,
            phase_name(cur),
            allowed.join(" or ")
        ))
    }

    /// Creates and arms a goal (a complete one may be replaced).
    pub fn create(
        &self,
        agent: &dyn Agent,
        objective: &str,
        max_goal_rounds: Option<u64>,
    ) -> Result<GoalView, GoalError> {
        let objective = objective.trim().to_owned();
        if objective.is_empty() {
            return Err(GoalError::InvalidObjective);
        }
        let max = max_goal_rounds.unwrap_or(self.config.default_max_goal_rounds);
        if max < 1 {
            return Err(GoalError::InvalidMaxRounds);
        }
        self.mutate(agent, |cur| {
            if let Some(c) = cur
                && c.goal.phase != GoalPhase::Complete
            {
                return Err(GoalError::AlreadyExists {
                    id: c.goal.id.clone(),
                    phase: phase_name(&c.goal),
                });
            }
            let t = now();
            let goal = Goal {
                id: format!("goal-{}", uuid::Uuid::now_v7()),
                revision: 1,
                objective,
                phase: GoalPhase::Active,
                max_goal_rounds: max,
                blocked_reason: None,
            };
            Ok((
                GoalChange::Snapshot {
                    operation: GoalOperation::Create,
                    goal,
                    rounds_started: 0,
                    created_at: t,
                    updated_at: t,
                },
                Activation::Armed,
            ))
        })?
        .ok_or(GoalError::NotFound)
    }

    /// A new objective and/or round limit; the phase is kept.
    pub fn edit(
        &self,
        agent: &dyn Agent,
        r: &GoalRef,
        objective: Option<&str>,
        max_goal_rounds: Option<u64>,
    ) -> Result<GoalView, GoalError> {
        if objective.is_none() && max_goal_rounds.is_none() {
            return Err(GoalError::InvalidEdit);
        }
        let objective = match objective.map(str::trim) {
            Some("") => return Err(GoalError::InvalidObjective),
            o => o.map(str::to_owned),
        };
        if max_goal_rounds == Some(0) {
            return Err(GoalError::InvalidMaxRounds);
        }
        let activation = self.get(agent).map(|v| v.activation).unwrap_or_default();
        self.mutate(agent, |cur| {
            let cur = Self::current_at(cur, r)?;
            let mut goal = cur.goal.clone();
            goal.revision += 1;
            if let Some(o) = objective {
                goal.objective = o;
            }
            if let Some(m) = max_goal_rounds {
                goal.max_goal_rounds = m;
            }
            Ok((Self::snapshot(cur, GoalOperation::Edit, goal), activation))
        })?
        .ok_or(GoalError::NotFound)
    }

    /// Active → paused (disarmed).
    pub fn pause(&self, agent: &dyn Agent, r: &GoalRef) -> Result<GoalView, GoalError> {
        self.mutate(agent, |cur| {
            let cur = Self::current_at(cur, r)?;
            if cur.goal.phase != GoalPhase::Active {
                return Err(Self::transition_error(
                    &cur.goal,
                    "pause",
                    &[GoalPhase::Active],
                ));
            }
            let goal = Self::with_phase(&cur.goal, GoalPhase::Paused);
            Ok((
                Self::snapshot(cur, GoalOperation::Pause, goal),
                Activation::Disarmed,
            ))
        })?
        .ok_or(GoalError::NotFound)
    }

    /// Active (disarmed), paused or blocked → active and armed, while rounds are left.
    pub fn resume(&self, agent: &dyn Agent, r: &GoalRef) -> Result<GoalView, GoalError> {
        let armed = self
            .get(agent)
            .is_some_and(|v| v.activation == Activation::Armed);
        self.mutate(agent, |cur| {
            let cur = Self::current_at(cur, r)?;
            let g = &cur.goal;
            if g.phase == GoalPhase::Complete {
                return Err(Self::transition_error(
                    g,
                    "resume",
                    &[GoalPhase::Active, GoalPhase::Paused, GoalPhase::Blocked],
                ));
            }
            if g.phase == GoalPhase::Active && armed {
                return Err(GoalError::InvalidTransition(format!(
                    "goal \"{}\" is already active and armed",
                    g.id
                )));
            }
            if cur.rounds_started >= g.max_goal_rounds {
                return Err(GoalError::InvalidTransition(format!(
                    "goal \"{}\" exhausted {} goal rounds; increase maxGoalRounds before resuming",
                    g.id, g.max_goal_rounds
                )));
            }
            let goal = Self::with_phase(g, GoalPhase::Active);
            Ok((
                Self::snapshot(cur, GoalOperation::Resume, goal),
                Activation::Armed,
            ))
        })?
        .ok_or(GoalError::NotFound)
    }

    /// Any phase but complete → complete (disarmed).
    pub fn complete(&self, agent: &dyn Agent, r: &GoalRef) -> Result<GoalView, GoalError> {
        self.mutate(agent, |cur| {
            let cur = Self::current_at(cur, r)?;
            if cur.goal.phase == GoalPhase::Complete {
                return Err(Self::transition_error(
                    &cur.goal,
                    "complete",
                    &[GoalPhase::Active, GoalPhase::Paused, GoalPhase::Blocked],
                ));
            }
            let goal = Self::with_phase(&cur.goal, GoalPhase::Complete);
            Ok((
                Self::snapshot(cur, GoalOperation::Complete, goal),
                Activation::Disarmed,
            ))
        })?
        .ok_or(GoalError::NotFound)
    }

    /// Active → blocked with `reason` (disarmed).
    pub fn block(
        &self,
        agent: &dyn Agent,
        r: &GoalRef,
        reason: BlockedReason,
    ) -> Result<GoalView, GoalError> {
        self.mutate(agent, |cur| {
            let cur = Self::current_at(cur, r)?;
            if cur.goal.phase != GoalPhase::Active {
                return Err(Self::transition_error(
                    &cur.goal,
                    "block",
                    &[GoalPhase::Active],
                ));
            }
            let mut goal = Self::with_phase(&cur.goal, GoalPhase::Blocked);
            goal.blocked_reason = Some(BlockedReason {
                code: reason.code,
                message: reason.message.trim().to_owned(),
            });
            Ok((
                Self::snapshot(cur, GoalOperation::Block, goal),
                Activation::Disarmed,
            ))
        })?
        .ok_or(GoalError::NotFound)
    }

    /// Clears the goal (a tombstone one revision past it).
    pub fn clear(&self, agent: &dyn Agent, r: &GoalRef) -> Result<(), GoalError> {
        self.mutate(agent, |cur| {
            let cur = Self::current_at(cur, r)?;
            Ok((
                GoalChange::Clear {
                    cleared: GoalRef {
                        id: cur.goal.id.clone(),
                        revision: cur.goal.revision + 1,
                    },
                    cleared_at: now().max(cur.updated_at),
                },
                Activation::Disarmed,
            ))
        })?;
        Ok(())
    }
}
