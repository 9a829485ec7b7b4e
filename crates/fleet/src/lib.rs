//! `dsh-fleet`: the work queue of dsh on PostgreSQL (issue 39, item 3).
//!
//! Tasks are rows of `dsh_tasks` (created when missing). `dsh tasks submit` inserts them
//! ([`Fleet::submit`], all or nothing); a worker claims one at a time ([`Fleet::claim`]: one
//! statement, `FOR UPDATE SKIP LOCKED`, a visibility timeout), renews the claim while it runs
//! ([`Fleet::renew`]) and records the result ([`Fleet::finish`]) or gives the task back
//! ([`Fleet::release`]). Every write after the claim is fenced by the claim's attempt number:
//! a worker whose claim expired and was taken by another writes nothing.

mod error;
mod queue;
mod spec;
mod sql;

pub use dsh_protocol::Effort;
pub use error::FleetError;
pub use queue::{Claim, Fleet, Outcome, TaskResult, TaskRow, TaskState, Usage};
pub use spec::{Limits, SpecError, TaskSpec, parse_jsonl};
