//! `dsh-goal`: goals, as the original harness has them.
//!
//! A goal is a persistent objective that keeps a session working in automatic continuation
//! rounds until it is complete, blocked, paused or out of rounds.
//!
//! - Tools `create_goal`, `get_goal`, `update_goal` ([`GoalTool`]): the original's arguments,
//!   results (`{"goal":{…},"activation":"armed"}`) and authority rules (creating, editing,
//!   pausing and resuming need a human prompt in the open turn of a top-level agent; complete and
//!   blocked also work in the goal's own round, blocked only from round 3).
//! - Every mutation is one `goal/change` event ([`dsh_goal_api::GoalChange`]), byte-compatible
//!   with the original's; rounds are `user/message`s with source `goal`.
//! - The round driver ([`driver`]) queues the next round when a turn ends with an active, armed
//!   goal; an interrupted round pauses the goal; the round limit blocks it (`round-limit`).
//! - `/goal` ([`GoalCommandPlugin`]) in the command registry.
//! - The goal's runtime-context section ([`GoalContextPlugin`]): the objective and the goal-tool
//!   policy while a goal is active or paused, appended as context (the prompt stays as it is).

mod command;
mod context;
pub mod driver;
mod plugin;
mod service;
pub mod texts;
mod tools;

pub use command::{GoalCommandPlugin, render, run as run_goal_command};
pub use context::{GoalContextPlugin, SECTION as CONTEXT_SECTION};
pub use plugin::{ConfigError, GoalConfig, GoalPlugin};
pub use service::{Activation, GoalError, GoalView, Goals};
pub use tools::{CREATE, GET, GoalTool, GoalToolKind, UPDATE, display, goal_value};
