//! `dsh-sandbox-local`: the Linux backends of the sandbox seam and the `sandbox` plugin.
//!
//! Backends, probed in order by confining `true` (verdict kept for the plugin's lifetime):
//! bubblewrap ([`backend::bwrap_prefix`]: user/PID/IPC namespaces, `--cap-drop ALL`, the root
//! read-only, the writable roots bound read-write, `--unshare-net` when the network is off,
//! `--die-with-parent`, a fresh `/proc` and `/dev`), then Landlock through the
//! [`landlock_run`] launcher (file rules; network denial by Landlock TCP rules where the ABI
//! has them plus a seccomp socket-family filter). With none usable, a restricted mode fails
//! closed: [`dsh_sandbox::SandboxError::Unavailable`].

pub mod backend;
pub mod landlock_run;
pub mod plugin;
pub mod service;
pub mod supervisor;

pub use backend::{Backend, BackendKind};
pub use plugin::{SandboxConfig, SandboxContextPlugin, SandboxPlugin};
pub use service::{LocalSandbox, LocalSandboxOptions};
