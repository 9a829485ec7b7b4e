//! Round trip of `true` through the local executor: from `run` being called to the outcome
//! being returned (spawn, wait, pipe drain, group check). Prints min / median / p90 / max over
//! `DSH_BENCH_RUNS` runs (default 200) after 20 warm-up runs, and the same figures for a bare
//! `std::process::Command` spawn of the same bash as a baseline.
//!
//! Each figure is taken twice: with the bench's own small heap, then after touching a 200 MB
//! heap (`DSH_BENCH_HEAP_MB` to change it). A spawn path that forks copies the page tables of
//! the whole address space, so its cost grows with the harness's RSS; a `posix_spawn` (vfork)
//! path does not.
//!
//! `cargo bench -p dsh-bash-local --bench roundtrip`

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_shell::{ShellExecutor, ShellRequest};

fn main() {
    let runs: usize = std::env::var("DSH_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let heap_mb: usize = std::env::var("DSH_BENCH_HEAP_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cwd = std::env::temp_dir();
    let shell = LocalShell::new(LocalShellOptions::default());

    println!("small heap: RSS {} KiB", rss_kib());
    measure(&runtime, &shell, &cwd, runs, "small heap");

    // Grow the harness: a heap of `heap_mb` MB, every page touched (so it is resident and its
    // page-table entries exist), kept alive across the second measurement.
    let mut heap: Vec<Vec<u8>> = Vec::with_capacity(heap_mb);
    for i in 0..heap_mb {
        heap.push(vec![(i % 251) as u8 + 1; 1 << 20]);
    }
    println!("large heap: RSS {} KiB", rss_kib());
    measure(&runtime, &shell, &cwd, runs, "large heap");
    let checksum: u64 = heap.iter().map(|b| u64::from(b[b.len() / 2])).sum();
    println!("(heap checksum {checksum})");
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    shell: &LocalShell,
    cwd: &Path,
    runs: usize,
    label: &str,
) {
    let mut samples: Vec<Duration> = runtime.block_on(async {
        for _ in 0..20 {
            let out = shell.run(ShellRequest::new("true", cwd)).await.unwrap();
            assert!(out.termination.success());
        }
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            let out = shell.run(ShellRequest::new("true", cwd)).await.unwrap();
            samples.push(start.elapsed());
            assert!(out.termination.success());
        }
        samples
    });
    report(
        &format!("[{label}] LocalShell::run(\"true\")"),
        &mut samples,
    );

    // Baseline: the bare process cost, std::process::Command spawn + wait with piped output
    // (an absolute program path and an inherited environment: std's posix_spawn path).
    let mut baseline: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let out = std::process::Command::new("/bin/bash")
                .args(["--noprofile", "--norc", "-c", "true"])
                .current_dir(cwd)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success());
            start.elapsed()
        })
        .collect();
    report(
        &format!("[{label}] baseline std Command output()"),
        &mut baseline,
    );
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!(
        "{what} ({} runs): min {:?}  median {:?}  p90 {:?}  max {:?}",
        samples.len(),
        pick(0.0),
        pick(0.5),
        pick(0.9),
        pick(1.0)
    );
}
