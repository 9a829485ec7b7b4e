//! The test tools and the plugin that registers tools and prompt sections between turns.

use super::*;

/// The three test tools: `(name, parallel-safe)`.
pub(super) const TOOLS: [(&str, bool); 3] = [("alpha", true), ("beta", true), ("gamma", false)];

/// The agent of the case (replaced when it is resumed), for tools that steer it.
pub(super) type AgentCell = Arc<Mutex<Option<Arc<dyn Agent>>>>;

pub(super) fn test_tool(name: &str, parallel: bool, agent: AgentCell) -> FnTool {
    let label = name.to_owned();
    let tool = FnTool::new(
        name,
        format!("Test tool {name}."),
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        move |_c, args| {
            let label = label.clone();
            let agent = agent.clone();
            async move {
                // Let parallel calls interleave.
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                let n = args["n"].as_u64().unwrap_or(0);
                let mut out = ToolOutput::text(format!("{label} -> {n}"));
                if label == "alpha" && n == 2 {
                    out.contexts
                        .push(format!("context deferred by {label} {n}"));
                }
                if label == "gamma" && n == 1 {
                    let agent = agent.lock().clone().expect("agent set");
                    agent.steer(user(&format!("steer from {label}"))).unwrap();
                }
                if label == "gamma" && n == 2 {
                    let agent = agent.lock().clone().expect("agent set");
                    agent.cancel(CancelCause::User, args["keep"] == true);
                }
                Ok(out)
            }
        },
    );
    if parallel { tool.parallel_safe() } else { tool }
}

/// What one mounted [`ExtraPlugin`] registers.
#[derive(Clone)]
pub(super) enum Extra {
    Tool {
        name: String,
        parallel: bool,
        agent: AgentCell,
    },
    Prompt(String),
    Runtime(String),
}

#[derive(Clone, Default, serde::Deserialize, schemars::JsonSchema)]
pub(super) struct ExtraConfig {
    #[serde(skip)]
    extra: Option<Extra>,
}

/// Registers one test tool, prompt section or runtime-context section for as long as it is
/// mounted: disposing the fiber removes it (and waits for the teardown).
pub(super) struct ExtraPlugin;
impl Plugin for ExtraPlugin {
    const NAME: &'static str = "prop-extra";
    type Config = ExtraConfig;
    fn deps() -> Vec<dsh_kernel::Dep> {
        vec![
            dsh_kernel::Dep::on::<dyn Tools>(),
            dsh_kernel::Dep::on::<dyn SystemPrompt>(),
        ]
    }
    async fn apply(ctx: Ctx, c: ExtraConfig) -> Result<(), BoxError> {
        match c.extra.ok_or("nothing to register")? {
            Extra::Tool {
                name,
                parallel,
                agent,
            } => ctx
                .dep::<dyn Tools>()?
                .register(&ctx, Arc::new(test_tool(&name, parallel, agent)))?,
            Extra::Prompt(text) => {
                ctx.dep::<dyn SystemPrompt>()?
                    .section(&ctx, Section::new("prop-prompt", text))?;
            }
            Extra::Runtime(text) => {
                ctx.dep::<dyn SystemPrompt>()?
                    .runtime_context(&ctx, Section::new("prop:context", text))?;
            }
        }
        Ok(())
    }
}

/// Mounts or disposes extras so that exactly `want` (key → text) is registered.
pub(super) async fn sync_extras(
    kernel: &Kernel,
    mounted: &mut HashMap<String, (String, FiberHandle)>,
    want: Vec<(String, String, Extra)>,
) {
    let keys: Vec<String> = want.iter().map(|(k, _, _)| k.clone()).collect();
    let stale: Vec<String> = mounted
        .iter()
        .filter(|(k, (text, _))| !want.iter().any(|(wk, wt, _)| wk == *k && wt == text))
        .map(|(k, _)| k.clone())
        .collect();
    for k in stale {
        mounted.remove(&k).unwrap().1.dispose().await;
    }
    for (key, text, extra) in want {
        if mounted.contains_key(&key) {
            continue;
        }
        let handle = kernel
            .mount_plugin::<ExtraPlugin>(ExtraConfig { extra: Some(extra) })
            .unwrap();
        handle.ready().await.unwrap();
        mounted.insert(key, (text, handle));
    }
    assert!(mounted.keys().all(|k| keys.contains(k)));
}
