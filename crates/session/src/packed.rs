//! The stream packer (format §3.4) and the packed form it builds for live attempts.
//!
//! A run's members are ranges of one text, not one string per delta: deltas the loop also folded
//! into its [`BlockAssembler`] are recorded as lengths and resolved against the assembled blocks
//! when the attempt ends, so a tool call's arguments (megabytes for a `write`) are held once and
//! shared with the message content ([`ToolArguments`]). The packed form serialises to exactly
//! the records [`crate::stream::expand_stream`] reads.

use std::collections::BTreeMap;

use dsh_llm::{BlockAssembler, BlockKind, ContentBlock, StreamChunk, ToolArguments};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::data::StreamRecords;
use crate::json::MAX_SAFE_INTEGER;

/// Packs timed chunks into stream records incrementally (one packer per attempt).
#[derive(Debug, Default, Clone)]
pub struct StreamPacker {
    records: Vec<Rec>,
    last_time: i64,
    /// Bytes folded so far per block index (the offset of the next folded delta).
    folded: BTreeMap<u32, usize>,
}

/// A packed stream: typed records plus the block texts their folded runs point into.
#[derive(Debug, Clone, Default)]
pub struct PackedStream {
    records: Vec<Rec>,
    blocks: BTreeMap<u32, BlockText>,
}

#[derive(Debug, Clone)]
enum BlockText {
    /// A tool call's arguments, shared with the message content.
    Arguments(ToolArguments),
    /// A text, reasoning or unfinished block's text.
    Text(String),
}

impl BlockText {
    fn as_str(&self) -> &str {
        match self {
            BlockText::Arguments(a) => a.as_str(),
            BlockText::Text(t) => t,
        }
    }
}

#[derive(Debug, Clone)]
enum Rec {
    Chunk { time: i64, chunk: Box<StreamChunk> },
    Run(Run),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunKind {
    Text,
    Reasoning,
    ToolCall,
}

impl RunKind {
    fn tag(self) -> &'static str {
        match self {
            RunKind::Text => "text-chunks",
            RunKind::Reasoning => "reasoning-chunks",
            RunKind::ToolCall => "tool-call-chunks",
        }
    }
}

#[derive(Debug, Clone)]
struct Run {
    kind: RunKind,
    time0: i64,
    index: u32,
    dt: Vec<i64>,
    /// Tool runs: the call id and the name (when the deltas carry one).
    id: String,
    name: Option<String>,
    /// `Some`: the members are this text (pushed with [`StreamPacker::push`]); `None`: they
    /// are a range of block `index`'s text (pushed with [`StreamPacker::push_folded`]).
    own: Option<String>,
    /// Where the first member starts, and where each member ends, in the run's text.
    start: usize,
    ends: Vec<usize>,
}

impl Run {
    fn members<'a>(&'a self, text: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let mut from = self.start;
        self.ends.iter().map(move |&end| {
            let m = text.get(from..end).unwrap_or("");
            from = end;
            m
        })
    }
}

/// The parts of a delta the packer keeps.
struct Delta<'c> {
    kind: RunKind,
    index: u32,
    id: &'c str,
    name: Option<&'c str>,
    text: &'c str,
}

fn delta(chunk: &StreamChunk) -> Option<Delta<'_>> {
    match chunk {
        StreamChunk::TextDelta { index, text } => Some(Delta {
            kind: RunKind::Text,
            index: *index,
            id: "",
            name: None,
            text,
        }),
        StreamChunk::ReasoningDelta { index, text } => Some(Delta {
            kind: RunKind::Reasoning,
            index: *index,
            id: "",
            name: None,
            text,
        }),
        // A delta with an empty id or name is a raw `chunk` record (§3.4).
        StreamChunk::ToolCallDelta {
            index,
            id,
            name,
            arguments_delta,
        } if !id.is_empty() && name.as_deref() != Some("") => Some(Delta {
            kind: RunKind::ToolCall,
            index: *index,
            id,
            name: name.as_deref(),
            text: arguments_delta,
        }),
        _ => None,
    }
}

impl StreamPacker {
    /// An empty packer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one chunk received at `time` (epoch ms), keeping a copy of its text.
    pub fn push(&mut self, time: i64, chunk: &StreamChunk) {
        self.add(time, chunk, false);
    }

    /// Adds one chunk received at `time` that the caller also folded, successfully, into the
    /// [`BlockAssembler`] later given to [`StreamPacker::finish_with`]: a delta's text is not
    /// copied, only its length recorded (the assembled block holds the bytes).
    pub fn push_folded(&mut self, time: i64, chunk: &StreamChunk) {
        self.add(time, chunk, true);
    }

