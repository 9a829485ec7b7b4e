//! A kernel with `tools` and `mcp-client` rows, and a feed of `mcp/server-changed`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{FiberHandle, Kernel, PluginRegistry};
use dsh_mcp_client::{McpClientPlugin, McpResourcesPlugin, McpServerChanged, ServerInfo};
use dsh_tools::{ToolRequest, ToolResult, Tools, ToolsPlugin};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Safety net for waits that should end far sooner.
pub const SAFETY: Duration = Duration::from_secs(60);

/// The test server binary cargo built next to this test (`target/<profile>/examples/`).
pub fn server_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let bin = profile_dir.join("examples").join("mcp_test_server");
    assert!(
        bin.is_file(),
        "{} is missing: run the tests with `cargo test -p dsh-mcp-client` (it builds the examples)",
        bin.display()
    );
    bin
}

/// A stdio row for the test server named `name` with extra server `args` and config fields.
pub fn stdio(name: &str, args: &[&str], extra: Value) -> Value {
    let mut row = json!({
        "transport": "stdio",
        "serverName": name,
        "command": server_bin(),
        "args": args,
        "startupGraceMs": 20000,
        "reconnect": {"initialDelayMs": 20, "maxDelayMs": 200, "maxAttempts": 3},
    });
    if let (Value::Object(r), Value::Object(e)) = (&mut row, extra) {
        r.extend(e);
    }
    row
}

pub struct Harness {
    pub kernel: Kernel,
    pub tools: Arc<dyn Tools>,
    events: mpsc::UnboundedReceiver<ServerInfo>,
    dir: tempfile::TempDir,
}

impl Harness {
    /// `tools` plus one `mcp-client` row per config; waits for every row's activation.
    pub async fn new(rows: Vec<Value>) -> Self {
        Self::build(rows, false).await
    }

    /// [`Harness::new`] with the `mcp-resources` row mounted before the servers.
    pub async fn with_resources(rows: Vec<Value>) -> Self {
        Self::build(rows, true).await
    }

    async fn build(rows: Vec<Value>, resources: bool) -> Self {
        let mut registry = PluginRegistry::new();
        registry
            .register::<ToolsPlugin>()
            .register::<McpResourcesPlugin>()
            .register::<McpClientPlugin>();
        let kernel = Kernel::new(registry);
        let (tx, events) = mpsc::unbounded_channel();
        kernel
            .root()
            .on::<McpServerChanged>(move |e| {
                let _ = tx.send(e.info.clone());
                Ok(())
            })
            .unwrap();
        kernel.mount("tools", json!({})).unwrap();
        if resources {
            let hub = kernel.mount("mcp-resources", json!({})).unwrap();
            tokio::time::timeout(SAFETY, hub.ready())
                .await
                .expect("activation within the safety net")
                .unwrap();
        }
        let rows: Vec<FiberHandle> = rows
            .into_iter()
            .map(|r| kernel.mount("mcp-client", r).unwrap())
            .collect();
        for r in &rows {
            tokio::time::timeout(SAFETY, r.ready())
                .await
                .expect("activation within the safety net")
                .unwrap();
        }
        let tools = kernel.root().get::<dyn Tools>().unwrap();
        Self {
            kernel,
            tools,
            events,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Waits for a `mcp/server-changed` snapshot matching `pred`.
    pub async fn wait_for(&mut self, pred: impl Fn(&ServerInfo) -> bool) -> ServerInfo {
        let wait = async {
            loop {
                let info = self.events.recv().await.expect("event feed closed");
                if pred(&info) {
                    return info;
                }
            }
        };
        tokio::time::timeout(SAFETY, wait)
            .await
            .expect("the awaited server change never came")
    }

    /// The registered tool names starting with `mcp__`.
    pub fn mcp_names(&self) -> Vec<String> {
        self.tools
            .schemas(None)
            .into_iter()
            .map(|s| s.name)
            .filter(|n| n.starts_with("mcp__"))
            .collect()
    }

    /// Every registered tool name.
    pub fn names(&self) -> Vec<String> {
        self.tools
            .schemas(None)
            .into_iter()
            .map(|s| s.name)
            .collect()
    }

    /// Calls `name` with `args`.
    pub async fn call(&self, name: &str, args: Value) -> ToolResult {
        let request = ToolRequest::new("call-1", name, args.to_string(), "sess-1", self.dir.path());
        tokio::time::timeout(SAFETY, self.tools.execute(request))
            .await
            .expect("tool call within the safety net")
    }

    /// Calls `name` and asserts success; returns the text.
    pub async fn ok(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args).await;
        assert!(!r.is_error, "{name}: {}", r.text());
        r.text()
    }

    pub async fn dispose(self) {
        self.kernel.dispose().await;
    }
}

/// Whether process `pid` is gone (or a zombie awaiting its reaper).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}
