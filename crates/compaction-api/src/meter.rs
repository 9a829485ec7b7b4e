//! The token meter: how many input tokens the next request would carry. Provider-reported usage
//! of the newest request first (exact for everything that request sent), plus a byte estimate of
//! what was appended after it; a full estimate when a replacement since then made the reported
//! figure stale.

use dsh_llm::{ContentBlock, Message};
use dsh_session::{CoreEvent, SessionLog, SurfaceOp};
use schemars::JsonSchema;
use serde::Deserialize;

/// Per-message framing overhead in bytes (role, keys, separators) added to the content bytes.
const MESSAGE_OVERHEAD_BYTES: u64 = 16;

/// The meter's one setting: bytes per token of the estimate.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TokenMeter {
    /// Bytes per token for text the provider has not counted yet (default 3.4: DeepSeek's
    /// tokenizer on mixed English, code and JSON).
    #[serde(default = "default_bytes_per_token")]
    pub bytes_per_token: f64,
}

fn default_bytes_per_token() -> f64 {
    3.4
}

impl Default for TokenMeter {
    fn default() -> Self {
        TokenMeter {
            bytes_per_token: default_bytes_per_token(),
        }
    }
}

/// One reading of the meter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measure {
    /// `reported + estimated`.
    pub tokens: u64,
    /// Input plus output tokens the provider reported for the newest request (0 when stale or
    /// absent).
    pub reported: u64,
    /// Estimated tokens of everything the report does not cover.
    pub estimated: u64,
}

/// Content bytes of one message as the provider sees them (text, reasoning, tool calls).
pub fn message_bytes(m: &Message) -> u64 {
    let mut n = MESSAGE_OVERHEAD_BYTES;
    for b in &m.content {
        n += match b {
            ContentBlock::Text { text } | ContentBlock::Reasoning { text } => text.len() as u64,
            ContentBlock::ToolCall(c) => {
                (c.id.len() + c.name.len() + c.arguments.len() + 32) as u64
            }
            // Images, files and opaque blocks are sent as short placeholders or not at all.
            _ => 64,
        };
    }
    n
}

impl TokenMeter {
    /// Estimated tokens of `bytes` bytes.
    pub fn tokens_of_bytes(&self, bytes: u64) -> u64 {
        let per = if self.bytes_per_token > 0.0 {
            self.bytes_per_token
        } else {
            default_bytes_per_token()
        };
        (bytes as f64 / per).ceil() as u64
    }

    /// Estimated tokens of one message.
    pub fn message_tokens(&self, m: &Message) -> u64 {
        self.tokens_of_bytes(message_bytes(m))
    }

    /// The next request's input tokens: the current model history plus `pending` (the batch
    /// the next step will append). O(events since the newest assistant message) when the
    /// provider's report is current, O(history) after a replacement.
    pub fn measure(&self, log: &SessionLog, pending: &[Message]) -> Measure {
        match reported_usage(log) {
            Some(r) => {
                let nodes = log.surface().nodes();
                let tail = || nodes.iter().rev().filter(|n| !n.is_skipped());
                // Calibrate on the last two reports: the bytes appended between them against
                // the tokens the provider counted for them.
                let meter = r
                    .previous
                    .and_then(|(prev_seq, prev_prompt)| {
                        let bytes: u64 = tail()
                            .skip_while(|n| n.seq >= r.seq)
                            .take_while(|n| n.seq >= prev_seq)
                            .map(|n| message_bytes(&n.message))
                            .sum();
                        calibrate(bytes, r.prompt.checked_sub(prev_prompt)?)
                    })
                    .map_or(*self, |bytes_per_token| TokenMeter { bytes_per_token });
                let unsent: u64 = tail()
                    .take_while(|n| n.seq > r.seq)
                    .map(|n| meter.message_tokens(&n.message))
                    .sum();
                let pending_tokens: u64 = pending.iter().map(|m| meter.message_tokens(m)).sum();
                let reported = r.prompt + r.output;
                let estimated = unsent + pending_tokens;
                Measure {
                    tokens: reported + estimated,
                    reported,
                    estimated,
                }
            }
            None => {
                let pending_tokens: u64 = pending.iter().map(|m| self.message_tokens(m)).sum();
                let history = self.history_tokens(log);
                let estimated = history + pending_tokens;
                Measure {
                    tokens: estimated,
                    reported: 0,
                    estimated,
                }
            }
        }
    }

    /// A full estimate of the current history, tools of the newest header included.
    pub fn history_tokens(&self, log: &SessionLog) -> u64 {
        let messages: u64 = log
            .surface()
            .nodes()
            .iter()
            .filter(|n| !n.is_skipped())
            .map(|n| self.message_tokens(&n.message))
            .sum();
        let tools = log
            .latest_request_header()
            .and_then(|e| match e.core() {
                Some(CoreEvent::RequestHeader(h)) => h.header.tools.as_ref().map(|t| {
                    t.iter()
                        .map(|s| {
                            (s.name.len() + s.description.len() + s.parameters.to_string().len())
                                as u64
                        })
                        .sum::<u64>()
                }),
                _ => None,
            })
            .unwrap_or(0);
        messages + self.tokens_of_bytes(tools)
    }
}

/// Bytes per token from `bytes` the provider counted as `tokens`; `None` when the sample is
/// too small to say (under 256 tokens) or implausible (outside 1–10 bytes per token).
pub fn calibrate(bytes: u64, tokens: u64) -> Option<f64> {
    if tokens < 256 {
        return None;
    }
    let ratio = bytes as f64 / tokens as f64;
    (1.0..=10.0).contains(&ratio).then_some(ratio)
}

/// The newest provider report that still describes the history.
struct Reported {
    /// Seq of its assistant message.
    seq: u64,
    /// Prompt tokens (uncached + cached).
    prompt: u64,
    /// Output tokens.
    output: u64,
    /// The report before it (seq, prompt tokens), when no replacement came between them.
    previous: Option<(u64, u64)>,
}

/// The newest assistant message's usage, unless a replacement landed after it (then the report
/// no longer describes the history). O(events since the report before it).
fn reported_usage(log: &SessionLog) -> Option<Reported> {
    let mut found: Option<Reported> = None;
    for e in log.events().iter().rev() {
        if let Some(SurfaceOp::Replace { .. }) = e.surface_op() {
            return found;
        }
        if let Some(CoreEvent::AssistantMessage(a)) = e.core() {
            let Some(u) = a.usage else {
                return found;
            };
            let prompt = u.input_tokens + u.cache_read_tokens.unwrap_or(0);
            match &mut found {
                None => {
                    found = Some(Reported {
                        seq: e.seq(),
                        prompt,
                        output: u.output_tokens,
                        previous: None,
                    })
                }
                Some(r) => {
                    r.previous = Some((e.seq(), prompt));
                    return found;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_rounds_up_and_survives_a_bad_setting() {
        let m = TokenMeter::default();
        assert_eq!(m.tokens_of_bytes(0), 0);
        assert_eq!(m.tokens_of_bytes(34), 10);
        assert_eq!(m.tokens_of_bytes(35), 11);
        let bad = TokenMeter {
            bytes_per_token: 0.0,
        };
        assert_eq!(bad.tokens_of_bytes(34), 10);
    }

    #[test]
    fn calibration_needs_a_real_sample() {
        assert_eq!(calibrate(4000, 1000), Some(4.0));
        assert_eq!(calibrate(400, 100), None, "too small a sample");
        assert_eq!(calibrate(100_000, 1000), None, "implausible");
        assert_eq!(calibrate(500, 1000), None, "implausible");
    }
}
