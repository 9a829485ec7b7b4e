//! `dsh-goal-api`: the goal vocabulary of dsh, as the original harness logs it.
//!
//! A goal is a persistent objective that drives automatic continuation rounds in its session.
//! Its durable state is event-sourced, exactly as the original 0.2.1 writes it (so a log with
//! goals exchanges with it both ways):
//!
//! - `goal/change` ([`GoalChange`]): a full snapshot of the goal after each mutation
//!   (`create`, `edit`, `pause`, `resume`, `complete`, `block`) with the round counter and the
//!   creation and update times, or a `clear` tombstone;
//! - a round is a `user/message` whose source is `{"kind":"goal","goalId","revision","round"}`
//!   ([`GoalSource`]); each admitted round moves `roundsStarted` on by one.
//!
//! [`GoalFold`] folds a session's events into its current goal with the original's replay rules;
//! the first event that breaks them is kept as the fold's failure (the goal stays at the last
//! valid state, and the implementation refuses to mutate it).

use std::collections::HashSet;
use std::sync::Arc;

use dsh_llm::{Message, MessageSource};
use dsh_session::{CoreEvent, Event, PluginEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The message source kind of a goal round.
pub const SOURCE_KIND: &str = "goal";

/// The event type of a goal mutation.
pub const CHANGE_TYPE: &str = "goal/change";

/// The version of the change payload the original writes.
pub const CHANGE_VERSION: u32 = 1;

/// Where a goal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GoalPhase {
    /// Rounds continue while it is armed.
    Active,
    /// Stopped by the user (or an interrupted round); `resume` continues it.
    Paused,
    /// Stopped by a concrete blocker (or the round limit).
    Blocked,
    /// Achieved.
    Complete,
}

impl GoalPhase {
    /// The phase as logged (`active`, `paused`, `blocked`, `complete`).
    pub fn as_str(self) -> &'static str {
        match self {
            GoalPhase::Active => "active",
            GoalPhase::Paused => "paused",
            GoalPhase::Blocked => "blocked",
            GoalPhase::Complete => "complete",
        }
    }
}

/// Why a goal is blocked: a lower-kebab-case code (`model-reported`, `round-limit`,
/// `prompt-rejected`, `queue-failed`) and a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockedReason {
    /// The code.
    pub code: String,
    /// What blocks it.
    pub message: String,
}

/// A goal as one `goal/change` snapshot carries it (key order as the original writes it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Goal {
    /// `goal-<uuid>`.
    pub id: String,
    /// 1 at creation, one more at every mutation.
    pub revision: u64,
    /// What to achieve (trimmed, non-empty).
    pub objective: String,
    /// Where it is.
    pub phase: GoalPhase,
    /// The most rounds it may start.
    pub max_goal_rounds: u64,
    /// Present exactly when blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_reason: Option<BlockedReason>,
}

/// The identity of one goal revision (`{id, revision}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalRef {
    /// The goal.
    pub id: String,
    /// Its revision.
    pub revision: u64,
}

/// What a snapshot change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GoalOperation {
    /// A new goal (revision 1, active, no rounds).
    Create,
    /// A new objective and/or round limit.
    Edit,
    /// Active → paused.
    Pause,
    /// Active, paused or blocked → active (and armed).
    Resume,
    /// → complete.
    Complete,
    /// Active → blocked.
    Block,
}

impl GoalOperation {
    /// The operation as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalOperation::Create => "create",
            GoalOperation::Edit => "edit",
            GoalOperation::Pause => "pause",
            GoalOperation::Resume => "resume",
            GoalOperation::Complete => "complete",
            GoalOperation::Block => "block",
        }
    }
}

/// One `goal/change` payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Wire", into = "Wire")]
pub enum GoalChange {
    /// The goal after a mutation.
    Snapshot {
        /// What changed.
        operation: GoalOperation,
        /// The goal now.
        goal: Goal,
        /// Rounds started so far.
        rounds_started: u64,
        /// When the goal was created (epoch ms).
        created_at: u64,
        /// When this change was made (epoch ms).
        updated_at: u64,
    },
    /// The goal was cleared (`cleared` is one revision past its last snapshot).
    Clear {
        /// The tombstone.
        cleared: GoalRef,
        /// When (epoch ms).
        cleared_at: u64,
    },
}

