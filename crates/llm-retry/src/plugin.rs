//! The `llm-retry` plugin: the policy as a listener of `agent/request-error`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_agent::hooks::{AgentRequestError, RequestErrorDecision, RequestErrorInput};
use dsh_kernel::{BoxError, CancellationToken, Ctx, Next, Plugin};
use dsh_session::NewEvent;
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::policy::{GiveUp, PolicyError, RetryDecision, RetryMode, RetryPolicy, random_unit};
use crate::record::{RETRY_EVENT, RETRY_STARTED_EVENT, RetryRecord};

/// Config of [`LlmRetryPlugin`]: one default policy and per-provider overrides (budgets are per
/// provider).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LlmRetryConfig {
    /// The policy of every provider without an entry in `providers`.
    #[serde(default)]
    pub default: RetryPolicy,
    /// Policies by provider route id (each field defaulted as in `default`'s docs).
    #[serde(default)]
    pub providers: BTreeMap<String, RetryPolicy>,
}

impl LlmRetryConfig {
    /// The policy of `provider`.
    pub fn policy_for(&self, provider: &str) -> &RetryPolicy {
        self.providers.get(provider).unwrap_or(&self.default)
    }

    /// Checks every policy, naming the bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.default.validate().map_err(ConfigError::Default)?;
        for (name, p) in &self.providers {
            p.validate().map_err(|source| ConfigError::Provider {
                name: name.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

/// A policy of [`LlmRetryConfig`] that cannot work, naming where it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The `default` policy.
    #[error("default: {0}")]
    Default(#[source] PolicyError),
    /// The policy of one provider.
    #[error("providers.{name}: {source}")]
    Provider {
        /// The provider route.
        name: String,
        /// What is wrong with it.
        source: PolicyError,
    },
}

/// A retry chain: retries are counted per (agent, turn, step, provider, policy).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ChainKey {
    agent: String,
    turn: u64,
    step: u64,
    provider: String,
    policy_key: String,
}

/// Retry counts of the live chains (only the current step of each agent is kept).
#[derive(Default)]
struct Chains {
    spent: Mutex<HashMap<ChainKey, u32>>,
}

impl Chains {
    fn spent(&self, key: &ChainKey) -> u32 {
        let mut map = self.spent.lock();
        // Chains of earlier steps of this agent are over.
        map.retain(|k, _| k.agent != key.agent || (k.turn == key.turn && k.step == key.step));
        map.get(key).copied().unwrap_or(0)
    }

    fn set(&self, key: ChainKey, retry: u32) {
        self.spent.lock().insert(key, retry);
    }
}

/// Listens on `agent/request-error`: for a failure the policy retries, appends `llm/retry`,
/// waits (cancellation wins), appends `llm/retry-started` and answers `Retry`; otherwise passes
/// the failure down the chain. In `always` mode downstream recovery runs first.
#[derive(Debug)]
pub struct LlmRetryPlugin;

impl Plugin for LlmRetryPlugin {
    const NAME: &'static str = "llm-retry";
    type Config = LlmRetryConfig;

    async fn apply(ctx: Ctx, config: LlmRetryConfig) -> Result<(), BoxError> {
        config.validate()?;
        let config = Arc::new(config);
        let chains = Arc::new(Chains::default());
        let unloading = ctx.cancel_token();
        ctx.hook::<AgentRequestError, _, _>(move |input, next| {
            let config = config.clone();
            let chains = chains.clone();
            let unloading = unloading.clone();
            async move { on_request_error(&config, &chains, &unloading, input, next).await }
        })?;
        Ok(())
    }
}

/// What survives handing the input to `next` (always mode).
struct Failed {
    agent: Arc<dyn Agent>,
    turn: u64,
    step: u64,
    provider: String,
    failure: dsh_llm::LlmFailure,
    cancel: CancellationToken,
}

async fn on_request_error(
    config: &LlmRetryConfig,
    chains: &Chains,
    unloading: &CancellationToken,
    input: RequestErrorInput,
    next: Next<AgentRequestError>,
) -> RequestErrorDecision {
    if input.cancel.is_cancelled() {
        return next.run(input).await;
    }
    let policy = config.policy_for(&input.provider).clone();
    let failed = Failed {
        agent: input.agent.clone(),
        turn: input.turn,
        step: input.step,
        provider: input.provider.clone(),
        failure: input.failure.clone(),
        cancel: input.cancel.clone(),
    };
    let key = chain_key(&failed, &policy);
    if policy.mode == RetryMode::Always {
        let downstream = next.run(input).await;
        if downstream == RequestErrorDecision::Retry || failed.cancel.is_cancelled() {
            return downstream;
        }
        return match policy.decide(&failed.failure, chains.spent(&key), random_unit()) {
            RetryDecision::Retry { retry: n, delay } => {
                retry(&policy, chains, key, unloading, &failed, n, delay).await
            }
            RetryDecision::GiveUp(reason) => {
                log_give_up(&failed, reason);
                downstream
            }
        };
    }
    match policy.decide(&failed.failure, chains.spent(&key), random_unit()) {
        RetryDecision::Retry { retry: n, delay } => {
            retry(&policy, chains, key, unloading, &failed, n, delay).await
        }
        RetryDecision::GiveUp(reason) => {
            log_give_up(&failed, reason);
            next.run(input).await
        }
    }
}

fn chain_key(failed: &Failed, policy: &RetryPolicy) -> ChainKey {
    ChainKey {
        agent: failed.agent.id().to_owned(),
        turn: failed.turn,
        step: failed.step,
        provider: failed.provider.clone(),
        policy_key: policy.policy_key(),
    }
}

fn log_give_up(failed: &Failed, reason: GiveUp) {
    tracing::debug!(
        agent = failed.agent.id(),
        code = %failed.failure.code,
        ?reason,
        "llm-retry: not retrying"
    );
}

/// Records `llm/retry`, waits `delay` (cancellation and unloading win), records
/// `llm/retry-started` and answers `Retry`; any refusal on the way answers `Fail`.
async fn retry(
    policy: &RetryPolicy,
    chains: &Chains,
    key: ChainKey,
    unloading: &CancellationToken,
    failed: &Failed,
    retry: u32,
    delay: std::time::Duration,
) -> RequestErrorDecision {
    chains.set(key, retry);
    let record = RetryRecord {
        retry_id: format!("retry-{}", uuid::Uuid::now_v7()),
        turn: failed.turn,
        step: failed.step,
        provider: failed.provider.clone(),
        policy: policy.clone(),
        retry,
        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        failure: failed.failure.clone(),
    };
    let session = failed.agent.session();
    if let Err(e) = session.append(NewEvent::new(RETRY_EVENT, record.retry_data())) {
        tracing::warn!(agent = failed.agent.id(), error = %e, "llm-retry: cannot record llm/retry");
        return RequestErrorDecision::Fail;
    }
    tokio::select! {
        biased;
        _ = failed.cancel.cancelled() => return RequestErrorDecision::Fail,
        _ = unloading.cancelled() => return RequestErrorDecision::Fail,
        _ = tokio::time::sleep(delay) => {}
    }
    if failed.cancel.is_cancelled() {
        return RequestErrorDecision::Fail;
    }
    if let Err(e) = session.append(NewEvent::new(RETRY_STARTED_EVENT, record.started_data())) {
        tracing::warn!(agent = failed.agent.id(), error = %e, "llm-retry: cannot record llm/retry-started");
        return RequestErrorDecision::Fail;
    }
    RequestErrorDecision::Retry
}
