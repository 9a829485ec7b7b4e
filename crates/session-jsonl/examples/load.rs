//! `cargo run --release -p dsh-session-jsonl --example load -- ROOT ID [N]`: loads a stored
//! session N times (read, parse, admit) and prints the median and minimum times: for profiling
//! the load path by hand on a log written by `dsh-bench --generate-resume`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_session_jsonl::JsonlStore;

fn main() {
    let mut args = std::env::args().skip(1);
    let root = args.next().expect("usage: load ROOT ID [N]");
    let id = args.next().expect("usage: load ROOT ID [N]");
    let n: usize = args
        .next()
        .map_or(10, |n| n.parse().expect("N is a number"));
    let store = JsonlStore::new(root);
    let mut times: Vec<Duration> = Vec::with_capacity(n);
    let mut events = 0;
    for _ in 0..n {
        let t = Instant::now();
        let decoded = store.load(&id).expect("load");
        let log = decoded.replay().expect("replay");
        events = log.events().len();
        times.push(t.elapsed());
        drop(log);
    }
    times.sort();
    let path = store.log_path(&id).expect("log path");
    if path.extension().is_some_and(|x| x == "zstd") {
        let bytes = std::fs::read(&path).expect("read");
        let mut unz: Vec<Duration> = (0..n)
            .map(|_| {
                let t = Instant::now();
                let plain = dsh_session_jsonl::zstd::decompress_frames(&bytes).expect("frames");
                std::hint::black_box(plain);
                t.elapsed()
            })
            .collect();
        unz.sort();
        println!(
            "decompress alone: median {:.2} ms",
            unz[n / 2].as_secs_f64() * 1e3
        );
    }
    println!(
        "{events} events: median {:.2} ms, min {:.2} ms",
        times[n / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3
    );
}