impl PluginEvent for GoalChange {
    const TYPE: &'static str = CHANGE_TYPE;
}

/// The payload as it is written: `kind, version, operation, goal, roundsStarted, createdAt,
/// updatedAt` for a snapshot, `kind, version, operation, cleared, clearedAt` for a clear.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Wire {
    kind: String,
    version: u32,
    operation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    goal: Option<Goal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rounds_started: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cleared: Option<GoalRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cleared_at: Option<u64>,
}

/// A `goal/change` payload that breaks the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChangeError(String);

impl TryFrom<Wire> for GoalChange {
    type Error = ChangeError;

    fn try_from(w: Wire) -> Result<Self, ChangeError> {
        let bad = |m: &str| ChangeError(m.to_owned());
        if w.kind != CHANGE_TYPE {
            return Err(bad("goal change kind must be goal/change"));
        }
        if w.version != CHANGE_VERSION {
            return Err(ChangeError(format!(
                "unsupported goal change version {}",
                w.version
            )));
        }
        if w.operation == "clear" {
            return match (w, ()) {
                (
                    Wire {
                        goal: None,
                        rounds_started: None,
                        created_at: None,
                        updated_at: None,
                        cleared: Some(cleared),
                        cleared_at: Some(cleared_at),
                        ..
                    },
                    (),
                ) => Ok(GoalChange::Clear {
                    cleared,
                    cleared_at,
                }),
                _ => Err(bad(
                    "goal clear change must have exactly cleared,clearedAt,kind,operation,version fields",
                )),
            };
        }
        let operation: GoalOperation = serde_json::from_value(Value::String(w.operation))
            .map_err(|_| bad("goal change operation is invalid"))?;
        match w {
            Wire {
                goal: Some(goal),
                rounds_started: Some(rounds_started),
                created_at: Some(created_at),
                updated_at: Some(updated_at),
                cleared: None,
                cleared_at: None,
                ..
            } => {
                check_goal(&goal)?;
                if updated_at < created_at {
                    return Err(bad("goal change updatedAt cannot precede createdAt"));
                }
                Ok(GoalChange::Snapshot {
                    operation,
                    goal,
                    rounds_started,
                    created_at,
                    updated_at,
                })
            }
            _ => Err(bad(
                "goal snapshot change must have exactly createdAt,goal,kind,operation,roundsStarted,updatedAt,version fields",
            )),
        }
    }
}

fn check_goal(goal: &Goal) -> Result<(), ChangeError> {
    let bad = |m: &str| Err(ChangeError(m.to_owned()));
    if goal.id.is_empty() {
        return bad("goal change goal.id must be a non-empty string");
    }
    if goal.objective.trim().is_empty() || goal.objective.trim() != goal.objective {
        return bad("goal change goal.objective must be non-empty and normalized");
    }
    if goal.revision < 1 || goal.max_goal_rounds < 1 {
        return bad("goal change revision and maxGoalRounds must be positive");
    }
    if (goal.phase == GoalPhase::Blocked) != goal.blocked_reason.is_some() {
        return bad("goal change goal.blockedReason is present exactly when blocked");
    }
    if let Some(r) = &goal.blocked_reason
        && (!is_kebab(&r.code) || r.message.trim().is_empty() || r.message.trim() != r.message)
    {
        return bad(
            "goal change goal.blockedReason must have a lower-kebab-case code and a message",
        );
    }
    Ok(())
}

/// Whether `code` is lower-kebab-case (`round-limit`).
pub fn is_kebab(code: &str) -> bool {
    let mut parts = code.split('-');
    let first_ok = parts
        .next()
        .is_some_and(|p| p.starts_with(|c: char| c.is_ascii_lowercase()) && simple(p));
    first_ok && parts.all(|p| !p.is_empty() && simple(p))
}

