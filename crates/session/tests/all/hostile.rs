//! Hostile input: random mutations of a real log never panic the reader.

use dsh_session::SessionLog;
use dsh_session::codec::decode_jsonl;
use proptest::prelude::*;

use crate::common::{Subst, fixture_bytes, fixtures_dir};

fn base(v3: bool) -> Vec<u8> {
    let file = if v3 {
        "v3/system-prompt-update-tool-change/session.v3.jsonl"
    } else {
        "v4/image-offload-retry/session.v4.jsonl"
    };
    fixture_bytes(&fixtures_dir().join(file), &mut Subst::default())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (
            any::<usize>(),
            proptest::collection::vec(
                prop_oneof![
                    Just(b'"'),
                    Just(b'{'),
                    Just(b'}'),
                    Just(b'\n'),
                    Just(b'-'),
                    Just(b'0'),
                    any::<u8>()
                ],
                1..16
            )
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn mutated_logs_never_panic(v3 in any::<bool>(), muts in proptest::collection::vec(mutation(), 1..4)) {
        let mut bytes = base(v3);
        for m in muts {
            let len = bytes.len().max(1);
            match m {
                Mutation::Flip(i, b) => { let i = i % len; if i < bytes.len() { bytes[i] ^= b | 1; } }
                Mutation::Delete(i, n) => { let i = i % len; let end = (i + n).min(bytes.len()); bytes.drain(i.min(end)..end); }
                Mutation::Insert(i, v) => { let i = i % (bytes.len() + 1); bytes.splice(i..i, v); }
            }
        }
        for v in [3, 4, 5] {
            let _ = decode_jsonl(&bytes, v, "mutated", "s").map(|d| SessionLog::replay(d.header, d.events));
        }
    }
}
