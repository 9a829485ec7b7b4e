//! The surface (format §8): the ordered nodes whose messages form the model history, folded
//! incrementally. Appending is O(1); a replacement splices only the shadowed span.

use std::sync::Arc;

use dsh_llm::{ContentBlock, Message};

use crate::data::{CoreEvent, ImageOffload};
use crate::error::Rejection;
use crate::vocab::*;

/// One current surface node.
#[derive(Debug, Clone)]
pub struct Node {
    /// The event's seq.
    pub seq: u64,
    /// The event's type (one of the five surface types).
    pub kind: &'static str,
    /// The node's message (the projected copy when a projection changed it).
    pub message: Arc<Message>,
}

impl Node {
    /// Whether the node derives no message (§8.3: empty system, developer or assistant).
    pub fn is_skipped(&self) -> bool {
        matches!(
            self.kind,
            SYSTEM_MESSAGE | DEVELOPER_MESSAGE | ASSISTANT_MESSAGE
        ) && self.message.content.is_empty()
    }
}

/// Surface state of one log.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    nodes: Vec<Node>,
    /// Bit set of current node seqs; guards the linear position scans of replacements.
    members: Vec<u64>,
    replace_generation: u64,
    content_generation: u64,
}

/// A validated replacement, ready to apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplacePlan {
    start: usize,
    end: usize,
}

pub(crate) fn static_kind(kind: &EventKind) -> &'static str {
    kind.static_name().unwrap_or(USER_MESSAGE)
}

impl Surface {
    /// Current nodes in surface order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// Number of committed replacements.
    pub fn replace_generation(&self) -> u64 {
        self.replace_generation
    }
    /// Replacements plus projection events: moves whenever model-visible history changed.
    pub fn content_generation(&self) -> u64 {
        self.content_generation
    }
    /// Whether `seq` is a current node.
    pub fn contains(&self, seq: u64) -> bool {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        self.members.get(w).is_some_and(|word| word & (1 << b) != 0)
    }
    /// Position of a current node.
    pub fn position(&self, seq: u64) -> Option<usize> {
        if !self.contains(seq) {
            return None;
        }
        self.nodes.iter().rposition(|n| n.seq == seq)
    }
    /// The node of a current seq.
    pub fn node(&self, seq: u64) -> Option<&Node> {
        self.position(seq).map(|i| &self.nodes[i])
    }

    /// `derive_messages()` (§8.3): current nodes in order, skipped nodes dropped.
    pub fn derive_messages(&self) -> Vec<Arc<Message>> {
        self.nodes
            .iter()
            .filter(|n| !n.is_skipped())
            .map(|n| Arc::clone(&n.message))
            .collect()
    }

    /// `derive_messages()` with each message's node seq.
    pub fn derive_nodes(&self) -> Vec<&Node> {
        self.nodes.iter().filter(|n| !n.is_skipped()).collect()
    }

    fn set_member(&mut self, seq: u64, present: bool) {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if self.members.len() <= w {
            self.members.resize(w + 1, 0);
        }
        if present {
            self.members[w] |= 1 << b;
        } else {
            self.members[w] &= !(1 << b);
        }
    }

    pub(crate) fn push(&mut self, node: Node) {
        self.set_member(node.seq, true);
        self.nodes.push(node);
    }