fn simple(p: &str) -> bool {
    p.chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

impl From<GoalChange> for Wire {
    fn from(c: GoalChange) -> Wire {
        let mut w = Wire {
            kind: CHANGE_TYPE.to_owned(),
            version: CHANGE_VERSION,
            operation: String::new(),
            goal: None,
            rounds_started: None,
            created_at: None,
            updated_at: None,
            cleared: None,
            cleared_at: None,
        };
        match c {
            GoalChange::Snapshot {
                operation,
                goal,
                rounds_started,
                created_at,
                updated_at,
            } => {
                w.operation = operation.as_str().to_owned();
                w.goal = Some(goal);
                w.rounds_started = Some(rounds_started);
                w.created_at = Some(created_at);
                w.updated_at = Some(updated_at);
            }
            GoalChange::Clear {
                cleared,
                cleared_at,
            } => {
                w.operation = "clear".to_owned();
                w.cleared = Some(cleared);
                w.cleared_at = Some(cleared_at);
            }
        }
        w
    }
}

/// The source of a goal round: `{"kind":"goal","goalId","revision","round"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoalSource {
    /// The goal.
    pub goal_id: String,
    /// The goal revision the round was admitted for.
    pub revision: u64,
    /// The round (1-based).
    pub round: u64,
}

impl GoalSource {
    /// The message source.
    pub fn source(&self) -> MessageSource {
        MessageSource::new(SOURCE_KIND)
            .with("goalId", Value::String(self.goal_id.clone()))
            .with("revision", Value::from(self.revision))
            .with("round", Value::from(self.round))
    }

    /// The goal source of `message` (`None`: not a goal round, or a malformed one).
    pub fn of(message: &Message) -> Option<GoalSource> {
        let s = &message.source;
        if s.kind != SOURCE_KIND {
            return None;
        }
        let goal_id = s.extra.get("goalId")?.as_str()?.to_owned();
        let revision = s.extra.get("revision")?.as_u64()?;
        let round = s.extra.get("round")?.as_u64()?;
        (!goal_id.is_empty() && revision >= 1 && round >= 1).then_some(GoalSource {
            goal_id,
            revision,
            round,
        })
    }
}

/// A session's goal as its log says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoalState {
    /// The goal.
    pub goal: Goal,
    /// Rounds started.
    pub rounds_started: u64,
    /// Created (epoch ms).
    pub created_at: u64,
    /// Last changed (epoch ms).
    pub updated_at: u64,
}

/// The fold of a session's goal events (the original's replay rules).
#[derive(Clone, Debug, Default)]
pub struct GoalFold {
    /// The current goal (`None`: never created, or cleared).
    pub current: Option<GoalState>,
    /// The last change's identity (after a clear: the tombstone).
    pub last_ref: Option<GoalRef>,
    seen: HashSet<String>,
    /// The first event that broke the rules, with why (later events are ignored).
    pub failure: Option<String>,
}

impl GoalFold {
    /// The fold of `events` in order.
    pub fn of(events: &[Arc<Event>]) -> GoalFold {
        let mut f = GoalFold::default();
        for e in events {
            f.apply(e);
        }
        f
    }

    /// Whether `event` is one the fold reads (a `goal/change`, or a goal round).
    pub fn reads(event: &Event) -> bool {
        event.kind() == CHANGE_TYPE
            || matches!(event.core(), Some(CoreEvent::UserMessage(m)) if m.0.source.kind == SOURCE_KIND)
    }

    /// Applies one committed event (unrelated ones are ignored).
    pub fn apply(&mut self, event: &Event) {
        if self.failure.is_some() || !Self::reads(event) {
            return;
        }
        let r = if event.kind() == CHANGE_TYPE {
            match event.plugin::<GoalChange>() {
                Some(Ok(c)) => self.change(&c),
                Some(Err(e)) => Err(ReplayError::Decode(e.to_string())),
                None => Ok(()),
            }
        } else if let Some(CoreEvent::UserMessage(m)) = event.core() {
            self.round(&m.0)
        } else {
            Ok(())
        };
        if let Err(why) = r {
            self.failure = Some(format!(
                "goal replay failed at session event {}: {why}",
                event.seq()
            ));
        }
    }

