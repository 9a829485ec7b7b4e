//! `cargo bench -p dsh-session-jsonl --bench session`: hand-written timing (no criterion).
//!
//! 1. append throughput with a flush (write + fsync, JSONL backend) every 100 events;
//! 2. open + repair + derive of a 10,000-event session (budget: < 100 ms in release);
//! 3. memory per stored event (a counting global allocator);
//! 4. the store's part of a load: streaming read + line split + parse (`JsonlStore::load`).
#![allow(
    unsafe_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dsh_session::codec::decode_jsonl;
use dsh_session::{
    CreateOptions, DirectSink, NewEvent, SessionLog, SessionPersistence, SessionStore, Sessions,
};
use dsh_session_jsonl::JsonlStore;
use serde_json::json;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Counting is switched on only for the memory measurement (a shared counter would otherwise
/// add contention to the timed, multi-threaded parts).
static COUNTING: AtomicBool = AtomicBool::new(false);

// SAFETY: delegates every call to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TEXT: &str = "The quick brown fox jumps over the lazy dog while the harness records every step of the turn in an append-only log, one JSON object per line, durable at each flush barrier.";

/// A realistic turn of `k` steps with one tool call each, then a final answer: 2 + 6k + 3 events.
fn turn_events(turn: u64, steps: u64, open_tail: bool) -> Vec<NewEvent> {
    let mut out = vec![
        NewEvent::new("turn/start", json!({"turn": turn})),
        NewEvent::new(
            "user/message",
            json!({"content": [{"type": "text", "text": TEXT}], "source": {"kind": "user"}, "role": "user", "id": format!("u{turn}")}),
        ),
    ];
    for step in 1..=steps {
        let call = format!("call_{turn}_{step}");
        let args = r#"{"command":"ls -la","description":"List files"}"#;
        out.push(NewEvent::new(
            "step/start",
            json!({"turn": turn, "step": step}),
        ));
        out.push(NewEvent::new(
            "assistant/message",
            json!({"turn": turn, "step": step,
                "message": {"role": "assistant", "content": [{"type": "reasoning", "text": TEXT}, {"type": "tool-call", "id": call, "name": "bash", "arguments": args}],
                            "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}, "id": format!("a{turn}.{step}")},
                "usage": {"inputTokens": 1200, "outputTokens": 90},
                "stream": [{"type":"chunk","time":0,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}},
                           {"type":"reasoning-chunks","time0":0,"index":0,"dt":[1,1,1],"texts":["The quick ", "brown fox ", "jumps ", "over"]},
                           {"type":"chunk","time":0,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}]}),
        ));
        if open_tail && step == steps {
            return out; // crash: the requested call never started
        }
        out.push(NewEvent::new(
            "tool/call",
            json!({"turn": turn, "step": step, "callId": call, "name": "bash", "arguments": args}),
        ));
        out.push(NewEvent::new(
            "tool/result",
            json!({"turn": turn, "step": step, "message": {"role": "tool", "source": {"kind": "tool", "callId": call}, "toolCallId": call, "content": [{"type": "text", "text": TEXT}], "isError": false, "id": format!("r{turn}.{step}")}}),
        ));
        out.push(NewEvent::new(
            "step/end",
            json!({"turn": turn, "step": step}),
        ));
    }
    out.push(NewEvent::new(
        "step/start",
        json!({"turn": turn, "step": steps + 1}),
    ));
    out.push(NewEvent::new(
        "assistant/message",
        json!({"turn": turn, "step": steps + 1, "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}], "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}, "id": format!("f{turn}")}, "stream": []}),
    ));
    out.push(NewEvent::new(
        "step/end",
        json!({"turn": turn, "step": steps + 1}),
    ));
    out.push(NewEvent::new(
        "turn/end",
        json!({"turn": turn, "reason": {"kind": "completed"}}),
    ));
    out
}

/// About `n` events of complete 8-step turns, the last turn left open (crash).
fn workload(n: usize) -> Vec<NewEvent> {
    let mut out = Vec::new();
    let mut turn = 1;
    while out.len() + 60 < n {
        out.extend(turn_events(turn, 8, false));
        turn += 1;
    }
    out.extend(turn_events(turn, 8, true));
    out
}

