//! The turn/step/tool-call structure (format §4.7), folded over the typed payloads.

use std::collections::HashSet;

use crate::data::CoreEvent;
use crate::error::Rejection;
use crate::event::{Event, SurfaceOp};
use crate::vocab::EventKind;

use super::SessionLog;
use super::repair::is_not_started_repair;

/// A tool call advertised in the open step and not yet settled by a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    /// The provider's call id.
    pub call_id: String,
    /// Step of the advertising assistant message.
    pub step: u64,
    /// Seq of its `tool/call`, once dispatched.
    pub call_seq: Option<u64>,
    /// Tool name (from the block).
    pub name: String,
    /// Raw arguments (from the block; shared with it).
    pub arguments: dsh_llm::ToolArguments,
}

/// Turn/step/tool-call state folded over the log.
#[derive(Debug, Clone, Default)]
pub struct TurnTracker {
    last_turn: u64,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    last_step: u64,
    pending: Vec<PendingCall>,
    advertised: HashSet<String>,
}

impl TurnTracker {
    /// The open turn, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }
    /// The open step, if any.
    pub fn open_step(&self) -> Option<u64> {
        self.open_step
    }
    /// The highest turn number seen.
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }
    /// Unsettled calls of the open step, in advertisement order.
    pub fn pending(&self) -> &[PendingCall] {
        &self.pending
    }
    /// Whether a tool call id was advertised anywhere in the log.
    pub fn is_advertised(&self, call_id: &str) -> bool {
        self.advertised.contains(call_id)
    }

    fn in_step(&self, what: EventKind, turn: u64, step: u64) -> Result<(), Rejection> {
        match (self.open_turn, self.open_step) {
            (Some(ot), Some(os)) if ot == turn && os == step => Ok(()),
            _ => Err(Rejection::Structure(format!(
                "{what} turn {turn} step {step} is not the open step"
            ))),
        }
    }

    pub(super) fn apply(&mut self, ev: &Event) {
        let Some(core) = ev.core() else { return };
        match core {
            CoreEvent::TurnStart(e) => {
                self.open_turn = Some(e.turn);
                self.last_turn = e.turn;
                self.open_step = None;
                self.last_step = 0;
                self.pending.clear();
            }
            CoreEvent::TurnEnd(_) => {
                self.open_turn = None;
                self.open_step = None;
                self.pending.clear();
            }
            CoreEvent::StepStart(e) => {
                self.open_step = Some(e.step);
                self.last_step = e.step;
            }
            CoreEvent::StepEnd(_) => {
                self.pending.clear();
                self.open_step = None;
            }
            CoreEvent::AssistantMessage(e) => {
                for call in e.message.tool_calls() {
                    self.advertised.insert(call.id.clone());
                    self.pending.push(PendingCall {
                        call_id: call.id.clone(),
                        step: e.step,
                        call_seq: None,
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    });
                }
            }
            CoreEvent::ToolCallEvent(e) => {
                if let Some(p) = self.pending.iter_mut().find(|p| p.call_id == e.call_id) {
                    p.call_seq = Some(ev.seq());
                }
            }
            CoreEvent::ToolResult(e) if ev.surface_op() == Some(SurfaceOp::Append) => {
                let id = e.message.tool_call_id.as_deref().unwrap_or("");
                self.pending.retain(|p| p.call_id != id);
            }
            _ => {}
        }
    }
}

