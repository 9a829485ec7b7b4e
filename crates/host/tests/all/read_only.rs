//! The `untrusted` approval policy asks before every call but those of tools that say they only
//! read (`Tool::read_only`): the tool's own word, not its name.

use dsh_approval::{ApprovalConfig, ApprovalPlugin, ApprovalPolicy};
use dsh_protocol::{EventMsg, Op};
use dsh_test_harness::{Script, TestHarness, calls, text, within};
use dsh_tools::{Tool, ToolContext, ToolError, ToolOutput};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::compose::{Touch, host_over, open};

/// A tool that says it only reads; named `peek`.
struct Peek {
    schema: Value,
}

impl Tool for Peek {
    fn name(&self) -> &str {
        "peek"
    }
    fn description(&self) -> &str {
        "Look at something."
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    fn read_only(&self) -> bool {
        true
    }
    fn execute<'a>(
        &'a self,
        _ctx: ToolContext,
        _args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::text("seen")) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_asks_before_a_write_and_not_before_a_tool_that_only_reads() {
    let h = TestHarness::builder()
        .plugin::<ApprovalPlugin>(ApprovalConfig {
            policy: Some(ApprovalPolicy::Untrusted),
            ..Default::default()
        })
        .tool(Peek {
            schema: json!({"type": "object", "properties": {}}),
        })
        .tool(Touch::new())
        .scripts(vec![
            Script::Chunks(calls(&[("p1", "peek", "{}")])),
            Script::Chunks(calls(&[("t1", "touch", r#"{"path":"a"}"#)])),
            Script::Chunks(text("done")),
        ])
        .on_disk()
        .build()
        .await;
    let (_host, client) = host_over(&h, true);
    let id = open(&client, &h).await;
    let mut events = client.subscribe(&id, None).await.unwrap();
    client
        .send(
            &id,
            Op::Submit {
                text: "go".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    let mut ended = Vec::new();
    let asked = loop {
        let ev = within("no event", events.next()).await.unwrap();
        match ev.msg {
            EventMsg::ToolCallEnded { call_id, .. } => ended.push(call_id),
            EventMsg::ApprovalRequested(req) => break req,
            _ => {}
        }
    };
    // The read-only call ran unasked; the write is the one asked about.
    assert_eq!(ended, ["p1"]);
    assert_eq!(asked.call_id, "t1");
    client.send(&id, Op::Interrupt).await.unwrap();
    client.close(&id).await.unwrap();
    h.dispose().await;
}
