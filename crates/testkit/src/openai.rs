//! The OpenAI-compatible dialect: chat-completions SSE as vLLM, llama.cpp, Ollama, OpenRouter
//! and OpenAI send it. The stream shape is [`crate::Completion`]'s; what differs between servers
//! is the member that carries reasoning, chosen with [`ReasoningField`]. Errors use the same
//! envelope as [`crate::deepseek`] (`{"error":{"message","type","param","code"}}`).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{Reply, Split};
use crate::sse::{Completion, DONE_EVENT, data_event};

/// The member of `choices[0].delta` that carries reasoning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReasoningField {
    /// `reasoning_content` (DeepSeek, vLLM, SGLang).
    ReasoningContent,
    /// `reasoning` (OpenRouter's plain form, Ollama, llama.cpp).
    Reasoning,
    /// `reasoning_details: [{"type":"reasoning.text","text","format","index":0}]` (OpenRouter);
    /// the last reasoning piece carries `signature` when given.
    ReasoningDetails {
        /// Signature on the last text item.
        signature: Option<String>,
    },
}

/// The payloads of `completion` with reasoning moved to `field` (`[DONE]` kept).
pub fn payloads(completion: &Completion, field: &ReasoningField) -> Vec<String> {
    let raw = completion.payloads();
    let last_reasoning = raw.iter().rposition(|p| {
        serde_json::from_str::<Value>(p).ok().is_some_and(|v| {
            v["choices"][0]["delta"]["reasoning_content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
    });
    raw.into_iter()
        .enumerate()
        .map(|(i, p)| {
            let Ok(mut v) = serde_json::from_str::<Value>(&p) else {
                return p;
            };
            let Some(delta) = v
                .get_mut("choices")
                .and_then(|c| c.get_mut(0))
                .and_then(|c| c.get_mut("delta"))
                .and_then(Value::as_object_mut)
            else {
                return p;
            };
            if *field == ReasoningField::ReasoningContent {
                return p;
            }
            let Some(r) = delta.remove("reasoning_content") else {
                return p;
            };
            match (field, r) {
                (ReasoningField::Reasoning, Value::String(s)) => {
                    delta.insert("reasoning".into(), Value::String(s));
                }
                (ReasoningField::ReasoningDetails { signature }, Value::String(s))
                    if !s.is_empty() =>
                {
                    let mut item =
                        json!({"type":"reasoning.text","text":s,"format":"unknown","index":0});
                    if Some(i) == last_reasoning
                        && let Some(sig) = signature
                    {
                        item["signature"] = Value::String(sig.clone());
                    }
                    delta.insert("reasoning_details".into(), json!([item]));
                }
                _ => {}
            }
            v.to_string()
        })
        .collect()
}

/// The SSE bytes of `completion` in the `field` dialect.
pub fn to_bytes(completion: &Completion, field: &ReasoningField) -> Bytes {
    let mut s = String::new();
    for p in payloads(completion, field) {
        if p == "[DONE]" {
            s.push_str(DONE_EVENT);
        } else {
            s.push_str(&data_event(&p));
        }
    }
    Bytes::from(s)
}

/// A reply writing one event per write.
pub fn reply(completion: &Completion, field: &ReasoningField) -> Reply {
    Reply::sse().split_events(to_bytes(completion, field))
}

/// A reply with the bytes split as `split` says.
pub fn reply_split(completion: &Completion, field: &ReasoningField, split: &Split) -> Reply {
    Reply::sse().split(to_bytes(completion, field), split)
}

/// 401 in OpenAI's wording.
pub fn unauthorized() -> Reply {
    crate::deepseek::error_reply(
        401,
        "Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    )
}

/// 429 `insufficient_quota` (how OpenAI reports an exhausted balance).
pub fn insufficient_quota() -> Reply {
    crate::deepseek::error_reply(
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
        "insufficient_quota",
    )
}

/// 400 `context_length_exceeded`.
pub fn context_exceeded() -> Reply {
    crate::deepseek::error_reply(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "invalid_request_error",
        "context_length_exceeded",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_moves_to_the_chosen_member() {
        let c = Completion::new().reasoning("think").text("hi");
        let r = String::from_utf8(to_bytes(&c, &ReasoningField::Reasoning).to_vec()).unwrap();
        assert!(
            r.contains(r#""reasoning":"think""#) && !r.contains("reasoning_content"),
            "{r}"
        );
        let d = String::from_utf8(
            to_bytes(
                &c,
                &ReasoningField::ReasoningDetails {
                    signature: Some("sg".into()),
                },
            )
            .to_vec(),
        )
        .unwrap();
        assert!(d.contains(r#""reasoning_details":[{"type":"reasoning.text","text":"think","format":"unknown","index":0,"signature":"sg"}]"#), "{d}");
        assert!(d.ends_with(DONE_EVENT));
    }
}
