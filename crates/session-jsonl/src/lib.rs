//! `dsh-session-jsonl`: the JSONL persistence backend of dsh sessions, the embedded default.
//!
//! [`JsonlStore`] implements [`dsh_session::SessionPersistence`] with the layout, naming, lock
//! and publishing rules of `session-format.md` §1: one directory per session under
//! `--<projectKey(cwd)>--/`, `session.v4.jsonl` (one JSON object per line), an exclusive
//! `flock` on `session.lock`, nothing on disk before the first flush, fsync at every flush.

pub mod error;
pub mod naming;
pub mod plugin;
pub mod prefetch;
pub mod repair;
mod slots;
pub mod spill;
pub mod store;
pub mod zstd;

pub use error::{StoreError, ZstdError};
pub use plugin::{JsonlConfig, JsonlPlugin, default_root};
pub use repair::{RepairCause, RepairReport};
pub use store::{Compression, DEFAULT_SPILL_CAP_BYTES, JsonlStore};
