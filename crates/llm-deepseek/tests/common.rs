//! Shared helpers.

use dsh_llm::{SseFramer, SseItem, StreamChunk};
use dsh_llm_deepseek::{Progress, Translator};

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fixtures/deepseek/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Frames and translates `bytes` cut at `cuts` (offsets, any order, reduced modulo the length).
/// Returns the chunks and whether `[DONE]` was reached.
pub fn decode(bytes: &[u8], cuts: &[usize]) -> (Vec<StreamChunk>, bool) {
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
