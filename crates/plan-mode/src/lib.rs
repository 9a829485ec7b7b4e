//! `dsh-plan-mode`: a mode in which only read-only tools run, until the agent calls
//! `exit_plan_mode` with its plan and the plan is accepted.
//!
//! - [`PlanMode`] (kernel service `plan-mode`): per session, on or off; front ends toggle it
//!   (the TUI's `/plan` and Shift+Tab, `dsh exec --plan`). Every change is logged as
//!   `plan/mode {active}` ([`dsh_session::feature::PlanModeChange`], latest wins, restored on
//!   resume) and, when the user made it, told to the model in a one-line `user/message`
//!   (source `plan-mode`) appended before the next request (never a rewrite of the prompt).
//! - A deny-only guard refuses, while the mode is on, every tool that is not read-only
//!   ([`PlanModeConfig::read_only_tools`]) and every `bash` command that is not judged read-only
//!   ([`readonly::bash_is_read_only`]), with a reason naming the way out.
//! - `exit_plan_mode {plan}` submits the plan; the [`PlanAccept`] policy decides: `ask` the
//!   user through the approval seam (`approval-answerer`: the TUI's prompt, ACP's permission
//!   request), `accept` it at once, or `stop` (the plan is recorded for review and the mode
//!   stays on).

mod command;
mod plugin;
pub mod readonly;
mod tool;

pub use command::PlanCommandPlugin;
pub use dsh_plan_mode_api::{PlanAccept, PlanMode, PlanModeError, SOURCE_KIND};
pub use plugin::{PlanModeConfig, PlanModePlugin};
pub use tool::{ExitPlanModeTool, display};
