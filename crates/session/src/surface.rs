//! The surface (format §8): the ordered nodes whose messages form the model history, folded
//! incrementally. Appending is O(1); a replacement splices only the shadowed span.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_llm::{ContentBlock, Message};

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
    /// seq → present; guards the linear position scans of replacements.
    members: HashMap<u64, ()>,
    replace_generation: u64,
    content_generation: u64,
}

/// A validated replacement, ready to apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplacePlan {
    start: usize,
    end: usize,
}

pub(crate) fn static_kind(kind: &str) -> &'static str {
    SURFACE_TYPES
        .iter()
        .copied()
        .find(|k| *k == kind)
        .unwrap_or(USER_MESSAGE)
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
        self.members.contains_key(&seq)
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

    pub(crate) fn push(&mut self, node: Node) {
        self.members.insert(node.seq, ());
        self.nodes.push(node);
    }

    /// Checks a replacement (§8.5) for the event `kind` with `sources`.
    pub(crate) fn check_replace(
        &self,
        kind: &str,
        start_seq: u64,
        end_seq: u64,
        sources: Option<&[u64]>,
        events: &[Arc<crate::Event>],
        data: &serde_json::Value,
    ) -> Result<ReplacePlan, String> {
        if kind == ASSISTANT_MESSAGE {
            return Err("assistant/message never replaces".into());
        }
        let start = self
            .position(start_seq)
            .ok_or_else(|| format!("replace startSeq {start_seq} is not a current surface node"))?;
        let end = self
            .position(end_seq)
            .ok_or_else(|| format!("replace endSeq {end_seq} is not a current surface node"))?;
        if start > end {
            return Err(format!(
                "replace span {start_seq}..{end_seq} is reversed in surface order"
            ));
        }
        let sources = sources.unwrap_or(&[]);
        for n in &self.nodes[start..=end] {
            if !sources.contains(&n.seq) {
                return Err(format!(
                    "sourceEventSeqs must cover shadowed node {}",
                    n.seq
                ));
            }
        }
        if start == 0
            && self.nodes[0].kind == SYSTEM_MESSAGE
            && (kind != SYSTEM_MESSAGE || end != 0)
        {
            return Err(
                "the protected system head may only be replaced by one system/message, alone"
                    .into(),
            );
        }
        if kind == TOOL_RESULT {
            if start != end || self.nodes[start].kind != TOOL_RESULT {
                return Err("a tool/result replacement shadows exactly one tool/result".into());
            }
            let shadowed = &events[self.nodes[start].seq as usize];
            if strip_content(shadowed.data()) != strip_content(data) {
                return Err("a tool/result replacement may differ only in message.content".into());
            }
        }
        Ok(ReplacePlan { start, end })
    }

    pub(crate) fn apply_replace(&mut self, plan: ReplacePlan, node: Node) {
        for n in self.nodes.splice(plan.start..=plan.end, [node.clone()]) {
            self.members.remove(&n.seq);
        }
        self.members.insert(node.seq, ());
        self.replace_generation += 1;
        self.content_generation += 1;
    }

    /// Checks an `image/offload` payload (§8.6) and returns the projected messages.
    pub(crate) fn check_offload(
        &self,
        data: &serde_json::Value,
    ) -> Result<Vec<(usize, Arc<Message>)>, String> {
        let m = data
            .as_object()
            .ok_or("image/offload data must be an object")?;
        if m.len() != 1 {
            return Err("image/offload data must have exactly the key targets".into());
        }
        let targets = m
            .get("targets")
            .and_then(serde_json::Value::as_array)
            .filter(|t| !t.is_empty())
            .ok_or("image/offload targets must be a non-empty array")?;
        let mut out: Vec<(usize, Arc<Message>)> = Vec::new();
        for t in targets {
            let t = t
                .as_object()
                .filter(|t| t.len() == 2)
                .ok_or("image/offload target must be exactly {seq, imageIndexes}")?;
            let seq = t
                .get("seq")
                .and_then(crate::json::as_safe_u64)
                .ok_or("image/offload target seq must be an integer")?;
            let pos = self.position(seq).ok_or_else(|| {
                format!("image/offload target {seq} is not a current surface node")
            })?;
            if out.iter().any(|(p, _)| *p == pos) {
                return Err(format!("image/offload repeats target {seq}"));
            }
            let node = &self.nodes[pos];
            if node.kind != USER_MESSAGE && node.kind != TOOL_RESULT {
                return Err(format!(
                    "image/offload target {seq} is not a user/message or tool/result"
                ));
            }
            let idx = t
                .get("imageIndexes")
                .and_then(serde_json::Value::as_array)
                .filter(|a| !a.is_empty())
                .ok_or("imageIndexes must be a non-empty array")?;
            let mut indexes = Vec::with_capacity(idx.len());
            for i in idx {
                let i = crate::json::as_safe_u64(i)
                    .ok_or("imageIndexes members must be non-negative integers")?;
                if indexes.last().is_some_and(|l| *l >= i) {
                    return Err("imageIndexes must be strictly increasing".into());
                }
                indexes.push(i);
            }
            let mut msg = (*node.message).clone();
            let mut k = 0u64;
            let mut hit = 0usize;
            for block in &mut msg.content {
                if let ContentBlock::Image { offloaded, .. } = block {
                    if indexes.contains(&k) {
                        if *offloaded == Some(true) {
                            return Err(format!("image {k} of {seq} is already offloaded"));
                        }
                        *offloaded = Some(true);
                        hit += 1;
                    }
                    k += 1;
                }
            }
            if hit != indexes.len() {
                return Err(format!(
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

fn strip_content(data: &serde_json::Value) -> serde_json::Value {
    let mut d = data.clone();
    if let Some(m) = d
        .get_mut("message")
        .and_then(serde_json::Value::as_object_mut)
    {
        m.remove("content");
    }
    d
}
