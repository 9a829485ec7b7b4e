//! Memory per stored event (issue 11 item 6: under 1 KB), counted by a global allocator over a
//! log read back from its bytes: every event, the surface, the tracker and the inbox.
#![allow(
    unsafe_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use dsh_session::SessionLog;
use dsh_session::codec::encode_jsonl;

#[path = "support/workload.rs"]
mod workload;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates every call to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_stored_event_costs_under_one_kilobyte() {
    let source = workload::log_of(3_000);
    let bytes = encode_jsonl(source.header(), source.events());
    let header = source.header().clone();
    drop(source);
    let lines = workload::lines(&bytes);
    let n = lines.len();
    // Measured: everything the read log keeps (parsing scratch is freed before the end).
    let before = LIVE.load(Ordering::SeqCst);
    let events = workload::parse(&lines, 1);
    let log = SessionLog::replay(header, events).unwrap();
    let history = log.derive_messages();
    let kept = LIVE.load(Ordering::SeqCst) - before;
    let per_event = kept as f64 / n as f64;
    let file_per_event = bytes.len() as f64 / n as f64;
    println!("{n} events, {per_event:.0} B/event in memory, {file_per_event:.0} B/event on disk");
    assert!(per_event < 1024.0, "{per_event:.0} bytes per stored event");
    assert!(!history.is_empty() && log.len() == n as u64);
}
