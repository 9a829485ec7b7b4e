//! The `Llm` service on a real kernel: routes owned by fibers, prepare_call, the llm/stream hook.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Kernel, Plugin, PluginRegistry};
use dsh_llm::{
    BlockKind, CallSettings, ChunkStream, FailureCode, FinishReason, Llm, LlmAdapter, LlmError,
    LlmFailure, LlmPlugin, LlmRequest, LlmStream, Modality, ModelInfo, ReasoningEffort,
    StreamChunk, SystemPromptUpdate, ToolUpdate, codes,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// A minimal adapter: echoes the request's model and effort as one text block.
struct Echo;

impl LlmAdapter for Echo {
    fn default_model(&self) -> String {
        "echo-1".into()
    }
    fn resolve_model(&self, model: &str) -> ModelInfo {
        ModelInfo {
            id: model.into(),
            context_window: 1000,
            default_max_tokens: 100,
            max_output_tokens: None,
            reasoning_efforts: vec!["off".into(), "high".into()],
            default_effort: Some("high".into()),
            input_modalities: vec![Modality::Text],
            system_prompt_update: (model == "in-history").then_some(SystemPromptUpdate::InHistory),
            tool_update: (model == "in-history").then_some(ToolUpdate::AdditionOnly),
            pricing: None,
        }
    }
    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        Box::pin(async move {
            let effort = req.call.effort.as_ref().map(ReasoningEffort::as_str);
            let text = format!("{}/{:?}/{}", req.call.model.id, effort, req.call.max_tokens);
            let chunks = vec![
                StreamChunk::BlockStart {
                    index: 0,
                    block_type: BlockKind::Text,
                },
                StreamChunk::TextDelta {
                    index: 0,
                    text: text.clone(),
                },
                StreamChunk::BlockEnd {
                    index: 0,
                    block: dsh_llm::ContentBlock::text(text),
                },
                StreamChunk::finish(FinishReason::Stop),
            ];
            Ok(futures::stream::iter(chunks).boxed())
        })
    }
}

#[derive(Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EchoConfig {
    route: String,
}

struct EchoPlugin;
impl Plugin for EchoPlugin {
    const NAME: &'static str = "echo-adapter";
    type Config = EchoConfig;
    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }
    async fn apply(ctx: Ctx, config: EchoConfig) -> Result<(), BoxError> {
        ctx.dep::<dyn Llm>()?
            .register(&ctx, &config.route, Arc::new(Echo))?;
        Ok(())
    }
}

async fn kernel() -> (Kernel, Arc<dyn Llm>) {
    let mut reg = PluginRegistry::new();
    reg.register::<LlmPlugin>().register::<EchoPlugin>();
    let kernel = Kernel::new(reg);
    kernel
        .mount("llm", serde_json::json!({}))
        .unwrap()
        .ready()
        .await
        .unwrap();
    let llm = kernel.root().get::<dyn Llm>().unwrap();
    (kernel, llm)
}

