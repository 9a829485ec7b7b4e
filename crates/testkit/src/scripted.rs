//! A scripted in-process [`LlmAdapter`] for tests that need the `Llm` seam but no HTTP: each
//! `stream()` replays the next [`Script`] and records the request.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::adapter::{
    ChunkStream, LlmAdapter, LlmRequest, ModelInfo, ReasoningEffort, SystemPromptUpdate, ToolUpdate,
};
use dsh_llm::service::Llm;
use dsh_llm::{
    BlockKind, ContentBlock, FinishReason, LlmFailure, StreamChunk, TokenUsage, ToolCall, codes,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// One scripted attempt.
#[derive(Clone, Debug)]
pub enum Script {
    /// These chunks, then the stream ends.
    Chunks(Vec<StreamChunk>),
    /// These chunks, then nothing until the request is cancelled (then an `aborted` finish).
    ChunksThenHang(Vec<StreamChunk>),
    /// A failure before streaming.
    Fail(LlmFailure),
}

/// Replays [`Script`]s in order and records every request. An exhausted script list answers
/// `SERVER` "no scripted response left".
#[derive(Default)]
pub struct ScriptedAdapter {
    scripts: Mutex<VecDeque<Script>>,
    requests: Mutex<Vec<LlmRequest>>,
    arrived: Notify,
    capabilities: Mutex<(Option<SystemPromptUpdate>, Option<ToolUpdate>)>,
}

impl std::fmt::Debug for ScriptedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedAdapter")
            .field("queued", &self.scripts.lock().len())
            .field("requests", &self.requests.lock().len())
            .finish()
    }
}

impl ScriptedAdapter {
    /// Declares the route capabilities its models report (default: neither, as DeepSeek).
    pub fn set_capabilities(
        &self,
        system_prompt_update: Option<SystemPromptUpdate>,
        tool_update: Option<ToolUpdate>,
    ) {
        *self.capabilities.lock() = (system_prompt_update, tool_update);
    }

    /// Queues one attempt.
    pub fn push(&self, script: Script) {
        self.scripts.lock().push_back(script);
    }

    /// Snapshots of the requests received so far.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().clone()
    }

    /// Takes the recorded requests, leaving none.
    pub fn take_requests(&self) -> Vec<LlmRequest> {
        std::mem::take(&mut *self.requests.lock())
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.requests.lock().len()
    }

    /// Waits until `n` requests arrived (panics after a generous 10 s safety bound).
    pub async fn wait_requests(&self, n: usize) {
        loop {
            let notified = self.arrived.notified();
            if self.request_count() >= n {
                return;
            }
            if tokio::time::timeout(Duration::from_secs(10), notified)
                .await
                .is_err()
            {
                panic!("{n} requests did not arrive");
            }
        }
    }

    /// The messages of request `i`, each serialised as JSON.
    pub fn messages(&self, i: usize) -> Vec<String> {
        self.requests.lock()[i]
            .messages
            .iter()
            .map(|m| serde_json::to_string(m.as_ref()).unwrap_or_default())
            .collect()
    }
}

impl LlmAdapter for ScriptedAdapter {
    fn default_model(&self) -> String {
        "mock-model".into()
    }

    fn resolve_model(&self, model: &str) -> ModelInfo {
        let (system_prompt_update, tool_update) = *self.capabilities.lock();
        ModelInfo {
            id: model.to_owned(),
            context_window: 100_000,
            default_max_tokens: 4096,
            max_output_tokens: None,
            reasoning_efforts: vec![ReasoningEffort::Off, ReasoningEffort::High],
            default_effort: None,
            input_modalities: Vec::new(),
            system_prompt_update,
            tool_update,
            pricing: None,
        }
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        let cancel = request.cancel.clone();
        self.requests.lock().push(request);
        self.arrived.notify_waiters();
        let script = self.scripts.lock().pop_front();
        Box::pin(async move {
            match script {
                None => Err(LlmFailure::new(codes::SERVER, "no scripted response left")),
                Some(Script::Fail(f)) => Err(f),
                Some(Script::Chunks(chunks)) => {
                    Ok(Box::pin(futures::stream::iter(chunks)) as ChunkStream)
                }
                Some(Script::ChunksThenHang(chunks)) => {
                    let tail = futures::stream::once(async move {
                        cancel.cancelled().await;
                        StreamChunk::finish(FinishReason::Aborted {
                            failure: LlmFailure::new(codes::ABORTED, "cancelled"),
                        })
                    });
                    Ok(Box::pin(futures::stream::iter(chunks).chain(tail)) as ChunkStream)
                }
            }
        })
    }
}

/// Config of [`ScriptedRoute`]: the adapter is passed in code (`mount_plugin`), not in YAML.
#[derive(Clone, Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptedRouteConfig {
    /// The route to register (default `mock`).
    #[serde(default)]
    pub route: Option<String>,
    /// The adapter to register.
    #[serde(skip)]
    pub adapter: Option<Arc<ScriptedAdapter>>,
}

/// Registers a [`ScriptedAdapter`] on the `llm` service.
#[derive(Debug)]
pub struct ScriptedRoute;

impl Plugin for ScriptedRoute {
    const NAME: &'static str = "scripted-route";
    type Config = ScriptedRouteConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: ScriptedRouteConfig) -> Result<(), BoxError> {
        let adapter = config
            .adapter
            .ok_or("scripted-route needs an adapter (mount it in code)")?;
        let route = config.route.unwrap_or_else(|| "mock".into());
        ctx.dep::<dyn Llm>()?.register(&ctx, &route, adapter)?;
        Ok(())
    }
}

/// A complete text answer (`stop` finish, with usage).
pub fn text(t: &str) -> Vec<StreamChunk> {
    vec![
        StreamChunk::BlockStart {
            index: 0,
            block_type: BlockKind::Text,
        },
        StreamChunk::TextDelta {
            index: 0,
            text: t.into(),
        },
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text(t),
        },
        StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: 10,
                output_tokens: 1,
                ..Default::default()
            },
        },
        StreamChunk::finish(FinishReason::Stop),
    ]
}

/// Tool calls `(id, name, arguments)` ending with `reason`.
pub fn calls_with(calls: &[(&str, &str, &str)], reason: FinishReason) -> Vec<StreamChunk> {
    let mut out = Vec::new();
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let index = i as u32;
        out.push(StreamChunk::BlockStart {
            index,
            block_type: BlockKind::ToolCall,
        });
        out.push(StreamChunk::ToolCallDelta {
            index,
            id: (*id).into(),
            name: Some((*name).into()),
            arguments_delta: (*args).into(),
        });
        out.push(StreamChunk::BlockEnd {
            index,
            block: ContentBlock::ToolCall(ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            }),
        });
    }
    out.push(StreamChunk::finish(reason));
    out
}

/// Tool calls `(id, name, arguments)` ending with `tool-calls`.
pub fn calls(calls: &[(&str, &str, &str)]) -> Vec<StreamChunk> {
    calls_with(calls, FinishReason::ToolCalls)
}
