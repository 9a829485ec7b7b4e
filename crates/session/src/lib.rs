//! `dsh-session`: the session log of dsh — the single source of truth of the harness.
//!
//! - [`Event`] / [`NewEvent`]: the immutable, shared envelope (format §3) and what callers append.
//! - [`SessionLog`]: admission (format §4), the incremental surface and `derive_messages()`
//!   (§8), crash repair (§15) and fork seeds (§12).
//! - [`EventKind`] (the 63 known types plus plugin types), [`CoreEvent`] and [`data`]: typed
//!   payloads of the core events, decoded once per event and kept beside its exact JSON;
//!   [`PluginEvent`]: a plugin's own typed event; [`feature`]: the shared feature events the
//!   original 0.2.1 writes (jobs, working directory, permission knobs, titles); [`wire`]: the closed sets as enums;
//!   [`stream`]: embedded stream records.
//! - [`codec`]: reading stored bytes (header, torn tails, version refusal) and the v3→v4
//!   conversion ([`migrate`]).
//!
//! The normative format is `docs/session-format.md`.

pub mod codec;
pub mod data;
pub mod error;
pub mod event;
pub mod feature;
pub mod forked;
pub mod header;
pub mod ids;
pub mod json;
pub mod log;
pub mod migrate;
pub mod packed;
pub mod persist;
pub mod plugin;
pub mod seqs;
pub mod service;
pub mod session;
pub mod stream;
pub mod surface;
pub mod validate;
pub mod vocab;
pub mod wire;

pub use data::{CoreEvent, EventData, PluginEvent};
pub use error::{
    AppendError, EventError, ForkError, LogError, Rejection, SeqsError, SessionError,
    SurfaceOpError,
};
pub use event::{Event, NewData, NewEvent, SurfaceOp};
pub use header::SessionHeader;
pub use log::{CloseCause, Inbox, PendingCall, SessionLog, TurnTracker, UnknownValue, now_ms};
pub use persist::{SessionPersistence, SessionSummary};
pub use plugin::{KernelSink, SessionEvent, SessionFlush, SessionsPlugin};
pub use service::{CreateOptions, ForkOptions, SessionStore, Sessions, new_session_id};
pub use session::{DirectSink, NullSink, Session, SessionSink};
pub use surface::{Node, Surface};
pub use vocab::EventKind;
pub use wire::Target;
