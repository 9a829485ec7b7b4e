//! Cost of one assembly: identity, persona and 8 more sections (two computed), 24 tools,
//! 3 runtime-context sections, one `system-prompt/assemble` listener; plus the §10.3
//! projection. Run with `cargo bench -p dsh-system-prompt`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use dsh_kernel::{Kernel, PluginRegistry};
use dsh_system_prompt::runtime_context::{RetainedContext, propose, render};
use dsh_system_prompt::{
    AssembleContext, Section, SystemPrompt, SystemPromptAssemble, SystemPromptPlugin,
};
use dsh_tools::{FnTool, ToolError, ToolOutput, Tools, ToolsPlugin};
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut reg = PluginRegistry::new();
        reg.register::<ToolsPlugin>().register::<SystemPromptPlugin>();
        let kernel = Kernel::new(reg);
        kernel.mount("tools", json!({})).unwrap().ready().await.unwrap();
        kernel
            .mount(
                "system-prompt",
                json!({"persona": "You are a coding agent running on the {{model}} model. Your working directory is {{cwd}}."}),
            )
            .unwrap()
            .ready()
            .await
            .unwrap();
        let root = kernel.root();
        let tools = root.get::<dyn Tools>().unwrap();
        let sp = root.get::<dyn SystemPrompt>().unwrap();
        for i in 0..24 {
            let params = json!({"type":"object","properties":{
                "path":{"type":"string","description":"A path."},
                "limit":{"type":"integer","description":"At most."}},"required":["path"]});
            tools
                .register(
                    &root,
                    Arc::new(FnTool::new(
                        format!("tool_{i:02}"),
                        "A tool with a description of ordinary length for the model to read.",
                        params,
                        |_c, _a| async { Ok::<_, ToolError>(ToolOutput::text("ok")) },
                    )),
                )
                .unwrap();
        }
        for i in 0..6 {
            sp.section(
                &root,
                Section::new(format!("guide:{i}"), "Guidance text ".repeat(40) + "in {{cwd}}.")
                    .with_order(100 + i),
            )
            .unwrap();
        }
        for i in 0..2 {
            sp.section(
                &root,
                Section::computed(format!("computed:{i}"), |c: &AssembleContext| {
                    Ok(format!("Agent {}.", c.agent_id.as_deref().unwrap_or("-")))
                })
                .with_order(150),
            )
            .unwrap();
        }
        for (i, name) in ["sandbox:policy", "approval:policy", "subagent:delegation"]
            .iter()
            .enumerate()
        {
            sp.runtime_context(
                &root,
                Section::new(*name, "Policy text ".repeat(20)).with_order(110 + i as i32 * 5),
            )
            .unwrap();
        }
        root.hook::<SystemPromptAssemble, _, _>(|input, next| async move { next.run(input).await })
            .unwrap();

        let cx = AssembleContext::new("deepseek", "deepseek-chat", "/home/u/proj")
            .with_agent_id("session-1");
        let a = sp.assemble(cx.clone()).await.unwrap();
        assert_eq!(a.tools.len(), 24);
        assert_eq!(a.runtime_context.len(), 3);
        let retained = RetainedContext::Snapshot {
            seq: 3,
            text: render(&a.runtime_context),
        };

        const N: u32 = 2_000;
        let mut assemble = Vec::new();
        let mut projection = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            for _ in 0..N {
                black_box(sp.assemble(black_box(cx.clone())).await.unwrap());
            }
            assemble.push(t.elapsed().as_nanos() as f64 / f64::from(N) / 1000.0);
            let t = Instant::now();
            for _ in 0..N {
                black_box(propose(black_box(&retained), black_box(&a.runtime_context)));
            }
            projection.push(t.elapsed().as_nanos() as f64 / f64::from(N) / 1000.0);
        }
        println!(
            "assemble (10 sections, 24 tools, 3 contexts, 1 listener): median {:.1} µs",
            median(assemble)
        );
        println!(
            "runtime-context projection (unchanged):                   median {:.2} µs",
            median(projection)
        );
        kernel.dispose().await;
    });
}
