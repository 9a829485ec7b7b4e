//! `--plan[=POLICY]`: start the session in plan mode (only read-only tools run until the
//! agent's `exit_plan_mode` plan is accepted), with what happens to the plan.

use clap::{Args, ValueEnum};
use dsh_kernel::Composition;
use serde_json::Value;

/// What `exit_plan_mode` does with the plan in a `--plan` run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PlanPolicy {
    /// Accept it: plan mode ends and the agent carries the plan out (the default).
    Accept,
    /// Stop after planning: the plan is the answer, plan mode stays on.
    Stop,
    /// Ask whoever answers approvals (e.g. `approval-scripted`); nobody → as `stop`.
    Ask,
}

impl PlanPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PlanPolicy::Accept => "accept",
            PlanPolicy::Stop => "stop",
            PlanPolicy::Ask => "ask",
        }
    }
}

/// The plan-mode flag of `dsh exec`.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct PlanArgs {
    /// Start in plan mode: only read-only tools run until the agent's plan is accepted
    /// (`--plan` or `--plan=POLICY`: accept, the default: go on with it; stop: end with the plan; ask: ask the
    /// approval answerer).
    #[arg(long, value_enum, value_name = "POLICY", num_args = 0..=1, require_equals = true, default_missing_value = "accept")]
    pub(crate) plan: Option<PlanPolicy>,
}

impl PlanArgs {
    /// Sets `startActive` and `accept` on the `plan-mode` rows.
    pub(crate) fn apply(&self, c: &mut Composition) {
        let Some(policy) = self.plan else {
            return;
        };
        for r in c.rows.iter_mut().filter(|r| r.row.name == "plan-mode") {
            if !r.row.config.is_object() {
                r.row.config = Value::Object(Default::default());
            }
            r.row.config["startActive"] = Value::Bool(true);
            r.row.config["accept"] = Value::from(policy.as_str());
        }
    }
}
