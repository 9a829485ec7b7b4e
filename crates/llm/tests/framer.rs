//! Property tests of the SSE framer: chunk boundaries carry no meaning.

use dsh_llm::{SseError, SseFramer, SseItem};
use proptest::prelude::*;

fn frame_split(bytes: &[u8], cuts: &[usize]) -> (Vec<SseItem>, Result<(), SseError>) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut f = SseFramer::new();
    let mut out = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().chain(std::iter::once(bytes.len())) {
        if let Err(e) = f.push(&bytes[start..c], &mut out) {
            return (out, Err(e));
        }
        start = c;
    }
    let r = f.finish();
    (out, r)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fixtures/deepseek/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A stream built from SSE-ish pieces with mixed line ends, a BOM, UTF-8 and comments.
fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
    let line_end = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
    let piece = prop_oneof![
        "[a-zé€😀 {}\":,]{0,12}".prop_map(|s| format!("data: {s}")),
        "[a-z ]{0,8}".prop_map(|s| format!("data:{s}")),
        "[a-z -]{0,8}".prop_map(|s| format!(": {s}")),
        Just(String::new()),
        Just("event: x".to_owned()),
        Just("id: 1".to_owned()),
        Just("retry: 10".to_owned()),
    ];
    (
        any::<bool>(),
        prop::collection::vec((piece, line_end), 0..24),
    )
        .prop_map(|(bom, parts)| {
            let mut s = String::new();
            if bom {
                s.push('\u{feff}');
            }
            for (p, e) in parts {
                s.push_str(&p);
                s.push_str(e);
            }
            s.into_bytes()
        })
}

proptest! {
    #[test]
    fn random_splits_give_identical_items(
        bytes in stream_strategy(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = frame_split(&bytes, &[]);
        let split = frame_split(&bytes, &cuts);
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn fixtures_at_random_splits(cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        for name in ["text.sse", "reasoning-text.sse", "parallel-tools.sse"] {
            let bytes = fixture(name);
            let whole = frame_split(&bytes, &[]);
            prop_assert_eq!(&whole.1, &Ok(()));
            prop_assert_eq!(frame_split(&bytes, &cuts), whole.clone());
            // CRLF and CR variants give the same items.
            let text = String::from_utf8(bytes.clone()).unwrap();
            for ending in ["\r\n", "\r"] {
                let alt = text.replace('\n', ending).into_bytes();
                prop_assert_eq!(frame_split(&alt, &cuts), whole.clone());
            }
        }
    }

    #[test]
    fn hostile_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let _ = frame_split(&bytes, &cuts);
    }
}

#[test]
fn fixture_items() {
    let (items, r) = frame_split(&fixture("reasoning-text.sse"), &[]);
    assert_eq!(r, Ok(()));
    assert_eq!(items[0], SseItem::Comment(" keep-alive".into()));
    assert_eq!(items[1], SseItem::Comment(" keep-alive".into()));
    let events: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            SseItem::Event(e) => Some(e.data.as_str()),
            SseItem::Comment(_) => None,
        })
        .collect();
    assert_eq!(events.len(), 7);
    assert_eq!(*events.last().unwrap(), "[DONE]");
    // Cutting off the final blank line is truncation.
    let bytes = fixture("text.sse");
    assert_eq!(
        frame_split(&bytes[..bytes.len() - 1], &[]).1,
        Err(SseError::Truncated)
    );
}

#[test]
fn every_single_byte_split_of_fixtures() {
    for name in ["text.sse", "reasoning-text.sse", "parallel-tools.sse"] {
        let bytes = fixture(name);
        let whole = frame_split(&bytes, &[]);
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        for b in &bytes {
            f.push(std::slice::from_ref(b), &mut out).unwrap();
        }
        assert_eq!((out, f.finish()), whole, "{name}");
    }
}