    fn add(&mut self, time: i64, chunk: &StreamChunk, folded: bool) {
        let dt = time - self.last_time;
        self.last_time = time;
        let Some(d) = delta(chunk) else {
            // A folded delta that is recorded raw still advances its block's offset.
            if let (
                true,
                StreamChunk::ToolCallDelta {
                    index,
                    arguments_delta,
                    ..
                },
            ) = (folded, chunk)
            {
                *self.folded.entry(*index).or_default() += arguments_delta.len();
            }
            self.records.push(Rec::Chunk {
                time,
                chunk: Box::new(chunk.clone()),
            });
            return;
        };
        let offset = if folded {
            let at = self.folded.entry(d.index).or_default();
            let start = *at;
            *at += d.text.len();
            Some(start)
        } else {
            None
        };
        if let Some(Rec::Run(run)) = self.records.last_mut()
            && run.kind == d.kind
            && run.index == d.index
            && run.id == d.id
            && run.name.as_deref() == d.name
            && run.own.is_none() == folded
            && offset.is_none_or(|o| run.ends.last() == Some(&o))
        {
            run.dt.push(dt);
            match (&mut run.own, offset) {
                (Some(own), _) => {
                    own.push_str(d.text);
                    run.ends.push(own.len());
                }
                (None, Some(o)) => run.ends.push(o + d.text.len()),
                (None, None) => {}
            }
            return;
        }
        let (own, start) = match offset {
            Some(o) => (None, o),
            None => (Some(d.text.to_owned()), 0),
        };
        let end = start + d.text.len();
        self.records.push(Rec::Run(Run {
            kind: d.kind,
            time0: time,
            index: d.index,
            dt: Vec::new(),
            id: d.id.to_owned(),
            name: d.name.map(str::to_owned),
            own,
            start,
            ends: vec![end],
        }));
    }

    /// The number of records so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record was packed yet.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records, for a packer fed only with [`StreamPacker::push`].
    pub fn finish(self) -> StreamRecords {
        StreamRecords::from_packed(PackedStream {
            records: self.records,
            blocks: BTreeMap::new(),
        })
    }

    /// The records of a packer fed only with [`StreamPacker::push`], as JSON values.
    pub fn into_records(self) -> Vec<serde_json::Value> {
        self.finish().records().unwrap_or_default()
    }

    /// The records, resolving folded deltas against `assembler` (the one they were folded
    /// into): an ended tool call's arguments are shared, other block texts copied once.
    pub fn finish_with(self, assembler: &BlockAssembler) -> StreamRecords {
        let mut blocks = BTreeMap::new();
        for (&index, &len) in &self.folded {
            let text = match assembler.block(index) {
                Some((_, Some(ContentBlock::ToolCall(c)))) => {
                    BlockText::Arguments(c.arguments.clone())
                }
                Some((_, Some(ContentBlock::Text { text } | ContentBlock::Reasoning { text }))) => {
                    BlockText::Text(text.clone())
                }
                Some((streamed, _)) => BlockText::Text(streamed.to_owned()),
                None => BlockText::Text(String::new()),
            };
            if text.as_str().len() < len {
                // Cannot happen when the contract of `push_folded` is kept; the stream would
                // lose bytes, so say so loudly.
                tracing::error!(
                    index,
                    folded = len,
                    held = text.as_str().len(),
                    "stream packer: a block holds fewer bytes than were folded into it"
                );
            }
            blocks.insert(index, text);
        }
        StreamRecords::from_packed(PackedStream {
            records: self.records,
            blocks,
        })
    }
}

impl PackedStream {
    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The arguments the runs of tool call `index` point into, when they are the ended call's
    /// (shared with the message content, not a copy).
    pub fn arguments(&self, index: u32) -> Option<&ToolArguments> {
        match self.blocks.get(&index) {
            Some(BlockText::Arguments(a)) => Some(a),
            _ => None,
        }
    }

    /// The §3.4/§4.5 rules a packer's own output could break: safe times, and no retired or
    /// misplaced block tags in `block-start`/`block-end` chunks.
    pub fn validate(&self) -> Result<(), PackedStreamError> {
        let safe = |t: i64| t.abs() <= MAX_SAFE_INTEGER;
        for (i, rec) in self.records.iter().enumerate() {
            match rec {
                Rec::Chunk { time, chunk } => {
                    if !safe(*time) {
                        return Err(PackedStreamError::BadTime { record: i });
                    }
                    let tag = match chunk.as_ref() {
                        StreamChunk::BlockStart {
                            block_type: BlockKind::Other(tag),
                            ..
                        } => Some(tag.as_str()),
                        StreamChunk::BlockEnd { block, .. } => Some(block.type_tag()),
                        _ => None,
                    };
                    if let Some(t @ ("tool-result" | "tool-addition" | "tool-removal")) = tag {
                        return Err(PackedStreamError::RetiredBlock(t.to_owned()));
                    }
                }
                Rec::Run(run) => {
                    let mut t = run.time0;
                    let ok = safe(t)
                        && run.dt.iter().all(|d| {
                            t = t.saturating_add(*d);
                            safe(*d) && safe(t)
                        });
                    if !ok {
                        return Err(PackedStreamError::TimeOverflow { record: i });
                    }
                }
            }
        }
        Ok(())
    }
}

