//! The inbox projection (format §11): the two pending lists, rebuilt by replaying every
//! `agent/inbox/spliced` in log order. This is the one inbox projection of dsh: the log keeps
//! it current, and an agent edits its own copy with [`Inbox::splice`] as it logs splices.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_llm::Message;

use crate::data::{CoreEvent, InboxSpliced};
use crate::error::Rejection;
use crate::event::Event;
use crate::wire::Target;

use super::Effect;

/// The two pending inbox lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inbox {
    /// `next-turn` list (follow-ups; one is claimed at each turn's first step).
    pub next_turn: Vec<Arc<Message>>,
    /// `next-step` list (steer and inject; claimed whole at each step).
    pub next_step: Vec<Arc<Message>>,
}

impl Inbox {
    /// The list of a target.
    pub fn list(&self, target: Target) -> &[Arc<Message>] {
        match target {
            Target::NextTurn => &self.next_turn,
            Target::NextStep => &self.next_step,
        }
    }

    fn list_mut(&mut self, target: Target) -> &mut Vec<Arc<Message>> {
        match target {
            Target::NextTurn => &mut self.next_turn,
            Target::NextStep => &mut self.next_step,
        }
    }

    /// Whether both lists are empty.
    pub fn is_empty(&self) -> bool {
        self.next_turn.is_empty() && self.next_step.is_empty()
    }

    /// Number of queued messages in both lists.
    pub fn len(&self) -> usize {
        self.next_turn.len() + self.next_step.len()
    }

    /// Whether a message with this id is queued in either list.
    pub fn contains_id(&self, id: &str) -> bool {
        self.next_turn
            .iter()
            .chain(&self.next_step)
            .any(|m| m.id == id)
    }

    /// Checks a splice against the lists (bounds, and queued ids unique across both lists
    /// afterwards) without applying it.
    pub fn check(
        &self,
        target: Target,
        start: usize,
        removed: usize,
        inserted: &[Arc<Message>],
    ) -> Result<(), Rejection> {
        let list = self.list(target);
        if start > list.len() || start.saturating_add(removed) > list.len() {
            return Err(Rejection::Inbox(format!(
                "inbox splice {start}+{removed} is outside its list ({target}, {} queued)",
                list.len()
            )));
        }
        let other = self.list(match target {
            Target::NextTurn => Target::NextStep,
            Target::NextStep => Target::NextTurn,
        });
        let kept = list[..start].iter().chain(&list[start + removed..]);
        let mut ids: HashSet<&str> = HashSet::new();
        for m in other.iter().chain(kept).chain(inserted) {
            if !ids.insert(m.id.as_str()) {
                return Err(Rejection::Inbox(format!(
                    "inbox message id \"{}\" is queued twice",
                    m.id
                )));
            }
        }
        Ok(())
    }

    /// Applies a splice (after [`Inbox::check`]) and returns the removed messages.
    pub fn splice(
        &mut self,
        target: Target,
        start: usize,
        removed: usize,
        inserted: Vec<Arc<Message>>,
    ) -> Result<Vec<Arc<Message>>, Rejection> {
        self.check(target, start, removed, &inserted)?;
        Ok(self
            .list_mut(target)
            .splice(start..start + removed, inserted)
            .collect())
    }

    /// Rebuilds the lists from a log's events (the same fold as the log's own).
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Arc<Event>>) -> Inbox {
        let mut inbox = Inbox::default();
        for ev in events {
            if let Some(CoreEvent::InboxSpliced(s)) = ev.core() {
                let (start, removed) = bounds(s);
                if let Err(e) = inbox.splice(s.target, start, removed, s.inserted.clone()) {
                    tracing::warn!(seq = ev.seq(), "inbox splice skipped: {e}");
                }
            }
        }
        inbox
    }

    pub(super) fn check_splice(&self, s: &InboxSpliced) -> Result<Effect, Rejection> {
        let (start, removed) = bounds(s);
        self.check(s.target, start, removed, &s.inserted)?;
        Ok(Effect::Splice {
            target: s.target,
            start,
            removed,
            inserted: s.inserted.clone(),
        })
    }

    pub(super) fn apply_splice(
        &mut self,
        target: Target,
        start: usize,
        removed: usize,
        inserted: Vec<Arc<Message>>,
    ) {
        self.list_mut(target)
            .splice(start..start + removed, inserted);
    }
}

fn bounds(s: &InboxSpliced) -> (usize, usize) {
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    (n(s.start), n(s.removed_count.unwrap_or(0)))
}