fn stores(root: &std::path::Path) -> SessionStore {
    let p: Arc<dyn SessionPersistence> = Arc::new(JsonlStore::new(root));
    SessionStore::new(Some(Arc::clone(&p)), Arc::new(DirectSink::new(p)))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let n = 10_000;
    let events = workload(n);
    let count = events.len();
    println!("workload: {count} events (8-step tool turns, last turn open)");

    // 1. append throughput, flush every 100 events
    let tmp = tempfile::tempdir().unwrap();
    let sessions = stores(tmp.path());
    let s = sessions
        .create(CreateOptions {
            id: Some("bench".into()),
            cwd: Some("/bench".into()),
            ..Default::default()
        })
        .unwrap();
    let start = Instant::now();
    for (i, ev) in events.iter().cloned().enumerate() {
        s.append(ev).unwrap();
        if (i + 1) % 100 == 0 {
            futures::executor::block_on(s.flush()).unwrap();
        }
    }
    futures::executor::block_on(s.flush()).unwrap();
    let elapsed = start.elapsed();
    println!(
        "append + flush/100 (fsync): {count} events in {:.1} ms = {:.0} events/s ({:.1} µs/event)",
        elapsed.as_secs_f64() * 1e3,
        count as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / count as f64
    );
    let mut mem = SessionLog::new(s.header());
    let copies = events.clone();
    let start = Instant::now();
    for ev in copies {
        mem.append(ev).unwrap();
    }
    let e2 = start.elapsed();
    println!(
        "append in memory (validation + fold, no I/O): {:.1} µs/event",
        e2.as_secs_f64() * 1e6 / count as f64
    );
    futures::executor::block_on(sessions.close("bench")).unwrap();
    drop(s);
    let path = tmp
        .path()
        .join("--bench--")
        .join("bench")
        .join("session.v4.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    println!(
        "file: {} bytes = {:.0} bytes/event",
        bytes.len(),
        bytes.len() as f64 / count as f64
    );

    // 2. open + repair + derive of the 10,000-event session (write open through the service)
    let mut runs = Vec::new();
    let mut decode_runs = Vec::new();
    let mut admit_runs = Vec::new();
    for _ in 0..7 {
        std::fs::write(&path, &bytes).unwrap();
        let sessions = stores(tmp.path());
        let t0 = Instant::now();
        let s = sessions.open("bench").unwrap();
        let msgs = s.derive_messages();
        let t = t0.elapsed();
        runs.push(t);
        assert!(msgs.len() > 1000);
        assert_eq!(s.events().len(), count + 3 + 1, "closers + marker");
        drop(s);
        futures::executor::block_on(sessions.close("bench")).unwrap();
        // split: decode vs admission/fold
        let t1 = Instant::now();
        let d = decode_jsonl(&bytes, 4, "bench", "bench").unwrap();
        let t2 = Instant::now();
        let log = SessionLog::replay(d.header, d.events).unwrap();
        decode_runs.push(t2 - t1);
        admit_runs.push(t2.elapsed());
        drop(log);
    }
    // 2b. the store's own part: streaming read + line split + per-line parse of the file
    // (JsonlStore::load, a read open: no lock, no admission), and the line split alone
    std::fs::write(&path, &bytes).unwrap();
    let store = JsonlStore::new(tmp.path());
    let mut load_runs = Vec::new();
    let mut split_runs = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let d = store.load("bench").unwrap();
        load_runs.push(t.elapsed());
        assert_eq!(d.events.len(), count);
        let t = Instant::now();
        let f = std::io::BufReader::with_capacity(256 << 10, std::fs::File::open(&path).unwrap());
        let lines = std::io::BufRead::split(f, b'\n').count();
        split_runs.push(t.elapsed());
        assert_eq!(lines, count + 1);
    }
    println!(
        "store load (streaming read + split + parse, no admission), {count} events: best {:.1} ms, median {:.1} ms; read + line split alone best {:.2} ms",
        ms(*load_runs.iter().min().unwrap()),
        ms(median(load_runs)),
        ms(*split_runs.iter().min().unwrap()),
    );

    let best = *runs.iter().min().unwrap();
    println!(
        "open + repair + derive, {count} events: best {:.1} ms, median {:.1} ms of 7 (budget 100 ms); decode best {:.1} ms, admit+fold best {:.1} ms",
        ms(best),
        ms(median(runs)),
        ms(*decode_runs.iter().min().unwrap()),
        ms(*admit_runs.iter().min().unwrap())
    );

    // 3. memory per stored event: live heap of the decoded + admitted log (events, Arcs,
    // surface, cached messages), measured with the counting allocator
    COUNTING.store(true, Ordering::SeqCst);
    let before = LIVE.load(Ordering::Relaxed);
    let d = decode_jsonl(&bytes, 4, "bench", "bench").unwrap();
    let mid = LIVE.load(Ordering::Relaxed);
    let log = SessionLog::replay(d.header, d.events).unwrap();
    let after = LIVE.load(Ordering::Relaxed);
    COUNTING.store(false, Ordering::SeqCst);
    println!(
        "memory split: decoded events {:.0} bytes/event, admission (Arcs, surface, cached messages) {:.0} bytes/event",
        (mid as f64 - before as f64) / count as f64,
        (after as f64 - mid as f64) / count as f64
    );
    let per = (after as f64 - before as f64) / count as f64;
    println!(
        "memory: {per:.0} bytes per stored event ({:.2}x its JSONL size; surface of {} nodes with cached messages)",
        per / (bytes.len() as f64 / count as f64),
        log.surface().nodes().len()
    );
}
