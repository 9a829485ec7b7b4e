//! Shared helpers: a kernel with the Tools service, small tools and requests.

use std::sync::Arc;

use dsh_kernel::{Ctx, Kernel, PluginRegistry};
use dsh_tools::{
    FnTool, Tool, ToolError, ToolOutput, ToolRequest, Tools, ToolsConfig, ToolsPlugin,
};
use serde_json::{Value, json};

pub struct Env {
    pub kernel: Kernel,
    pub root: Ctx,
    pub tools: Arc<dyn Tools>,
}

pub async fn env_with(config: ToolsConfig) -> Env {
    let mut reg = PluginRegistry::new();
    reg.register::<ToolsPlugin>();
    let kernel = Kernel::new(reg);
    let fiber = kernel.mount_plugin::<ToolsPlugin>(config).unwrap();
    fiber.ready().await.unwrap();
    let root = kernel.root();
    let tools = root.get::<dyn Tools>().unwrap();
    Env {
        kernel,
        root,
        tools,
    }
}

pub async fn env() -> Env {
    env_with(ToolsConfig::default()).await
}

pub fn text_schema() -> Value {
    json!({"type":"object","properties":{"text":{"type":"string","description":"what to echo"}},"required":["text"]})
}

/// `name` echoes `args.text` prefixed with `prefix`.
pub fn echo(name: &str, prefix: &str) -> Arc<dyn Tool> {
    let prefix = prefix.to_owned();
    Arc::new(FnTool::new(
        name,
        format!("Echo ({name})."),
        text_schema(),
        move |_ctx, args| {
            let prefix = prefix.clone();
            async move {
                let text = args["text"].as_str().unwrap_or_default().to_owned();
                Ok::<_, ToolError>(ToolOutput::text(format!("{prefix}{text}")))
            }
        },
    ))
}

pub fn req(name: &str, args: &str) -> ToolRequest {
    ToolRequest::new("call_1", name, args, "sess-1", std::env::temp_dir())
}
