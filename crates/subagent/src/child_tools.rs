//! Tools only a child has: `report` (continuable children) and `structured_output` (children
//! with an `outputSchema`). Both are registered in the child's scope and survive its tool filter.

use std::sync::Arc;

use dsh_agent::Agents;
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_tools::{Concurrency, Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::texts;

/// Name of the report tool.
pub const REPORT_TOOL: &str = "report";
/// Name of the structured-output tool.
pub const STRUCTURED_OUTPUT_TOOL: &str = "structured_output";

/// `report(output)`: a continuable child tells the agent that started it something now, without
/// ending its turn (the parent sees `Background subagent <id> reported:` + output at its next
/// step; an idle parent is woken).
pub struct ReportTool {
    agents: Arc<dyn Agents>,
    parent_id: String,
    parameters: Value,
}

impl std::fmt::Debug for ReportTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportTool")
            .field("parent_id", &self.parent_id)
            .finish_non_exhaustive()
    }
}

impl ReportTool {
    /// The tool of a child whose direct parent is `parent_id`.
    pub fn new(agents: Arc<dyn Agents>, parent_id: String) -> Self {
        Self {
            agents,
            parent_id,
            parameters: json!({
                "type": "object",
                "properties": {
                    "output": {"type": "string", "description": "What to report: self-contained, it is all the agent that started you sees."}
                },
                "required": ["output"]
            }),
        }
    }
}

impl Tool for ReportTool {
    fn name(&self) -> &str {
        REPORT_TOOL
    }

    fn description(&self) -> &str {
        "Report progress or a result to the agent that started you, now, without ending your \
         turn. Your final message reaches it anyway when your turn ends; use this for what it \
         needs earlier."
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
            let output = match args.get("output").and_then(Value::as_str) {
                Some(s) if !s.trim().is_empty() => s.to_owned(),
                _ => {
                    return Err(ToolError::invalid_args(
                        "invalid output: expected a non-empty string",
                    ));
                }
            };
            let Some(parent) = self.agents.get(&self.parent_id) else {
                return Err(ToolError::failed(texts::REPORT_PARENT_GONE));
            };
            let source = MessageSource::new("subagent-report")
                .with("form", "notice".into())
                .with("senderSessionId", ctx.session_id().into());
            let message = Message::new(
                "",
                Role::User,
                vec![ContentBlock::text(texts::report_notice(
                    ctx.session_id(),
                    &output,
                ))],
                source,
            );
            let id = parent
                .steer(message)
                .map_err(|_| ToolError::failed(texts::REPORT_PARENT_GONE))?;
            Ok(ToolOutput::text(texts::report_accepted(&id)))
        })
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }
}

/// Where a child's `structured_output` value is kept for its run's outcome.
pub type StructuredSlot = Arc<Mutex<Option<Value>>>;

/// `structured_output(<the outputSchema's properties>)`: records the child's answer. The
/// tools pipeline validates the arguments against the schema first, so a value that does not
/// fit is an `INVALID_ARGS` error result with the violations, and the child can try again.
pub struct StructuredOutputTool {
    parameters: Value,
    slot: StructuredSlot,
}

impl std::fmt::Debug for StructuredOutputTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredOutputTool")
            .finish_non_exhaustive()
    }
}

impl StructuredOutputTool {
    /// The tool over `schema` (an object schema), recording into `slot`.
    pub fn new(schema: Value, slot: StructuredSlot) -> Self {
        Self {
            parameters: schema,
            slot,
        }
    }
}

impl Tool for StructuredOutputTool {
    fn name(&self) -> &str {
        STRUCTURED_OUTPUT_TOOL
    }

    fn description(&self) -> &str {
        "Record your final answer as structured data matching this tool's parameters. Call it \
         once your work is done, then end your turn; the agent that started you receives this \
         value as your answer."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        _ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            *self.slot.lock() = Some(args);
            Ok(ToolOutput::text(texts::STRUCTURED_RECORDED))
        })
    }
}
