//! Input held while the UI moves to a rewind's fork.
//!
//! From the moment this UI applies a conversation rewind (or learns, live, that the shown
//! session was forked) until the fork's UI is up, what the user sends (prompts, commands,
//! settings) is held here, then delivered to the fork in the order typed: sent at once, it
//! would reach the session being left (or nowhere while no session is shown).

use crate::app::Action;

/// The held input and why it is held.
#[derive(Debug, Default)]
pub struct Hold {
    /// Held actions, in the order typed (`None`: not holding).
    held: Option<Vec<Action>>,
    /// A conversation rewind this UI sent has not been answered yet.
    pub rewind_in_flight: bool,
}

impl Hold {
    /// Whether input is being held.
    pub fn holding(&self) -> bool {
        self.held.is_some()
    }

    /// Starts holding (if not already).
    pub fn start(&mut self) {
        self.held.get_or_insert_with(Vec::new);
    }

    /// Holds `action` when holding and it is input for the session; gives it back otherwise.
    pub fn take(&mut self, action: Action) -> Option<Action> {
        match &mut self.held {
            Some(held) if is_input(&action) => {
                held.push(action);
                None
            }
            _ => Some(action),
        }
    }

    /// Stops holding: the held actions, to deliver now.
    pub fn release(&mut self) -> Vec<Action> {
        self.rewind_in_flight = false;
        self.held.take().unwrap_or_default()
    }
}

/// Input for the shown session: what is held during a switch (not quitting, interrupting,
/// answering a question or moving elsewhere).
fn is_input(action: &Action) -> bool {
    matches!(
        action,
        Action::Send(_)
            | Action::RunCommand { .. }
            | Action::Compact
            | Action::TogglePlan
            | Action::Diff
            | Action::SetModel(_)
            | Action::SetEffort(_)
    )
}

/// What this UI has shown of the rewind it applied, for the move to the fork.
///
/// The host commits the old session's `sessionForked`, then sends the command's `commandRan`,
/// then answers the command; the events and the answer travel apart (the subscription, the
/// op's answer), so the answer may come first. The UI moves once it has the answer and the
/// stream has shown both events ([`Told::settled`]): the screen then says where the session
/// continues, and why, from the log's own record. Only when the stream lost events on the
/// way (it fell behind, or ended) is what it did not show told from the answer, once.
#[derive(Debug, Default)]
pub struct Told {
    /// The forks whose `sessionForked` the stream showed.
    notices: Vec<String>,
    /// The forks whose `commandRan` the stream showed.
    outputs: Vec<String>,
    /// The rewind's answer: the fork and the command's output.
    answer: Option<(String, String)>,
    /// The stream lost events since (it fell behind the session, or ended): what it has not
    /// shown may never come.
    lost: bool,
}

/// What the stream did not show of an answered rewind ([`Told::missing`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Missing {
    /// The fork.
    pub session_id: String,
    /// The command's output, when its `commandRan` was not shown.
    pub output: Option<String>,
    /// Whether the `sessionForked` line is missing.
    pub notice: bool,
}

impl Told {
    /// The stream showed the `sessionForked` of fork `id`.
    pub fn saw_notice(&mut self, id: &str) {
        self.notices.push(id.to_owned());
    }

    /// The stream showed the `commandRan` that answered fork `id`.
    pub fn saw_output(&mut self, id: &str) {
        self.outputs.push(id.to_owned());
    }

    /// This UI's rewind was answered: it continues in `id`; `text` is the command's output.
    pub fn answered(&mut self, id: &str, text: &str) {
        self.answer = Some((id.to_owned(), text.to_owned()));
    }

    /// The stream lost events (it fell behind the session, or ended).
    pub fn lost(&mut self) {
        self.lost = true;
    }

    /// Whether the UI may move now: no rewind of its own is answered, or the stream has shown
    /// the answered fork's `sessionForked` and `commandRan`, or it lost events.
    pub fn settled(&self) -> bool {
        match &self.answer {
            None => true,
            Some((id, _)) => self.lost || (self.notices.contains(id) && self.outputs.contains(id)),
        }
    }

