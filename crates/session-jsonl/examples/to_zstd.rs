//! `cargo run --release -p dsh-session-jsonl --example to_zstd -- LOG`: rewrites a plain
//! `session.v4.jsonl` as `session.v4.jsonl.zstd` (the header alone, then one frame per step,
//! about what dsh's flushes write) and removes the plain file: a zstd fixture for profiling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let log = std::env::args().nth(1).expect("usage: to_zstd LOG");
    let text = std::fs::read_to_string(&log).expect("read");
    let mut out = Vec::new();
    let mut batch = String::new();
    let mut lines = text.split_inclusive('\n');
    let header = lines.next().expect("empty log");
    dsh_session_jsonl::zstd::encode_frame(header.as_bytes(), &mut out);
    for line in lines {
        batch.push_str(line);
        if line.starts_with("{\"type\":\"step/end\"") {
            dsh_session_jsonl::zstd::encode_frame(batch.as_bytes(), &mut out);
            batch.clear();
        }
    }
    if !batch.is_empty() {
        dsh_session_jsonl::zstd::encode_frame(batch.as_bytes(), &mut out);
    }
    std::fs::write(format!("{log}.zstd"), &out).expect("write");
    std::fs::remove_file(&log).expect("remove");
}
