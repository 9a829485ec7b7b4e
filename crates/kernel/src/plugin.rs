//! Plugins and the registry of plugin factories.

use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::ctx::Ctx;
use crate::error::{BoxError, KernelError};
use crate::service::Dep;

/// A plugin: a named unit of composition with a typed config, declared service dependencies and an
/// async `apply` that registers its effects through the given [`Ctx`].
///
/// `apply` never runs inside the call that mounts the plugin; it runs once every declared
/// dependency is provided, and runs again (after a full unload) whenever a provider is replaced or
/// the config changes.
pub trait Plugin: Send + Sync + 'static {
    /// The name used in compositions, logs and errors.
    const NAME: &'static str;
    /// The config. Derive `Deserialize` with `deny_unknown_fields` and `rename_all = "camelCase"`.
    type Config: DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static;
    /// When true, a config update is delivered in place through [`Ctx::config_watch`] instead of
    /// restarting the plugin.
    const LIVE_CONFIG: bool = false;

    /// Services that must exist before `apply` runs.
    fn deps() -> Vec<Dep> {
        Vec::new()
    }

    /// Registers the plugin's services, listeners, tasks and disposers.
    fn apply(ctx: Ctx, config: Self::Config) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// A config for plugins that take none: accepts `{}` (or nothing) and rejects any field.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyConfig {}

/// A type-erased config value.
pub(crate) type AnyConfig = Arc<dyn Any + Send + Sync>;

/// Type-erased view of a [`Plugin`] used by the registry and fibers.
pub(crate) trait ErasedPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    fn deps(&self) -> Vec<Dep>;
    fn live(&self) -> bool;
    fn parse(&self, value: &serde_json::Value) -> Result<AnyConfig, KernelError>;
    fn schema(&self) -> serde_json::Value;
    fn apply(&self, ctx: Ctx, config: AnyConfig) -> BoxFuture<'static, Result<(), BoxError>>;
    /// A watch channel sender for in-place config delivery, holding `config`.
    fn config_slot(&self, config: &AnyConfig) -> Option<Box<dyn Any + Send + Sync>>;
    /// Sends `config` through a slot made by `config_slot`.
    fn send_config(&self, slot: &(dyn Any + Send + Sync), config: &AnyConfig);
}

struct Erased<P: Plugin>(std::marker::PhantomData<fn() -> P>);

impl<P: Plugin> ErasedPlugin for Erased<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn deps(&self) -> Vec<Dep> {
        P::deps()
    }

    fn live(&self) -> bool {
        P::LIVE_CONFIG
    }

    fn parse(&self, value: &serde_json::Value) -> Result<AnyConfig, KernelError> {
        let config: P::Config = parse_config(P::NAME, value)?;
        Ok(Arc::new(config))
    }

    fn schema(&self) -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(P::Config)).unwrap_or(serde_json::Value::Null)
    }

    fn apply(&self, ctx: Ctx, config: AnyConfig) -> BoxFuture<'static, Result<(), BoxError>> {
        match config.downcast_ref::<P::Config>() {
            Some(c) => Box::pin(P::apply(ctx, c.clone())),
            None => {
                let err = KernelError::ConfigType(P::NAME.to_owned());
                Box::pin(async move { Err(err.into()) })
            }
        }
    }

    fn config_slot(&self, config: &AnyConfig) -> Option<Box<dyn Any + Send + Sync>> {
        let c = config.downcast_ref::<P::Config>()?;
        let (tx, _rx) = watch::channel(c.clone());
        Some(Box::new(tx))
    }

    fn send_config(&self, slot: &(dyn Any + Send + Sync), config: &AnyConfig) {
        if let (Some(tx), Some(c)) = (
            slot.downcast_ref::<watch::Sender<P::Config>>(),
            config.downcast_ref::<P::Config>(),
        ) {
            tx.send_replace(c.clone());
        }
    }
}

/// Parses a config value, naming the path of a bad field in the error (`agents[0].maxTokens`).
/// `null` is read as `{}` so plugins without settings can be mounted without a config.
pub fn parse_config<C: DeserializeOwned>(
    plugin: &str,
    value: &serde_json::Value,
) -> Result<C, KernelError> {
    let empty = serde_json::Value::Object(serde_json::Map::new());
    let value = if value.is_null() { &empty } else { value };
    serde_path_to_error::deserialize::<_, C>(value).map_err(|e| {
        let path = e.path().to_string();
        KernelError::Config {
            plugin: plugin.to_owned(),
            path,
            message: e.into_inner().to_string(),
        }
    })
}

/// Converts a YAML document to a JSON value (for mounting with YAML configs).
pub fn yaml_to_json(yaml: &str) -> Result<serde_json::Value, KernelError> {
    yaml_serde::from_str::<serde_json::Value>(yaml).map_err(KernelError::Yaml)
}

/// The registry of plugin factories, filled explicitly by the binary (each plugin crate exports its
/// plugins) and consulted when mounting by name.
#[derive(Clone, Default)]
pub struct PluginRegistry {
    plugins: BTreeMap<&'static str, Arc<dyn ErasedPlugin>>,
}

impl PluginRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds plugin `P` under `P::NAME` (a later registration of the same name replaces it).
    pub fn register<P: Plugin>(&mut self) -> &mut Self {
        self.plugins
            .insert(P::NAME, Arc::new(Erased::<P>(std::marker::PhantomData)));
        self
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.plugins.keys().map(|k| (*k).to_owned()).collect()
    }

    /// The JSON Schema of a plugin's config.
    pub fn schema(&self, name: &str) -> Result<serde_json::Value, KernelError> {
        Ok(self.lookup(name)?.schema())
    }

    /// Validates a config value for a plugin without mounting it.
    pub fn validate(&self, name: &str, config: &serde_json::Value) -> Result<(), KernelError> {
        self.lookup(name)?.parse(config).map(|_| ())
    }

    pub(crate) fn lookup(&self, name: &str) -> Result<Arc<dyn ErasedPlugin>, KernelError> {
        self.plugins
            .get(name)
            .cloned()
            .ok_or_else(|| KernelError::UnknownPlugin {
                name: name.to_owned(),
                known: self.names(),
            })
    }

    pub(crate) fn erased<P: Plugin>() -> Arc<dyn ErasedPlugin> {
        Arc::new(Erased::<P>(std::marker::PhantomData))
    }
}

impl std::fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.plugins.keys()).finish()
    }
}
