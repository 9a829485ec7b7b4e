//! `replayState` of assistant messages, as the original 0.2.1 writes it:
//! `{"response":{"kind","version":1,"model"},"blocks":[{"type":"reasoning","signature"?},
//! {"type":"text"},{"type":"tool-call"}]}`, one entry per content block.

use dsh_llm::ContentBlock;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version written and accepted.
pub const VERSION: u64 = 1;

/// `replayState.response`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// `deepseek-messages` / `anthropic-messages`.
    pub kind: String,
    /// [`VERSION`].
    pub version: u64,
    /// The model that produced the signatures (they are valid for it only).
    pub model: String,
}

/// One entry of `replayState.blocks`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockState {
    /// The content block's type tag (`reasoning`, `text`, `tool-call`).
    #[serde(rename = "type")]
    pub kind: String,
    /// A thinking block's signature (from `signature_delta`), replayed unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// A `redacted_thinking` block's opaque data, replayed unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
}

/// The replay state of one assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayState {
    /// Who wrote it.
    pub response: Response,
    /// One entry per content block, in order.
    pub blocks: Vec<BlockState>,
}

impl ReplayState {
    /// The state if it is usable for `model`: right kind and version, one entry per block with
    /// matching types, written for the same model. Anything else: `None` (signatures are then
    /// omitted, never guessed).
    pub fn valid_for(
        value: &Value,
        kind: &str,
        model: &str,
        content: &[ContentBlock],
    ) -> Option<ReplayState> {
        let state = ReplayState::deserialize(value).ok()?;
        let ok = state.response.kind == kind
            && state.response.version == VERSION
            && state.response.model == model
            && state.blocks.len() == content.len()
            && state
                .blocks
                .iter()
                .zip(content)
                .all(|(s, b)| s.kind == b.type_tag());
        if !ok {
            tracing::debug!(
                kind,
                model,
                "replay state not usable for this request; thinking replayed without signatures"
            );
        }
        ok.then_some(state)
    }

    /// As JSON, for the `finish` chunk.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
