//! The dsh plugin kernel.
//!
//! Everything in dsh is a plugin mounted on this kernel. A plugin ([`Plugin`]) declares the
//! services it needs and registers its own services, event listeners, tasks and disposers through
//! a [`Ctx`]. Each registration is an effect of the plugin's fiber and is undone when the fiber
//! unloads, so config changes, dependency loss and shutdown all clean up the same way.
//!
//! Events are typed: one Rust type per event, whose mode is the trait it implements —
//! [`Notify`] (synchronous fan-out with contained failures), [`Hook`] (waterfall middleware with
//! a by-value [`Next`]) or [`Parallel`] (awaited fan-out with aggregated errors).

mod compose;
mod contain;
mod ctx;
mod error;
mod events;
mod fiber;
mod kernel;
mod plugin;
mod scope;
mod service;

pub use compose::{ComposeError, ComposeReport, ComposedRow, Composer, Composition, Layer, Row};
pub use contain::{Panicked, contain, contain_sync};
pub use ctx::{Ctx, Registration};
pub use error::{BoxError, KernelError, ListenerFailure};
pub use events::{Hook, HookOptions, Next, Notify, Parallel};
pub use fiber::FiberState;
pub use kernel::{FiberHandle, FiberInfo, Kernel, KernelStats};
pub use plugin::{EmptyConfig, Plugin, PluginRegistry, parse_config, yaml_to_json};
pub use scope::{Scope, ScopeKey};
pub use service::{Dep, Service};

/// Re-exported so plugin crates use the same versions the kernel was built with.
pub use schemars;
pub use tokio_util::sync::CancellationToken;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
