//! The `dsh` command.

use std::process::ExitCode;

use clap::Parser;

/// dsh — the DeepSeek Harness.
#[derive(Debug, Parser)]
#[command(
    name = "dsh",
    version,
    about = "dsh — the DeepSeek Harness: a coding agent on DeepSeek models"
)]
struct Cli {}

fn main() -> ExitCode {
    match Cli::try_parse() {
        Ok(Cli {}) => {
            // Subcommands arrive with the `dsh` command issue; until then there is nothing to run.
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            ExitCode::SUCCESS
        }
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            ExitCode::from(code)
        }
    }
}
