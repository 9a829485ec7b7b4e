//! `dsh permissions`: the allow-always rules of a project, listed and revoked.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Subcommand;
use dsh_approval::RuleStore;

use crate::Failure;
use crate::config_cmd::write_stdout;
use crate::home;

/// `dsh permissions` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum PermissionsCommand {
    /// The rules of the project (default: the current directory), numbered.
    List {
        /// The project directory.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Every project's rules.
        #[arg(long)]
        all: bool,
    },
    /// Remove rule number N of the project.
    Revoke {
        /// The rule's number, as listed.
        number: usize,
        /// The project directory.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
}

/// The rules file the `approval` plugin uses: `$DSH_HOME/permissions.json`.
pub(crate) fn store() -> RuleStore {
    RuleStore::in_home(&home::dsh_home())
}

fn project(cwd: Option<PathBuf>) -> Result<PathBuf, Failure> {
    match cwd {
        Some(d) => Ok(d),
        None => std::env::current_dir()
            .map_err(|e| Failure::usage(anyhow!("cannot read the current directory: {e}"))),
    }
}

/// Runs `dsh permissions ...`.
pub(crate) fn run(cmd: PermissionsCommand) -> Result<u8, Failure> {
    let store = store();
    match cmd {
        PermissionsCommand::List { cwd, all } => {
            let mut out = String::new();
            if all {
                for (project, rules) in store.projects().map_err(Failure::run)? {
                    out.push_str(&format!("{project}\n"));
                    for (i, r) in rules.iter().enumerate() {
                        out.push_str(&format!("  {}. {r}\n", i + 1));
                    }
                }
            } else {
                let project = project(cwd)?;
                let rules = store.rules(&project).map_err(Failure::run)?;
                for (i, r) in rules.iter().enumerate() {
                    out.push_str(&format!("{}. {r}\n", i + 1));
                }
            }
            if out.is_empty() {
                out.push_str("no allow-always rules\n");
            }
            write_stdout(&out)
        }
        PermissionsCommand::Revoke { number, cwd } => {
            let project = project(cwd)?;
            let rule = store.revoke(&project, number).map_err(|e| match e {
                dsh_approval::rules::RulesError::NoSuchRule(_) => Failure::usage(e),
                other => Failure::run(other),
            })?;
            write_stdout(&format!("revoked: {rule}\n"))
        }
    }
}
