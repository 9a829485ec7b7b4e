//! The tool-result pruner (upstream compaction-tool-result-pruner): no model call. An old tool
//! result whose text is over `thresholdChars` code points keeps its first `headChars` and last
//! `tailChars`, with one marker between; non-text blocks keep their place. Logged as
//! `compaction/prune` then a `tool/result` replacement that differs only in `message.content`,
//! so `derive_messages` reproduces it on resume. Pruning a pruned result changes nothing.

use std::sync::Arc;

use dsh_llm::{ContentBlock, Message, Role};
use dsh_session::{CoreEvent, NewEvent, SessionLog};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::events::{CompactionPrune, ShadowedRange};
use crate::meter::TokenMeter;

/// The marker put where the middle was.
pub const MARKER: &str = "\n\n[... tool result middle pruned ...]\n\n";

/// Config of the pruner (plugin `tool-result-pruner`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrunerConfig {
    /// Results with more text code points than this are pruned (default 8192).
    #[serde(default = "default_threshold")]
    pub threshold_chars: usize,
    /// Code points kept from the start (default 4096).
    #[serde(default = "default_head")]
    pub head_chars: usize,
    /// Code points kept from the end (default 1024).
    #[serde(default = "default_tail")]
    pub tail_chars: usize,
}

fn default_threshold() -> usize {
    8192
}
fn default_head() -> usize {
    4096
}
fn default_tail() -> usize {
    1024
}

impl Default for PrunerConfig {
    fn default() -> Self {
        PrunerConfig {
            threshold_chars: default_threshold(),
            head_chars: default_head(),
            tail_chars: default_tail(),
        }
    }
}

/// A pruner config that cannot be idempotent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool-result-pruner: headChars ({head}) + marker ({marker}) + tailChars ({tail}) must not exceed thresholdChars ({threshold}), or a pruned result would be pruned again"
)]
pub struct PrunerConfigError {
    head: usize,
    marker: usize,
    tail: usize,
    threshold: usize,
}

impl PrunerConfig {
    /// Checks `head + marker + tail ≤ threshold`.
    pub fn validate(&self) -> Result<(), PrunerConfigError> {
        let marker = MARKER.chars().count();
        if self.head_chars + marker + self.tail_chars > self.threshold_chars {
            return Err(PrunerConfigError {
                head: self.head_chars,
                marker,
                tail: self.tail_chars,
                threshold: self.threshold_chars,
            });
        }
        Ok(())
    }
}

/// Code points of the text blocks.
fn text_chars(content: &[ContentBlock]) -> usize {
    content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count(),
            _ => 0,
        })
        .sum()
}

/// The pruned content, or `None` when `content` is within the threshold.
pub fn prune_content(content: &[ContentBlock], config: &PrunerConfig) -> Option<Vec<ContentBlock>> {
    // Bytes bound code points: most results are decided without counting.
    let bytes: usize = content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            _ => 0,
        })
        .sum();
    if bytes <= config.threshold_chars {
        return None;
    }
    let total = text_chars(content);
    if total <= config.threshold_chars {
        return None;
    }
    let head = config.head_chars.min(total);
    let tail_from = total - config.tail_chars.min(total - head);
    // Byte offset of code point `k` of `text` (its length when `k` is past the end).
    let at_char = |text: &str, k: usize| text.char_indices().nth(k).map_or(text.len(), |(i, _)| i);
    let mut out = Vec::with_capacity(content.len() + 1);
    let mut start = 0usize;
    let mut marked = false;
    for block in content {
        let ContentBlock::Text { text } = block else {
            out.push(block.clone());
            continue;
        };
        let len = text.chars().count();
        let end = start + len;
        let mut kept = String::new();
        // The head part: code points [start, min(end, head)).
        if start < head {
            kept.push_str(&text[..at_char(text, head.min(end) - start)]);
        }
        // The marker goes where the head ends (once).
        if !marked && end >= head {
            kept.push_str(MARKER);
            marked = true;
        }
        // The tail part: code points [max(start, tail_from), end).
        if end > tail_from {
            kept.push_str(&text[at_char(text, tail_from.saturating_sub(start))..]);
        }
        start = end;
        if !kept.is_empty() {
            out.push(ContentBlock::Text { text: kept });
        }
    }
    Some(out)
}

