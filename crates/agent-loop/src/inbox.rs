//! The two pending lists (format §11), rebuilt from `agent/inbox/spliced` events on resume.

use dsh_agent::Target;
use dsh_llm::Message;
use dsh_session::Event;
use dsh_session::data::InboxSpliced;

/// Pending input of one agent.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    pub(crate) next_turn: Vec<Message>,
    pub(crate) next_step: Vec<Message>,
}

impl Inbox {
    pub(crate) fn list(&self, target: Target) -> &Vec<Message> {
        match target {
            Target::NextTurn => &self.next_turn,
            Target::NextStep => &self.next_step,
        }
    }

    pub(crate) fn list_mut(&mut self, target: Target) -> &mut Vec<Message> {
        match target {
            Target::NextTurn => &mut self.next_turn,
            Target::NextStep => &mut self.next_step,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.next_turn.is_empty() && self.next_step.is_empty()
    }

    pub(crate) fn contains_id(&self, id: &str) -> bool {
        self.next_turn
            .iter()
            .chain(&self.next_step)
            .any(|m| m.id == id)
    }

    /// Replays the splices of a log. Malformed splices are skipped with a warning (the log was
    /// admitted, so this only happens for foreign logs).
    pub(crate) fn replay<'a>(events: impl IntoIterator<Item = &'a std::sync::Arc<Event>>) -> Self {
        let mut inbox = Inbox::default();
        for ev in events {
            if ev.kind() != "agent/inbox/spliced" {
                continue;
            }
            let Ok(s) = ev.data_as::<InboxSpliced>() else {
                tracing::warn!(seq = ev.seq(), "unreadable inbox splice skipped");
                continue;
            };
            let target = match s.target.as_str() {
                "next-step" => Target::NextStep,
                _ => Target::NextTurn,
            };
            let list = inbox.list_mut(target);
            let start = (s.start as usize).min(list.len());
            let end = (start + s.removed_count.unwrap_or(0) as usize).min(list.len());
            list.splice(
                start..end,
                s.inserted.into_iter().map(std::sync::Arc::unwrap_or_clone),
            );
        }
        inbox
    }
}
