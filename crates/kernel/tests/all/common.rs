//! Shared test plugins and probes.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin, Service};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;

/// An ordered log shared between a test and its plugins.
#[derive(Clone, Debug, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().push(s.into());
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }
    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}

pub trait Greeter: Send + Sync {
    fn greet(&self) -> String;
}
impl Service for dyn Greeter {
    const NAME: &'static str = "greeter";
}

struct FixedGreeter(String);
impl Greeter for FixedGreeter {
    fn greet(&self) -> String {
        self.0.clone()
    }
}

#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProbeConfig {
    #[serde(default)]
    pub label: String,
    #[serde(skip)]
    pub log: Log,
    #[serde(skip)]
    pub ctx_out: Option<Arc<Mutex<Option<Ctx>>>>,
}

impl ProbeConfig {
    pub fn new(label: &str, log: &Log) -> Self {
        Self {
            label: label.to_owned(),
            log: log.clone(),
            ctx_out: None,
        }
    }
}

/// Provides `Greeter` answering its label.
pub struct Provider;
impl Plugin for Provider {
    const NAME: &'static str = "provider";
    type Config = ProbeConfig;
    async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
        config.log.push(format!("provider:apply:{}", config.label));
        ctx.provide::<dyn Greeter>(Arc::new(FixedGreeter(config.label.clone())))?;
        let log = config.log.clone();
        ctx.on_dispose(move || log.push("provider:dispose"))?;
        Ok(())
    }
}

/// A second provider of the same service, for duplicate tests.
pub struct OtherProvider;
impl Plugin for OtherProvider {
    const NAME: &'static str = "other-provider";
    type Config = ProbeConfig;
    async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
        ctx.provide::<dyn Greeter>(Arc::new(FixedGreeter(config.label)))?;
        Ok(())
    }
}

/// Depends on `Greeter`; its async disposer yields several times before logging.
pub struct Consumer;
impl Plugin for Consumer {
    const NAME: &'static str = "consumer";
    type Config = ProbeConfig;
    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Greeter>()]
    }
    async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
        let greeter = ctx.dep::<dyn Greeter>()?;
        config
            .log
            .push(format!("consumer:apply:{}", greeter.greet()));
        if let Some(out) = &config.ctx_out {
            *out.lock() = Some(ctx.clone());
        }
        let log = config.log.clone();
        ctx.on_dispose_async(async move {
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
            log.push("consumer:dispose");
        })?;
        Ok(())
    }
}

/// Hands its ctx to the test and does nothing else.
pub struct Bare;
impl Plugin for Bare {
    const NAME: &'static str = "bare";
    type Config = ProbeConfig;
    async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
        config.log.push(format!("bare:apply:{}", config.label));
        if let Some(out) = &config.ctx_out {
            *out.lock() = Some(ctx.clone());
        }
        Ok(())
    }
}

pub fn take_ctx(slot: &Arc<Mutex<Option<Ctx>>>) -> Ctx {
    slot.lock().clone().expect("plugin stored its ctx")
}
