//! The `dsh` command: the composition root of the DeepSeek Harness.

// Printing to the terminal is this binary's job (libraries log through `tracing`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod acp_cmd;
mod audit;
mod bg;
mod catalog;
mod compose;
mod config_cmd;
mod context_cmd;
mod exec;
mod exec_follow;
mod exec_remote;
mod home;
mod json_out;
mod mcp_cmd;
mod permissions_cmd;
mod plan_args;
mod providers;
mod rewind_cmd;
mod sandbox_args;
mod sandbox_cmd;
mod sdk_cmd;
mod serve_cmd;
mod sessions_cmd;
mod sessions_delete;
mod stats_cmd;
mod store_cmd;
mod tasks_cmd;
mod tui_cmd;
mod watch;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// dsh — the DeepSeek Harness: a coding agent on DeepSeek models.
#[derive(Debug, Parser)]
#[command(name = "dsh", version, about, long_about = None, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: the interactive terminal UI.
    #[command(flatten)]
    tui: tui_cmd::TuiArgs,
    /// `--profile NAME`: the SDK runtime on stdio.
    #[command(flatten)]
    profile: sdk_cmd::ProfileArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one task headless and print the final answer.
    #[command(alias = "headless")]
    Exec(ExecArgs),
    /// List, search, show or export stored sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Show the composed configuration or the config schemas.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Inspect the sandbox.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// List or revoke the allow-always approval rules of a project.
    #[command(subcommand)]
    Permissions(permissions_cmd::PermissionsCommand),
    /// List the provider routes, the plugin that registers each, and their model catalogs.
    Models {
        #[command(flatten)]
        compose: ComposeArgs,
    },
    /// Show what would be loaded for a directory: instruction files, skills, hooks, commands.
    Context(context_cmd::ContextArgs),
    /// Serve the Agent Client Protocol on stdio (editors, acpx).
    Acp(acp_cmd::AcpArgs),
    /// List, add or remove MCP servers.
    #[command(subcommand)]
    Mcp(mcp_cmd::McpCommand),
    /// Serve sessions over HTTP (JSON, Server-Sent Events); `serve token` manages its tokens.
    Serve(serve_cmd::ServeArgs),
    /// `dsh serve` plus the web page at `/`: opens the browser on loopback, else prints a
    /// one-time login link.
    Web(serve_cmd::web::WebArgs),
    /// Sessions, turns, tokens, cache-hit ratio and cost, by day, model or project.
    Stats(stats_cmd::StatsArgs),
    /// Rewind files and/or conversation to before an earlier turn (`--undo` takes it back).
    Rewind(rewind_cmd::RewindArgs),
    /// The workspace checkpoints behind `dsh rewind`: list, gc.
    #[command(subcommand)]
    Checkpoints(rewind_cmd::CheckpointsCommand),
    /// List the background server's sessions (`dsh exec --bg`): waiting for an approval first,
    /// then working; what each is doing now.
    Ps(bg::PsArgs),
    /// Interrupt a background session's turn.
    Stop(bg::StopArgs),
    /// Open the terminal UI on a background session (`--follow`: print its events as text).
    Attach(bg::AttachArgs),
    /// Submit tasks to the work queue on PostgreSQL and see their state and results.
    #[command(subcommand)]
    Tasks(tasks_cmd::TasksCommand),
    /// Claim and run tasks from the work queue on PostgreSQL.
    Worker(tasks_cmd::WorkerArgs),
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Probe the backends: which one is used, what it enforces, why others were skipped.
    Check {
        #[command(flatten)]
        compose: ComposeArgs,
        #[command(flatten)]
        sandbox: sandbox_args::SandboxArgs,
    },
}

/// Reasoning effort.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Effort {
    Off,
    Low,
    High,
    Max,
}

impl From<Effort> for dsh_llm::ReasoningEffort {
    fn from(e: Effort) -> Self {
        match e {
            Effort::Off => dsh_llm::ReasoningEffort::Off,
            Effort::Low => dsh_llm::ReasoningEffort::Low,
            Effort::High => dsh_llm::ReasoningEffort::High,
            Effort::Max => dsh_llm::ReasoningEffort::Max,
        }
    }
}

