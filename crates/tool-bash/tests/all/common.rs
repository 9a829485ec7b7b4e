//! A kernel with `tools`, `bash-local` and `tool-bash` mounted.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_bash_local::LocalShellPlugin;
use dsh_kernel::{Kernel, PluginRegistry};
use dsh_tool_bash::BashToolPlugin;
use dsh_tools::{ToolRequest, ToolResult, Tools, ToolsPlugin};
use serde_json::{Value, json};

/// Safety net for waits that should end far sooner.
pub const SAFETY: Duration = Duration::from_secs(60);

pub struct Harness {
    pub kernel: Kernel,
    pub tools: Arc<dyn Tools>,
    pub dir: tempfile::TempDir,
}

impl Harness {
    /// `bash-local` with `shell_config`, plus `tools` and `tool-bash`.
    pub async fn with_shell_config(shell_config: Value) -> Self {
        let mut registry = PluginRegistry::new();
        registry
            .register::<ToolsPlugin>()
            .register::<LocalShellPlugin>()
            .register::<BashToolPlugin>();
        let kernel = Kernel::new(registry);
        let bash = kernel.mount("tool-bash", json!({})).unwrap();
        kernel.mount("tools", json!({})).unwrap();
        kernel.mount("bash-local", shell_config).unwrap();
        bash.ready().await.unwrap();
        let tools = kernel.root().get::<dyn Tools>().unwrap();
        Self {
            kernel,
            tools,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub async fn new() -> Self {
        Self::with_shell_config(json!({"killGraceMs": 300, "drainWindowMs": 200})).await
    }

    pub fn cwd(&self) -> PathBuf {
        let cwd = self.dir.path().join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        cwd
    }

    pub fn scratch(&self) -> PathBuf {
        self.dir.path().join("scratch")
    }

    /// A request for `bash` with raw argument text.
    pub fn request(&self, arguments: &str) -> ToolRequest {
        let mut request = ToolRequest::new("call-1", "bash", arguments, "sess-7", self.cwd());
        request.scratch_dir = Some(self.scratch());
        request
    }

    pub async fn call_raw(&self, request: ToolRequest) -> ToolResult {
        tokio::time::timeout(SAFETY, self.tools.execute(request))
            .await
            .expect("tool call did not finish within the safety net")
    }

    /// Calls `bash` with `args`.
    pub async fn call(&self, args: Value) -> ToolResult {
        self.call_raw(self.request(&args.to_string())).await
    }

    /// Calls `bash` with `command` and a description; asserts a non-error result.
    pub async fn ok(&self, command: &str) -> String {
        let result = self
            .call(json!({"command": command, "description": "Run a test command"}))
            .await;
        assert!(!result.is_error, "{command}: {}", result.text());
        result.text()
    }

    pub async fn dispose(self) {
        self.kernel.dispose().await;
    }
}
