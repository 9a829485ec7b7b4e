//! Property (issue 12): mutate a valid log (flip a byte, duplicate a line, renumber a seq,
//! truncate, insert garbage). Loading either yields every valid committed event of the
//! original (only a torn last line may be lost) or refuses naming the file and the line —
//! never continues with fewer events silently.

use std::path::Path;

use dsh_session::LogError;
use dsh_session::codec::{DecodedLog, LoadError};
use dsh_session_jsonl::{JsonlStore, StoreError};
use proptest::prelude::*;

use crate::corrupt::unfinished_session;

#[derive(Debug, Clone)]
enum Mutation {
    /// XOR a byte of the body (after the header) with a non-zero mask.
    Flip { at: usize, mask: u8 },
    /// Repeat line `line` (0-based body line) right after itself.
    Duplicate { line: usize },
    /// Give line `line` another seq.
    Renumber { line: usize, seq: u64 },
    /// Cut the file at a body position.
    Truncate { at: usize },
    /// Insert a garbage line before body line `line` (or at the end).
    Insert { line: usize, garbage: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<usize>().prop_map(|line| Mutation::Duplicate { line }),
        (any::<usize>(), 0u64..40).prop_map(|(line, seq)| Mutation::Renumber { line, seq }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (
            any::<usize>(),
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..40),
                Just(b"{\"type\":\"turn/start\"".to_vec()),
                Just(b"{}".to_vec()),
            ]
        )
            .prop_map(|(line, garbage)| Mutation::Insert { line, garbage }),
    ]
}

/// Byte ranges `(start, end_inclusive_of_newline)` of the body lines.
fn body_lines(bytes: &[u8]) -> (usize, Vec<(usize, usize)>) {
    let header = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
    let mut out = Vec::new();
    let mut start = header;
    for (i, b) in bytes.iter().enumerate().skip(header) {
        if *b == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    (header, out)
}

/// Applies the mutation; returns the new bytes and the index of the first body line whose
/// bytes changed (`None`: the header changed), plus whether the mutation only touched the
/// last original line.
fn apply(orig: &[u8], m: &Mutation) -> (Vec<u8>, Option<usize>) {
    let (header, lines) = body_lines(orig);
    let n = lines.len();
    let line_of = |pos: usize| lines.iter().position(|(s, e)| pos >= *s && pos < *e);
    match m {
        Mutation::Flip { at, mask } => {
            let at = at % orig.len();
            let mut b = orig.to_vec();
            b[at] ^= mask;
            (b, line_of(at))
        }
        Mutation::Duplicate { line } => {
            let (s, e) = lines[line % n];
            let mut b = orig[..e].to_vec();
            b.extend_from_slice(&orig[s..e]);
            b.extend_from_slice(&orig[e..]);
            (b, Some(line % n + 1))
        }
        Mutation::Renumber { line, seq } => {
            let l = line % n;
            let (s, e) = lines[l];
            let text = String::from_utf8(orig[s..e].to_vec()).unwrap();
            let new = text.replace(&format!("\"seq\":{l},"), &format!("\"seq\":{seq},"));
            let mut b = orig[..s].to_vec();
            b.extend_from_slice(new.as_bytes());
            b.extend_from_slice(&orig[e..]);
            (b, Some(l))
        }
        Mutation::Truncate { at } => {
            let at = header + at % (orig.len() - header);
            (orig[..at].to_vec(), line_of(at))
        }
        Mutation::Insert { line, garbage } => {
            let l = line % (n + 1);
            let pos = if l == n { orig.len() } else { lines[l].0 };
            let mut b = orig[..pos].to_vec();
            b.extend_from_slice(garbage);
            b.push(b'\n');
            b.extend_from_slice(&orig[pos..]);
            (b, Some(l))
        }
    }
}

enum Outcome {
    Loaded(Box<DecodedLog>),
    /// Refused while reading or admitting, located.
    Refused(Box<LoadError>),
}

fn load(root: &Path, id: &str) -> Outcome {
    let store = JsonlStore::new(root);
    match store.load(id) {
        Err(StoreError::Load(e)) => Outcome::Refused(e),
        Err(e) => panic!("unexpected error kind: {e:?}"),
        Ok(d) => match d.clone().replay() {
            Ok(_) => Outcome::Loaded(Box::new(d)),
            Err(LogError::Load(e)) => Outcome::Refused(e),
            Err(e) => panic!("an admission refusal that names no line: {e}"),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn mutated_logs_load_whole_or_are_refused_naming_file_and_line(m in mutation()) {
        let tmp = tempfile::tempdir().unwrap();
        let path = unfinished_session(tmp.path(), "p");
        let orig = std::fs::read(&path).unwrap();
        let original = JsonlStore::new(tmp.path()).load("p").unwrap();
        let (bytes, first_changed) = apply(&orig, &m);
        std::fs::write(&path, &bytes).unwrap();
        let shown = path.display().to_string();
        let n = original.events.len();
        match load(tmp.path(), "p") {
            Outcome::Refused(e) => {
                prop_assert_eq!(&e.path, &shown);
                prop_assert!(e.line >= 1);
                let named = e.to_string().contains(&format!("line {}", e.line));
                prop_assert!(named || e.is_unsupported(), "{}", e);
                // the refused line is the mutated one or after it (earlier lines are intact)
                if let Some(k) = first_changed {
                    prop_assert!(e.line >= k as u64 + 2, "refused line {} before the mutation at line {}", e.line, k + 2);
                }
            }
            Outcome::Loaded(d) => {
                let kept = d.events.len();
                match (&m, first_changed) {
                    (_, None) => prop_assert_eq!(kept, n, "header mutation"),
                    (Mutation::Truncate { .. }, Some(k)) => {
                        // every row completed before the cut is kept
                        prop_assert_eq!(kept, k);
                    }
                    (_, Some(k)) => {
                        // all original events kept, except the last line when the mutation
                        // touched it (a torn last line)
                        let allowed = if k + 1 >= n { n - 1 } else { n };
                        prop_assert!(kept >= allowed, "kept {} of {} (mutation at body line {})", kept, n, k);
                    }
                }
                // every untouched row is the original event
                let untouched = first_changed.unwrap_or(0).min(kept);
                for i in 0..untouched {
                    prop_assert_eq!(d.events[i].to_json_line(), original.events[i].to_json_line());
                }
            }
        }
    }
}
