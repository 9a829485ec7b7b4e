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
