//! The summary call's fixed texts and the checkpoint message (upstream compaction-basic §8,
//! `session-format.md` §14).

use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use serde_json::Value;

/// Source kind of the (never logged) instruction message.
pub const INSTRUCTION_SOURCE: &str = "dsh-compaction-basic";

/// The first text block of a checkpoint (fixed by the format).
pub const PREAMBLE: &str = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n<compacted-summary>";

/// The last text block of a checkpoint.
pub const CLOSE: &str = "</compacted-summary>";

/// The eight sections, in order.
pub const SECTIONS: [&str; 8] = [
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code",
    "Errors and Fixes",
    "Pending Jobs",
    "Current Work",
    "Next Step",
    "Critical Context",
];

/// The instruction appended after the conversation's own last request. `retained` is how many
/// of the newest messages stay verbatim after the checkpoint.
pub fn instruction(retained: usize) -> String {
    let mut s = String::from(
        "You are now acting as a compaction engine. Condense the conversation above into a checkpoint that replaces it in the context window.",
    );
    if retained > 0 {
        s.push_str(&format!(
            " The newest {retained} message(s) above stay verbatim after the checkpoint: cover everything before them."
        ));
    }
    s.push_str(" Output exactly these eight sections, in this order, each a heading followed by terse bullets (write `(none)` when a section is empty):\n");
    for (i, name) in SECTIONS.iter().enumerate() {
        s.push_str(&format!("{}. {name}\n", i + 1));
    }
    s.push_str(
        "Preserve exact file paths, commands, error messages and identifiers. Keep every correction the user made. If the conversation contains an earlier <compacted-summary>, merge its content into your sections instead of copying it. Do not mention that this is a summary or a compaction, and do not call any tool.",
    );
    s
}

/// The instruction as a user message (source `dsh-compaction-basic`; sent, never logged).
pub fn instruction_message(id: String, retained: usize) -> Message {
    Message::new(
        id,
        Role::User,
        vec![ContentBlock::text(instruction(retained))],
        MessageSource::new(INSTRUCTION_SOURCE),
    )
}

/// The replacement `user/message`: preamble, the summary blocks, the closing tag; source
/// `compact-checkpoint` naming the compaction (and the command that asked for it).
pub fn checkpoint_message(
    id: String,
    compaction_id: &str,
    source_command_id: Option<&str>,
    summary: &[ContentBlock],
) -> Message {
    let mut content = Vec::with_capacity(summary.len() + 2);
    content.push(ContentBlock::text(PREAMBLE));
    content.extend(summary.iter().cloned());
    content.push(ContentBlock::text(CLOSE));
    let mut source = MessageSource::new("compact-checkpoint")
        .with("compactionId", Value::String(compaction_id.to_owned()));
    if let Some(c) = source_command_id {
        source = source.with("sourceCommandId", Value::String(c.to_owned()));
    }
    Message::new(id, Role::User, content, source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instruction_names_the_sections_in_order() {
        let s = instruction(3);
        let mut at = 0;
        for name in SECTIONS {
            let i = s[at..].find(name).map(|i| i + at);
            assert!(i.is_some(), "{name} missing or out of order");
            at = i.unwrap_or(0);
        }
        assert!(s.contains("newest 3 message(s)"));
        assert!(!instruction(0).contains("verbatim after"));
    }

    #[test]
    fn the_checkpoint_is_framed_like_the_fixture() {
        let m = checkpoint_message("m6".into(), "c1", None, &[ContentBlock::text("S")]);
        let v = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(
            v["source"],
            serde_json::json!({"kind":"compact-checkpoint","compactionId":"c1"})
        );
        assert_eq!(v["content"][0]["text"], PREAMBLE);
        assert_eq!(v["content"][2]["text"], CLOSE);
    }
}
