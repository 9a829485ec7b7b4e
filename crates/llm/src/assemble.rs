//! `BlockAssembler`: the one fold of [`StreamChunk`]s into content blocks and a message.
//!
//! The loop logs the chunks it streams and feeds the same chunks here. A stream that breaks the
//! chunk contract (a delta for an unknown block, anything after `finish`, ...) is reported as a
//! [`ProtocolViolation`], never a panic.

use std::collections::BTreeMap;

use serde_json::Value;
use thiserror::Error;

use crate::chunk::{
    BlockKind, FinishReason, LlmFailure, StreamChunk, StreamNote, TokenUsage, codes,
};
use crate::message::{ContentBlock, Message, MessageSource, Role, ToolCall};

/// A stream that broke the chunk contract.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolViolation {
    /// A chunk (of the named type) arrived after `finish`.
    #[error("`{0}` chunk after finish")]
    AfterFinish(&'static str),
    /// A delta or `block-end` for an index no `block-start` opened.
    #[error("`{kind}` for unknown block {index}")]
    UnknownBlock {
        /// Chunk type.
        kind: &'static str,
        /// The index.
        index: u32,
    },
    /// `block-start` for an index already opened.
    #[error("block {0} started twice")]
    DuplicateStart(u32),
    /// A delta or `block-end` for a block already ended.
    #[error("`{kind}` for block {index} after its block-end")]
    AfterBlockEnd {
        /// Chunk type.
        kind: &'static str,
        /// The index.
        index: u32,
    },
    /// A delta whose kind does not match the block's kind.
    #[error("`{kind}` for block {index} of type `{block}`")]
    KindMismatch {
        /// Chunk type.
        kind: &'static str,
        /// The index.
        index: u32,
        /// The block's type.
        block: String,
    },
    /// A `block-end` whose block disagrees with the streamed deltas.
    #[error("block-end {0} does not match its streamed deltas")]
    EndMismatch(u32),
    /// A successful finish while blocks are still open.
    #[error("finish while block {0} is still open")]
    OpenAtFinish(u32),
    /// The stream ended without a `finish` chunk.
    #[error("stream ended without a finish chunk")]
    NoFinish,
}

impl ProtocolViolation {
    /// The violation as an attempt failure (code `PROTOCOL_VIOLATION`).
    pub fn to_failure(&self) -> LlmFailure {
        LlmFailure::new(
            codes::PROTOCOL_VIOLATION,
            format!("stream protocol violation: {self}"),
        )
    }
}

#[derive(Debug)]
struct Slot {
    kind: BlockKind,
    text: String,
    id: String,
    name: Option<String>,
    ended: Option<ContentBlock>,
}

/// The result of a finished attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembled {
    /// The retained content in block order (tool calls removed on a max-tokens finish).
    pub content: Vec<ContentBlock>,
    /// The last usage seen.
    pub usage: Option<TokenUsage>,
    /// Why the attempt finished.
    pub finish: FinishReason,
    /// Provider replay state from the finish chunk.
    pub replay_state: Option<Value>,
    /// Tool calls dropped because the output hit `max_tokens` (never to be run).
    pub dropped_tool_calls: Vec<ToolCall>,
    /// What the adapter repaired or tolerated (from the finish chunk); the loop may log them.
    pub notes: Vec<StreamNote>,
}

impl Assembled {
    /// The assistant message for this attempt.
    pub fn into_message(
        self,
        id: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Message {
        let source = MessageSource::model(provider, model, self.replay_state);
        Message::new(id, Role::Assistant, self.content, source)
    }

    /// The tool calls to run, in model order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(ContentBlock::as_tool_call)
    }
}

/// Folds chunks into blocks; see the module docs.
#[derive(Debug, Default)]
pub struct BlockAssembler {
    blocks: BTreeMap<u32, Slot>,
    usage: Option<TokenUsage>,
    finish: Option<(FinishReason, Option<Value>, Vec<StreamNote>)>,
}

