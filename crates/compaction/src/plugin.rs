//! The plugins: `tool-result-pruner` (the pruner service) and `compaction-basic` (the
//! [`Compaction`] service, pressure at `agent/pre-step`, overflow recovery at
//! `agent/request-error`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dsh_agent::hooks::{
    AgentRequestError, PreStep, PreStepInput, RequestErrorDecision, RequestErrorInput,
};
use dsh_agent::{Agent, AgentStatus};
use dsh_kernel::{BoxError, CancellationToken, Ctx, Dep, Next, Plugin};
use dsh_llm::{FailureCode, Llm, Message};
use dsh_session::{CoreEvent, Session, SessionError};
use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::compact::{CompactionRequest, Target, compact};
use crate::config::BasicConfig;
use crate::prune::{PrunerConfig, prune_plan};
use dsh_compaction_api::meter::TokenMeter;
use dsh_compaction_api::{Compaction, CompactionError, CompactionOutcome, ToolResultPruner};

struct Pruner(PrunerConfig);

impl ToolResultPruner for Pruner {
    fn prune(&self, session: &Session, meter: &TokenMeter) -> Result<usize, SessionError> {
        let plan = session.with_log(|l| prune_plan(l, &self.0, meter));
        let n = plan.len();
        if n > 0 {
            session.append_all(plan.into_iter().flat_map(|p| p.events).collect())?;
            tracing::info!(session = %session.id(), pruned = n, "pruned old tool results");
        }
        Ok(n)
    }

    fn savings(&self, session: &Session, meter: &TokenMeter) -> u64 {
        session.with_log(|l| {
            prune_plan(l, &self.0, meter)
                .iter()
                .map(|p| p.saved_tokens)
                .sum()
        })
    }
}

/// Plugin `tool-result-pruner`: provides [`ToolResultPruner`]; runs only when compaction asks.
#[derive(Debug)]
pub struct ToolResultPrunerPlugin;

impl Plugin for ToolResultPrunerPlugin {
    const NAME: &'static str = "tool-result-pruner";
    type Config = PrunerConfig;

    async fn apply(ctx: Ctx, config: PrunerConfig) -> Result<(), BoxError> {
        config.validate()?;
        ctx.provide::<dyn ToolResultPruner>(Arc::new(Pruner(config)) as Arc<dyn ToolResultPruner>)?;
        Ok(())
    }
}

/// Shared state of `compaction-basic`.
struct Basic {
    ctx: Ctx,
    config: BasicConfig,
    meter: TokenMeter,
    llm: Arc<dyn Llm>,
    /// Agents with a compaction in flight (the in-process lock; the durable bracket records it).
    busy: Mutex<HashSet<String>>,
    /// Overflow recoveries spent per agent in its current step.
    overflow: Mutex<HashMap<String, Spent>>,
    /// Targets already warned about (no context window).
    warned: Mutex<HashSet<String>>,
}

/// Overflow recoveries spent in one step: ((turn, step), count).
type Spent = ((u64, u64), u32);

/// Releases the busy mark.
struct BusyGuard<'a>(&'a Basic, String);
impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0.busy.lock().remove(&self.1);
    }
}

