//! `dsh-session-postgres`: the PostgreSQL persistence backend of dsh sessions, a store that
//! several hosts share (issue 39).
//!
//! [`PgStore`] implements [`dsh_session::SessionPersistence`]: sessions are rows of
//! `dsh_sessions` (the header line verbatim, listing facts, the write lease: owner, epoch,
//! expiry), events are rows of `dsh_events` keyed by `(session_id, seq)` holding each event's
//! stored line verbatim, so a session exported to JSONL is byte-identical to the same session
//! written by the JSONL store. One writer per session across hosts: a writer takes a lease,
//! every commit batch checks it in the same statement, and a writer that lost it is refused
//! with [`PgStoreError::LeaseLost`]. Readers take no lease.

pub mod catalog;
mod conn;
pub mod error;
pub mod forward;
pub mod plugin;
mod search;
mod sql;
pub mod store;

pub use catalog::PgCatalog;
pub use error::{LeaseLoss, PgStoreError};
pub use forward::{
    ForwardError, ForwardOptions, Forwarder, PgHandle, Projections, StoredProjection,
};
pub use plugin::{PgConfig, PgPlugin};
pub use store::{DEFAULT_LEASE, Durability, PgOptions, PgStore};
