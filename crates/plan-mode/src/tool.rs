//! `exit_plan_mode {plan}`: submit the plan; leave plan mode when it is accepted.

use std::sync::Arc;

use dsh_agent::{Agent, Agents};
use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};
use dsh_kernel::Ctx;
use dsh_tools::{
    DisplayInput, OutputSummary, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode,
    ToolKind, ToolOutput,
};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{PlanAccept, PlanMode};

/// `exit_plan_mode` was called outside plan mode.
pub const NOT_IN_PLAN_MODE: ToolErrorCode = ToolErrorCode::tool_defined("NOT_IN_PLAN_MODE");

const DESCRIPTION: &str = "In plan mode: submit your plan (markdown) for approval; once approved, \
carry it out.";

const ACCEPTED: &str = "The user accepted the plan. Plan mode is off: carry the plan out now.";
const RECORDED: &str = "The plan was recorded for the user to review. Plan mode stays on: end \
your turn now without making changes.";

/// The `exit_plan_mode` tool.
pub struct ExitPlanModeTool {
    ctx: Ctx,
    parameters: Value,
}

impl std::fmt::Debug for ExitPlanModeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExitPlanModeTool").finish_non_exhaustive()
    }
}

impl ExitPlanModeTool {
    /// The tool; it reaches the `plan-mode`, `agents` and `approval-answerer` services of `ctx`.
    pub fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            parameters: json!({
                "type": "object",
                "properties": {
                    "plan": {"type": "string"}
                },
                "required": ["plan"]
            }),
        }
    }

    fn leave(
        &self,
        plan_mode: &Arc<dyn PlanMode>,
        agent: &Arc<dyn Agent>,
    ) -> Result<ToolOutput, ToolError> {
        plan_mode
            .set(agent, false, false)
            .map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(ToolOutput::text(ACCEPTED).with_meta(json!({"accepted": true})))
    }
}

/// The arguments of `exit_plan_mode` (the schema checked their shape; the display reads
/// them leniently).
#[derive(Default, Deserialize)]
struct PlanArgs {
    #[serde(default)]
    plan: Option<String>,
}

/// The display of an `exit_plan_mode` call: the plan, and once it ended whether it was
/// accepted (the result's meta) with the first line of the result.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Plan, NAME);
    d.plan = call.parse::<PlanArgs>().and_then(|s| s.plan);
    let Some(r) = call.succeeded() else {
        return d.with_subject("plan submitted");
    };
    let accepted = call.meta_field("accepted").and_then(Value::as_bool) == Some(true);
    d = d.with_subject(if accepted {
        "plan accepted · plan mode is off"
    } else {
        "plan not accepted · plan mode stays on"
    });
    d.with_output(OutputSummary {
        text: r.text.lines().next().unwrap_or("").to_owned(),
        truncated: r.text.lines().nth(1).is_some(),
        ..Default::default()
    })
}

/// The tool's name.
pub const NAME: &str = "exit_plan_mode";

impl Tool for ExitPlanModeTool {
    fn name(&self) -> &str {
        NAME
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let parsed = PlanArgs::deserialize(&args).unwrap_or_default();
            let plan = parsed.plan.as_deref().unwrap_or("").trim();
            if plan.is_empty() {
                return Err(ToolError::invalid_args("`plan` must be a non-empty string"));
            }
            let plan_mode = self
                .ctx
                .get::<dyn PlanMode>()
                .ok_or_else(|| ToolError::failed("plan mode is not available"))?;
            if !plan_mode.is_active(ctx.session_id()) {
                return Err(ToolError::new(
                    NOT_IN_PLAN_MODE,
                    "not in plan mode: there is no plan to submit; go ahead with the task",
                ));
            }
            let agent = self
                .ctx
                .get::<dyn Agents>()
                .and_then(|a| a.get(ctx.session_id()))
                .ok_or_else(|| {
                    ToolError::failed("exit_plan_mode requires an owning agent session")
                })?;
            let answerer = self.ctx.get::<dyn ApprovalAnswerer>();
            match (plan_mode.accept_policy(), answerer) {
                (PlanAccept::Accept, _) => self.leave(&plan_mode, &agent),
                (PlanAccept::Stop, _) | (PlanAccept::Ask, None) => {
                    Ok(ToolOutput::text(RECORDED).with_meta(json!({"accepted": false})))
                }
                (PlanAccept::Ask, Some(answerer)) => {
                    let request = ApprovalRequest {
                        id: dsh_plan_mode_api::review_request_id(ctx.call_id()),
                        session_id: ctx.session_id().to_owned(),
                        call_id: ctx.call_id().to_owned(),
                        tool_name: "exit_plan_mode".into(),
                        arguments: args.clone(),
                        reason: format!("Accept this plan and leave plan mode?\n\n{plan}"),
                        escalation: None,
                    };
                    let answer = tokio_select(&ctx, answerer.answer(&request)).await;
                    match answer {
                        Some(ApprovalAnswer::AllowOnce | ApprovalAnswer::AllowAlways) => {
                            self.leave(&plan_mode, &agent)
                        }
                        Some(ApprovalAnswer::Deny { reason }) => {
                            let why = reason
                                .filter(|r| !r.trim().is_empty())
                                .map(|r| format!(" Their feedback: {r}"))
                                .unwrap_or_default();
                            Ok(ToolOutput::text(format!(
                                "The user rejected the plan.{why} Plan mode stays on: revise the \
                                 plan and submit it again, or end your turn."
                            ))
                            .with_meta(json!({"accepted": false})))
                        }
                        Some(ApprovalAnswer::Cancelled) | None => Err(ToolError::aborted()),
                    }
                }
            }
        })
    }
}

/// The answer, or `None` when the call is cancelled first.
async fn tokio_select<F: std::future::Future<Output = ApprovalAnswer>>(
    ctx: &ToolContext,
    answer: F,
) -> Option<ApprovalAnswer> {
    let cancel = ctx.cancel_token().clone();
    futures::pin_mut!(answer);
    let cancelled = cancel.cancelled();
    futures::pin_mut!(cancelled);
    match futures::future::select(answer, cancelled).await {
        futures::future::Either::Left((a, _)) => Some(a),
        futures::future::Either::Right(_) => None,
    }
}
