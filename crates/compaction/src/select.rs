//! Span selection (upstream compaction-basic §3): which current surface nodes a summary
//! shadows. From the newest node backwards, tokens are accumulated until the retained tail holds
//! at least `retain_tokens`; the cut then moves earlier until no tool call crosses it. The span
//! is everything from the oldest unprotected node to the node before the cut.

use dsh_llm::{ContentBlock, Role};
use dsh_session::Node;

use crate::meter::TokenMeter;

/// What selection needs to know about one current node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's seq.
    pub seq: u64,
    /// The node message's role.
    pub role: Role,
    /// Estimated tokens of the node's message (0 for a node that derives nothing).
    pub tokens: u64,
    /// Tool-call ids an assistant node opens.
    pub calls: Vec<String>,
    /// The call a tool-result node answers.
    pub answers: Option<String>,
}

impl NodeInfo {
    /// The selection view of a surface node.
    pub fn of(node: &Node, meter: &TokenMeter) -> Self {
        let m = &node.message;
        NodeInfo {
            seq: node.seq,
            role: m.role,
            tokens: if node.is_skipped() {
                0
            } else {
                meter.message_tokens(m)
            },
            calls: m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(c) => Some(c.id.clone()),
                    _ => None,
                })
                .collect(),
            answers: (m.role == Role::Tool)
                .then(|| {
                    m.tool_call_id
                        .clone()
                        .or_else(|| m.source.call_id().map(str::to_owned))
                })
                .flatten(),
        }
    }
}

/// A selected span: surface positions `start..=end` (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First shadowed position.
    pub start: usize,
    /// Last shadowed position.
    pub end: usize,
}

/// `balanced[c]`: no tool call opened before position `c` is answered at or after it (a cut
/// at `c` keeps every call with its result). An unanswered call makes every later cut unsafe.
pub fn balanced_cuts(nodes: &[NodeInfo]) -> Vec<bool> {
    let n = nodes.len();
    // diff[c] counts calls crossing cut c.
    let mut diff = vec![0i64; n + 2];
    for (i, node) in nodes.iter().enumerate() {
        for id in &node.calls {
            let answer = nodes[i + 1..]
                .iter()
                .position(|m| m.answers.as_deref() == Some(id.as_str()))
                .map_or(n, |p| i + 1 + p);
            // Cuts i+1 ..= answer are crossed.
            diff[i + 1] += 1;
            diff[answer + 1] -= 1;
        }
    }
    let mut out = Vec::with_capacity(n + 1);
    let mut open = 0i64;
    for d in diff.iter().take(n + 1) {
        open += d;
        out.push(open == 0);
    }
    out
}

