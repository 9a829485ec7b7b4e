//! A kernel with the Tools and SystemPrompt services.

use std::sync::Arc;

use dsh_kernel::{Ctx, Kernel, PluginRegistry};
use dsh_system_prompt::{AssembleContext, SystemPrompt, SystemPromptPlugin};
use dsh_tools::{FnTool, Tool, ToolError, ToolOutput, Tools, ToolsPlugin};
use serde_json::{Value, json};

pub struct Env {
    pub kernel: Kernel,
    pub root: Ctx,
    pub prompt: Arc<dyn SystemPrompt>,
    pub tools: Arc<dyn Tools>,
}

pub async fn env(config: Value) -> Env {
    let mut reg = PluginRegistry::new();
    reg.register::<ToolsPlugin>()
        .register::<SystemPromptPlugin>();
    let kernel = Kernel::new(reg);
    kernel
        .mount("tools", json!({}))
        .unwrap()
        .ready()
        .await
        .unwrap();
    kernel
        .mount("system-prompt", config)
        .unwrap()
        .ready()
        .await
        .unwrap();
    let root = kernel.root();
    let prompt = root.get::<dyn SystemPrompt>().unwrap();
    let tools = root.get::<dyn Tools>().unwrap();
    Env {
        kernel,
        root,
        prompt,
        tools,
    }
}

pub fn tool(name: &str) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        name,
        format!("The {name} tool."),
        json!({"type":"object","properties":{}}),
        |_ctx, _args| async { Ok::<_, ToolError>(ToolOutput::text("ok")) },
    ))
}

pub fn cx() -> AssembleContext {
    AssembleContext::new("deepseek", "deepseek-chat", "/home/u/proj")
}
