//! The model-facing `bash` tool.
//!
//! A consumer of the shell seam: it depends on `dsh-shell` (the `ShellExecutor` service and its
//! vocabulary) and never on an implementation. [`args`] holds the argument schema and the
//! checks beyond it; [`format`] renders a [`dsh_shell::ShellOutcome`] as the reference result
//! text (stdout, `[stderr]` section, truncation notes, markers, `(no output)`).

pub mod args;
pub mod format;

pub use args::BashArgs;
pub use format::format_result;
