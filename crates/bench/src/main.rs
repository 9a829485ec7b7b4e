//! `dsh-bench`: runs the release `dsh` end to end against the in-process testkit mock and checks
//! the figures against the budgets of `docs/architecture.md` §10. See the README for what is
//! measured.

// Printing the report is this binary's job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod catalog;
mod checkpoints;
mod compaction;
mod compression;
mod confine;
mod context;
mod figures;
mod fleet;
mod frontends;
mod images;
mod layout;
mod mcp;
mod payload;
mod providers;
mod report;
mod resume;
mod rows;
mod run;
mod scenario;
mod serve;
mod spawn;
mod startup;
mod stats;
mod steps;
mod store_apart;
mod subagent;
mod tool_set;
mod tui;
mod web;
mod workflow;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::Parser;

/// End-to-end benchmarks of dsh against its budgets.
#[derive(Debug, Parser)]
#[command(name = "dsh-bench", version, about)]
struct Cli {
    /// Runs of every scenario (medians are over these).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// One iteration of small scenarios (a smoke test; timings are not meaningful).
    #[arg(long)]
    quick: bool,
    /// The `dsh` binary to measure (default: `cargo build --release -p dsh-cli`, then
    /// `target/release/dsh` of this workspace).
    #[arg(long, value_name = "PATH")]
    dsh: Option<PathBuf>,
    /// Directory for `benchmarks.md` and `benchmarks.json` (default: `docs/` of this workspace;
    /// with `--quick`, nothing is written unless this is given).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the JSON report on stdout instead of the markdown table.
    #[arg(long)]
    json: bool,
    /// Do not fail on timing or memory budgets (exact budgets still fail): for smoke tests
    /// with a debug build.
    #[arg(long)]
    report_only: bool,
    /// Only write a generated resume log of N events into DIR (as `DIR/sessions/...` of a
    /// `DSH_HOME`) and exit: a fixture for profiling the load path by hand.
    #[arg(long, num_args = 2, value_names = ["N", "DIR"])]
    generate_resume: Option<Vec<String>>,
    /// Only measure and print the rows of these feature groups (no files written): a quick
    /// look at some features' figures.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUP,...")]
    only: Vec<Only>,
}

/// Feature groups `--only` can measure alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Only {
    /// Session log compression (bytes per step, zstd resume).
    Compression,
    /// `dsh web` on a 1,000-turn session: the tail's time and bytes against the whole replay,
    /// a page of earlier turns, the assets' size.
    Web,
    /// Per-step overhead of every provider route.
    Providers,
    /// MCP call overhead and startup with a slow server.
    Mcp,
    /// Sub-agent delegation.
    Subagent,
    /// Project context startup cost.
    Context,
    /// `dsh exec` spawn → first request of the default composition, and each plugin's share.
    Startup,
    /// One turn through the SDK runtime and the ACP server against `dsh exec`.
    Frontends,
    /// Bytes of the tool schemas with every tool enabled, and their order's stability.
    Tools,
    /// The interactive UI in a pty: first frame, key-to-screen, streaming, RSS, idle CPU.
    Tui,
    /// Sandbox confinement overhead per bash call (warm, cold, unconfined).
    Sandbox,
    /// Resume of a 10k-event plain log: spawn → first request, `sessions show`, memory.
    Resume,
    /// One step with a 5 MB `write`: peak RSS and log size.
    Payload,
    /// A ~1 MB PNG through `read_image` on `deepseek-flash`: bytes sent, body build time.
    Images,
    /// The session catalog on 10,000 generated sessions: rebuild, search, list, stats, size.
    Catalog,
    /// `write(2)` bytes per session byte of the 20-step bash scenario (the catalog's commits
    /// among them).
    Writes,
    /// Workspace checkpoints on a 10,000-file repository: snapshots, store growth, rewind.
    Checkpoints,
    /// `dsh serve`: per-step overhead of a 200-step turn against `dsh exec`, event delivery to
    /// an SSE client; one session's step writes while another flushes, in one store.
    Serve,
    /// The `workflow` tool: its engine's start, and a fan-out of 5 children against its slowest.
    Workflow,
    /// The fleet on a private PostgreSQL cluster: round trips and overhead per step against
    /// the JSONL store, 1,000 tasks per CPU-second with 1 and 4 workers.
    Fleet,
    /// The fleet's watcher on another server alone: rows read and delivery latency over a
    /// 200-step turn, steers relayed (also part of `fleet`).
    FleetWatch,
    /// The 20- and 200-step bash scenarios (peak RSS, overhead per step) and the bash spawn
    /// round trip after a long history (large / small).
    Steps,
}

/// The workspace root (this crate is `crates/bench`).
fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn locate_dsh(cli: &Cli) -> Result<PathBuf> {
    if let Some(p) = &cli.dsh {
        if !p.is_file() {
            bail!("--dsh {}: no such file", p.display());
        }
        return Ok(p.clone());
    }
    let root = workspace_root();
    eprintln!("dsh-bench: cargo build --release -p dsh-cli");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "-p", "dsh-cli"])
        .current_dir(&root)
        .status()
        .context("running cargo build --release -p dsh-cli")?;
    if !status.success() {
        bail!("cargo build --release -p dsh-cli failed ({status})");
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let dsh = target.join("release/dsh");
    if !dsh.is_file() {
        bail!("{} was not built", dsh.display());
    }
    Ok(dsh)
}

