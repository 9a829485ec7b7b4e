//! `Tools::display`: a tool's own display, and the generic one for tools it does not know.

use std::sync::Arc;

use dsh_tools::{
    DisplayInput, DisplayResult, Tool, ToolContext, ToolDisplay, ToolError, ToolKind, ToolOutput,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::common::{echo, env};

/// A tool that describes its calls: the URL it pings, and whether the host answered.
struct Ping {
    parameters: Value,
}

impl Tool for Ping {
    fn name(&self) -> &str {
        "ping"
    }
    fn description(&self) -> &str {
        "Ping a host."
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn execute<'a>(
        &'a self,
        _ctx: ToolContext,
        _args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::text("pong")) })
    }
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        #[derive(serde::Deserialize)]
        struct Args {
            host: String,
        }
        let mut d = ToolDisplay::new(ToolKind::Fetch, "Ping");
        if let Some(a) = call.parse::<Args>() {
            d = d.with_subject(a.host);
        }
        if let Some(r) = call.succeeded() {
            d = d.with_field("answer", r.text);
        }
        d
    }
}

/// A tool whose display panics.
struct Broken;

impl Tool for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn description(&self) -> &str {
        "x"
    }
    fn parameters(&self) -> &Value {
        static P: std::sync::LazyLock<Value> =
            std::sync::LazyLock::new(|| json!({"type": "object", "properties": {}}));
        &P
    }
    fn execute<'a>(
        &'a self,
        _ctx: ToolContext,
        _args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::text("")) })
    }
    #[allow(clippy::panic)]
    fn display(&self, _call: &DisplayInput<'_>) -> ToolDisplay {
        panic!("display bug")
    }
}

#[tokio::test]
async fn a_tool_describes_its_own_calls_and_unknown_tools_get_the_generic_display() {
    let e = env().await;
    let parameters =
        json!({"type":"object","properties":{"host":{"type":"string"}},"required":["host"]});
    e.tools
        .register(&e.root, Arc::new(Ping { parameters }))
        .unwrap();
    e.tools.register(&e.root, echo("echo", "")).unwrap();
    e.tools.register(&e.root, Arc::new(Broken)).unwrap();

    let call = DisplayInput::new("ping", r#"{"host":"example.org"}"#);
    let running = e.tools.display(None, &call);
    assert_eq!(running.kind, ToolKind::Fetch);
    assert_eq!(running.title, "Ping");
    assert_eq!(running.subject.as_deref(), Some("example.org"));
    assert!(running.fields.is_empty());
    let ended = e
        .tools
        .display(None, &call.with_result(DisplayResult::ok("pong")));
    assert_eq!(ended.fields[0].label, "answer");
    assert_eq!(ended.fields[0].value, "pong");

    // A tool without its own display, a tool nobody registered (a resumed session's MCP tool
    // whose server is gone), and a display that panics: the generic display.
    for name in ["echo", "mcp__gone__lookup", "broken"] {
        let d = e
            .tools
            .display(None, &DisplayInput::new(name, r#"{"text": "hi"}"#));
        assert_eq!(d.kind, ToolKind::Other, "{name}");
        assert_eq!(d.title, name);
        assert_eq!(d.subject.as_deref(), Some(r#"{"text":"hi"}"#), "{name}");
    }
    e.kernel.dispose().await;
}