    /// Checks a replacement (§8.5) by the event whose typed payload is `core`, with `sources`.
    pub(crate) fn check_replace(
        &self,
        core: &CoreEvent,
        start_seq: u64,
        end_seq: u64,
        sources: Option<&[u64]>,
        events: &[Arc<crate::Event>],
    ) -> Result<ReplacePlan, Rejection> {
        let err = |m: String| Err(Rejection::Surface(m));
        if matches!(core, CoreEvent::AssistantMessage(_)) {
            return err("assistant/message never replaces".into());
        }
        let Some(start) = self.position(start_seq) else {
            return err(format!(
                "replace startSeq {start_seq} is not a current surface node"
            ));
        };
        let Some(end) = self.position(end_seq) else {
            return err(format!(
                "replace endSeq {end_seq} is not a current surface node"
            ));
        };
        if start > end {
            return err(format!(
                "replace span {start_seq}..{end_seq} is reversed in surface order"
            ));
        }
        let sources = sources.unwrap_or(&[]);
        // O(span + sources): a compaction can shadow thousands of nodes.
        let sorted = sources.windows(2).all(|w| w[0] < w[1]);
        let set: std::collections::HashSet<u64> = if sorted {
            Default::default()
        } else {
            sources.iter().copied().collect()
        };
        let covers = |seq: u64| {
            if sorted {
                sources.binary_search(&seq).is_ok()
            } else {
                set.contains(&seq)
            }
        };
        for n in &self.nodes[start..=end] {
            if !covers(n.seq) {
                return err(format!(
                    "sourceEventSeqs must cover shadowed node {}",
                    n.seq
                ));
            }
        }
        if start == 0
            && self.nodes[0].kind == SYSTEM_MESSAGE
            && (!matches!(core, CoreEvent::SystemMessage(_)) || end != 0)
        {
            return err(
                "the protected system head may only be replaced by one system/message, alone"
                    .into(),
            );
        }
        if let CoreEvent::ToolResult(new) = core {
            if start != end || self.nodes[start].kind != TOOL_RESULT {
                return err("a tool/result replacement shadows exactly one tool/result".into());
            }
            let shadowed = events
                .get(self.nodes[start].seq as usize)
                .and_then(|e| e.core());
            let Some(CoreEvent::ToolResult(old)) = shadowed else {
                return err("a tool/result replacement shadows exactly one tool/result".into());
            };
            if !same_but_content(old, new) {
                return err("a tool/result replacement may differ only in message.content".into());
            }
        }
        Ok(ReplacePlan { start, end })
    }

    pub(crate) fn apply_replace(&mut self, plan: ReplacePlan, node: Node) {
        let seq = node.seq;
        let shadowed: Vec<u64> = self
            .nodes
            .splice(plan.start..=plan.end, [node])
            .map(|n| n.seq)
            .collect();
        for s in shadowed {
            self.set_member(s, false);
        }
        self.set_member(seq, true);
        self.replace_generation += 1;
        self.content_generation += 1;
    }

    /// Checks an `image/offload` payload (§8.6) and returns the projected messages.
    pub(crate) fn check_offload(
        &self,
        offload: &ImageOffload,
    ) -> Result<Vec<(usize, Arc<Message>)>, Rejection> {
        let err = |m: String| Err(Rejection::Surface(m));
        let mut out: Vec<(usize, Arc<Message>)> = Vec::new();
        for t in &offload.targets {
            let seq = t.seq;
            let Some(pos) = self.position(seq) else {
                return err(format!(
                    "image/offload target {seq} is not a current surface node"
                ));
            };
            if out.iter().any(|(p, _)| *p == pos) {
                return err(format!("image/offload repeats target {seq}"));
            }
            let node = &self.nodes[pos];
            if node.kind != USER_MESSAGE && node.kind != TOOL_RESULT {
                return err(format!(
                    "image/offload target {seq} is not a user/message or tool/result"
                ));
            }
            let indexes = &t.image_indexes;
            let mut msg = (*node.message).clone();
            let mut k = 0u64;
            let mut hit = 0usize;
            for block in &mut msg.content {
                if let ContentBlock::Image { offloaded, .. } = block {
                    if indexes.contains(&k) {
                        if *offloaded == Some(true) {
                            return err(format!("image {k} of {seq} is already offloaded"));
                        }
                        *offloaded = Some(true);
                        hit += 1;
                    }
                    k += 1;
                }
            }
            if hit != indexes.len() {
                return err(format!(
                    "image/offload names an image that {seq} does not have"
                ));
            }
            out.push((pos, Arc::new(msg)));
        }
        Ok(out)
    }

    pub(crate) fn apply_offload(&mut self, projected: Vec<(usize, Arc<Message>)>) {
        for (pos, msg) in projected {
            self.nodes[pos].message = msg;
        }
        self.content_generation += 1;
    }
}

/// Whether two tool results are equal but for `message.content` (typed members; unknown
/// top-level payload members are not compared).
fn same_but_content(a: &crate::data::ToolResult, b: &crate::data::ToolResult) -> bool {
    let (ma, mb) = (&a.message, &b.message);
    a.turn == b.turn
        && a.step == b.step
        && a.error == b.error
        && a.meta == b.meta
        && ma.id == mb.id
        && ma.role == mb.role
        && ma.source == mb.source
        && ma.tool_call_id == mb.tool_call_id
        && ma.is_error == mb.is_error
        && ma.extra == mb.extra
}
