//! Benchmark: `grep` (in-process ripgrep crates) over a generated tree, against `rg` when it is
//! installed and `grep -rn` otherwise (or as well). Run with `cargo bench -p dsh-tool-fs`.
//!
//! Prints one table row per engine: median and min wall time of 7 runs after a warm-up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

const DIRS: usize = 40;
const FILES_PER_DIR: usize = 100;
const LINES_PER_FILE: usize = 250;
const RUNS: usize = 7;
const PATTERN: &str = "needle_[0-9]+x";

/// Deterministic pseudo-random words (xorshift), with a rare needle.
fn generate(root: &Path) -> (u64, usize) {
    let words = [
        "alpha", "beta", "gamma", "delta", "tokio", "future", "async", "buffer", "kernel",
        "plugin", "session", "stream", "value", "result", "error", "match", "lorem", "ipsum",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut bytes = 0u64;
    let mut needles = 0usize;
    for d in 0..DIRS {
        let dir = root.join(format!("dir{d:02}/sub"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let mut text = String::with_capacity(LINES_PER_FILE * 64);
            for l in 0..LINES_PER_FILE {
                for _ in 0..8 {
                    text.push_str(words[(next() % words.len() as u64) as usize]);
                    text.push(' ');
                }
                if next() % 500 == 0 {
                    text.push_str(&format!("needle_{l}x"));
                    needles += 1;
                }
                text.push('\n');
            }
            bytes += text.len() as u64;
            std::fs::File::create(dir.join(format!("file{f:03}.txt")))
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
    }
    (bytes, needles)
}

fn time(mut f: impl FnMut() -> usize) -> (Duration, Duration, usize) {
    let found = f();
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let n = f();
            assert_eq!(n, found, "engine gave different counts between runs");
            t.elapsed()
        })
        .collect();
    samples.sort();
    (samples[RUNS / 2], samples[0], found)
}

fn external(cmd: &str, args: &[&str], root: &Path) -> Option<usize> {
    let out = Command::new(cmd)
        .args(args)
        .arg(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(out.stdout.iter().filter(|&&b| b == b'\n').count())
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (bytes, needles) = generate(root);
    println!(
        "tree: {} files, {:.1} MB, {} matching lines; pattern {PATTERN:?}; {} cores",
        DIRS * FILES_PER_DIR,
        bytes as f64 / 1e6,
        needles,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!("| engine | median | min | matches |");
    println!("|---|---|---|---|");
    let cancel = CancellationToken::new();
    let row = |name: &str, (median, min, found): (Duration, Duration, usize)| {
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {found} |",
            median.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3
        );
    };
    row(
        "dsh grep (in-process)",
        time(|| {
            dsh_tool_fs::grep::search(root, PATTERN, None, &cancel)
                .unwrap()
                .total
        }),
    );
    if external("rg", &["--version"], Path::new(".")).is_some() {
        row(
            "rg -n",
            time(|| external("rg", &["-n", PATTERN], root).unwrap()),
        );
    } else {
        println!("| rg | not installed | | |");
    }
    row(
        "grep -rnE",
        time(|| external("grep", &["-rnE", PATTERN], root).unwrap_or(0)),
    );
    pipeline_overhead(root);
}

/// Median wall time of one `read` call of a small file through the whole Tools pipeline
/// (validation, hooks, guard of the read-before-write policy, rendering, notification).
fn pipeline_overhead(root: &Path) {
    use dsh_kernel::{Kernel, PluginRegistry};
    use dsh_tool_fs::{FsToolsPlugin, ReadBeforeWritePlugin};
    use dsh_tools::{ToolRequest, Tools, ToolsPlugin};

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let kernel = Kernel::new(PluginRegistry::new());
        let fibers = [
            kernel.mount_plugin::<ToolsPlugin>(Default::default()).unwrap(),
            kernel.mount_plugin::<FsToolsPlugin>(Default::default()).unwrap(),
            kernel
                .mount_plugin::<ReadBeforeWritePlugin>(Default::default())
                .unwrap(),
        ];
        for f in &fibers {
            f.ready().await.unwrap();
        }
        let tools = kernel.root().get::<dyn Tools>().unwrap();
        let file = root.join("small.txt");
        std::fs::write(&file, "one\ntwo\nthree\n").unwrap();
        let args = format!("{{\"file_path\":{:?}}}", file.display().to_string());
        let mut samples = Vec::with_capacity(2000);
        for i in 0..2000 {
            let req = ToolRequest::new(format!("c{i}"), "read", args.clone(), "bench", root);
            let t = Instant::now();
            let r = tools.execute(req).await;
            samples.push(t.elapsed());
            assert!(!r.is_error, "{}", r.text());
        }
        samples.sort();
        println!(
            "\npipeline: `read` of a 3-line file through Tools::execute: median {:.1} µs, p90 {:.1} µs (2000 calls)",
            samples[1000].as_secs_f64() * 1e6,
            samples[1800].as_secs_f64() * 1e6
        );
        kernel.dispose().await;
    });
}
