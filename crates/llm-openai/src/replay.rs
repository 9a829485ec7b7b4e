//! `replayState` of this adapter's assistant messages: `{"kind":"openai-chat","version":1,
//! "reasoningDetails"?:[…]}`, present when the stream carried `reasoning_details`, so the
//! structured items (signatures, encrypted reasoning) go back unchanged.

use serde_json::{Value, json};

/// `replayState.kind`.
pub const KIND: &str = "openai-chat";
/// `replayState.version`.
pub const VERSION: u64 = 1;

/// The replay state carrying `details`.
pub fn with_details(details: Vec<Value>) -> Value {
    json!({"kind": KIND, "version": VERSION, "reasoningDetails": details})
}

/// The `reasoning_details` of a replay state written by this adapter.
pub fn reasoning_details(state: &Value) -> Option<&Value> {
    (state.get("kind")?.as_str()? == KIND && state.get("version")?.as_u64()? == VERSION)
        .then(|| state.get("reasoningDetails"))
        .flatten()
        .filter(|d| d.is_array())
}
