//! `dsh-tool-fs`: the file tools `read`, `write`, `edit`, `glob` and `grep`, and the
//! read-before-write policy.
//!
//! [`FsToolsPlugin`] registers the tools on the `Tools` service; [`ReadBeforeWritePlugin`]
//! adds the observation policy (a guard plus a `tools/result` listener). Relative paths
//! resolve against the session's working directory ([`dsh_tools::ToolContext::cwd`]); results
//! show absolute paths (glob and grep list paths relative to the working directory when
//! inside it). Texts and limits follow `docs/behaviours.md` §6 and §19. A front end can route a
//! session's `read`, `write` and `edit` through another [`FileBackend`] (an editor's buffers)
//! with the [`FileBackends`] service; `glob` and `grep` stay on the local file system.

pub mod args;
pub mod backend;
pub mod display;
pub mod edit;
mod fenced;
pub mod glob;
pub mod grep;
pub mod paths;
pub mod plugin;
pub mod policy;
pub mod read;
pub mod write;

pub use backend::{BackendError, BackendRegistration, FileBackend, FileBackends};
pub use paths::codes;
pub use plugin::{FsTool, FsToolsPlugin};
pub use policy::{Observations, ReadBeforeWritePlugin};
