//! `McpTool`: one MCP server tool as a dsh tool.

use std::sync::Arc;
use std::time::Duration;

use dsh_tools::{
    DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode, ToolKind, ToolOutput,
};
use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, Tool as RawTool};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::images::{ImageSink, SinkRefusal};
use crate::render::{is_error, render_with};
use crate::server::{REFRESH_WAIT, Server, Status};

/// Code of a call to a server that is not connected (starting, reconnecting, given up).
pub const SERVER_UNAVAILABLE: ToolErrorCode = ToolErrorCode::tool_defined("MCP_SERVER_UNAVAILABLE");
/// Code of a call the server or its transport failed (closed mid-call, protocol error,
/// garbage instead of a result).
pub const CALL_FAILED: ToolErrorCode = ToolErrorCode::tool_defined("MCP_CALL_FAILED");

/// A tool of an MCP server, registered as `mcp__<server>__<tool>`.
pub struct McpTool {
    server: Arc<Server>,
    name: String,
    raw: String,
    description: String,
    schema: Value,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The tool `raw` of `server`, known to the model as `name`. Description (`""` when
    /// absent) and input schema verbatim.
    pub fn new(server: Arc<Server>, name: String, raw: &RawTool) -> Self {
        Self {
            server,
            name,
            raw: raw.name.to_string(),
            description: raw.description.as_deref().unwrap_or("").to_owned(),
            schema: Value::Object((*raw.input_schema).clone()),
        }
    }

    /// The tool's name on the wire.
    pub fn raw_name(&self) -> &str {
        &self.raw
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let server = self.server.name().to_owned();
        let peer = self.server.peer().map_err(|(status, last)| {
            ToolError::new(
                SERVER_UNAVAILABLE,
                unavailable_message(&server, &status, last),
            )
        })?;
        let Value::Object(arguments) = args else {
            return Err(ToolError::invalid_args(
                "invalid arguments: arguments must be a JSON object",
            ));
        };
        let params = CallToolRequestParams::new(self.raw.clone()).with_arguments(arguments);
        let timeout = self.server.config().call_timeout();
        // Dropping the call future before its answer sends `notifications/cancelled`.
        let outcome = tokio::select! {
            r = peer.call_tool(params) => r,
            _ = tokio::time::sleep(timeout) => {
                tracing::warn!(server = %server, tool = %self.raw, "MCP call timed out: cancelled");
                return Err(ToolError::timeout(timeout.as_millis()));
            }
            _ = ctx.cancel_token().cancelled() => return Err(ToolError::aborted()),
        };
        let result = outcome.map_err(|e| call_error(&server, &self.raw, e))?;
        // A list change announced during the call is registered before its result returns.
        self.server.refresh().settled(REFRESH_WAIT).await;
        let sink = if is_error(&result) {
            ImageSink::refusing(SinkRefusal::CallFailed)
        } else {
            ImageSink::for_call(self.server.ctx(), ctx.session_id())
        };
        let (text, images) = render_with(&self.name, &result, &sink);
        if is_error(&result) {
            return Err(ToolError::failed(text));
        }
        let meta = json!({ "server": server, "tool": self.raw });
        if images.is_empty() {
            return Ok(ToolOutput::text(text).with_meta(meta));
        }
        Ok(ToolOutput::json(json!({ "text": text, "images": images })).with_meta(meta))
    }
}

/// The model-visible text of a call to `server` while it is not connected.
pub(crate) fn unavailable_message(server: &str, status: &Status, last: Option<String>) -> String {
    let why = match status {
        Status::Connecting => "is still starting".to_owned(),
        Status::Reconnecting { attempt, max } => {
            format!("lost its connection and is reconnecting (attempt {attempt} of {max})")
        }
        Status::Failed => "is not available".to_owned(),
        Status::Ready => "has just closed its connection".to_owned(),
    };
    let last = last
        .map(|e| format!(" (last error: {e})"))
        .unwrap_or_default();
    format!("MCP server \"{server}\" {why}{last}; try again later or use another tool")
}

fn call_error(server: &str, tool: &str, e: ServiceError) -> ToolError {
    let message = match &e {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => format!(
            "MCP server \"{server}\" closed the connection during the call to {tool}; it is being \
             restarted, so the tool may work again shortly (the call's effects are unknown)"
        ),
        ServiceError::McpError(err) => {
            format!(
                "MCP server \"{server}\" refused the call to {tool}: {}",
                err.message
            )
        }
        ServiceError::UnexpectedResponse => format!(
            "MCP server \"{server}\" answered the call to {tool} with something that is not a tool result"
        ),
        other => format!("MCP call to {tool} on \"{server}\" failed: {other}"),
    };
    ToolError::new(CALL_FAILED, message)
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.call(ctx, args))
    }

    /// A safety net over the call's own budget (which cancels the call on the server).
    fn timeout(&self) -> Option<Duration> {
        Some(self.server.config().call_timeout() + Duration::from_secs(5))
    }

    fn foreign_schema(&self) -> bool {
        true
    }

    /// Kind `mcp`, titled `server/tool` (the server's own tool name), with the generic
    /// subject (the compact arguments) and head of the result.
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        let mut d = dsh_tools::generic_display(call);
        d.kind = ToolKind::Mcp;
        d.title = format!("{}/{}", self.server.name(), self.raw);
        d
    }

    /// The text, then the images the call stored (an `image` block each).
    fn render(&self, output: &ToolOutput) -> Vec<dsh_llm::ContentBlock> {
        render_output(output)
    }
}

/// A result with stored images (`{"text", "images": [ImageRef]}`) as a text block and image
/// blocks; any other output as the default rendering.
pub(crate) fn render_output(output: &ToolOutput) -> Vec<dsh_llm::ContentBlock> {
    let images = output
        .value
        .get("images")
        .and_then(|v| serde_json::from_value::<Vec<dsh_llm::ImageRef>>(v.clone()).ok());
    let (Some(text), Some(images)) = (output.value.get("text").and_then(Value::as_str), images)
    else {
        return dsh_tools::render_default(output);
    };
    let mut blocks = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        blocks.push(dsh_llm::ContentBlock::text(text));
    }
    blocks.extend(
        images
            .into_iter()
            .map(|attachment| dsh_llm::ContentBlock::Image {
                attachment,
                offloaded: None,
            }),
    );
    blocks
}
