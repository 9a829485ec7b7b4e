//! `dsh-bench --quick` end to end (one iteration of small scenarios) so the runner cannot rot.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_dsh-bench");

/// The debug `dsh` next to this build's `dsh-bench` (same target directory and profile); built by
/// `cargo test --workspace` (the CLI's own tests need it). `DSH_BENCH_DSH` overrides it.
fn dsh() -> PathBuf {
    if let Some(p) = std::env::var_os("DSH_BENCH_DSH") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(BENCH).with_file_name("dsh");
    assert!(
        p.is_file(),
        "{} is missing: build it first with `cargo build -p dsh-cli` (or run `cargo test --workspace`), \
         or set DSH_BENCH_DSH",
        p.display()
    );
    p
}

#[test]
fn quick_run_reports_every_figure_and_passes_the_exact_budgets() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(BENCH)
        .args(["--quick", "--report-only", "--json", "--dsh"])
        .arg(dsh())
        .arg("--out")
        .arg(out_dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(report["plan"]["quick"], true);
    assert!(report["dshVersion"].as_str().unwrap().starts_with("dsh "));
    let rows = report["rows"].as_array().unwrap();
    let figure = |group: &str, figure: &str| -> &Value {
        rows.iter()
            .find(|r| {
                r["group"].as_str().unwrap().starts_with(group)
                    && r["figure"].as_str().unwrap().starts_with(figure)
            })
            .unwrap_or_else(|| panic!("no row {group} / {figure}"))
    };
    for (group, name) in [
        ("startup", "`dsh --version` wall time"),
        (
            "startup: default composition",
            "`dsh exec` spawn → first request",
        ),
        ("bash", "peak RSS"),
        ("bash", "harness overhead per step"),
        ("bash", "first request size"),
        ("bash", "system prompt"),
        ("bash", "tool schemas"),
        ("bash", "request growth per step"),
        ("bash", "session directory bytes per step"),
        ("bash", "write(2) bytes per session byte"),
        ("parallel reads", "step gap with 8 reads"),
        ("large output", "tool result bytes sent to the model"),
        ("resume", "`dsh exec --resume`: spawn → first request"),
        ("resume (1000", "memory per stored event"),
        ("resume (3000", "peak RSS of the resumed run"),
        ("long session: bash", "peak RSS"),
        ("long session: bash", "harness overhead, last quarter"),
        (
            "long session: 100 KB outputs",
            "request size at the end (last request)",
        ),
        (
            "bash spawn round trip",
            "large history: dsh RSS at the calls",
        ),
        ("large payload", "peak RSS"),
        ("large payload", "session log size"),
    ] {
        let row = figure(group, name);
        if row["measured"]
            .as_str()
            .unwrap()
            .starts_with("not available")
        {
            continue; // no /proc/self/io in this environment
        }
        let stat = &row["stat"];
        assert!(stat["median"].as_f64().unwrap() > 0.0, "{row}");
        assert!(stat["min"].as_f64() <= stat["max"].as_f64(), "{row}");
    }
    // The correctness figures are exact and must pass even in a debug build.
    let exact: Vec<&Value> = rows.iter().filter(|r| r["exact"] == true).collect();
    assert!(exact.len() >= 22, "{}", exact.len());
    for r in &exact {
        assert_eq!(r["verdict"], "pass", "{r}");
    }
    // One keep-alive connection, exactly, in every run.
    for group in ["bash (3 steps)", "bash, `[DONE]` split"] {
        let row = figure(group, "TCP connections the mock accepted");
        assert_eq!(row["exact"], true, "{row}");
        assert_eq!(row["measured"], "1", "{row}");
    }
    // A startup row per plugin of the default composition.
    assert!(
        rows.iter()
            .filter(|r| r["group"]
                .as_str()
                .unwrap()
                .starts_with("startup: default composition")
                && r["figure"].as_str().unwrap().starts_with("mount of"))
            .count()
            >= 20
    );
    assert!(
        figure("reasoning", "reasoning passed back")["measured"] == "yes",
        "{rows:?}"
    );
    // Every scenario ran its steps; the resumed log was really that long.
    let bash = &report["scenarios"][0]["runs"][0];
    assert_eq!(bash["gapsUs"].as_array().unwrap().len(), 3);
    assert_eq!(bash["prefixFraction"].as_array().unwrap().len(), 3);
    assert!(report["resume"][0]["events"].as_u64().unwrap() >= 1000);
    assert!(report["resumeLarge"][0]["events"].as_u64().unwrap() >= 3000);
    // The long sessions ran every step and read dsh's RSS once a quarter.
    let long = &report["long"][0]["runs"][0];
    assert_eq!(long["gapsUs"].as_array().unwrap().len(), 8);
    assert_eq!(long["rssProbesKib"].as_array().unwrap().len(), 4, "{long}");
    for g in [
        "resume growth",
        "long session: bash",
        "long session: 100 KB outputs",
    ] {
        assert!(
            rows.iter()
                .filter(|r| r["group"].as_str().unwrap().starts_with(g))
                .count()
                >= 3,
            "{g}"
        );
    }
    // The spawn probe measured one pair at each history size, with dsh's RSS from its child.
    for key in ["spawnSmall", "spawnLarge"] {
        let run = &report[key][0];
        assert_eq!(run["perCallMs"].as_array().unwrap().len(), 1, "{run}");
        assert_eq!(run["harnessRssKib"].as_array().unwrap().len(), 2, "{run}");
    }
    assert!(report["spawnLarge"][0]["resumedEvents"].as_u64().unwrap() >= 3000);
    // The load average is recorded as each group starts.
    assert!(report["groupLoad"].as_array().unwrap().len() >= 11);
    let payload = &report["payload"][0];
    assert_eq!(payload["fileMatches"], true);
    assert!(payload["payloadBytes"].as_u64().unwrap() > 200_000);
    // Both files were written, the markdown with the tables and the microbenchmark sections.
    let md = std::fs::read_to_string(out_dir.path().join("benchmarks.md")).unwrap();
    assert!(md.contains("## Budgets (ARCHITECTURE §10)"));
    assert!(md.contains("| startup | `dsh --version` wall time | under 10 ms (median) |"));
    assert!(md.contains("From `crates/kernel/README.md`"), "{md}");
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("benchmarks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["rows"], report["rows"]);
}

#[test]
fn a_missing_dsh_binary_is_a_clear_error() {
    let out = Command::new(BENCH)
        .args(["--quick", "--dsh", "/nonexistent/dsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--dsh /nonexistent/dsh: no such file"),
        "{stderr}"
    );
}

#[test]
fn zero_iterations_are_refused() {
    let out = Command::new(BENCH)
        .args(["--iterations", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iterations"));
}

#[test]
fn the_probe_reports_a_failing_child() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = Command::new(BENCH)
        .arg("__probe")
        .arg(&report)
        .args(["sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["exitCode"], 3);
    assert!(r["maxRssKib"].as_i64().unwrap() > 0);
    assert!(r["wallNs"].as_u64().unwrap() > 0);
}

#[test]
fn a_quick_run_without_out_writes_no_files() {
    let out = Command::new(BENCH)
        .args(["--quick", "--report-only", "--dsh"])
        .arg(dsh())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("--quick without --out: no files written"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("| group | figure | budget | measured | result |"),
        "{stdout}"
    );
}