impl Basic {
    fn lock(&self, agent: &str) -> Result<BusyGuard<'_>, CompactionError> {
        if !self.busy.lock().insert(agent.to_owned()) {
            return Err(CompactionError::Busy(format!(
                "a compaction of `{agent}` is already running"
            )));
        }
        Ok(BusyGuard(self, agent.to_owned()))
    }

    fn pruner(&self) -> Option<Arc<dyn ToolResultPruner>> {
        self.ctx.get::<dyn ToolResultPruner>()
    }

    fn target(&self) -> Option<Target> {
        (!self.config.summarization_provider.is_empty()).then(|| Target {
            provider: self.config.summarization_provider.clone(),
            model: self.config.summarization_model.clone(),
        })
    }

    /// Provider, model and context window of the conversation's newest request.
    fn route(&self, session: &Session) -> Option<(String, String, u64)> {
        let (provider, model) = session.with_log(|l| match l.latest_request_header()?.core() {
            Some(CoreEvent::RequestHeader(h)) => Some((
                h.header.config.provider.clone(),
                h.header.config.model.clone(),
            )),
            _ => None,
        })?;
        let window = self
            .llm
            .adapter(&provider)
            .map(|a| a.resolve_model(&model).context_window)
            .filter(|w| *w > 0);
        let Some(window) = window else {
            let key = format!("{provider}/{model}");
            if self.warned.lock().insert(key.clone()) {
                tracing::warn!(
                    "no context capacity for {key}; configure contextWindow for the model"
                );
            }
            return None;
        };
        Some((provider, model, window))
    }

    fn request(
        &self,
        turn: Option<u64>,
        retain_tokens: u64,
        pending: Vec<Message>,
        max_tokens: u64,
        cancel: CancellationToken,
        source_command_id: Option<String>,
    ) -> CompactionRequest {
        CompactionRequest {
            turn,
            retain_tokens,
            source_command_id,
            pending,
            target: self.target(),
            max_tokens,
            cancel,
        }
    }

    /// Pressure (pre-step): below the threshold nothing happens. Above it, pruning alone is
    /// used when it is enough; otherwise the summary runs first on the unpruned history (its
    /// request is then a byte-extension of the last one, served from the prefix cache) and the
    /// pruner afterwards, then up to `compactionRetries` more rounds.
    async fn pressure(&self, input: &PreStepInput) -> Result<(), CompactionError> {
        let agent = &input.agent;
        let session = agent.session();
        let Some((provider, model, window)) = self.route(&session) else {
            return Ok(());
        };
        let policy = self.config.policy_for(&provider, &model);
        let threshold = policy.threshold(window);
        let measure = |s: &Session| s.with_log(|l| self.meter.measure(l, &input.batch).tokens);
        let before = measure(&session);
        if before <= threshold {
            return Ok(());
        }
        let _guard = self.lock(agent.id())?;
        let pruner = self.pruner();
        if let Some(p) = &pruner
            && before.saturating_sub(p.savings(&session, &self.meter)) <= threshold
        {
            p.prune(&session, &self.meter)?;
            return Ok(());
        }
        // Leave room for the summary's own output in the window.
        let max_tokens = policy
            .max_tokens
            .min(window.saturating_sub(before).max(1024));
        for _ in 0..=policy.compaction_retries {
            let req = self.request(
                Some(input.turn),
                policy.retain(window),
                input.batch.clone(),
                max_tokens,
                input.cancel.clone(),
                None,
            );
            let landed = compact(&self.llm, &self.meter, agent, req).await?;
            if let Some(p) = &pruner
                && measure(&session) > threshold
            {
                p.prune(&session, &self.meter)?;
            }
            if landed.is_none() || measure(&session) <= threshold {
                break;
            }
        }
        Ok(())
    }

    /// Overflow: prune, compact maximally (retain 0), retry iff the surface changed.
    async fn overflow(&self, input: &RequestErrorInput) -> bool {
        let agent = &input.agent;
        let policy = self.config.policy_for(&input.provider, &input.model);
        {
            let mut spent = self.overflow.lock();
            let entry = spent
                .entry(agent.id().to_owned())
                .or_insert(((input.turn, input.step), 0));
            if entry.0 != (input.turn, input.step) {
                *entry = ((input.turn, input.step), 0);
            }
            if entry.1 >= policy.max_overflow_retries {
                tracing::warn!(agent = %agent.id(), "context window exceeded again after compaction; giving up");
                return false;
            }
            entry.1 += 1;
        }
        let Ok(_guard) = self.lock(agent.id()) else {
            return false;
        };
        let session = agent.session();
        let generation = session.with_log(|l| l.surface().replace_generation());
        if let Some(p) = self.pruner()
            && let Err(e) = p.prune(&session, &self.meter)
        {
            tracing::warn!(agent = %agent.id(), error = %e, "overflow pruning failed");
        }
        let req = self.request(
            Some(input.turn),
            0,
            Vec::new(),
            policy.max_tokens,
            input.cancel.clone(),
            None,
        );
        if let Err(e) = compact(&self.llm, &self.meter, agent, req).await {
            tracing::warn!(agent = %agent.id(), error = %e, "overflow compaction failed");
        }
        session.with_log(|l| l.surface().replace_generation()) > generation
    }
}

/// The [`Compaction`] service over the shared state.
struct Service(Arc<Basic>);

impl Compaction for Service {
    fn compact_now(
        &self,
        agent: Arc<dyn Agent>,
        cancel: CancellationToken,
        source_command_id: Option<String>,
    ) -> BoxFuture<'static, Result<Option<CompactionOutcome>, CompactionError>> {
        let basic = self.0.clone();
        Box::pin(async move {
            if agent.status() != AgentStatus::Idle {
                return Err(CompactionError::Busy(format!(
                    "agent `{}` is not idle",
                    agent.id()
                )));
            }
            let _guard = basic.lock(agent.id())?;
            let session = agent.session();
            let max_tokens = match basic.route(&session) {
                Some((p, m, _)) => basic.config.policy_for(&p, &m).max_tokens,
                None => basic.config.policy_for("", "").max_tokens,
            };
            let req = basic.request(None, 0, Vec::new(), max_tokens, cancel, source_command_id);
            let out = compact(&basic.llm, &basic.meter, &agent, req).await;
            session.flush().await?;
            out
        })
    }
}

/// Plugin `compaction-basic`: provides [`Compaction`]; with `auto` (default) it also compacts
/// at pressure and recovers from context overflow.
#[derive(Debug)]
pub struct CompactionBasicPlugin;

impl Plugin for CompactionBasicPlugin {
    const NAME: &'static str = "compaction-basic";
    type Config = BasicConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: BasicConfig) -> Result<(), BoxError> {
        config.validate()?;
        let llm = ctx.dep::<dyn Llm>()?;
        let basic = Arc::new(Basic {
            ctx: ctx.clone(),
            meter: config.meter.unwrap_or_default(),
            config,
            llm,
            busy: Mutex::new(HashSet::new()),
            overflow: Mutex::new(HashMap::new()),
            warned: Mutex::new(HashSet::new()),
        });
        ctx.provide::<dyn Compaction>(Arc::new(Service(basic.clone())) as Arc<dyn Compaction>)?;
        if !basic.config.auto() {
            return Ok(());
        }
        let b = basic.clone();
        ctx.hook::<PreStep, _, _>(move |input: PreStepInput, next: Next<PreStep>| {
            let b = b.clone();
            async move {
                if let Err(e) = b.pressure(&input).await {
                    tracing::warn!(agent = %input.agent.id(), "step compaction failed: {e}; continuing the turn");
                }
                next.run(input).await
            }
        })?;
        let b = basic;
        ctx.hook::<AgentRequestError, _, _>(
            move |input: RequestErrorInput, next: Next<AgentRequestError>| {
                let b = b.clone();
                async move {
                    if input.failure.code == FailureCode::ContextWindowExceeded
                        && !input.cancel.is_cancelled()
                        && b.overflow(&input).await
                    {
                        return RequestErrorDecision::Retry;
                    }
                    next.run(input).await
                }
            },
        )?;
        Ok(())
    }
}
