//! The local provider of the dsh shell service.
//!
//! [`LocalShell`] implements [`dsh_shell::ShellExecutor`] with local processes: each run is
//! `bash --noprofile --norc -c <command>` in its own process group, with stdin from
//! `/dev/null`, a scrubbed environment ([`env::EnvPolicy`]), a deadline and cancellation that
//! terminate the whole group (SIGTERM, grace, SIGKILL), per-stream output caps that keep the
//! tail, and private spill files holding the full output.
//!
//! [`LocalShellPlugin`] (plugin name `bash-local`) provides it as the kernel's `shell` service.
//!
//! Consumers never name this crate: they look up `dyn ShellExecutor`. Only the composition
//! root (`dsh-cli`) and tests depend on it.

mod capture;
pub mod env;
mod executor;
mod group;
mod plugin;
mod program;
mod warm;
mod warm_run;

pub use executor::{LocalShell, LocalShellOptions};
pub use plugin::{LocalShellConfig, LocalShellPlugin};
