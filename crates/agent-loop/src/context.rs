//! The retained runtime-context snapshot of the log (format §10.3), kept incrementally: each
//! step folds only the events committed since the previous step, so the cost does not grow
//! with the history.

use std::sync::Arc;

use dsh_llm::ContentBlock;
use dsh_session::data::UserMessage;
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, Event, Session, SessionLog, SurfaceOp};
use dsh_system_prompt::runtime_context::{OwnedContextMessage, RetainedContext};

/// The snapshot and how far into the log it has been folded.
pub(crate) struct ContextTracker {
    state: RetainedContext,
    /// The next seq to fold.
    next: u64,
}

/// The text of a runtime-context message owned by the loop, or `None` for any other event.
fn owned_text(e: &Event) -> Option<String> {
    let Some(CoreEvent::UserMessage(UserMessage(m))) = e.core() else {
        return None;
    };
    if SourceKind::of(m) != SourceKind::RuntimeContext {
        return None;
    }
    Some(
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect(),
    )
}

impl ContextTracker {
    /// The state of a loop attaching to `log`: one scan, newest first, that stops at the
    /// newest owned message.
    pub(crate) fn attach(log: &SessionLog) -> Self {
        let owned = log.events().iter().rev().filter_map(|e| {
            owned_text(e).map(|text| OwnedContextMessage {
                seq: e.seq(),
                text,
                current: log.surface().contains(e.seq()),
            })
        });
        ContextTracker {
            state: RetainedContext::scan(owned),
            next: log.len(),
        }
    }

    /// The snapshot as of the session's latest event.
    pub(crate) fn current(&mut self, session: &Session) -> &RetainedContext {
        let new: Vec<Arc<Event>> = session.events_since(self.next);
        for e in &new {
            self.fold(e);
        }
        &self.state
    }

    fn fold(&mut self, e: &Event) {
        if let Some(SurfaceOp::Replace { .. }) = e.surface_op() {
            self.state.replaced(e.source_event_seqs().unwrap_or(&[]));
        }
        if let Some(text) = owned_text(e) {
            self.state.appended(e.seq(), text);
        }
        self.next = e.seq() + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_llm::{Message, MessageSource, Role};
    use dsh_session::data::{StepStart, TurnStart};
    use dsh_session::{NewEvent, SessionHeader};
    use dsh_system_prompt::runtime_context::SOURCE_KIND;

    fn context(id: &str, text: &str) -> NewEvent {
        let m = Message::new(
            id,
            Role::User,
            vec![ContentBlock::text(text)],
            MessageSource::new(SOURCE_KIND),
        );
        NewEvent::core(UserMessage(m.into()))
    }

    fn user(id: &str) -> NewEvent {
        NewEvent::core(UserMessage(Message::user_text(id, "hi").into()))
    }

    fn text(t: &RetainedContext) -> Option<String> {
        t.text().map(str::to_owned)
    }

    /// Folding event by event gives what a fresh scan of the same log gives.
    #[test]
    fn incremental_equals_a_fresh_scan() {
        let mut log = SessionLog::new(SessionHeader::new("s", 0, None));
        let mut tracker = ContextTracker::attach(&log);
        let check = |log: &SessionLog, tracker: &mut ContextTracker| {
            let new: Vec<_> = log.events()[tracker.next as usize..].to_vec();
            for e in &new {
                tracker.fold(e);
            }
            assert_eq!(
                text(&tracker.state),
                text(&ContextTracker::attach(log).state)
            );
            assert_eq!(
                matches!(tracker.state, RetainedContext::Cleared),
                matches!(ContextTracker::attach(log).state, RetainedContext::Cleared)
            );
        };
        log.append(NewEvent::core(TurnStart { turn: 1 })).unwrap();
        log.append(NewEvent::core(StepStart { turn: 1, step: 1 }))
            .unwrap();
        log.append(user("m0")).unwrap();
        check(&log, &mut tracker);
        assert!(matches!(tracker.state, RetainedContext::Absent));
        let first = log.append(context("m1", "cwd: /a")).unwrap().seq();
        check(&log, &mut tracker);
        assert_eq!(text(&tracker.state).as_deref(), Some("cwd: /a"));
        let second = log.append(context("m2", "cwd: /b")).unwrap().seq();
        check(&log, &mut tracker);
        assert_eq!(text(&tracker.state).as_deref(), Some("cwd: /b"));
        // Shadowing an older context message changes nothing; shadowing the snapshot clears it.
        log.append(user("m3").replacing(first, first).with_sources(vec![first]))
            .unwrap();
        check(&log, &mut tracker);
        assert_eq!(text(&tracker.state).as_deref(), Some("cwd: /b"));
        log.append(
            user("m4")
                .replacing(second, second)
                .with_sources(vec![second]),
        )
        .unwrap();
        check(&log, &mut tracker);
        assert!(matches!(tracker.state, RetainedContext::Cleared));
        // A context message that replaces a span becomes the snapshot.
        let plain = log.append(user("m5")).unwrap().seq();
        log.append(
            context("m6", "cwd: /c")
                .replacing(plain, plain)
                .with_sources(vec![plain]),
        )
        .unwrap();
        check(&log, &mut tracker);
        assert_eq!(text(&tracker.state).as_deref(), Some("cwd: /c"));
    }
}
