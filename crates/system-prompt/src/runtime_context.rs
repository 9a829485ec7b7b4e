//! Runtime-context snapshots (`session-format.md` §10.3): dynamic sections that travel as a
//! `user/message` at the history tail instead of being rendered into the system prompt, which
//! keeps the system prefix cache-stable.
//!
//! This module is pure: the loop tracks the [`RetainedContext`] from its session log and asks
//! [`propose`] whether to append a snapshot before a step.

use dsh_llm::{ContentBlock, MessageSource};
use serde_json::{Map, Value};

use crate::section::ContextSection;

/// The `source.kind` of an owned runtime-context message.
pub const SOURCE_KIND: &str = "runtime-context";

/// First line of a snapshot, followed by `\n\n` and the sections joined with `\n\n`.
pub const SNAPSHOT_HEADER: &str =
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.";

/// The text appended when the set of sections became empty after having existed.
pub const CLEARED_TEXT: &str =
    "Current runtime context: none. Earlier runtime-context snapshots no longer apply.";

/// What the log says about the last runtime-context message (§10.3 "retained").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RetainedContext {
    /// No owned message was ever appended.
    #[default]
    Absent,
    /// One existed, but none is a current surface node (shadowed or replaced).
    Cleared,
    /// The current owned message: its event seq and text.
    Snapshot {
        /// Event seq of the `user/message`.
        seq: u64,
        /// Its text.
        text: String,
    },
}

/// An owned runtime-context message found in the log, for [`RetainedContext::scan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedContextMessage {
    /// Event seq of the `user/message` whose `source.kind` is `runtime-context`.
    pub seq: u64,
    /// Its text (the text of its single text block).
    pub text: String,
    /// Whether it is still a current surface node.
    pub current: bool,
}

impl RetainedContext {
    /// The state on load: `messages` are the owned messages **newest first**. The first one seen
    /// sets [`Cleared`](Self::Cleared); the newest that is still current becomes the snapshot.
    pub fn scan(messages: impl IntoIterator<Item = OwnedContextMessage>) -> Self {
        let mut state = RetainedContext::Absent;
        for m in messages {
            if m.current {
                return RetainedContext::Snapshot {
                    seq: m.seq,
                    text: m.text,
                };
            }
            state = RetainedContext::Cleared;
        }
        state
    }

    /// Live update: an owned message was appended at `seq` with `text`.
    pub fn appended(&mut self, seq: u64, text: impl Into<String>) {
        *self = RetainedContext::Snapshot {
            seq,
            text: text.into(),
        };
    }

    /// Live update: a replacement with these `sourceEventSeqs` was appended; if it covers the
    /// retained snapshot, the state becomes [`Cleared`](Self::Cleared).
    pub fn replaced(&mut self, source_event_seqs: &[u64]) {
        if let RetainedContext::Snapshot { seq, .. } = self
            && source_event_seqs.contains(seq)
        {
            *self = RetainedContext::Cleared;
        }
    }

    /// The retained text, when there is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            RetainedContext::Snapshot { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// A runtime-context `user/message` to append (the last member of the step's accepted batch).
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeContextProposal {
    /// The message text (the content is exactly one text block with it).
    pub text: String,
    /// `{"kind":"runtime-context","form":"snapshot","sections":[{name,text}…]}`, or
    /// `{"kind":"runtime-context"}` for the cleared text.
    pub source: MessageSource,
}

impl RuntimeContextProposal {
    /// The message content: `[{"type":"text","text":…}]`.
    pub fn content(&self) -> Vec<ContentBlock> {
        vec![ContentBlock::text(self.text.clone())]
    }

    /// The source as JSON, members in logged order.
    pub fn source_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("kind".into(), Value::String(self.source.kind.clone()));
        for (k, v) in &self.source.extra {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }

    /// Whether this is the cleared form (no sections remain).
    pub fn is_cleared(&self) -> bool {
        self.text == CLEARED_TEXT && !self.source.extra.contains_key("form")
    }
}

/// The current rendering of `sections`: `""` when there are none, else [`SNAPSHOT_HEADER`],
/// `\n\n`, and the texts joined with `\n\n`.
pub fn render(sections: &[ContextSection]) -> String {
    if sections.is_empty() {
        return String::new();
    }
    let mut out = String::from(SNAPSHOT_HEADER);
    for s in sections {
        out.push_str("\n\n");
        out.push_str(&s.text);
    }
    out
}

/// The projection of §10.3: `None` when nothing needs appending, else the message to append.
///
/// - no snapshot ever and no sections → nothing;
/// - otherwise the snapshot is the rendering, or [`CLEARED_TEXT`] when there are no sections;
/// - a retained snapshot with the same text → nothing; anything else → propose it.
pub fn propose(
    retained: &RetainedContext,
    sections: &[ContextSection],
) -> Option<RuntimeContextProposal> {
    let current = render(sections);
    if current.is_empty() && *retained == RetainedContext::Absent {
        return None;
    }
    let cleared = current.is_empty();
    let text = if cleared {
        CLEARED_TEXT.to_owned()
    } else {
        current
    };
    if retained.text() == Some(text.as_str()) {
        return None;
    }
    let source = if cleared {
        MessageSource::new(SOURCE_KIND)
    } else {
        let list = sections
            .iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("name".into(), Value::String(s.name.clone()));
                m.insert("text".into(), Value::String(s.text.clone()));
                Value::Object(m)
            })
            .collect();
        MessageSource::new(SOURCE_KIND)
            .with("form", Value::String("snapshot".into()))
            .with("sections", Value::Array(list))
    };
    Some(RuntimeContextProposal { text, source })
}