fn chunk_name(c: &StreamChunk) -> &'static str {
    match c {
        StreamChunk::BlockStart { .. } => "block-start",
        StreamChunk::TextDelta { .. } => "text-delta",
        StreamChunk::ReasoningDelta { .. } => "reasoning-delta",
        StreamChunk::ToolCallDelta { .. } => "tool-call-delta",
        StreamChunk::BlockEnd { .. } => "block-end",
        StreamChunk::Usage { .. } => "usage",
        StreamChunk::Finish { .. } => "finish",
    }
}

impl BlockAssembler {
    /// An empty assembler for one attempt.
    pub fn new() -> Self {
        Self::default()
    }

    fn open_slot(
        &mut self,
        kind: &'static str,
        index: u32,
    ) -> Result<&mut Slot, ProtocolViolation> {
        let slot = self
            .blocks
            .get_mut(&index)
            .ok_or(ProtocolViolation::UnknownBlock { kind, index })?;
        if slot.ended.is_some() {
            return Err(ProtocolViolation::AfterBlockEnd { kind, index });
        }
        Ok(slot)
    }

    /// Folds one chunk. On error the assembler is unchanged.
    pub fn push(&mut self, chunk: &StreamChunk) -> Result<(), ProtocolViolation> {
        let name = chunk_name(chunk);
        if self.finish.is_some() {
            return Err(ProtocolViolation::AfterFinish(name));
        }
        match chunk {
            StreamChunk::BlockStart { index, block_type } => {
                if self.blocks.contains_key(index) {
                    return Err(ProtocolViolation::DuplicateStart(*index));
                }
                self.blocks.insert(
                    *index,
                    Slot {
                        kind: block_type.clone(),
                        text: String::new(),
                        id: String::new(),
                        name: None,
                        ended: None,
                    },
                );
            }
            StreamChunk::TextDelta { index, text }
            | StreamChunk::ReasoningDelta { index, text } => {
                let want = if name == "text-delta" {
                    BlockKind::Text
                } else {
                    BlockKind::Reasoning
                };
                let slot = self.open_slot(name, *index)?;
                if slot.kind != want {
                    return Err(ProtocolViolation::KindMismatch {
                        kind: name,
                        index: *index,
                        block: slot.kind.as_str().to_owned(),
                    });
                }
                slot.text.push_str(text);
            }
            StreamChunk::ToolCallDelta {
                index,
                id,
                name: tool,
                arguments_delta,
            } => {
                let slot = self.open_slot(name, *index)?;
                if slot.kind != BlockKind::ToolCall {
                    return Err(ProtocolViolation::KindMismatch {
                        kind: name,
                        index: *index,
                        block: slot.kind.as_str().to_owned(),
                    });
                }
                if !id.is_empty() {
                    slot.id.clone_from(id);
                }
                if let Some(t) = tool.as_ref().filter(|t| !t.is_empty()) {
                    slot.name = Some(t.clone());
                }
                slot.text.push_str(arguments_delta);
            }
            StreamChunk::BlockEnd { index, block } => {
                let slot = self.open_slot(name, *index)?;
                let consistent = match (&slot.kind, block) {
                    (BlockKind::Text, ContentBlock::Text { text })
                    | (BlockKind::Reasoning, ContentBlock::Reasoning { text }) => {
                        *text == slot.text
                    }
                    (BlockKind::ToolCall, ContentBlock::ToolCall(c)) => {
                        c.arguments.is_streamed() || c.arguments == slot.text
                    }
                    (BlockKind::Text | BlockKind::Reasoning | BlockKind::ToolCall, _) => false,
                    (BlockKind::Other(tag), b) => b.type_tag() == tag,
                };
                if !consistent {
                    return Err(ProtocolViolation::EndMismatch(*index));
                }
                // The streamed text equals the block's: move it instead of copying the block,
                // and share a tool call's arguments with the block (they can be megabytes; one
                // copy is kept, not two). Arguments left "as streamed" are this text.
                let text = std::mem::take(&mut slot.text);
                slot.ended = Some(match block {
                    ContentBlock::Text { .. } => ContentBlock::Text { text },
                    ContentBlock::Reasoning { .. } => ContentBlock::Reasoning { text },
                    ContentBlock::ToolCall(c) if c.arguments.is_streamed() => {
                        let mut text = text;
                        text.shrink_to_fit();
                        ContentBlock::ToolCall(ToolCall {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: text.into(),
                        })
                    }
                    ContentBlock::ToolCall(c) => {
                        drop(text);
                        ContentBlock::ToolCall(c.clone())
                    }
                    other => {
                        slot.text = text;
                        other.clone()
                    }
                });
            }
            StreamChunk::Usage { usage } => self.usage = Some(*usage),
            StreamChunk::Finish {
                reason,
                replay_state,
                notes,
            } => {
                if reason.is_success()
                    && let Some((i, _)) = self.blocks.iter().find(|(_, s)| s.ended.is_none())
                {
                    return Err(ProtocolViolation::OpenAtFinish(*i));
                }
                self.finish = Some((reason.clone(), replay_state.clone(), notes.clone()));
            }
        }
        Ok(())
    }

