//! Round trip of `true` through the local executor: from `run` being called to the outcome
//! being returned (spawn, wait, pipe drain, group check). Prints min / median / p90 / max over
//! `DSH_BENCH_RUNS` runs (default 200) after 20 warm-up runs, and the same figures for a bare
//! `std::process::Command` spawn of the same bash as a baseline.
//!
//! `cargo bench -p dsh-bash-local --bench roundtrip`

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_shell::{ShellExecutor, ShellRequest};

fn main() {
    let runs: usize = std::env::var("DSH_BENCH_RUNS")
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
    let mut samples: Vec<Duration> = runtime.block_on(async {
        for _ in 0..20 {
            let out = shell.run(ShellRequest::new("true", &cwd)).await.unwrap();
            assert!(out.termination.success());
        }
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            let out = shell.run(ShellRequest::new("true", &cwd)).await.unwrap();
            samples.push(start.elapsed());
            assert!(out.termination.success());
        }
        samples
    });
    report("LocalShell::run(\"true\")", &mut samples);

    // Baseline: the bare process cost, std::process::Command spawn + wait with piped output.
    let mut baseline: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let out = std::process::Command::new("bash")
                .args(["--noprofile", "--norc", "-c", "true"])
                .current_dir(&cwd)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success());
            start.elapsed()
        })
        .collect();
    report("baseline std Command output()", &mut baseline);
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