fn real_main(cli: &Cli) -> Result<bool> {
    let dsh = locate_dsh(cli)?
        .canonicalize()
        .context("resolving the dsh path")?;
    if let Some(spec) = &cli.generate_resume {
        let [n, dir] = spec.as_slice() else {
            bail!("--generate-resume takes N and DIR");
        };
        let n: usize = n.parse().context("--generate-resume N is not a number")?;
        let home = resume::Generated::new(&dsh, n)?.export_home(Path::new(dir))?;
        eprintln!(
            "dsh-bench: DSH_HOME with the generated session: {}",
            home.display()
        );
        return Ok(true);
    }
    if !cli.only.is_empty() {
        let mut rows = Vec::new();
        for group in &cli.only {
            match group {
                Only::Compression => compression::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Web => web::rows(&dsh, cli.iterations, &mut rows)?,
                Only::Providers => providers::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Mcp => mcp::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Subagent => subagent::rows(&dsh, cli.iterations, &mut rows)?,
                Only::Context => context::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Startup => startup::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Frontends => frontends::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Tools => tool_set::rows(&dsh, &mut rows)?,
                Only::Images => images::rows(&dsh, cli.iterations, &mut rows)?,
                Only::Catalog => catalog::rows(cli.quick, cli.iterations, &mut rows)?,
                Only::Writes => catalog::write_rows(&dsh, cli.iterations, &mut rows)?,
                Only::Checkpoints => checkpoints::rows(cli.quick, cli.iterations, &mut rows)?,
                Only::Tui => tui::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Serve => {
                    serve::rows(&dsh, cli.quick, cli.iterations, &mut rows)?;
                    store_apart::rows(cli.quick, cli.iterations, &mut rows)?;
                }
                Only::Workflow => workflow::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Fleet => fleet::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::FleetWatch => {
                    fleet::watch_rows(&dsh, cli.quick, cli.iterations, &mut rows)?;
                }
                Only::Steps => steps::rows(&dsh, cli.quick, cli.iterations, &mut rows)?,
                Only::Sandbox => {
                    let runs = confine::runs(&dsh, cli.iterations, cli.quick)?;
                    confine::rows(&mut rows, &runs);
                }
                Only::Resume => {
                    let events = if cli.quick { 2_000 } else { 10_000 };
                    let g = resume::Generated::new(&dsh, events)?;
                    let runs = (0..cli.iterations)
                        .map(|_| resume::run(&dsh, &g))
                        .collect::<Result<Vec<_>>>()?;
                    rows::resume_rows(&mut rows, &runs, events, true);
                }
                Only::Payload => {
                    let bytes = if cli.quick { 1_000_000 } else { 5_000_000 };
                    let runs = (0..cli.iterations)
                        .map(|_| payload::run(&dsh, bytes))
                        .collect::<Result<Vec<_>>>()?;
                    rows::payload_rows(&mut rows, &runs);
                }
            }
        }
        // The RSS figures follow the binary's code layout: a stale link order file fails here
        // rather than as a silent regression of these rows.
        if cli
            .only
            .iter()
            .any(|g| matches!(g, Only::Tui | Only::Steps | Only::Payload))
        {
            layout::rows(&mut rows, &dsh);
        }
        println!("{}", report::table(&rows, false));
        let failed = rows.iter().any(|r| r.verdict == report::Verdict::Fail);
        return Ok(!failed || cli.report_only);
    }
    let plan = figures::Plan::new(cli.quick, cli.iterations);
    let report = figures::measure(&dsh, &plan)?;
    let md = figures::markdown(&report, &workspace_root());
    let json = serde_json::to_string_pretty(&report)?;
    // A quick smoke run never overwrites the real figures in docs/ unless asked to.
    let out = match (&cli.out, cli.quick) {
        (Some(dir), _) => Some(dir.clone()),
        (None, false) => Some(workspace_root().join("docs")),
        (None, true) => None,
    };
    if let Some(out) = &out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        std::fs::write(out.join("benchmarks.md"), &md)
            .with_context(|| format!("writing {}", out.join("benchmarks.md").display()))?;
        std::fs::write(out.join("benchmarks.json"), format!("{json}\n"))
            .with_context(|| format!("writing {}", out.join("benchmarks.json").display()))?;
    }
    if cli.json {
        println!("{json}");
    } else {
        println!("{}", report::table(&report.rows, false));
        match &out {
            Some(out) => eprintln!("dsh-bench: wrote {}/benchmarks.{{md,json}}", out.display()),
            None => eprintln!("dsh-bench: --quick without --out: no files written"),
        }
    }
    let failed: Vec<&report::Row> = report
        .rows
        .iter()
        .filter(|r| r.verdict == report::Verdict::Fail && (r.exact || !cli.report_only))
        .collect();
    for r in &failed {
        eprintln!(
            "dsh-bench: FAIL {} / {}: {} (budget {})",
            r.group, r.figure, r.measured, r.budget
        );
    }
    Ok(failed.is_empty())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__probe") {
        return match run::probe_main(&args[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("dsh-bench probe: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    if args.get(1).map(String::as_str) == Some("__mcp_server") {
        // The stdio MCP server of the MCP figures (see `mcp.rs`).
        return ExitCode::from(
            u8::try_from(dsh_mcp_testserver::main_with_args(args[2..].to_vec())).unwrap_or(1),
        );
    }
    let cli = Cli::parse();
    match real_main(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("dsh-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}
