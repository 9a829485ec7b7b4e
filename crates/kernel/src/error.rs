//! Errors reported by the kernel.

use std::fmt;

/// A boxed error for plugin bodies, listeners and disposers: any error type converts into it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One failing listener of a [`crate::Parallel`] dispatch.
#[derive(Debug)]
pub struct ListenerFailure {
    /// Name of the plugin that owns the listener.
    pub owner: String,
    /// What the listener returned (or a description of its panic).
    pub error: String,
}

impl fmt::Display for ListenerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.owner, self.error)
    }
}

/// Errors of the kernel API. Each variant names what went wrong and who was involved.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A second provider for a service that already has one.
    #[error(
        "service `{service}` is already provided by `{existing}`; `{requested}` cannot provide it too"
    )]
    DuplicateService {
        /// The service's `NAME`.
        service: &'static str,
        /// The plugin that provides it now.
        existing: String,
        /// The plugin that tried to provide it as well.
        requested: String,
    },
    /// `dep()` for a service the plugin did not declare in `deps()`.
    #[error(
        "plugin `{plugin}` did not declare a dependency on service `{service}`; use `get()` or add it to `deps()`"
    )]
    UndeclaredDependency {
        /// The plugin.
        plugin: String,
        /// The service's `NAME`.
        service: &'static str,
    },
    /// A registration on a fiber that is unloading, disposed, or an earlier activation's context.
    #[error("`{owner}` cannot register {what}: its fiber is {state}")]
    Inactive {
        /// The fiber's name.
        owner: String,
        /// What was being registered.
        what: String,
        /// The fiber's state, or "stale" for a context of an earlier activation.
        state: String,
    },
    /// Mount of a plugin name that the registry does not know.
    #[error("unknown plugin `{name}`; known plugins: {}", known.join(", "))]
    UnknownPlugin {
        /// The requested name.
        name: String,
        /// Every registered name, sorted.
        known: Vec<String>,
    },
    /// A config value that does not fit the plugin's schema.
    #[error("invalid config for plugin `{plugin}`: {path}: {message}")]
    Config {
        /// The plugin name.
        plugin: String,
        /// Path of the bad field, e.g. `agents[0].maxTokens` (`.` for the root).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// YAML that does not parse.
    #[error("invalid YAML: {0}")]
    Yaml(#[source] yaml_serde::Error),
    /// A plugin's `apply` failed; the fiber is `Failed`.
    #[error("plugin `{plugin}` failed to apply: {message}")]
    ApplyFailed {
        /// The plugin.
        plugin: String,
        /// The error it returned, or its panic.
        message: String,
    },
    /// The fiber was disposed before it became active.
    #[error("plugin `{0}` was disposed")]
    Disposed(String),
    /// The kernel was dropped or disposed.
    #[error("the kernel is gone")]
    KernelGone,
    /// The kernel API was used outside a tokio runtime.
    #[error("the kernel needs a tokio runtime: call it from within one")]
    NoRuntime,
    /// One or more listeners of a parallel event failed.
    #[error("{count} listener(s) of `{event}` failed: {}", failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "), count = failures.len())]
    Listeners {
        /// The event name.
        event: &'static str,
        /// Each failure.
        failures: Vec<ListenerFailure>,
    },
    /// A config value of the wrong type was delivered to a plugin (a kernel bug if seen).
    #[error("config type mismatch for plugin `{0}`")]
    ConfigType(String),
}
