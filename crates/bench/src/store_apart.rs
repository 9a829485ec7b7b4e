//! Sessions apart in one store: the JSONL store a `dsh serve` shares among its sessions, in
//! process. One thread makes a session durable over and over (100 events, then a flush with
//! its fsync), as a busy session's turn ends do; meanwhile the bench times another session's
//! step writes, an append of one event then a write-through (the write before a tool's side
//! effect, no fsync). Its p99 and maximum show whether the first session's fsyncs hold the
//! second up: with one lock over the whole store they did (each write waited for an fsync in
//! progress); with a lock per session they do not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use dsh_session::{Event, SessionHeader, SessionPersistence};
use dsh_session_jsonl::JsonlStore;

use crate::report::{Group, Row};
use crate::serve::quantile;

/// Events of one durable flush of the busy session.
const BATCH: u64 = 100;

/// One event line of about 300 bytes (`seq` as given).
fn event(seq: u64) -> Result<Arc<Event>> {
    let line = serde_json::json!({
        "type": "tool/result",
        "data": {
            "callId": format!("call-{seq}"),
            "output": "The quick brown fox jumps over the lazy dog while the harness records \
                       every step of the turn in an append-only log, one JSON object per line, \
                       durable at each flush barrier.",
        },
        "seq": seq,
        "time": 1_700_000_000_000_u64 + seq,
    })
    .to_string();
    Event::from_line(&line, seq)
        .map(Arc::new)
        .map_err(|e| anyhow!("the bench's event line: {e}"))
}

/// One run: the step writes' latencies (µs) and the busy session's flushes meanwhile.
fn run(samples: usize) -> Result<(Vec<f64>, u64)> {
    let tmp = tempfile::tempdir()?;
    let store = Arc::new(JsonlStore::new(tmp.path()));
    for id in ["busy", "stepper"] {
        store.create(&SessionHeader::new(id, 1, Some("/bench".into())))?;
        store.append(id, &[event(0)?])?;
        store.flush(id)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (started, first) = std::sync::mpsc::channel();
    let flusher = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || -> Result<u64> {
            let (mut seq, mut flushes) = (1, 0);
            while !stop.load(Ordering::Relaxed) {
                let batch = (seq..seq + BATCH).map(event).collect::<Result<Vec<_>>>()?;
                store.append("busy", &batch)?;
                store.flush("busy")?;
                seq += BATCH;
                flushes += 1;
                if flushes == 1 {
                    let _ = started.send(());
                }
            }
            Ok(flushes)
        })
    };
    // Timed from the busy session's first fsync on, so that every sample can meet one.
    first
        .recv()
        .map_err(|_| anyhow!("the busy session's flushes failed to start"))?;
    let mut out = Vec::with_capacity(samples);
    for seq in 1..=samples as u64 {
        let ev = [event(seq)?];
        let t = Instant::now();
        store.append("stepper", &ev)?;
        store.write_through("stepper")?;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    stop.store(true, Ordering::Relaxed);
    let flushes = flusher
        .join()
        .map_err(|_| anyhow!("the flushing thread panicked"))??;
    store.close_all();
    Ok((out, flushes))
}

/// The group's rows.
pub fn rows(quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let samples = if quick { 500 } else { 5_000 };
    let (mut p50, mut p99, mut max, mut flushes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations {
        eprintln!("dsh-bench: sessions apart run {}/{iterations}", i + 1);
        let (v, n) = run(samples).context("the sessions-apart run")?;
        p50.push(quantile(&v, 0.5));
        p99.push(quantile(&v, 0.99));
        max.push(quantile(&v, 1.0));
        flushes.push(n as f64);
    }
    let mut g = Group::new(
        rows,
        format!(
            "sessions apart in one JSONL store: {samples} step writes of one session while \
             another flushes {BATCH} events durably, over and over"
        ),
    );
    g.info("a step write (append + write-through), p50", &p50, "µs", 1);
    g.info("a step write (append + write-through), p99", &p99, "µs", 1);
    g.info("a step write (append + write-through), max", &max, "µs", 1);
    g.info(
        "the other session meanwhile",
        &flushes,
        "durable flushes",
        0,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_times_every_step_write_while_the_other_session_flushes() {
        let (v, flushes) = run(50).expect("the run");
        assert_eq!(v.len(), 50);
        assert!(v.iter().all(|us| us.is_finite() && *us > 0.0), "{v:?}");
        assert!(flushes >= 1, "the busy session flushed");
    }
}
