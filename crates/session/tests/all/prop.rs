//! Item 7: incremental derivation equals a full fold after any sequence of appends and replaces.

use dsh_llm::Message;
use dsh_session::{SessionLog, SurfaceOp};
use proptest::prelude::*;
use serde_json::Value;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    User,
    Assistant(bool),
    System(bool),
    /// Replace the span [a, a+len] of current nodes (indices taken modulo the surface length).
    Replace(usize, usize, bool),
    /// Replace the head system node.
    ReplaceHead(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::User),
        3 => any::<bool>().prop_map(Op::Assistant),
        1 => any::<bool>().prop_map(Op::System),
        2 => (any::<usize>(), 0usize..4, any::<bool>()).prop_map(|(a, l, e)| Op::Replace(a, l, e)),
        1 => any::<bool>().prop_map(Op::ReplaceHead),
    ]
}

/// An independent full fold over the log (format §8.2), written naively.
fn full_fold(log: &SessionLog) -> Vec<(u64, Message)> {
    let mut nodes: Vec<u64> = Vec::new();
    for ev in log.events() {
        match ev.surface_op() {
            None => {}
            Some(SurfaceOp::Append) => nodes.push(ev.seq()),
            Some(SurfaceOp::Replace { start_seq, end_seq }) => {
                let i = nodes.iter().position(|s| *s == start_seq).unwrap();
                let j = nodes.iter().position(|s| *s == end_seq).unwrap();
                nodes.splice(i..=j, [ev.seq()]);
            }
        }
    }
    nodes
        .into_iter()
        .filter_map(|s| {
            let ev = &log.events()[s as usize];
            let slot: &Value = if ev.kind() == "user/message" {
                ev.data()
            } else {
                &ev.data()["message"]
            };
            let m: Message = serde_json::from_value(slot.clone()).unwrap();
            let skip = matches!(
                ev.kind(),
                "system/message" | "assistant/message" | "developer/message"
            ) && m.content.is_empty();
            (!skip).then_some((s, m))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn incremental_equals_full_fold(ops in proptest::collection::vec(op(), 1..60)) {
        let mut log = new_log();
        log.append(turn_start(1)).unwrap();
        log.append(step_start(1, 1)).unwrap();
        log.append(system(1, 1, "s0", "head")).unwrap();
        for (i, op) in ops.into_iter().enumerate() {
            let id = format!("m{i}");
            let text = |empty: bool| if empty { String::new() } else { format!("text {i}") };
            let ev = match op {
                Op::User => user(&id, &format!("u{i}")),
                Op::Assistant(e) => assistant(1, 1, &id, &text(e), &[]),
                Op::System(e) => system(1, 1, &id, &text(e)),
                Op::Replace(a, len, e) => {
                    let nodes: Vec<u64> = log.surface().nodes().iter().map(|n| n.seq).collect();
                    // never start at the protected head
                    if nodes.len() < 2 { continue; }
                    let start = 1 + a % (nodes.len() - 1);
                    let end = (start + len).min(nodes.len() - 1);
                    let span: Vec<u64> = nodes[start..=end].to_vec();
                    let base = if e { system(1, 1, &id, "") } else { user(&id, "summary") };
                    base.replacing(span[0], *span.last().unwrap()).with_sources(span)
                }
                Op::ReplaceHead(e) => {
                    let head = log.surface().nodes()[0].seq;
                    system(1, 1, &id, &text(e)).replacing(head, head).with_sources(vec![head])
                }
            };
            log.append(ev).unwrap();
            let inc: Vec<(u64, Message)> = log.surface().derive_nodes().iter().map(|n| (n.seq, (*n.message).clone())).collect();
            prop_assert_eq!(&inc, &full_fold(&log));
        }
        let replayed = SessionLog::replay(log.header().clone(), log.events().iter().map(|e| (**e).clone()).collect()).unwrap();
        prop_assert_eq!(replayed.derive_messages(), log.derive_messages());
        prop_assert_eq!(replayed.surface().content_generation(), log.surface().content_generation());
    }
}