/// A §3.4/§4.5 rule a packed stream breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackedStreamError {
    /// A chunk record's time is not a safe integer.
    #[error("stream record {record}: bad time")]
    BadTime {
        /// The record's index.
        record: usize,
    },
    /// A `block-start`/`block-end` chunk names a retired or misplaced block tag.
    #[error("stream holds a retired or misplaced \"{0}\" block")]
    RetiredBlock(String),
    /// A run's times leave the safe-integer range.
    #[error("stream record {record}: time overflow")]
    TimeOverflow {
        /// The record's index.
        record: usize,
    },
}

impl Serialize for PackedStream {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.records.len()))?;
        for rec in &self.records {
            match rec {
                Rec::Chunk { time, chunk } => {
                    seq.serialize_element(&ChunkRecord { time: *time, chunk })?
                }
                Rec::Run(run) => {
                    let text = match &run.own {
                        Some(own) => own.as_str(),
                        None => self.blocks.get(&run.index).map_or("", BlockText::as_str),
                    };
                    seq.serialize_element(&RunRecord { run, text })?
                }
            }
        }
        seq.end()
    }
}

struct ChunkRecord<'a> {
    time: i64,
    chunk: &'a StreamChunk,
}

impl Serialize for ChunkRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("type", "chunk")?;
        m.serialize_entry("time", &self.time)?;
        m.serialize_entry("chunk", self.chunk)?;
        m.end()
    }
}

struct RunRecord<'a> {
    run: &'a Run,
    text: &'a str,
}

struct Members<'a>(&'a RunRecord<'a>);

impl Serialize for Members<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.run.members(self.0.text))
    }
}

impl Serialize for RunRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let run = self.run;
        let tool = run.kind == RunKind::ToolCall;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", run.kind.tag())?;
        m.serialize_entry("time0", &run.time0)?;
        m.serialize_entry("index", &run.index)?;
        m.serialize_entry("dt", &run.dt)?;
        if tool {
            m.serialize_entry("id", &run.id)?;
            if let Some(name) = &run.name {
                m.serialize_entry("name", name)?;
            }
            m.serialize_entry("args", &Members(self))?;
        } else {
            m.serialize_entry("texts", &Members(self))?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_llm::FinishReason;

    fn chunks() -> Vec<StreamChunk> {
        let tool = |id: &str, name: Option<&str>, a: &str| StreamChunk::ToolCallDelta {
            index: 1,
            id: id.into(),
            name: name.map(str::to_owned),
            arguments_delta: a.into(),
        };
        vec![
            StreamChunk::BlockStart {
                index: 0,
                block_type: BlockKind::Text,
            },
            StreamChunk::TextDelta {
                index: 0,
                text: "hé".into(),
            },
            StreamChunk::TextDelta {
                index: 0,
                text: "llo".into(),
            },
            StreamChunk::BlockEnd {
                index: 0,
                block: ContentBlock::text("héllo"),
            },
            StreamChunk::BlockStart {
                index: 1,
                block_type: BlockKind::ToolCall,
            },
            tool("", Some("write"), "{\"a\""),
            tool("c1", Some("write"), ":\"x"),
            tool("c1", None, "\\\"y"),
            tool("c1", None, "\"}"),
            StreamChunk::BlockEnd {
                index: 1,
                block: ContentBlock::tool_call("c1", "write", "{\"a\":\"x\\\"y\"}"),
            },
            StreamChunk::finish(FinishReason::ToolCalls),
        ]
    }

    #[test]
    fn folded_and_owned_packing_write_the_same_records() {
        let mut owned = StreamPacker::new();
        let mut folded = StreamPacker::new();
        let mut asm = BlockAssembler::new();
        for (i, c) in chunks().iter().enumerate() {
            let t = 1000 + i as i64 * 3;
            owned.push(t, c);
            asm.push(c).unwrap();
            folded.push_folded(t, c);
        }
        let a = owned.finish();
        let b = folded.finish_with(&asm);
        assert_eq!(a.json(), b.json());
        let records: Vec<serde_json::Value> = serde_json::from_str(&a.json()).unwrap();
        let expanded = crate::stream::expand_stream(&records).unwrap();
        let back: Vec<StreamChunk> = expanded
            .into_iter()
            .map(|(_, v)| serde_json::from_value(v).unwrap())
            .collect();
        assert_eq!(back, chunks());
        assert!(
            a.json().contains(
                r#"{"type":"text-chunks","time0":1003,"index":0,"dt":[3],"texts":["hé","llo"]}"#
            ),
            "{}",
            a.json()
        );
        assert!(
            a.json()
                .contains(r#""id":"c1","name":"write","args":[":\"x"]}"#),
            "{}",
            a.json()
        );
    }

    #[test]
    fn an_unfinished_tool_call_keeps_its_streamed_arguments() {
        let mut folded = StreamPacker::new();
        let mut asm = BlockAssembler::new();
        for c in chunks().iter().take(7) {
            asm.push(c).unwrap();
            folded.push_folded(5, c);
        }
        let s = folded.finish_with(&asm);
        assert!(s.json().contains(r#""args":[":\"x"]"#), "{}", s.json());
    }
}