    /// Applies one change, refusing what the original's fold refuses.
    pub fn change(&mut self, change: &GoalChange) -> Result<(), ReplayError> {
        match change {
            GoalChange::Clear {
                cleared,
                cleared_at,
            } => {
                let cur = self.current.as_ref().ok_or(ReplayError::ClearWithoutGoal)?;
                if cleared.id != cur.goal.id || cleared.revision != cur.goal.revision + 1 {
                    return Err(ReplayError::ClearNotNextRevision);
                }
                if *cleared_at < cur.updated_at {
                    return Err(ReplayError::ClearBeforeUpdate);
                }
                self.current = None;
                self.last_ref = Some(cleared.clone());
                Ok(())
            }
            GoalChange::Snapshot {
                operation,
                goal,
                rounds_started,
                created_at,
                updated_at,
            } => {
                let cur = self.current.as_ref();
                if *operation == GoalOperation::Create {
                    if goal.revision != 1
                        || goal.phase != GoalPhase::Active
                        || *rounds_started != 0
                        || cur.is_some_and(|c| c.goal.phase != GoalPhase::Complete)
                        || self.seen.contains(&goal.id)
                    {
                        return Err(ReplayError::CreateNotFresh);
                    }
                    self.seen.insert(goal.id.clone());
                } else {
                    let cur = cur.ok_or(ReplayError::NoCurrentGoal(*operation))?;
                    transition(
                        cur,
                        *operation,
                        goal,
                        *rounds_started,
                        *created_at,
                        *updated_at,
                    )?;
                }
                self.current = Some(GoalState {
                    goal: goal.clone(),
                    rounds_started: *rounds_started,
                    created_at: *created_at,
                    updated_at: *updated_at,
                });
                self.last_ref = Some(GoalRef {
                    id: goal.id.clone(),
                    revision: goal.revision,
                });
                Ok(())
            }
        }
    }

    /// Applies a user message: a goal round moves the round counter on.
    pub fn round(&mut self, message: &Message) -> Result<(), ReplayError> {
        if message.source.kind != SOURCE_KIND {
            return Ok(());
        }
        let src = GoalSource::of(message).ok_or(ReplayError::InvalidRoundSource)?;
        let cur = self.current.as_mut().filter(|c| {
            c.goal.phase == GoalPhase::Active
                && c.goal.id == src.goal_id
                && c.goal.revision == src.revision
                && src.round == c.rounds_started + 1
                && src.round <= c.goal.max_goal_rounds
        });
        match cur {
            Some(c) => {
                c.rounds_started = src.round;
                Ok(())
            }
            None => Err(ReplayError::RoundNotAdmitted),
        }
    }
}

/// Why the original's goal fold refuses an event (its messages, word for word).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// A clear with no goal.
    #[error("goal clear requires a current goal")]
    ClearWithoutGoal,
    /// A clear that is not the current goal's next revision.
    #[error("goal clear must advance the current goal by one revision")]
    ClearNotNextRevision,
    /// A clear older than the goal's last update.
    #[error("goal clear timestamp cannot precede the current goal update")]
    ClearBeforeUpdate,
    /// A create that is not a fresh active revision-one goal.
    #[error("goal create requires a fresh active revision-one goal with zero rounds")]
    CreateNotFresh,
    /// An operation on no goal.
    #[error("goal {} requires a current goal", .0.as_str())]
    NoCurrentGoal(GoalOperation),
    /// A snapshot that is not the current goal's next revision.
    #[error("goal {} must advance the current goal by one revision", .0.as_str())]
    NotNextRevision(GoalOperation),
    /// A snapshot that changes the counters or timestamps it must keep.
    #[error("goal {} does not preserve the current counters and timestamps", .0.as_str())]
    CountersChanged(GoalOperation),
    /// A phase change the operation does not allow.
    #[error("goal {} has an invalid phase transition", .0.as_str())]
    InvalidTransition(GoalOperation),
    /// A goal round whose source does not parse.
    #[error("goal message source is invalid")]
    InvalidRoundSource,
    /// A goal round that is not the active goal's next admitted round.
    #[error("goal round is not the next admitted round of the active goal")]
    RoundNotAdmitted,
    /// A `goal/change` payload that does not decode.
    #[error("{0}")]
    Decode(String),
}

