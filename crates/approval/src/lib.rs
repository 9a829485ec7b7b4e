//! `dsh-approval`: who decides what the agent may do beyond its sandbox.
//!
//! - The **seam**: [`ApprovalAnswerer`] (kernel service `approval-answerer`), implemented by
//!   whichever front end is attached (the TUI's inline prompt, the SDK's and ACP's permission
//!   requests; [`ScriptedAnswererPlugin`] for tests and automation). It answers an
//!   [`ApprovalRequest`] with an [`ApprovalAnswer`]: allow once, allow always, deny with a
//!   reason the model sees, or cancelled. No answerer mounted → the call is denied.
//! - The **policies** ([`ApprovalPolicy`]): `untrusted`, `on-request`, `on-failure`, `never`,
//!   enforced by [`ApprovalPlugin`] on the tools pipeline (`tools/pre-execute`, and
//!   `tools/execute` for `on-failure`).
//! - **Allow-always rules** ([`rules`]) per project under `$DSH_HOME/permissions.json`:
//!   command prefixes judged per simple command through a real shell parser ([`command`]),
//!   file tools by path glob.
//! - **Audit**: every question is logged as `approval/asked` and its answer as
//!   `approval/decided` ([`events`]).

pub mod plugin;
pub mod policy;
pub mod rules;
pub mod scripted;

/// The seam's vocabulary, owned by `dsh-approval-api` (re-exported for the composition root).
pub use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest, answer, events};
/// The command-line splitter, owned by `dsh-shell-parse`.
pub use dsh_shell_parse as command;
pub use plugin::{ApprovalConfig, ApprovalPlugin};
pub use policy::ApprovalPolicy;
pub use rules::{Rule, RuleMatcher, RuleStore};
pub use scripted::{ScriptedAnswererConfig, ScriptedAnswererPlugin};