/// Options shared by commands that compose the harness.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct ComposeArgs {
    /// A composition file applied after `$DSH_HOME/dsh.yaml`.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// A composition file applied last (repeatable, in order).
    #[arg(long, value_name = "FILE")]
    pub(crate) patch: Vec<PathBuf>,
    /// The session store: a `postgres://` URL (the PostgreSQL store, shared by several hosts)
    /// or `jsonl` (the default: JSONL files under $DSH_HOME/sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
    /// The session's working directory when a command has one (`exec --cwd`): the project
    /// whose `.mcp.json` is read (default: the current directory).
    #[arg(skip)]
    pub(crate) project_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// The task; `-` reads it from standard input.
    #[arg(value_name = "PROMPT")]
    pub(crate) prompt: String,
    /// Model id (default: the provider's default model).
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,
    /// Provider route.
    #[arg(long, value_name = "P", default_value = "deepseek-official")]
    pub(crate) provider: String,
    /// Reasoning effort.
    #[arg(long, value_enum)]
    pub(crate) effort: Option<Effort>,
    /// Working directory of the session (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Continue a stored session.
    #[arg(long, value_name = "ID", conflicts_with_all = ["continue_latest", "session"])]
    pub(crate) resume: Option<String>,
    /// Continue the latest session of the working directory.
    #[arg(long = "continue", conflicts_with = "session")]
    pub(crate) continue_latest: bool,
    /// Exact session id: created if new, resumed if it exists.
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Stream committed session events as JSON lines on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Size of the pool of parallel-safe tool calls (1 = serial).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_parallel_tools: Option<u64>,
    /// Once the task is answered, wait up to this long for the session's background work
    /// (jobs, continuable subagents) and the turns it wakes; what still runs then is stopped
    /// (settled with cause `teardown`) and named on stderr. 0: do not wait.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub(crate) wait_background: u64,
    /// Print the session's token usage and cost, its subagents' included, on stderr at the end.
    #[arg(long)]
    pub(crate) usage: bool,
    /// Run the task on a `dsh serve` at this URL (`http://127.0.0.1:7433`); its token, if it
    /// needs one, comes from `DSH_SERVER_TOKEN`. The composition is the server's (`--config`,
    /// `--patch`, `--network`, `--plan`, `--max-parallel-tools` are refused); `--sandbox` and
    /// `--ask-for-approval` are the session's own; `--continue` picks among its sessions.
    #[arg(long, value_name = "URL")]
    pub(crate) server: Option<String>,
    /// Run the task in the background: the per-user server (a `dsh serve` on
    /// `$DSH_HOME/run/serve.sock`, started if none runs, gone after `$DSH_BG_IDLE_EXIT`
    /// (default 5m) without clients or work) runs it; its session id is printed at once. See
    /// `dsh ps`, `dsh attach ID`, `dsh stop ID`. The composition (plugins, network, plan mode)
    /// is the server's: the flags that change it are refused here; `--sandbox` and
    /// `--ask-for-approval` are the session's own (pinned in its log, refused by the server
    /// when it cannot enforce them).
    #[arg(long, conflicts_with_all = ["server", "continue_latest", "json", "usage", "max_parallel_tools", "config", "patch", "network", "plan"])]
    pub(crate) bg: bool,
    #[command(flatten)]
    pub(crate) compose: ComposeArgs,
    #[command(flatten)]
    pub(crate) sandbox: sandbox_args::SandboxArgs,
    #[command(flatten)]
    pub(crate) plan: plan_args::PlanArgs,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// Stored sessions, newest first (children under their parent).
    List(sessions_cmd::ListArgs),
    /// Search the text of every session: prompts, replies, tool calls and results.
    Search(sessions_cmd::SearchArgs),
    /// A readable transcript of a session.
    Show(sessions_cmd::ShowArgs),
    /// The raw log of a session (plain JSONL), to stdout, a file or directory, or another
    /// store (`--to postgres://…`).
    Export(store_cmd::ExportArgs),
    /// Store plain JSONL session logs (as `export` writes them) in the JSONL store or, with
    /// `--store URL`, a PostgreSQL store.
    Import(store_cmd::ImportArgs),
    /// Make a refused (corrupt) log resumable without destroying anything: keep the valid
    /// prefix and move the rest, byte for byte, to a side file next to the log.
    Repair {
        /// Session id.
        id: String,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Delete stored sessions: their logs and catalog rows (asks first unless --yes; a live
    /// session is refused).
    Delete(sessions_delete::DeleteArgs),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// The composed tree with the layer each row came from.
    Dump(ComposeArgs),
    /// The JSON Schema of every plugin's config.
    Schema,
}

/// A failure with the exit status it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl Failure {
    /// A usage or configuration error (exit 2).
    pub(crate) fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }

    /// A run that did not complete (exit 1).
    pub(crate) fn run(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 1,
            error: error.into(),
        }
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("DSH_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::run(anyhow::anyhow!("cannot start the async runtime: {e}")))
}

fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        None if cli.profile.profile.is_some() => sdk_cmd::main(cli.profile, cli.tui.compose),
        None => {
            use std::io::IsTerminal;
            if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
                return runtime()?.block_on(tui_cmd::run(cli.tui));
            }
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            Ok(2)
        }
        Some(Command::Exec(args)) => {
            init_logging();
            runtime()?.block_on(exec::run(args))
        }
        Some(Command::Sessions(cmd)) => {
            init_logging();
            runtime()?.block_on(async move {
                match cmd {
                    SessionsCommand::List(args) => sessions_cmd::list(args).await,
                    SessionsCommand::Search(args) => sessions_cmd::search(args).await,
                    SessionsCommand::Show(args) => sessions_cmd::show(args).await,
                    SessionsCommand::Export(args) if args.store.is_none() && args.to.is_none() => {
                        sessions_cmd::export(&args.id).await
                    }
                    SessionsCommand::Export(args) => store_cmd::export(args).await,
                    SessionsCommand::Import(args) => store_cmd::import(args).await,
                    SessionsCommand::Repair { id, yes } => sessions_cmd::repair(&id, yes).await,
                    SessionsCommand::Delete(args) => sessions_delete::delete(args).await,
                }
            })
        }
        Some(Command::Rewind(args)) => {
            init_logging();
            runtime()?.block_on(rewind_cmd::rewind(args))
        }
        Some(Command::Checkpoints(cmd)) => {
            init_logging();
            runtime()?.block_on(rewind_cmd::checkpoints(cmd))
        }
        Some(Command::Config(cmd)) => match cmd {
            ConfigCommand::Dump(args) => config_cmd::dump(&args),
            ConfigCommand::Schema => config_cmd::schema(),
        },
        Some(Command::Sandbox(SandboxCommand::Check { compose, sandbox })) => {
            sandbox_cmd::check(&compose, &sandbox)
        }
        Some(Command::Permissions(cmd)) => permissions_cmd::run(cmd),
        Some(Command::Models { compose }) => {
            init_logging();
            runtime()?.block_on(providers::list(&compose))
        }
        Some(Command::Context(args)) => context_cmd::run(&args),
        Some(Command::Acp(args)) => acp_cmd::main(args),
        Some(Command::Mcp(cmd)) => {
            init_logging();
            mcp_cmd::run(cmd)
        }
        Some(Command::Serve(args)) => {
            init_logging();
            runtime()?.block_on(serve_cmd::run(args))
        }
        Some(Command::Web(args)) => {
            init_logging();
            runtime()?.block_on(serve_cmd::web::run(args))
        }
        Some(Command::Stats(args)) => {
            init_logging();
            runtime()?.block_on(stats_cmd::run(args))
        }
        Some(Command::Ps(args)) => {
            init_logging();
            runtime()?.block_on(bg::ps::run(args.json, args.all))
        }
        Some(Command::Stop(args)) => {
            init_logging();
            runtime()?.block_on(bg::stop(args))
        }
        Some(Command::Attach(args)) => {
            init_logging();
            runtime()?.block_on(bg::attach(args))
        }
        Some(Command::Tasks(cmd)) => {
            init_logging();
            runtime()?.block_on(tasks_cmd::run(cmd))
        }
        Some(Command::Worker(args)) => {
            init_logging();
            runtime()?.block_on(tasks_cmd::worker(args))
        }
    }
}

/// Two malloc arenas for the whole process (glibc), one per log-parsing thread. A loaded log is
/// built by the parse threads and kept by the main thread; with glibc's default of an arena per
/// thread (up to 8 per core), the memory the short-lived threads freed stays mapped in their own
/// arenas (~1.6 MB more peak RSS on a 10k-event resume), while a single arena makes the two
/// parse threads wait on its lock (3× the CPU time of the load on 2 cores).
///
/// And a fixed mmap threshold of 1 MiB: a megabyte buffer (tool-call arguments, a request
/// body, a large result) gets its own mapping, grows by `mremap` and goes back to the system
/// when freed. glibc's default threshold rises to the size of each mapped block freed, after
/// which such buffers grow by copying inside the arena and leave their old copies resident: a
/// 5 MB `write` cost 18–22 MB of peak RSS beyond a fresh session, 12–13 MB with this.
/// Called first in `main`, before any thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn tune_allocator() {
    // SAFETY: `mallopt` only sets an allocator parameter; no other thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

fn main() -> ExitCode {
    tune_allocator();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = sandbox_cmd::landlock_run_if_asked(&args) {
        return ExitCode::from(code);
    }
    if let Some(code) = sandbox_cmd::serve_if_asked(&args) {
        return ExitCode::from(code);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(Failure { code, error }) => {
            // Not `eprintln!`: it panics when stderr is gone (a terminal hung up), and the
            // exit code is all that is left to say then.
            let _ = writeln!(std::io::stderr(), "dsh: {error:#}");
            ExitCode::from(code)
        }
    }
}
