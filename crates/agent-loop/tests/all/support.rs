//! A kernel with the loop and its services, a scripted adapter, and log helpers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{Agent, AgentOptions, Agents, AgentsPlugin, CreateAgent};
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Kernel, Plugin, PluginRegistry};
use dsh_llm::adapter::{ChunkStream, LlmAdapter, LlmRequest, ModelInfo};
use dsh_llm::service::{Llm, LlmPlugin};
use dsh_llm::{
    BlockKind, ContentBlock, FinishReason, LlmFailure, Message, StreamChunk, TokenUsage, ToolCall,
};
use dsh_session::SessionsPlugin;
use dsh_tools::{Tool, Tools, ToolsPlugin};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::Notify;

/// One scripted response.
pub enum Script {
    /// These chunks, then the stream ends.
    Chunks(Vec<StreamChunk>),
    /// These chunks, then nothing until the request is cancelled.
    ChunksThenHang(Vec<StreamChunk>),
    /// Fails before streaming.
    Fail(LlmFailure),
}

/// An adapter that replays scripts and records requests.
#[derive(Default)]
pub struct Scripted {
    scripts: Mutex<VecDeque<Script>>,
    pub requests: Mutex<Vec<LlmRequest>>,
    pub arrived: Notify,
}

impl Scripted {
    pub fn push(&self, s: Script) {
        self.scripts.lock().push_back(s);
    }

    pub fn request_count(&self) -> usize {
        self.requests.lock().len()
    }

    /// Waits until `n` requests arrived.
    pub async fn wait_requests(&self, n: usize) {
        loop {
            let notified = self.arrived.notified();
            if self.request_count() >= n {
                return;
            }
            tokio::time::timeout(Duration::from_secs(10), notified)
                .await
                .expect("requests did not arrive");
        }
    }

    /// The messages of request `i` as JSON strings.
    pub fn messages(&self, i: usize) -> Vec<String> {
        self.requests.lock()[i]
            .messages
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect()
    }
}

impl LlmAdapter for Scripted {
    fn default_model(&self) -> String {
        "mock-model".into()
    }

    fn resolve_model(&self, model: &str) -> ModelInfo {
        ModelInfo {
            id: model.to_owned(),
            context_window: 100_000,
            default_max_tokens: 4096,
            max_output_tokens: None,
            reasoning_efforts: vec!["off".into(), "high".into()],
            default_effort: None,
            input_modalities: Vec::new(),
        }
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        let cancel = request.cancel.clone();
        self.requests.lock().push(request);
        self.arrived.notify_waiters();
        let script = self.scripts.lock().pop_front();
        Box::pin(async move {
            match script {
                None => Err(LlmFailure::new("SERVER", "no scripted response left")),
                Some(Script::Fail(f)) => Err(f),
                Some(Script::Chunks(chunks)) => {
                    Ok(Box::pin(futures::stream::iter(chunks)) as ChunkStream)
                }
                Some(Script::ChunksThenHang(chunks)) => {
                    let tail = futures::stream::once(async move {
                        cancel.cancelled().await;
                        StreamChunk::finish(FinishReason::Aborted {
                            failure: LlmFailure::new("ABORTED", "cancelled"),
                        })
                    });
                    Ok(Box::pin(futures::stream::iter(chunks).chain(tail)) as ChunkStream)
                }
            }
        })
    }
}

use futures::StreamExt;

#[derive(Clone, Default, serde::Deserialize, schemars::JsonSchema)]
struct MockConfig {
    #[serde(skip)]
    adapter: Option<Arc<Scripted>>,
}

/// Registers the scripted adapter on route `mock`.
struct MockRoute;
impl Plugin for MockRoute {
    const NAME: &'static str = "mock-route";
    type Config = MockConfig;
    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }
    async fn apply(ctx: Ctx, c: MockConfig) -> Result<(), BoxError> {
        let adapter = c.adapter.ok_or("no adapter")?;
        ctx.dep::<dyn Llm>()?.register(&ctx, "mock", adapter)?;
        Ok(())
    }
}

pub struct Harness {
    pub kernel: Kernel,
    pub llm: Arc<Scripted>,
    /// The agent loop's fiber (for live config updates).
    pub loop_fiber: dsh_kernel::FiberHandle,
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_config(AgentLoopConfig::default()).await
    }

    pub async fn with_config(config: AgentLoopConfig) -> Self {
        let llm = Arc::new(Scripted::default());
        let kernel = Kernel::new(PluginRegistry::new());
        let mut handles = vec![
            kernel
                .mount_plugin::<MockRoute>(MockConfig {
                    adapter: Some(llm.clone()),
                })
                .unwrap(),
            kernel.mount_plugin::<LlmPlugin>(EmptyConfig {}).unwrap(),
            kernel.mount_plugin::<AgentsPlugin>(EmptyConfig {}).unwrap(),
            kernel
                .mount_plugin::<SessionsPlugin>(EmptyConfig {})
                .unwrap(),
            kernel
                .mount_plugin::<ToolsPlugin>(Default::default())
                .unwrap(),
        ];
        let loop_fiber = kernel.mount_plugin::<AgentLoopPlugin>(config).unwrap();
        handles.push(loop_fiber.clone());
        for h in handles {
            h.ready().await.unwrap();
        }
        Self {
            kernel,
            llm,
            loop_fiber,
        }
    }

    pub fn agents(&self) -> Arc<dyn Agents> {
        self.kernel.root().get::<dyn Agents>().unwrap()
    }

    pub fn tools(&self) -> Arc<dyn Tools> {
        self.kernel.root().get::<dyn Tools>().unwrap()
    }

    pub fn register_tool(&self, tool: impl Tool) {
        self.tools()
            .register(&self.kernel.root(), Arc::new(tool))
            .unwrap();
    }

    pub async fn agent(&self) -> Arc<dyn Agent> {
        let options = AgentOptions {
            provider: Some("mock".into()),
            cwd: std::env::temp_dir(),
            ..Default::default()
        };
        self.agents()
            .create(
                &self.kernel.root(),
                CreateAgent {
                    options,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
    }
}

pub fn user(text: &str) -> Message {
    Message::user_text("", text)
}

/// A text answer.
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

/// Tool calls `(id, name, args)`, finishing with `tool-calls` (or `reason`).
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

pub fn calls(calls: &[(&str, &str, &str)]) -> Vec<StreamChunk> {
    calls_with(calls, FinishReason::ToolCalls)
}

/// Event types of a session, in order.
pub fn kinds(agent: &Arc<dyn Agent>) -> Vec<String> {
    agent
        .session()
        .events()
        .iter()
        .map(|e| e.kind().to_owned())
        .collect()
}

/// Data of every event of `kind`.
pub fn data_of(agent: &Arc<dyn Agent>, kind: &str) -> Vec<Value> {
    agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind() == kind)
        .map(|e| e.data().clone())
        .collect()
}

/// Waits for the agent to be idle (bounded).
pub async fn idle(agent: &Arc<dyn Agent>) {
    tokio::time::timeout(Duration::from_secs(10), agent.when_idle())
        .await
        .expect("agent never went idle");
}
