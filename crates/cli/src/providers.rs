//! Provider routes: the up-front `--provider` check and `dsh models`.

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_kernel::{Composer, Ctx, Kernel};
use dsh_llm::{Llm, ModelInfo};

use crate::compose::{compose, registry};
use crate::config_cmd::write_stdout;
use crate::{ComposeArgs, Failure};

/// Fails (usage, nothing sent) when `provider` is not a registered route, naming the known ones.
pub(crate) fn check_route(root: &Ctx, provider: &str) -> Result<(), Failure> {
    let Some(llm) = root.get::<dyn Llm>() else {
        return Err(Failure::usage(anyhow!(
            "the composition mounts no `llm` service"
        )));
    };
    if llm.adapter(provider).is_some() {
        return Ok(());
    }
    let known = llm.routes();
    Err(Failure::usage(anyhow!(
        "unknown provider `{provider}`; known routes: {} (see `dsh models`)",
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    )))
}

fn describe(out: &mut String, m: &ModelInfo) {
    let _ = write!(
        out,
        "  {}  context {}  max output {}",
        m.id,
        m.context_window,
        m.max_output_tokens
            .map_or_else(|| "?".to_owned(), |n| n.to_string())
    );
    match &m.pricing {
        Some(p) => {
            let _ = write!(
                out,
                "  USD/M hit {} miss {} output {}",
                p.cache_hit_input.usd(),
                p.cache_miss_input.usd(),
                p.output.usd()
            );
            if let Some(w) = p.cache_write_input {
                let _ = write!(out, " cache-write {}", w.usd());
            }
            if let Some(o) = &p.off_peak {
                let _ = write!(
                    out,
                    "  off-peak {}-{} UTC hit {} miss {} output {}",
                    o.window.start,
                    o.window.end,
                    o.cache_hit_input.usd(),
                    o.cache_miss_input.usd(),
                    o.output.usd()
                );
            }
        }
        None => out.push_str("  unpriced"),
    }
    let efforts: Vec<&str> = m.reasoning_efforts.iter().map(|e| e.as_str()).collect();
    let _ = write!(out, "  efforts {}", efforts.join("|"));
    if m.input_modalities.contains(&dsh_llm::Modality::Image) {
        out.push_str("  images");
    }
    if let Some(s) = m.system_prompt_update {
        let _ = write!(out, "  systemPromptUpdate {}", s.as_str());
    }
    if let Some(t) = m.tool_update {
        let _ = write!(out, "  toolUpdate {}", t.as_str());
    }
    out.push('\n');
}

/// `dsh models`: every route of the composition, the plugin that registered it, its default model
/// and its catalog (context window, output cap, prices, efforts, capabilities).
pub(crate) async fn list(args: &ComposeArgs) -> Result<u8, Failure> {
    let registry = registry();
    let composition = compose(args, None, &registry)?;
    let kernel = Kernel::new(registry);
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
    }
    let mut out = String::new();
    if let Some(llm) = kernel.root().get::<dyn Llm>() {
        for route in llm.routes() {
            let Some(adapter) = llm.adapter(&route) else {
                continue;
            };
            let source = llm.route_owner(&route).unwrap_or_else(|| "?".to_owned());
            let _ = writeln!(
                out,
                "{route} (plugin {source}; default model {})",
                adapter.default_model()
            );
            for m in adapter.models() {
                describe(&mut out, &m);
            }
        }
    }
    kernel.dispose().await;
    if out.is_empty() {
        out.push_str("no provider routes are registered\n");
    }
    write_stdout(&out)
}