/// Selects the span to shadow so that at least `retain_tokens` (and at least the newest
/// indivisible unit) stay verbatim. `None` when nothing before the cut is compactable. The
/// protected head (a system node at position 0) is never in the span.
pub fn select_span(nodes: &[NodeInfo], retain_tokens: u64) -> Option<Span> {
    let n = nodes.len();
    if n == 0 {
        return None;
    }
    let first = usize::from(nodes[0].role == Role::System);
    // The newest node always stays, whatever the retain budget.
    let mut cut = n - 1;
    let mut kept = nodes[cut].tokens;
    while cut > first && kept < retain_tokens {
        cut -= 1;
        kept += nodes[cut].tokens;
    }
    let balanced = balanced_cuts(nodes);
    while cut > first && !balanced[cut] {
        cut -= 1;
    }
    if cut <= first || !balanced[cut] {
        return None;
    }
    Some(Span {
        start: first,
        end: cut - 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn node(seq: u64, role: Role, tokens: u64) -> NodeInfo {
        NodeInfo {
            seq,
            role,
            tokens,
            calls: Vec::new(),
            answers: None,
        }
    }

    fn call(seq: u64, ids: &[&str]) -> NodeInfo {
        NodeInfo {
            calls: ids.iter().map(|s| s.to_string()).collect(),
            ..node(seq, Role::Assistant, 10)
        }
    }

    fn result(seq: u64, id: &str, tokens: u64) -> NodeInfo {
        NodeInfo {
            answers: Some(id.into()),
            ..node(seq, Role::Tool, tokens)
        }
    }

    #[test]
    fn keeps_the_head_and_the_retained_tail() {
        let nodes = vec![
            node(0, Role::System, 100),
            node(1, Role::User, 10),
            call(2, &["a"]),
            result(3, "a", 500),
            call(4, &["b"]),
            result(5, "b", 500),
            node(6, Role::Assistant, 10),
        ];
        // Retain 400: 6 alone is 10, 6+5 = 510 ≥ 400 but cut 5 splits b → cut moves to 4.
        assert_eq!(select_span(&nodes, 400), Some(Span { start: 1, end: 3 }));
        // Retain 0 keeps only the newest unit.
        assert_eq!(select_span(&nodes, 0), Some(Span { start: 1, end: 5 }));
        // Retain everything: nothing to compact.
        assert_eq!(select_span(&nodes, 10_000), None);
    }

    #[test]
    fn a_history_that_is_one_unit_is_not_compactable() {
        let nodes = vec![
            node(0, Role::System, 100),
            call(1, &["a", "b"]),
            result(2, "a", 5),
            result(3, "b", 5),
        ];
        assert_eq!(select_span(&nodes, 0), None);
        assert_eq!(select_span(&[], 0), None);
        assert_eq!(select_span(&[node(0, Role::System, 1)], 0), None);
    }

    #[test]
    fn an_unanswered_call_blocks_every_later_cut() {
        let nodes = vec![
            node(0, Role::User, 10),
            node(1, Role::Assistant, 10),
            call(2, &["x"]),
            node(3, Role::User, 10),
            node(4, Role::User, 10),
        ];
        assert_eq!(select_span(&nodes, 0), Some(Span { start: 0, end: 1 }));
    }

    /// A random well-formed history: optional system head, then units of user messages,
    /// plain assistant messages or an assistant with 1..=3 calls followed by their results.
    fn history() -> impl Strategy<Value = Vec<NodeInfo>> {
        let unit = prop_oneof![
            (1u64..400).prop_map(|t| vec![(Role::User, t, 0usize)]),
            (1u64..400).prop_map(|t| vec![(Role::Assistant, t, 0usize)]),
            (1usize..=3, proptest::collection::vec(1u64..2000, 3)).prop_map(|(k, ts)| {
                let mut v = vec![(Role::Assistant, 20, k)];
                for t in ts.into_iter().take(k) {
                    v.push((Role::Tool, t, 0));
                }
                v
            }),
        ];
        (any::<bool>(), proptest::collection::vec(unit, 0..40)).prop_map(|(head, units)| {
            let mut out = Vec::new();
            let mut seq = 0u64;
            if head {
                out.push(node(seq, Role::System, 300));
                seq += 1;
            }
            let mut pending: Vec<String> = Vec::new();
            for unit in units {
                for (role, tokens, k) in unit {
                    let mut n = node(seq, role, tokens);
                    if k > 0 {
                        n.calls = (0..k).map(|j| format!("c{seq}-{j}")).collect();
                        pending = n.calls.clone();
                        pending.reverse();
                    } else if role == Role::Tool {
                        n.answers = pending.pop();
                    }
                    out.push(n);
                    seq += 1;
                }
            }
            out
        })
    }

    proptest! {
        #[test]
        fn spans_never_split_a_call_from_its_result_nor_touch_the_head(
            nodes in history(), retain in 0u64..20_000,
        ) {
            let Some(span) = select_span(&nodes, retain) else { return Ok(()); };
            prop_assert!(span.start <= span.end && span.end < nodes.len() - 1);
            if nodes[0].role == Role::System {
                prop_assert_eq!(span.start, 1);
            } else {
                prop_assert_eq!(span.start, 0);
            }
            let inside = &nodes[span.start..=span.end];
            let outside: Vec<&NodeInfo> =
                nodes[..span.start].iter().chain(&nodes[span.end + 1..]).collect();
            // Every call in the span has its result in the span, and vice versa.
            for n in inside {
                for id in &n.calls {
                    prop_assert!(inside.iter().any(|m| m.answers.as_deref() == Some(id)));
                }
                if let Some(id) = &n.answers {
                    prop_assert!(inside.iter().any(|m| m.calls.contains(id)));
                }
            }
            for n in &outside {
                for id in &n.calls {
                    prop_assert!(!inside.iter().any(|m| m.answers.as_deref() == Some(id)));
                }
            }
            // The retained tail holds the budget, and no later safe cut would also hold it.
            let tail = |c: usize| nodes[c..].iter().map(|n| n.tokens).sum::<u64>();
            let cut = span.end + 1;
            prop_assert!(tail(cut) >= retain);
            let balanced = balanced_cuts(&nodes);
            prop_assert!(balanced[cut]);
            for (c, ok) in balanced.iter().enumerate().take(nodes.len()).skip(cut + 1) {
                prop_assert!(!(*ok && tail(c) >= retain), "cut {} would do", c);
            }
        }
    }
}