async fn collect_text(s: ChunkStream) -> String {
    let chunks: Vec<StreamChunk> = s.collect().await;
    chunks
        .into_iter()
        .filter_map(|c| match c {
            StreamChunk::TextDelta { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn route_is_owned_by_the_registering_fiber() {
    let (kernel, llm) = kernel().await;
    let fiber = kernel
        .mount("echo-adapter", serde_json::json!({"route": "echo"}))
        .unwrap();
    fiber.ready().await.unwrap();
    assert_eq!(llm.routes(), vec!["echo".to_owned()]);

    // A second registration of the same route is an error naming the owner.
    let err = llm
        .register(&kernel.root(), "echo", Arc::new(Echo))
        .unwrap_err();
    assert!(matches!(err, LlmError::DuplicateRoute { .. }));
    assert!(err.to_string().contains("echo-adapter"), "{err}");

    fiber.dispose().await;
    assert!(llm.routes().is_empty());
    // Now the route is free again.
    let reg = llm
        .register(&kernel.root(), "echo", Arc::new(Echo))
        .unwrap();
    reg.dispose();
    assert!(llm.routes().is_empty());
    kernel.dispose().await;
}

#[tokio::test]
async fn prepare_call_materialises_defaults_and_reports_them() {
    let (kernel, llm) = kernel().await;
    llm.register(&kernel.root(), "echo", Arc::new(Echo))
        .unwrap();

    let p = llm
        .prepare_call(&CallSettings {
            provider: "echo".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(p.model.id, "echo-1");
    assert_eq!(p.effort, Some(ReasoningEffort::High));
    assert_eq!((p.system_prompt_update, p.tool_update), (None, None));
    assert_eq!(p.max_tokens, 100);
    assert!(p.defaulted.model && p.defaulted.effort && p.defaulted.max_tokens);

    let p = llm
        .prepare_call(&CallSettings {
            provider: "echo".into(),
            model: Some("custom".into()),
            effort: Some("off".into()),
            max_tokens: Some(7),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (p.model.id.as_str(), p.effort.clone(), p.max_tokens),
        ("custom", Some(ReasoningEffort::Off), 7)
    );
    assert!(!p.defaulted.model && !p.defaulted.effort && !p.defaulted.max_tokens);

    let err = llm
        .prepare_call(&CallSettings {
            provider: "echo".into(),
            effort: Some("max".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.code, codes::UNSUPPORTED_REASONING_EFFORT);
    assert!(err.message.contains("off, high"), "{}", err.message);
    // An unknown effort id is kept verbatim and refused by the route, never defaulted.
    let err = llm
        .prepare_call(&CallSettings {
            provider: "echo".into(),
            effort: Some(ReasoningEffort::from_wire("xhigh")),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.code, FailureCode::UnsupportedReasoningEffort);
    assert!(err.message.contains("`xhigh`"), "{}", err.message);
    // Route capabilities travel from the model info to the prepared call.
    let p = llm
        .prepare_call(&CallSettings {
            provider: "echo".into(),
            model: Some("in-history".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (p.system_prompt_update, p.tool_update),
        (
            Some(SystemPromptUpdate::InHistory),
            Some(ToolUpdate::AdditionOnly)
        )
    );

    let err = llm.prepare_call(&CallSettings {
        provider: "nope".into(),
        ..Default::default()
    });
    assert_eq!(err.unwrap_err().code, codes::NO_ADAPTER);
    kernel.dispose().await;
}

#[tokio::test]
async fn stream_runs_through_the_hook_with_the_adapter_last() {
    let (kernel, llm) = kernel().await;
    let root = kernel.root();
    llm.register(&root, "echo", Arc::new(Echo)).unwrap();
    let p = llm
        .prepare_call(&CallSettings {
            provider: "echo".into(),
            ..Default::default()
        })
        .unwrap();

    // A listener rewrites the request on the way down and wraps the stream on the way up.
    root.hook::<LlmStream, _, _>(|mut req: LlmRequest, next| async move {
        req.call.max_tokens = 42;
        let s = next.run(req).await?;
        Ok(s.map(|c| match c {
            StreamChunk::TextDelta { index, text } => StreamChunk::TextDelta {
                index,
                text: format!("[{text}]"),
            },
            other => other,
        })
        .boxed())
    })
    .unwrap();
    let s = llm
        .stream(&root, p.request(vec![], vec![], CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(collect_text(s).await, "[echo-1/Some(\"high\")/42]");

    // Unknown route at stream time: NO_ADAPTER from the terminal.
    let mut req = p.request(vec![], vec![], CancellationToken::new());
    req.call.provider = "gone".into();
    let err = llm.stream(&root, req).await.err().unwrap();
    assert_eq!(err.code, codes::NO_ADAPTER);
    kernel.dispose().await;
}

#[tokio::test]
async fn a_listener_can_short_circuit() {
    let (kernel, llm) = kernel().await;
    let root = kernel.root();
    root.hook::<LlmStream, _, _>(|_req: LlmRequest, _next| async move {
        Err(LlmFailure::new("RATE_LIMIT", "vetoed"))
    })
    .unwrap();
    let req = dsh_llm::PreparedCall {
        provider: "none".into(),
        model: Echo.resolve_model("x"),
        effort: None,
        max_tokens: 1,
        temperature: None,
        stop: vec![],
        purpose: None,
        defaulted: Default::default(),
        system_prompt_update: None,
        tool_update: None,
    }
    .request(vec![], vec![], CancellationToken::new());
    assert_eq!(
        llm.stream(&root, req).await.err().unwrap().message,
        "vetoed"
    );
    kernel.dispose().await;
}
