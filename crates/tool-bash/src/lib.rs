//! The model-facing `bash` tool.
//!
//! A consumer of the shell seam: it depends on `dsh-shell` (the `shell` service and its
//! vocabulary) and `dsh-tools` (the `tools` service), never on an implementation.
//! [`BashToolPlugin`] (plugin name `tool-bash`) registers [`BashTool`] with the `tools`
//! service and runs its commands on whichever `shell` provider is mounted (`bash-local`
//! today). [`args`] holds the argument schema and the checks beyond it; [`format`] renders a
//! [`dsh_shell::ShellOutcome`] as the reference result text.

pub mod args;
pub mod display;
pub mod format;
mod tool;

pub use args::{BashArgs, BashArgsError};
pub use display::display;
pub use format::format_result;
pub use tool::{BashTool, BashToolPlugin, DESCRIPTION, NAME, SPAWN_FAILED};
