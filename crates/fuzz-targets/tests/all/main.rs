//! Smoke run of every fuzz target: each seed of `fixtures/<target>/`, then deterministic
//! mutations of them (a seeded xorshift: bit flips, byte overwrites, insertions, deletions,
//! truncations, splices of two seeds), a fixed number of executions per target. A panic is a
//! finding; the test names the target and the input (hex) so it can be replayed.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod regressions;

use std::path::PathBuf;

use dsh_fuzz_targets::{TARGETS, Target};

/// Executions per target (seeds included).
const EXECUTIONS: usize = 3_000;

fn fixtures(name: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let mut seeds: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.expect("dir entry").path();
            let bytes = std::fs::read(&p).expect("seed");
            (p, bytes)
        })
        .collect();
    seeds.sort();
    seeds.into_iter().map(|(_, b)| b).collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes that matter to the formats under test.
const INTERESTING: &[u8] = b"\n\r\0:{}[]\",\\ \xff\xc3\xa9-0123456789etnaf";

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let len = data.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                data.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(len - i).min(16) + 1;
                data.drain(i..i + n);
            }
            4 => data.truncate(rng.below(len + 1)),
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let at = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                data.truncate(at);
                data.extend_from_slice(&other[from..]);
            }
            _ if len > 1 => {
                // Duplicate a slice (repeats fields, events, lines).
                let i = rng.below(len);
                let n = rng.below(len - i).min(64) + 1;
                let piece = data[i..i + n].to_vec();
                let at = rng.below(data.len() + 1);
                data.splice(at..at, piece);
            }
            _ => data.push(INTERESTING[rng.below(INTERESTING.len())]),
        }
    }
    data
}

fn run(name: &str, target: Target) -> usize {
    let seeds = fixtures(name);
    assert!(!seeds.is_empty(), "fixtures/{name} has no seed");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    let mut runs = 0;
    let one = |input: &[u8]| {
        let r = std::panic::catch_unwind(|| target(input));
        if r.is_err() {
            panic!(
                "fuzz target {name} failed on input (hex) {}",
                input.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
    };
    for seed in &seeds {
        one(seed);
        runs += 1;
    }
    while runs < EXECUTIONS {
        let input = mutate(&mut rng, &seeds);
        one(&input);
        runs += 1;
    }
    runs
}

#[test]
fn every_target_survives_its_seeds_and_their_mutations() {
    for (name, target) in TARGETS {
        let runs = run(name, *target);
        assert_eq!(runs, EXECUTIONS);
    }
}

#[test]
fn every_target_has_seeds_and_a_cargo_fuzz_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fuzz = root.join("../../fuzz/fuzz_targets");
    for (name, _) in TARGETS {
        assert!(!fixtures(name).is_empty(), "{name}: no seed");
        let file = fuzz.join(format!("{name}.rs"));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            text.contains(&format!("dsh_fuzz_targets::{name}(")),
            "{} does not call the target",
            file.display()
        );
    }
}

#[test]
fn targets_are_found_by_name() {
    assert!(dsh_fuzz_targets::target("sse_framer").is_some());
    assert!(dsh_fuzz_targets::target("no_such_target").is_none());
}
