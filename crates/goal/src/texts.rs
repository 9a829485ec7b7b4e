//! The texts the model and the user see: the original's where a log or a model carries them
//! (round prompt, closing instructions, error messages), dsh's own compact tool descriptions.

/// The continuation prompt of round `round` (the original's text exactly).
pub fn round_prompt(objective: &str, round: u64, max_rounds: u64) -> String {
    format!(
        "<goal_round>\nObjective: {}\nRound: {round}/{max_rounds}\n\nContinue working toward the \
         objective in this same session. Treat the current workspace, tool results, and durable \
         session state as authoritative; inspect them instead of assuming earlier narration is \
         still current. Make concrete progress and verify the result. Before claiming completion, \
         gather evidence that the whole objective is achieved, read the current goal, and mark it \
         complete. If work remains, leave the goal active for the next round. Follow the \
         configured goal-tool policy before reporting a blocker.\n</goal_round>",
        json(objective)
    )
}

/// The closing instruction after a goal round reports `complete` (`blocked: None`) or
/// `blocked` (the original's texts exactly).
pub fn wrapup(objective: &str, blocked: Option<&str>) -> String {
    let heading = format!("Objective: {}\n", json(objective));
    match blocked {
        None => format!(
            "<goal_complete>\n{heading}The goal is marked complete and this autonomous run is \
             ending. Write the closing message to the user now: state the outcome, summarize what \
             was done and how it was verified, and point to the concrete results (files, commits, \
             or other artifacts). Report only what earlier rounds and tool results in this \
             session actually establish; when a detail is not in the session, say so instead of \
             inventing it. Note anything the user should review or do next. Address the user \
             directly. Do not call any more tools in this run; further work waits for the user's \
             next instruction.\n</goal_complete>"
        ),
        Some(reason) => format!(
            "<goal_blocked>\n{heading}Blocked: {}\nThe goal is marked blocked and this autonomous \
             run is ending. Write the closing message to the user now: state what has been \
             completed so far, describe the concrete blocking condition and what you tried, and \
             say exactly what you need from the user to continue. Report only what earlier rounds \
             and tool results in this session actually establish; when a detail is not in the \
             session, say so instead of inventing it. Address the user directly. Do not call any \
             more tools in this run; further work waits for the user's next instruction.\n\
             </goal_blocked>",
            json(reason)
        ),
    }
}

/// The `goal` runtime-context section of an active goal: the objective and the goal-tool
/// policy the round prompt refers to (dsh's text; the references do not give the original's).
pub fn context_active(objective: &str, blocked_after: u64) -> String {
    format!(
        "Goal of this session (set by the user): {}\nIt is active: the session works on it in \
         automatic rounds, each opened by a <goal_round> message. Work toward the whole \
         objective and verify the result. Once it is achieved, read the goal (get_goal) and mark \
         it complete (update_goal). Report it blocked only after the same blocker persisted \
         {blocked_after} consecutive rounds, with the blocker in blocked_reason. Edit, pause or \
         resume the goal only when the user asks for it directly.",
        json(objective)
    )
}

/// The `goal` runtime-context section of a paused goal.
pub fn context_paused(objective: &str) -> String {
    format!(
        "Goal of this session (set by the user): {}\nIt is paused: no automatic rounds run until \
         the user resumes it (/goal resume). Do not resume it yourself.",
        json(objective)
    )
}

/// A notice summary: at most 120 characters (cut with `…`).
pub fn summary(text: &str) -> String {
    const MAX: usize = 120;
    if text.chars().count() <= MAX {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(MAX - 1).collect();
    s.push('…');
    s
}

/// `s` as a JSON string literal (as the original's `JSON.stringify`).
pub fn json(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// `create_goal`'s description.
pub const CREATE_DESCRIPTION: &str = "Create a persisted goal that keeps this session working in \
automatic continuation rounds: for a long-running objective, not single-turn work.";

/// `get_goal`'s description.
pub const GET_DESCRIPTION: &str =
    "Read the current goal, with the id and revision update_goal needs.";

/// `update_goal`'s description (the original's goal policy, compact).
pub fn update_description(blocked_after: u64) -> String {
    format!(
        "Update the current goal. edit, pause and resume need the user's direct request. In a \
         goal round: complete only once the whole objective is verified; blocked only after the \
         same blocker persisted {blocked_after} rounds, stated in blocked_reason."
    )
}

/// The `/goal` usage line (the original's).
pub const USAGE: &str = "Usage: /goal [<objective>|clear|edit <objective>|pause|resume]";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_round_prompt_and_closing_texts_are_the_originals() {
        assert_eq!(
            round_prompt("a \"b\"", 2, 9),
            "<goal_round>\nObjective: \"a \\\"b\\\"\"\nRound: 2/9\n\nContinue working toward the objective in this same session. Treat the current workspace, tool results, and durable session state as authoritative; inspect them instead of assuming earlier narration is still current. Make concrete progress and verify the result. Before claiming completion, gather evidence that the whole objective is achieved, read the current goal, and mark it complete. If work remains, leave the goal active for the next round. Follow the configured goal-tool policy before reporting a blocker.\n</goal_round>"
        );
        assert_eq!(
            wrapup("x", None),
            "<goal_complete>\nObjective: \"x\"\nThe goal is marked complete and this autonomous run is ending. Write the closing message to the user now: state the outcome, summarize what was done and how it was verified, and point to the concrete results (files, commits, or other artifacts). Report only what earlier rounds and tool results in this session actually establish; when a detail is not in the session, say so instead of inventing it. Note anything the user should review or do next. Address the user directly. Do not call any more tools in this run; further work waits for the user's next instruction.\n</goal_complete>"
        );
        assert_eq!(
            wrapup("x", Some("no key")),
            "<goal_blocked>\nObjective: \"x\"\nBlocked: \"no key\"\nThe goal is marked blocked and this autonomous run is ending. Write the closing message to the user now: state what has been completed so far, describe the concrete blocking condition and what you tried, and say exactly what you need from the user to continue. Report only what earlier rounds and tool results in this session actually establish; when a detail is not in the session, say so instead of inventing it. Address the user directly. Do not call any more tools in this run; further work waits for the user's next instruction.\n</goal_blocked>"
        );
        assert_eq!(summary(&"a".repeat(130)).chars().count(), 120);
    }
}