    /// At the move to the fork: what of the answered rewind the stream has not shown (`None`
    /// without an answer, or when it showed all of it); starts over.
    pub fn missing(&mut self) -> Option<Missing> {
        let answer = self.answer.take();
        let notices = std::mem::take(&mut self.notices);
        let outputs = std::mem::take(&mut self.outputs);
        self.lost = false;
        let (session_id, text) = answer?;
        let output = (!outputs.contains(&session_id) && !text.trim().is_empty()).then_some(text);
        let notice = !notices.contains(&session_id);
        (output.is_some() || notice).then_some(Missing {
            session_id,
            output,
            notice,
        })
    }
}

/// Whether running `/rewind ARGS` applies a rewind that forks the conversation (`yes`, and a
/// mode other than `code`): the UI moves to the fork once it is answered.
pub fn forks(name: &str, args: &str) -> bool {
    let words: Vec<&str> = args.split_whitespace().collect();
    name == "rewind"
        && words.iter().any(|w| matches!(*w, "yes" | "--yes" | "-y"))
        && !words.contains(&"code")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_before_its_events_waits_for_both() {
        let mut told = Told::default();
        assert!(told.settled(), "nothing answered: nothing to wait for");
        told.answered("fork-1", "Rewound.");
        assert!(!told.settled());
        told.saw_notice("fork-1");
        assert!(
            !told.settled(),
            "the command's output comes after the notice"
        );
        told.saw_output("fork-0");
        assert!(!told.settled(), "another fork's output does not count");
        told.saw_output("fork-1");
        assert!(told.settled());
        assert_eq!(told.missing(), None);
        assert!(told.settled());
    }

    #[test]
    fn a_stream_that_lost_events_leaves_them_to_show() {
        let mut told = Told::default();
        told.answered("fork-1", "Rewound.");
        told.lost();
        assert!(told.settled());
        assert_eq!(
            told.missing(),
            Some(Missing {
                session_id: "fork-1".into(),
                output: Some("Rewound.".into()),
                notice: true,
            })
        );
        // Forgotten once moved.
        assert_eq!(told.missing(), None);
    }

    #[test]
    fn events_seen_first_are_not_shown_again() {
        let mut told = Told::default();
        told.saw_output("fork-1");
        told.saw_notice("fork-1");
        told.answered("fork-1", "Rewound.");
        assert_eq!(told.missing(), None);

        // Only one of them seen; an older fork's line does not count.
        told.saw_notice("fork-0");
        told.saw_output("fork-2");
        told.answered("fork-2", "Rewound.");
        assert_eq!(
            told.missing(),
            Some(Missing {
                session_id: "fork-2".into(),
                output: None,
                notice: true,
            })
        );
    }

    #[test]
    fn a_move_not_answered_here_shows_nothing() {
        let mut told = Told::default();
        told.saw_notice("fork-1");
        assert_eq!(told.missing(), None);
        // An empty output is nothing to show.
        told.saw_notice("fork-2");
        told.answered("fork-2", " \n");
        assert_eq!(told.missing(), None);
    }

    #[test]
    fn only_a_conversation_rewind_that_applies_forks() {
        assert!(forks("rewind", "2 both yes"));
        assert!(forks("rewind", "2 conversation force yes"));
        assert!(forks("rewind", "3 yes"));
        assert!(!forks("rewind", "2 code yes"));
        assert!(!forks("rewind", "2 both"));
        assert!(!forks("compact", "yes"));
    }

    #[test]
    fn input_is_held_in_order_and_the_rest_passes() {
        let mut h = Hold::default();
        assert_eq!(
            h.take(Action::Send("a".into())),
            Some(Action::Send("a".into()))
        );
        h.start();
        assert_eq!(h.take(Action::Send("a".into())), None);
        assert_eq!(h.take(Action::Cancel), Some(Action::Cancel));
        assert_eq!(h.take(Action::Compact), None);
        h.rewind_in_flight = true;
        assert_eq!(h.release(), [Action::Send("a".into()), Action::Compact]);
        assert!(!h.holding() && !h.rewind_in_flight);
    }
}
