//! `cargo bench -p dsh-session --bench load`: hand-written timing of reading a log back
//! (no storage backend: the JSONL bytes are in memory). Workload: `tests/support/workload.rs`
//! (8-step tool turns, the last turn open).
//!
//! Figures: parse (split lines + `Event::from_line` on 1 and 2 threads), admission
//! (`SessionLog::replay`), repair + `derive_messages`, and append in memory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use dsh_session::codec::encode_jsonl;
use dsh_session::{CloseCause, SessionLog};

#[path = "../tests/support/workload.rs"]
mod workload;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run(n: usize) {
    let events = workload::workload(n);
    let count = events.len();
    let mut append = Vec::new();
    for _ in 0..5 {
        let mut log = SessionLog::new(dsh_session::SessionHeader::new("s", 1, Some("/w".into())));
        let batch = events.clone();
        let t = Instant::now();
        for ev in batch {
            log.append(ev.at(1_789_000_000_000)).unwrap();
        }
        append.push(t.elapsed());
    }
    let source = workload::log_of(n);
    let bytes = encode_jsonl(source.header(), source.events());
    let header = source.header().clone();
    drop(source);
    let (mut p1, mut p2, mut admit, mut repair, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        let t0 = Instant::now();
        let lines = workload::lines(&bytes);
        let parsed = workload::parse(&lines, 2);
        let t1 = Instant::now();
        let mut log = SessionLog::replay(header.clone(), parsed).unwrap();
        let t2 = Instant::now();
        let closers = log.closers(CloseCause::Interrupted);
        log.append_all(closers).unwrap();
        let history = log.derive_messages();
        let t3 = Instant::now();
        assert!(!history.is_empty());
        p2.push(t1 - t0);
        admit.push(t2 - t1);
        repair.push(t3 - t2);
        total.push(t3 - t0);
        let t = Instant::now();
        let one = workload::parse(&lines, 1);
        p1.push(t.elapsed());
        assert_eq!(one.len(), lines.len());
    }
    println!(
        "{count} events, {:.1} MB: parse {:.1} ms (1 thread) / {:.1} ms (2 threads), admission {:.1} ms, repair + derive {:.2} ms, read total {:.1} ms (median of 7); append in memory {:.2} µs/event",
        bytes.len() as f64 / 1e6,
        ms(median(p1)),
        ms(median(p2)),
        ms(median(admit)),
        ms(median(repair)),
        ms(median(total)),
        median(append).as_secs_f64() * 1e6 / count as f64,
    );
}

/// Where the per-line time goes (single thread): each stage of `Event::from_line` alone.
fn breakdown(n: usize) {
    use dsh_session::CoreEvent;
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Row<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        #[serde(borrow)]
        data: &'a RawValue,
    }
    let source = workload::log_of(n);
    let bytes = encode_jsonl(source.header(), source.events());
    let lines = workload::lines(&bytes);
    let time = |name: &str, f: &dyn Fn(&str)| {
        let t = Instant::now();
        for l in &lines {
            f(l);
        }
        println!("  {name}: {:.1} ms", ms(t.elapsed()));
    };
    let rows: Vec<(dsh_session::EventKind, &str)> = lines
        .iter()
        .map(|l| {
            let r: Row<'_> = serde_json::from_str(l).unwrap();
            (dsh_session::EventKind::parse(r.kind), r.data.get())
        })
        .collect();
    let each = |name: &str, f: &dyn Fn(&dsh_session::EventKind, &str)| {
        let t = Instant::now();
        for (k, d) in &rows {
            f(k, d);
        }
        println!("  {name}: {:.1} ms", ms(t.elapsed()));
    };
    time("envelope (type + raw data)", &|l| {
        let _: Row<'_> = serde_json::from_str(l).unwrap();
    });
    time("serde_json::Value of the line", &|l| {
        let _: serde_json::Value = serde_json::from_str(l).unwrap();
    });
    let t = Instant::now();
    for (i, l) in lines.iter().enumerate() {
        dsh_session::Event::from_line(l, i as u64).unwrap();
    }
    println!("  from_line (all of it): {:.1} ms", ms(t.elapsed()));
    each("lossless check", &|_, d| {
        dsh_session::json::validate_lossless_str(d, "data").unwrap();
    });
    each("typed decode", &|k, d| {
        let _ = CoreEvent::decode(k, d);
    });
    let cores: Vec<(CoreEvent, &str)> = rows
        .iter()
        .filter_map(|(k, d)| CoreEvent::decode(k, d).map(|c| (c.unwrap(), *d)))
        .collect();
    let t = Instant::now();
    for (c, d) in &cores {
        dsh_session::validate::check_core(c, d, &mut None).unwrap();
    }
    println!("  check_core (streams included): {:.1} ms", ms(t.elapsed()));
    let t = Instant::now();
    for (c, d) in &cores {
        assert!(c.serialises_to(d));
    }
    println!(
        "  canonical check (serialise + compare): {:.1} ms",
        ms(t.elapsed())
    );
}

fn main() {
    if std::env::args().any(|a| a == "--breakdown") {
        breakdown(10_016);
    }
    run(10_016);
    if std::env::args().any(|a| a == "--100k") {
        run(100_000);
    }
}
