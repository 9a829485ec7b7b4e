//! Shared helpers.

use dsh_llm::{BlockAssembler, ContentBlock, SseFramer, SseItem, StreamChunk};
use dsh_llm_deepseek::{Progress, Translator};

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fixtures/deepseek/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The chunks as the loop passes them on: through a [`BlockAssembler`], which puts a tool
/// call's arguments in place of the adapter's "as streamed" marker. Asserts that every tool
/// call's `block-end` came with the marker (the adapter keeps no copy of the arguments).
pub fn filled(mut chunks: Vec<StreamChunk>) -> Vec<StreamChunk> {
    let mut a = BlockAssembler::new();
    for c in &mut chunks {
        if let StreamChunk::BlockEnd {
            block: ContentBlock::ToolCall(call),
            ..
        } = c
        {
            assert!(call.arguments.is_streamed(), "{call:?}");
        }
        if a.push(c).is_err() {
            break;
        }
        a.fill(c);
    }
    chunks
}

/// Frames and translates `bytes` cut at `cuts` (offsets, any order, reduced modulo the length).
/// Returns the chunks (as [`filled`] makes them) and whether `[DONE]` was reached.
pub fn decode(bytes: &[u8], cuts: &[usize]) -> (Vec<StreamChunk>, bool) {
    let (chunks, done) = decode_raw(bytes, cuts);
    (filled(chunks), done)
}

/// [`decode`] without the assembler: the adapter's own chunks.
pub fn decode_raw(bytes: &[u8], cuts: &[usize]) -> (Vec<StreamChunk>, bool) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut framer = SseFramer::new();
    let mut tr = Translator::new();
    let mut out = Vec::new();
    let mut items = Vec::new();
    let mut start = 0;
    for end in cuts.into_iter().chain(std::iter::once(bytes.len())) {
        items.clear();
        framer.push(&bytes[start..end], &mut items).unwrap();
        start = end;
        for item in &items {
            if let SseItem::Event(ev) = item
                && tr.event(&ev.data, &mut out).unwrap() == Progress::Done
            {
                return (out, true);
            }
        }
    }
    (out, false)
}
