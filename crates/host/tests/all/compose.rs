//! The composition the tests drive: the test harness (scripted model, loop, tools), the
//! approval plugin asking about everything, a tool that describes itself, and the host.

use std::sync::Arc;

use dsh_approval::{ApprovalConfig, ApprovalPlugin, ApprovalPolicy};
use dsh_host::{Host, HostOptions};
use dsh_protocol::{Client, ToolDisplay, ToolKind};
use dsh_test_harness::{Script, TestHarness};
use dsh_tools::{DisplayInput, Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A tool only this test knows: it "touches" a path and describes itself as a write.
pub struct Touch {
    schema: Value,
}

impl Touch {
    pub fn new() -> Self {
        Touch {
            schema: json!({"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"]}),
        }
    }
}

impl Tool for Touch {
    fn name(&self) -> &str {
        "touch"
    }
    fn description(&self) -> &str {
        "Touch a path."
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    fn execute<'a>(
        &'a self,
        _ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let path = args["path"].as_str().unwrap_or_default().to_owned();
            Ok(ToolOutput::text(format!("touched {path}")).with_meta(json!({"touched": path})))
        })
    }
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        let path = call.args()["path"].as_str().unwrap_or("?").to_owned();
        let mut d = ToolDisplay::new(ToolKind::Write, "Touch").with_subject(path);
        if let Some(t) = call.meta_field("touched").and_then(Value::as_str) {
            d.output = Some(dsh_protocol::OutputSummary {
                headline: Some(format!("touched {t}")),
                ..Default::default()
            });
        }
        d
    }
}

/// A harness with `scripts`, the approval plugin at `policy`, and a host over it.
pub async fn host(
    scripts: Vec<Script>,
    policy: ApprovalPolicy,
) -> (TestHarness, Host, Arc<dyn Client>) {
    let h = TestHarness::builder()
        .plugin::<ApprovalPlugin>(ApprovalConfig {
            policy: Some(policy),
            ..Default::default()
        })
        .tool(Touch::new())
        .scripts(scripts)
        .on_disk()
        .build()
        .await;
    let (host, client) = host_over(&h, true);
    (h, host, client)
}

/// A host over `h`'s kernel (answering approvals when asked to) and its client.
pub fn host_over(h: &TestHarness, answer_approvals: bool) -> (Host, Arc<dyn Client>) {
    let host = Host::new(
        h.root(),
        HostOptions {
            defaults: h.options(),
            answer_approvals,
        },
    )
    .unwrap();
    let client = host.client();
    (host, client)
}

/// A new session in `h`'s directory; its id.
pub async fn open(client: &Arc<dyn Client>, h: &TestHarness) -> String {
    client
        .open(dsh_protocol::OpenSession::Create {
            session_id: None,
            options: dsh_protocol::SessionOptions {
                cwd: Some(h.dir().display().to_string()),
                ..Default::default()
            },
            prompt: None,
        })
        .await
        .unwrap()
        .id
}
