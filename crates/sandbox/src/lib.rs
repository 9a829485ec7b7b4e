//! `dsh-sandbox`: the sandbox seam (`docs/architecture.md` §2, round 2).
//!
//! The vocabulary every confined effect shares: [`SandboxMode`] (`read-only`,
//! `workspace-write`, `danger-full-access`), [`NetworkAccess`], the per-call
//! [`SandboxPolicy`] (mode, network, realpath'd writable roots), its typed errors
//! ([`SandboxError`] with the codes `FS_SANDBOX_DENIED` and `SANDBOX_UNAVAILABLE`), the
//! [`fence`] module (a write that re-checks the real directory it writes into, by file
//! descriptor), and the [`Sandbox`] service that confines a command line with whichever backend
//! the host supports (the Linux ones are in `dsh-sandbox-local`).
//!
//! Consumers (the file tools, the bash tool, later MCP stdio servers) depend on this crate only.

pub mod error;
pub mod events;
pub mod fence;
pub mod mode;
pub mod policy;
pub mod service;

pub use error::{FS_SANDBOX_DENIED, SANDBOX_UNAVAILABLE, SandboxError};
pub use events::{SOURCE_DELEGATION, SOURCE_SESSION, SandboxModeEvent};
pub use mode::{NetworkAccess, ParseModeError, SandboxMode};
pub use policy::SandboxPolicy;
pub use service::{
    BackendReport, Confined, Enforcement, Sandbox, SandboxReport, escalation_properties,
    escalation_properties_plain, runtime_context_text,
};