fn transition(
    cur: &GoalState,
    op: GoalOperation,
    next: &Goal,
    rounds: u64,
    created_at: u64,
    updated_at: u64,
) -> Result<(), ReplayError> {
    if next.id != cur.goal.id || next.revision != cur.goal.revision + 1 {
        return Err(ReplayError::NotNextRevision(op));
    }
    if created_at != cur.created_at || updated_at < cur.updated_at || rounds != cur.rounds_started {
        return Err(ReplayError::CountersChanged(op));
    }
    let same =
        next.objective == cur.goal.objective && next.max_goal_rounds == cur.goal.max_goal_rounds;
    let from = cur.goal.phase;
    let ok = match op {
        GoalOperation::Edit => next.phase == from && next.blocked_reason == cur.goal.blocked_reason,
        GoalOperation::Pause => {
            same && from == GoalPhase::Active && next.phase == GoalPhase::Paused
        }
        GoalOperation::Resume => {
            same && from != GoalPhase::Complete
                && next.phase == GoalPhase::Active
                && rounds < next.max_goal_rounds
        }
        GoalOperation::Complete => {
            same && from != GoalPhase::Complete && next.phase == GoalPhase::Complete
        }
        GoalOperation::Block => {
            same && from == GoalPhase::Active && next.phase == GoalPhase::Blocked
        }
        GoalOperation::Create => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ReplayError::InvalidTransition(op))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const CREATE: &str = r#"{"kind":"goal/change","version":1,"operation":"create","goal":{"id":"goal-1","revision":1,"objective":"ship it","phase":"active","maxGoalRounds":3},"roundsStarted":0,"createdAt":10,"updatedAt":10}"#;
    const BLOCK: &str = r#"{"kind":"goal/change","version":1,"operation":"block","goal":{"id":"goal-1","revision":2,"objective":"ship it","phase":"blocked","maxGoalRounds":3,"blockedReason":{"code":"round-limit","message":"Goal reached its configured limit of 3 rounds."}},"roundsStarted":3,"createdAt":10,"updatedAt":20}"#;
    const CLEAR: &str = r#"{"kind":"goal/change","version":1,"operation":"clear","cleared":{"id":"goal-1","revision":3},"clearedAt":30}"#;

    #[test]
    fn changes_read_and_write_byte_for_byte_as_the_original() {
        for text in [CREATE, BLOCK, CLEAR] {
            let c: GoalChange = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), text);
        }
        let extra = CREATE.replace("\"createdAt\"", "\"extra\":1,\"createdAt\"");
        assert!(serde_json::from_str::<GoalChange>(&extra).is_err());
        let bad = CREATE.replace("\"active\"", "\"done\"");
        assert!(serde_json::from_str::<GoalChange>(&bad).is_err());
        let no_reason = BLOCK.replace(
            ",\"blockedReason\":{\"code\":\"round-limit\",\"message\":\"Goal reached its configured limit of 3 rounds.\"}",
            "",
        );
        assert!(serde_json::from_str::<GoalChange>(&no_reason).is_err());
    }

    fn round(goal: &str, revision: u64, round: u64) -> Message {
        let mut m = Message::user_text("m", "go");
        m.source = GoalSource {
            goal_id: goal.into(),
            revision,
            round,
        }
        .source();
        m
    }

    #[test]
    fn the_fold_counts_admitted_rounds_and_refuses_a_skipped_one() {
        let mut f = GoalFold::default();
        f.change(&serde_json::from_str(CREATE).unwrap()).unwrap();
        f.round(&round("goal-1", 1, 1)).unwrap();
        f.round(&round("goal-1", 1, 2)).unwrap();
        assert_eq!(f.current.as_ref().unwrap().rounds_started, 2);
        assert!(f.round(&round("goal-1", 1, 4)).is_err());
        f.round(&round("goal-1", 1, 3)).unwrap();
        f.change(&serde_json::from_str(BLOCK).unwrap()).unwrap();
        assert_eq!(f.current.as_ref().unwrap().goal.phase, GoalPhase::Blocked);
        f.change(&serde_json::from_str(CLEAR).unwrap()).unwrap();
        assert!(f.current.is_none());
        // A second create of the same id is refused.
        assert!(f.change(&serde_json::from_str(CREATE).unwrap()).is_err());
    }

    #[test]
    fn round_sources_round_trip() {
        let m = round("goal-1", 2, 5);
        assert_eq!(
            serde_json::to_value(&m.source).unwrap(),
            serde_json::json!({"kind":"goal","goalId":"goal-1","revision":2,"round":5})
        );
        let s = GoalSource::of(&m).unwrap();
        assert_eq!((s.revision, s.round), (2, 5));
        assert!(
            is_kebab("round-limit") && is_kebab("a1-b") && !is_kebab("Round") && !is_kebab("a--b")
        );
    }
}
