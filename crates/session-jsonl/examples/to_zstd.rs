//! `cargo run --release -p dsh-session-jsonl --example to_zstd -- LOG`: rewrites a plain
//! `session.v4.jsonl` as `session.v4.jsonl.zstd` (the header alone, then one frame per step,
//! about what dsh's flushes write) and removes the plain file: a zstd fixture for profiling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let log = std::env::args().nth(1).expect("usage: to_zstd LOG");
    let text = std::fs::read_to_string(&log).expect("read");
    let out = dsh_session_jsonl::zstd::encode_per_step(&text);
    std::fs::write(format!("{log}.zstd"), &out).expect("write");
    std::fs::remove_file(&log).expect("remove");
}