impl SessionLog {
    /// The structure rules of one core event (format §4.7).
    pub(super) fn check_structure(&self, ev: &Event, core: &CoreEvent) -> Result<(), Rejection> {
        let t = &self.tracker;
        let structure = |m: String| Err(Rejection::Structure(m));
        match core {
            CoreEvent::TurnStart(e) => {
                if let Some(open) = t.open_turn {
                    return structure(format!(
                        "turn/start {}: a turn is already open (turn {open})",
                        e.turn
                    ));
                }
                if e.turn <= t.last_turn {
                    return structure(format!(
                        "turn/start {} does not follow turn {}",
                        e.turn, t.last_turn
                    ));
                }
            }
            CoreEvent::TurnEnd(e) => {
                if t.open_turn != Some(e.turn) {
                    return structure(format!("turn/end {} is not the open turn", e.turn));
                }
                if let Some(step) = t.open_step {
                    return structure(format!("turn/end {}: a step is open (step {step})", e.turn));
                }
            }
            CoreEvent::StepStart(e) => {
                if t.open_turn != Some(e.turn) || t.open_step.is_some() {
                    return structure(format!(
                        "step/start {}/{} outside an open turn or inside a step",
                        e.turn, e.step
                    ));
                }
                if e.step <= t.last_step {
                    return structure(format!(
                        "step/start {} does not follow step {}",
                        e.step, t.last_step
                    ));
                }
            }
            CoreEvent::StepEnd(e) => {
                t.in_step(EventKind::StepEnd, e.turn, e.step)?;
                if let Some(p) = t.pending.first() {
                    return structure(format!(
                        "step/end leaves tool call \"{}\" unresolved",
                        p.call_id
                    ));
                }
            }
            CoreEvent::SystemMessage(e) => t.in_step(EventKind::SystemMessage, e.turn, e.step)?,
            CoreEvent::DeveloperMessage(e) => {
                t.in_step(EventKind::DeveloperMessage, e.turn, e.step)?
            }
            CoreEvent::AssistantAttempt(e) => {
                t.in_step(EventKind::AssistantAttempt, e.turn, e.step)?
            }
            CoreEvent::AssistantMessage(e) => {
                t.in_step(EventKind::AssistantMessage, e.turn, e.step)?;
                let mut seen = HashSet::new();
                for call in e.message.tool_calls() {
                    if t.advertised.contains(&call.id) || !seen.insert(call.id.as_str()) {
                        return structure(format!(
                            "tool call id \"{}\" is advertised twice",
                            call.id
                        ));
                    }
                }
            }
            CoreEvent::ToolCallEvent(e) => {
                t.in_step(EventKind::ToolCall, e.turn, e.step)?;
                let call_id = &e.call_id;
                let Some(p) = t.pending.iter().find(|p| &p.call_id == call_id) else {
                    return structure(format!(
                        "tool/call \"{call_id}\" names no advertised pending call"
                    ));
                };
                if p.call_seq.is_some() {
                    return structure(format!("tool/call \"{call_id}\" is logged twice"));
                }
                if e.name != p.name || e.arguments != p.arguments {
                    return structure(format!(
                        "tool/call \"{call_id}\" must repeat the block's name and arguments"
                    ));
                }
            }
            CoreEvent::ToolResult(e) => {
                if let Some(SurfaceOp::Replace { .. }) = ev.surface_op() {
                    if t.open_turn.is_none() {
                        return structure(
                            "a tool/result replacement must be inside an open turn".into(),
                        );
                    }
                } else {
                    t.in_step(EventKind::ToolResult, e.turn, e.step)?;
                    let call_id = e.message.tool_call_id.as_deref().unwrap_or("");
                    let Some(p) = t.pending.iter().find(|p| p.call_id == call_id) else {
                        return structure(format!(
                            "tool/result \"{call_id}\" settles no pending call"
                        ));
                    };
                    if p.call_seq.is_none() && !is_not_started_repair(ev, e, call_id) {
                        return structure(format!(
                            "tool/result \"{call_id}\" precedes its tool/call (only the exact TOOL_NOT_STARTED repair may)"
                        ));
                    }
                }
            }
            CoreEvent::RequestHeader(_) | CoreEvent::RequestContext(_) if t.open_turn.is_none() => {
                return structure(format!("{} outside an open turn", ev.event_kind()));
            }
            CoreEvent::EndSeed(e) if e.inherited.is_some() && !self.header.is_seeded => {
                return Err(Rejection::Relation(
                    "an inherited session/end-seed needs header isSeeded: true".into(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}