/// One planned prune.
#[derive(Debug)]
pub struct PlannedPrune {
    /// The pruned result's seq.
    pub seq: u64,
    /// Estimated tokens it saves.
    pub saved_tokens: u64,
    /// `compaction/prune`, then the replacing `tool/result`.
    pub events: [NewEvent; 2],
}

/// The prunes of every tool result already seen by the model (before the newest assistant
/// message) that is over the threshold. Nothing is written.
pub fn prune_plan(
    log: &SessionLog,
    config: &PrunerConfig,
    meter: &TokenMeter,
) -> Vec<PlannedPrune> {
    let newest_assistant = log
        .surface()
        .nodes()
        .iter()
        .rev()
        .find(|n| n.message.role == Role::Assistant)
        .map(|n| n.seq);
    let Some(limit) = newest_assistant else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for node in log.surface().nodes() {
        if node.message.role != Role::Tool || node.seq > limit {
            continue;
        }
        let Some(content) = prune_content(&node.message.content, config) else {
            continue;
        };
        let Some(CoreEvent::ToolResult(original)) =
            log.events().get(node.seq as usize).and_then(|e| e.core())
        else {
            continue;
        };
        let mut replacement = (**original).clone();
        let message = Message {
            content,
            ..(*node.message).clone()
        };
        let before = meter.message_tokens(&node.message);
        let saved_tokens = before.saturating_sub(meter.message_tokens(&message));
        replacement.message = Arc::new(message);
        let prune = CompactionPrune {
            shadowed_range: ShadowedRange {
                start: node.seq,
                end: node.seq,
            },
            shadowed_seqs: vec![node.seq],
            shadowed_token_count: before,
        };
        let Ok(record) = NewEvent::plugin(&prune) else {
            continue;
        };
        out.push(PlannedPrune {
            seq: node.seq,
            saved_tokens,
            events: [
                record,
                NewEvent::core(replacement)
                    .replacing(node.seq, node.seq)
                    .with_sources(vec![node.seq]),
            ],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(s: &str) -> ContentBlock {
        ContentBlock::text(s)
    }

    fn joined(content: &[ContentBlock]) -> String {
        content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn small() -> PrunerConfig {
        PrunerConfig {
            threshold_chars: 60,
            head_chars: 10,
            tail_chars: 5,
        }
    }

    #[test]
    fn defaults_are_the_originals_and_valid() {
        let c = PrunerConfig::default();
        assert_eq!(
            (c.threshold_chars, c.head_chars, c.tail_chars),
            (8192, 4096, 1024)
        );
        c.validate().unwrap();
        let bad = PrunerConfig {
            threshold_chars: 5000,
            ..c
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("thresholdChars (5000)"), "{e}");
    }

    #[test]
    fn head_marker_tail_with_code_points() {
        let s: String = "é".repeat(30) + &"x".repeat(40);
        let out = prune_content(&[text(&s)], &small()).unwrap();
        let t = joined(&out);
        assert_eq!(t, format!("{}{MARKER}{}", "é".repeat(10), "x".repeat(5)));
        assert!(prune_content(&out, &small()).is_none(), "idempotent");
        assert!(prune_content(&[text(&"y".repeat(60))], &small()).is_none());
    }

    proptest! {
        #[test]
        fn pruning_keeps_head_and_tail_and_is_idempotent(
            parts in proptest::collection::vec("[a-zé😀 ]{0,40}", 1..6),
            image_at in proptest::option::of(0usize..6),
        ) {
            let mut content: Vec<ContentBlock> = parts.iter().map(|p| text(p)).collect();
            let other = ContentBlock::Other(
                serde_json::json!({"type": "x-plugin", "n": 1}).as_object().cloned().unwrap_or_default(),
            );
            if let Some(i) = image_at {
                content.insert(i.min(content.len()), other.clone());
            }
            let cfg = small();
            let all: String = joined(&content);
            match prune_content(&content, &cfg) {
                None => prop_assert!(all.chars().count() <= cfg.threshold_chars),
                Some(out) => {
                    let chars: Vec<char> = all.chars().collect();
                    let head: String = chars[..cfg.head_chars].iter().collect();
                    let tail: String = chars[chars.len() - cfg.tail_chars..].iter().collect();
                    prop_assert_eq!(joined(&out), format!("{head}{MARKER}{tail}"));
                    prop_assert_eq!(
                        out.iter().filter(|b| **b == other).count(),
                        content.iter().filter(|b| **b == other).count()
                    );
                    prop_assert!(prune_content(&out, &cfg).is_none());
                }
            }
        }
    }
}
