//! Services: trait objects registered by type, looked up by plugins.

use std::any::{Any, TypeId};
use std::sync::Arc;

/// A kernel service. Implement it for the trait object type of the service's interface:
///
/// ```
/// use dsh_kernel::Service;
/// pub trait Clock: Send + Sync { fn now(&self) -> u64; }
/// impl Service for dyn Clock { const NAME: &'static str = "clock"; }
/// ```
///
/// The registry keys services by `TypeId::of::<dyn Clock>()`; `NAME` is for config, logs and errors.
pub trait Service: Send + Sync + 'static {
    /// Stable name of the service.
    const NAME: &'static str;
}

/// A declared dependency of a plugin on a service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dep {
    pub(crate) type_id: TypeId,
    pub(crate) name: &'static str,
}

impl Dep {
    /// The dependency on service `S`.
    pub fn on<S: Service + ?Sized>() -> Self {
        Self {
            type_id: TypeId::of::<S>(),
            name: S::NAME,
        }
    }

    /// The service's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// A registered provider of one service.
pub(crate) struct ServiceEntry {
    pub(crate) name: &'static str,
    pub(crate) owner: u64,
    pub(crate) owner_name: Arc<str>,
    /// Holds an `Arc<S>`.
    pub(crate) value: Arc<dyn Any + Send + Sync>,
    /// Visible to `get` only once the provider is active.
    pub(crate) published: bool,
}

/// Downcasts a stored service value.
pub(crate) fn downcast<S: Service + ?Sized>(value: &Arc<dyn Any + Send + Sync>) -> Option<Arc<S>> {
    value.downcast_ref::<Arc<S>>().cloned()
}
