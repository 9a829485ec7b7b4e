//! Peak memory while capturing hostile output: runs `head -c 100000000 /dev/zero` (100 MB on
//! stdout) and a single 10 MB line through `LocalShell::run` and prints the process's peak RSS
//! (`VmHWM`) before and after. The captured tail stays at 64,000 bytes per stream, so the peak
//! should barely move.
//!
//! `cargo bench -p dsh-bash-local --bench memory`

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_shell::{ShellExecutor, ShellRequest};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let spill = tempfile::tempdir().unwrap();
    let shell = LocalShell::new(LocalShellOptions {
        spill_dir: Some(spill.path().to_path_buf()),
        ..LocalShellOptions::default()
    });
    runtime.block_on(async {
        // Warm up the runtime and the spawn path first.
        shell.run(ShellRequest::new("true", spill.path())).await.unwrap();
        let before = peak_rss_kib();
        for (what, cmd) in [
            ("100 MB of stdout", "head -c 100000000 /dev/zero"),
            ("one 10 MB line", "head -c 10000000 /dev/zero | tr '\\0' a"),
        ] {
            let start = std::time::Instant::now();
            let out = shell.run(ShellRequest::new(cmd, spill.path())).await.unwrap();
            println!(
                "{what}: {} bytes seen, {} kept, spill {:?}, {:?}; peak RSS {} KiB (before: {} KiB)",
                out.stdout.total_bytes,
                out.stdout.tail.len(),
                out.stdout.spill_path.as_ref().map(|_| "kept").unwrap_or("discarded"),
                start.elapsed(),
                peak_rss_kib(),
                before
            );
        }
    });
}
