//! `dsh-agent-loop`: the concrete agent driver ("call the model, run the tools, repeat").
//!
//! It fills the factory slot of the `agents` service, so consumers never depend on it. Each
//! agent owns a session: every fact is appended to the log before the next step derives its
//! request from it, so a request can always be rebuilt byte for byte from the log alone.
//!
//! - [`AgentLoopPlugin`]: config (`agents[]`, `maxParallelToolCalls`), declarative agents,
//!   factory registration.
//! - The turn and step machine, prompt reconciliation (`session-format.md` §10), request
//!   bookkeeping (§9), inbox splices (§11), cancellation and failure recovery (§13).

mod agent;
mod attempt;
mod context;
mod factory;
mod request;
mod tools;
mod turn;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_agent::{AgentOptions, Agents, CreateAgent, ResumeAgent};
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::service::Llm;
use dsh_session::Sessions;
use dsh_tools::Tools;
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;

pub use factory::LoopFactory;

/// Default of `maxParallelToolCalls`.
pub const DEFAULT_MAX_PARALLEL_TOOL_CALLS: usize = 10;

/// One declarative agent, started when the plugin loads.
#[derive(Clone, Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentSpec {
    /// Stable label; a fresh session is named `<id>-session-<uuid>` unless `sessionId` is set.
    pub id: String,
    /// Provider route, e.g. `deepseek`.
    #[serde(default)]
    pub provider: Option<String>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Initial reasoning effort (`off|low|high|max`).
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// Positive per-request output-token cap.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Workspace directory of a fresh session (default: the process's current directory).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Exact identity: first use creates, later uses resume.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Load this stored session instead of creating one (exclusive with `sessionId`).
    #[serde(default)]
    pub resume_session_id: Option<String>,
}

/// Config of [`AgentLoopPlugin`].
#[derive(Clone, Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentLoopConfig {
    /// Agents started at load (startup configuration).
    #[serde(default)]
    pub agents: Vec<AgentSpec>,
    /// Size of the rolling pool of parallel-safe tool calls (1 = serial). Live: applies to the
    /// next batch.
    #[serde(default = "default_parallel")]
    #[schemars(range(min = 1))]
    pub max_parallel_tool_calls: usize,
}

fn default_parallel() -> usize {
    DEFAULT_MAX_PARALLEL_TOOL_CALLS
}

impl Default for AgentLoopConfig {
    fn default() -> Self {
        Self {
            agents: Vec::new(),
            max_parallel_tool_calls: DEFAULT_MAX_PARALLEL_TOOL_CALLS,
        }
    }
}

/// What every agent of one loop instance shares.
pub(crate) struct LoopShared {
    pub(crate) ctx: Ctx,
    pub(crate) sessions: Arc<dyn Sessions>,
    pub(crate) llm: Arc<dyn Llm>,
    pub(crate) tools: Arc<dyn Tools>,
    pub(crate) agents: Arc<dyn Agents>,
    pub(crate) max_parallel: AtomicUsize,
    /// The live config, read at each batch: `update_config` returns once the new value is in
    /// this watch, before any spawned task could apply it.
    pub(crate) config: Option<tokio::sync::watch::Receiver<AgentLoopConfig>>,
    /// Agents created by this loop, for teardown when the loop unloads.
    pub(crate) live: Mutex<Vec<std::sync::Weak<agent::LoopAgent>>>,
}

impl LoopShared {
    pub(crate) fn max_parallel(&self) -> usize {
        if let Some(rx) = &self.config {
            // An invalid (zero) update keeps the last good value.
            let n = rx.borrow().max_parallel_tool_calls;
            if n > 0 {
                self.max_parallel.store(n, Ordering::Relaxed);
            }
        }
        self.max_parallel.load(Ordering::Relaxed).max(1)
    }
}

/// Why an `agent-loop` config row is refused (the field path is in the message).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// `maxParallelToolCalls` is 0.
    #[error("maxParallelToolCalls: must be a positive integer (1 = serial)")]
    ZeroParallel,
    /// `agents[i].id` is empty.
    #[error("agents[{0}].id: must not be empty")]
    EmptyId(usize),
    /// `agents[i].maxTokens` is 0.
    #[error("agents[{0}].maxTokens: must be a positive integer")]
    ZeroMaxTokens(usize),
    /// `agents[i]` names both a new and a resumed session.
    #[error("agents[{0}]: sessionId and resumeSessionId are mutually exclusive")]
    SessionConflict(usize),
}

