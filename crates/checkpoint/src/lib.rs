//! `dsh-checkpoint`: snapshots of the workspace taken around each turn, and rewind.
//!
//! - [`Store`]: a private content-addressed store per project under
//!   `$DSH_HOME/checkpoints/<project>/` (SHA-256 blobs, one tree object per directory, a stat
//!   cache so an unchanged tree is not read again). The user's `.git` is never read or written.
//! - [`CheckpointPlugin`] (`checkpoint`): takes a snapshot before a turn's first tool call and
//!   at the turn's end, and records both in the session log ([`CheckpointTaken`]).
//! - [`rewind`]: plans and applies the restore of the files dsh changed since a turn began,
//!   refusing paths changed outside dsh unless forced, after a backup snapshot; every rewind is
//!   recorded and can itself be undone.
//! - [`RewindCommandPlugin`] (`rewind-command`): `/rewind` in the command registry.

mod command;
pub mod diff;
mod error;
pub mod events;
mod id;
mod index;
pub mod ops;
mod plugin;
pub mod preview;
pub mod rewind;
mod store;
pub mod tree;
mod walk;

pub use command::RewindCommandPlugin;
pub use diff::{Change, ChangeKind, diff};
pub use error::{CheckpointError, Result};
pub use events::{CheckpointTaken, Rewound};
pub use id::ObjectId;
pub use plugin::{CheckpointConfig, CheckpointPlugin, checkpoints_root};
pub use store::{
    CheckpointKind, CheckpointRecord, DEFAULT_MAX_FILE_BYTES, GcReport, RewindRecord, Snapshot,
    Store, project_dir,
};
pub use tree::{Manifest, Node};