    /// Gives a tool call's `block-end` just pushed the assembled arguments in place of the
    /// [`ToolArguments::streamed`](crate::ToolArguments::streamed) marker (shared, not copied),
    /// so what is passed on after the assembler is the whole block. Other chunks are untouched.
    pub fn fill(&self, chunk: &mut StreamChunk) {
        if let StreamChunk::BlockEnd {
            index,
            block: ContentBlock::ToolCall(call),
        } = chunk
            && call.arguments.is_streamed()
            && let Some(Slot {
                ended: Some(ContentBlock::ToolCall(done)),
                ..
            }) = self.blocks.get(index)
        {
            call.arguments = done.arguments.clone();
        }
    }

    /// Whether a `finish` chunk was folded.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The finish reason, once finished.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish.as_ref().map(|(r, _, _)| r)
    }

    /// The last usage seen.
    pub fn usage(&self) -> Option<&TokenUsage> {
        self.usage.as_ref()
    }

    /// Block `index`, if started: the text streamed into it and not yet moved into its ended
    /// block, and the ended block (text and reasoning move there at `block-end`; a tool call's
    /// arguments are shared with the `block-end` chunk).
    pub fn block(&self, index: u32) -> Option<(&str, Option<&ContentBlock>)> {
        self.blocks
            .get(&index)
            .map(|s| (s.text.as_str(), s.ended.as_ref()))
    }

    /// Whether any block was started.
    pub fn has_blocks(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// What the user already saw, for a cancelled attempt: the delivered text and reasoning
    /// (ended or not, non-empty only) in block order. Tool calls are dropped: a half-streamed
    /// call must never run.
    pub fn interrupted_prefix(&self) -> Vec<ContentBlock> {
        self.blocks
            .values()
            .filter_map(|s| {
                // An ended block holds its text in `ended` (moved there at `block-end`).
                let text = match &s.ended {
                    Some(ContentBlock::Text { text } | ContentBlock::Reasoning { text }) => text,
                    _ => &s.text,
                };
                if text.is_empty() {
                    return None;
                }
                match s.kind {
                    BlockKind::Text => Some(ContentBlock::text(text.clone())),
                    BlockKind::Reasoning => Some(ContentBlock::reasoning(text.clone())),
                    _ => None,
                }
            })
            .collect()
    }

    /// Finishes the fold. Content is every ended block in index order; on a `max-tokens` finish
    /// tool calls are moved to `dropped_tool_calls`. Errors if no `finish` was folded.
    pub fn finish(self) -> Result<Assembled, ProtocolViolation> {
        let (finish, replay_state, notes) = self.finish.ok_or(ProtocolViolation::NoFinish)?;
        let max_tokens = finish == FinishReason::MaxTokens;
        let mut content = Vec::new();
        let mut dropped_tool_calls = Vec::new();
        for slot in self.blocks.into_values() {
            match slot.ended {
                Some(ContentBlock::ToolCall(c)) if max_tokens => dropped_tool_calls.push(c),
                Some(b) => content.push(b),
                None => {
                    if slot.kind == BlockKind::ToolCall {
                        dropped_tool_calls.push(ToolCall {
                            id: slot.id,
                            name: slot.name.unwrap_or_default(),
                            arguments: slot.text.into(),
                        });
                    }
                }
            }
        }
        Ok(Assembled {
            content,
            usage: self.usage,
            finish,
            replay_state,
            dropped_tool_calls,
            notes,
        })
    }
}