fn check_config(config: &AgentLoopConfig) -> Result<(), ConfigError> {
    if config.max_parallel_tool_calls == 0 {
        return Err(ConfigError::ZeroParallel);
    }
    for (i, a) in config.agents.iter().enumerate() {
        if a.id.is_empty() {
            return Err(ConfigError::EmptyId(i));
        }
        if a.max_tokens == Some(0) {
            return Err(ConfigError::ZeroMaxTokens(i));
        }
        if a.session_id.is_some() && a.resume_session_id.is_some() {
            return Err(ConfigError::SessionConflict(i));
        }
    }
    Ok(())
}

/// The agent loop plugin: fills the `agents` factory slot and starts declarative agents.
pub struct AgentLoopPlugin;

impl Plugin for AgentLoopPlugin {
    const NAME: &'static str = "agent-loop";
    type Config = AgentLoopConfig;
    const LIVE_CONFIG: bool = true;

    fn deps() -> Vec<Dep> {
        vec![
            Dep::on::<dyn Agents>(),
            Dep::on::<dyn Sessions>(),
            Dep::on::<dyn Llm>(),
            Dep::on::<dyn Tools>(),
        ]
    }

    async fn apply(ctx: Ctx, config: AgentLoopConfig) -> Result<(), BoxError> {
        check_config(&config)?;
        let shared = Arc::new(LoopShared {
            ctx: ctx.clone(),
            sessions: ctx.dep::<dyn Sessions>()?,
            llm: ctx.dep::<dyn Llm>()?,
            tools: ctx.dep::<dyn Tools>()?,
            agents: ctx.dep::<dyn Agents>()?,
            max_parallel: AtomicUsize::new(config.max_parallel_tool_calls),
            config: ctx.config_watch::<AgentLoopConfig>(),
            live: Mutex::new(Vec::new()),
        });
        // Agents outlive nothing: dispose them (and commit their closing events) at unload.
        let s = shared.clone();
        ctx.on_dispose_async(async move {
            let agents: Vec<_> = s
                .live
                .lock()
                .drain(..)
                .filter_map(|w| w.upgrade())
                .collect();
            for a in agents.into_iter().rev() {
                a.dispose_now().await;
            }
        })?;
        shared
            .agents
            .set_factory(&ctx, Arc::new(LoopFactory::new(shared.clone())))?;
        if let Some(mut rx) = ctx.config_watch::<AgentLoopConfig>() {
            let s = shared.clone();
            ctx.spawn(async move {
                while rx.changed().await.is_ok() {
                    let n = rx.borrow_and_update().max_parallel_tool_calls;
                    if n == 0 {
                        tracing::warn!(
                            "maxParallelToolCalls must be positive; keeping the old value"
                        );
                        continue;
                    }
                    s.max_parallel.store(n, Ordering::Relaxed);
                }
            })?;
        }
        for spec in &config.agents {
            start_declared(&ctx, &shared, spec).await;
        }
        Ok(())
    }
}

async fn start_declared(ctx: &Ctx, shared: &Arc<LoopShared>, spec: &AgentSpec) {
    let options = AgentOptions {
        provider: spec.provider.clone(),
        model: spec.model.clone(),
        reasoning_effort: spec
            .reasoning_effort
            .as_deref()
            .map(dsh_llm::ReasoningEffort::from_wire),
        max_tokens: spec.max_tokens,
        temperature: None,
        cwd: spec.cwd.clone().map(Into::into).unwrap_or_else(default_cwd),
    };
    let result = match &spec.resume_session_id {
        Some(id) => {
            shared
                .agents
                .resume(
                    ctx,
                    ResumeAgent {
                        session_id: id.clone(),
                        options,
                        setup: None,
                    },
                )
                .await
        }
        None => {
            shared
                .agents
                .create(
                    ctx,
                    CreateAgent {
                        session_id: spec.session_id.clone(),
                        label: Some(spec.id.clone()),
                        options,
                        setup: None,
                    },
                )
                .await
        }
    };
    if let Err(e) = result {
        tracing::warn!(agent = %spec.id, error = %e, "configured agent did not start");
    }
}

pub(crate) fn default_cwd() -> std::path::PathBuf {
    std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configs_are_refused_by_variant() {
        let ok: AgentLoopConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(check_config(&ok), Ok(()));
        let zero: AgentLoopConfig =
            serde_json::from_value(serde_json::json!({"maxParallelToolCalls": 0})).unwrap();
        assert_eq!(check_config(&zero), Err(ConfigError::ZeroParallel));
        let agents: AgentLoopConfig = serde_json::from_value(serde_json::json!({
            "agents": [{"id": "a"}, {"id": "b", "maxTokens": 0}]
        }))
        .unwrap();
        assert_eq!(check_config(&agents), Err(ConfigError::ZeroMaxTokens(1)));
    }
}
