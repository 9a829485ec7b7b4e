//! The plugin context: every registration API, each recording its undo on the caller's fiber.

use std::any::{Any, TypeId};
use std::future::Future;
use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::contain::{contain, contain_sync};
use crate::error::{BoxError, KernelError};
use crate::events::{
    Entry, Hook, HookFn, HookOptions, Next, Notify, NotifyFn, Parallel, ParallelFn,
};
use crate::fiber::{FiberInner, FiberKind, FiberState, Undo};
use crate::kernel::{FiberHandle, KernelInner};
use crate::plugin::{Plugin, PluginRegistry};
use crate::scope::{Scope, ScopeKey};
use crate::service::{Service, ServiceEntry, downcast};

/// The context of one fiber activation (a plugin's `apply`, a scope, or the root).
///
/// Everything registered through it is an effect of that fiber and is undone when the fiber
/// unloads. A context of an earlier activation (after a restart) refuses new registrations.
#[derive(Clone)]
pub struct Ctx {
    kernel: Weak<KernelInner>,
    pub(crate) fiber: Arc<FiberInner>,
    generation: u64,
}

/// A registration that can be undone before its owner unloads. Dropping it does nothing: the
/// registration stays owned by the fiber.
#[derive(Debug)]
pub struct Registration {
    fiber: Weak<FiberInner>,
    effect: u64,
}

impl Registration {
    /// Undoes the registration now (an async undo is spawned).
    pub fn dispose(self) {
        let Some(fiber) = self.fiber.upgrade() else {
            return;
        };
        let Some(effect) = fiber.take_effect(self.effect) else {
            return;
        };
        match effect.undo {
            Undo::Sync(f) => {
                if let Err(panicked) = contain_sync(f) {
                    tracing::error!(plugin = %fiber.name, error = %panicked, "disposer failed");
                }
            }
            Undo::Async(fut) => {
                if let Ok(h) = tokio::runtime::Handle::try_current() {
                    h.spawn(contain(fut));
                }
            }
        }
    }
}

impl Ctx {
    pub(crate) fn new(kernel: Weak<KernelInner>, fiber: Arc<FiberInner>, generation: u64) -> Self {
        Self {
            kernel,
            fiber,
            generation,
        }
    }

    fn kernel(&self) -> Result<Arc<KernelInner>, KernelError> {
        self.kernel.upgrade().ok_or(KernelError::KernelGone)
    }

    fn inactive(&self, what: impl Into<String>, state: String) -> KernelError {
        KernelError::Inactive {
            owner: self.fiber.name.to_string(),
            what: what.into(),
            state,
        }
    }

    /// Records an undo on this fiber; when refused, the undo runs at once and an error is returned.
    fn effect(&self, label: String, undo: Undo) -> Result<Registration, KernelError> {
        let kernel = self.kernel()?;
        let id = kernel.next_id();
        match self
            .fiber
            .push_effect(self.generation, label.clone(), undo, id)
        {
            Ok(()) => Ok(Registration {
                fiber: Arc::downgrade(&self.fiber),
                effect: id,
            }),
            Err((undo, state)) => {
                if let Undo::Sync(f) = undo {
                    drop(contain_sync(f));
                }
                Err(self.inactive(label, state))
            }
        }
    }

    fn check(&self, what: &str) -> Result<(), KernelError> {
        self.fiber
            .accepts(self.generation)
            .map_err(|refusal| self.inactive(what, refusal.to_string()))
    }

    /// Whether both contexts belong to the same fiber (any activation).
    pub fn same_fiber(&self, other: &Ctx) -> bool {
        Arc::ptr_eq(&self.fiber, &other.fiber)
    }

    /// Name of the owning plugin (for errors and logs).
    pub fn owner_name(&self) -> &str {
        &self.fiber.name
    }

    /// Whether this context's activation is still running (not unloading, not replaced).
    pub fn is_active(&self) -> bool {
        self.fiber.accepts(self.generation).is_ok()
    }

    /// The scope this context registers and dispatches in (`None` is global).
    pub fn scope_key(&self) -> Option<ScopeKey> {
        self.fiber.scope.clone()
    }

    pub(crate) fn scope_ref(&self) -> Option<&ScopeKey> {
        self.fiber.scope.as_ref()
    }

    /// The fiber's cancellation token: cancelled when the activation unloads, after its disposers.
    pub fn cancel_token(&self) -> CancellationToken {
        self.fiber.act.lock().token.clone()
    }

    // ---- services -------------------------------------------------------------------------

    /// Provides service `S`. It becomes visible once this fiber is active and is withdrawn first
    /// when it unloads. A second provider of the same service is an error naming both owners.
    pub fn provide<S: Service + ?Sized>(&self, value: Arc<S>) -> Result<(), KernelError> {
        let kernel = self.kernel()?;
        self.check(&format!("service `{}`", S::NAME))?;
        let published = self.fiber.state() == FiberState::Active;
        {
            let mut services = kernel.services.lock();
            if let Some(existing) = services.get(&TypeId::of::<S>()) {
                return Err(KernelError::DuplicateService {
                    service: S::NAME,
                    existing: existing.owner_name.to_string(),
                    requested: self.fiber.name.to_string(),
                });
            }
            let value: Arc<dyn Any + Send + Sync> = Arc::new(value);
            services.insert(
                TypeId::of::<S>(),
                ServiceEntry {
                    name: S::NAME,
                    owner: self.fiber.id,
                    owner_name: self.fiber.name.clone(),
                    value,
                    published,
                },
            );
        }
        if published {
            kernel.reconcile();
        }
        Ok(())
    }

    /// The current provider of `S`, if one is active.
    pub fn get<S: Service + ?Sized>(&self) -> Option<Arc<S>> {
        let kernel = self.kernel.upgrade()?;
        let services = kernel.services.lock();
        let entry = services.get(&TypeId::of::<S>())?;
        if entry.published {
            downcast::<S>(&entry.value)
        } else {
            None
        }
    }

    /// A declared dependency: present for the whole activation (resolved when it started).
    pub fn dep<S: Service + ?Sized>(&self) -> Result<Arc<S>, KernelError> {
        let undeclared = || KernelError::UndeclaredDependency {
            plugin: self.fiber.name.to_string(),
            service: S::NAME,
        };
        if !self
            .fiber
            .deps
            .iter()
            .any(|d| d.type_id == TypeId::of::<S>())
        {
            return Err(undeclared());
        }
        let act = self.fiber.act.lock();
        act.resolved
            .get(&TypeId::of::<S>())
            .and_then(downcast::<S>)
            .ok_or_else(undeclared)
    }

    // ---- effects --------------------------------------------------------------------------

    /// Registers a synchronous disposer (run newest first at unload; a panic is logged).
    pub fn on_dispose(
        &self,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<Registration, KernelError> {
        self.effect("disposer".to_owned(), Undo::Sync(Box::new(f)))
    }

    /// Registers an async disposer (awaited in turn, one at a time, newest first).
    pub fn on_dispose_async(
        &self,
        f: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Registration, KernelError> {
        self.effect("disposer:async".to_owned(), Undo::Async(Box::pin(f)))
    }

    /// Spawns a task owned by this fiber: at unload (after the disposers) it is cancelled through
    /// the fiber's token (dropped at its next await point) and awaited.
    pub fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) -> Result<(), KernelError> {
        let kernel = self.kernel()?;
        let handle = kernel.handle()?;
        let (token, tracker) = {
            let act = self.fiber.act.lock();
            if act.generation != self.generation || !act.accepting {
                let state = if act.generation != self.generation {
                    "stale".to_owned()
                } else {
                    self.fiber.state().to_string()
                };
                return Err(self.inactive("a task", state));
            }
            (act.token.clone(), act.tracker.clone())
        };
        let owner = self.fiber.name.clone();
        tracker.spawn_on(
            async move {
                let run = contain(fut);
                // The task is polled first: one that watches the token and finishes when it
                // fires completes normally; anything else is dropped at its await point.
                tokio::select! {
                    biased;
                    r = run => if let Err(panicked) = r {
                        tracing::error!(plugin = %owner, error = %panicked, "task panicked");
                    },
                    _ = token.cancelled() => {}
                }
            },
            &handle,
        );
        Ok(())
    }

    // ---- events ---------------------------------------------------------------------------

    fn listener_undo(&self, key: (u8, TypeId), id: u64) -> Undo {
        let kernel = self.kernel.clone();
        Undo::Sync(Box::new(move || {
            if let Some(k) = kernel.upgrade() {
                k.bus.remove(key, id);
            }
        }))
    }

    /// Listens to notification `E` (in this context's scope, or globally).
    pub fn on<E: Notify>(
        &self,
        f: impl Fn(&E) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Result<Registration, KernelError> {
        let kernel = self.kernel()?;
        self.check(&format!("a listener of `{}`", E::NAME))?;
        let id = kernel.next_id();
        let f: NotifyFn<E> = Arc::new(f);
        let key = kernel.bus.add_notify::<E>(Entry {
            id,
            owner: self.fiber.name.clone(),
            scope: self.fiber.scope.clone(),
            f,
        });
        self.effect(format!("notify:{}", E::NAME), self.listener_undo(key, id))
    }

    /// Sends notification `E` to every global listener and those of this context's scope.
    pub fn emit<E: Notify>(&self, event: &E) {
        self.emit_in(self.fiber.scope.as_ref(), event);
    }

    /// Sends notification `E` in the given scope (`None`: global listeners only).
    pub fn emit_in<E: Notify>(&self, scope: Option<&ScopeKey>, event: &E) {
        if let Some(k) = self.kernel.upgrade() {
            k.bus.emit(event, scope);
        }
    }

    /// Adds a middleware at the end of hook `H`'s chain.
    pub fn hook<H, F, Fut>(&self, f: F) -> Result<Registration, KernelError>
    where
        H: Hook,
        F: Fn(H::Input, Next<H>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = H::Output> + Send + 'static,
    {
        self.hook_with::<H, F, Fut>(HookOptions::default(), f)
    }

    /// Adds a middleware to hook `H` with options (e.g. `prepend`).
    pub fn hook_with<H, F, Fut>(
        &self,
        options: HookOptions,
        f: F,
    ) -> Result<Registration, KernelError>
    where
        H: Hook,
        F: Fn(H::Input, Next<H>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = H::Output> + Send + 'static,
    {
        let kernel = self.kernel()?;
        self.check(&format!("a hook on `{}`", H::NAME))?;
        let id = kernel.next_id();
        let f: HookFn<H> = Arc::new(move |input, next| -> BoxFuture<'static, H::Output> {
            Box::pin(f(input, next))
        });
        let key = kernel.bus.add_hook::<H>(
            Entry {
                id,
                owner: self.fiber.name.clone(),
                scope: self.fiber.scope.clone(),
                f,
            },
            options.prepend,
        );
        self.effect(format!("hook:{}", H::NAME), self.listener_undo(key, id))
    }

    /// Runs hook `H` in this context's scope with `terminal` at the end of the chain.
    pub fn call<H, T, Fut>(&self, input: H::Input, terminal: T) -> BoxFuture<'static, H::Output>
    where
        H: Hook,
        T: FnOnce(H::Input) -> Fut + Send + 'static,
        Fut: Future<Output = H::Output> + Send + 'static,
    {
        self.call_in::<H, T, Fut>(self.fiber.scope.as_ref(), input, terminal)
    }

    /// Runs hook `H` in the given scope.
    pub fn call_in<H, T, Fut>(
        &self,
        scope: Option<&ScopeKey>,
        input: H::Input,
        terminal: T,
    ) -> BoxFuture<'static, H::Output>
    where
        H: Hook,
        T: FnOnce(H::Input) -> Fut + Send + 'static,
        Fut: Future<Output = H::Output> + Send + 'static,
    {
        match self.kernel.upgrade() {
            Some(k) => k.bus.call::<H, T, Fut>(input, scope, terminal),
            None => Box::pin(terminal(input)),
        }
    }

    /// Listens to parallel event `E`.
    pub fn on_parallel<E, F, Fut>(&self, f: F) -> Result<Registration, KernelError>
    where
        E: Parallel,
        F: Fn(Arc<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let kernel = self.kernel()?;
        self.check(&format!("a listener of `{}`", E::NAME))?;
        let id = kernel.next_id();
        let f: ParallelFn<E> =
            Arc::new(move |e| -> BoxFuture<'static, Result<(), BoxError>> { Box::pin(f(e)) });
        let key = kernel.bus.add_parallel::<E>(Entry {
            id,
            owner: self.fiber.name.clone(),
            scope: self.fiber.scope.clone(),
            f,
        });
        self.effect(format!("parallel:{}", E::NAME), self.listener_undo(key, id))
    }

    /// Fires parallel event `E` in this context's scope and awaits every listener.
    pub async fn fire<E: Parallel>(&self, event: Arc<E>) -> Result<(), KernelError> {
        self.fire_in(self.fiber.scope.as_ref(), event).await
    }

    /// Fires parallel event `E` in the given scope.
    pub async fn fire_in<E: Parallel>(
        &self,
        scope: Option<&ScopeKey>,
        event: Arc<E>,
    ) -> Result<(), KernelError> {
        match self.kernel.upgrade() {
            Some(k) => k.bus.fire(event, scope).await,
            None => Err(KernelError::KernelGone),
        }
    }

    // ---- composition ----------------------------------------------------------------------

    /// Creates a child scope; it is disposed with this fiber at the latest.
    pub fn scope(&self, key: impl Into<ScopeKey>) -> Result<Scope, KernelError> {
        let kernel = self.kernel()?;
        let key = key.into();
        self.check(&format!("scope `{key}`"))?;
        let fiber = kernel.create_scope_fiber(key.clone(), &self.fiber);
        let child = fiber.clone();
        let registration = self.effect(
            format!("scope:{key}"),
            Undo::Async(Box::pin(async move { child.dispose_self().await })),
        );
        if let Err(e) = registration {
            kernel.remove_fiber(fiber.id);
            return Err(e);
        }
        if let Ok(reg) = &registration {
            *fiber.parent_effect.lock() = Some((Arc::downgrade(&self.fiber), reg.effect));
        }
        let generation = fiber.act.lock().generation;
        Ok(Scope {
            ctx: Ctx::new(self.kernel.clone(), fiber, generation),
        })
    }

    /// Mounts a registered plugin by name as a child of this fiber.
    pub fn mount(&self, name: &str, config: serde_json::Value) -> Result<FiberHandle, KernelError> {
        let kernel = self.kernel()?;
        let plugin = kernel.registry.lookup(name)?;
        let parsed = plugin.parse(&config)?;
        self.mount_erased(&kernel, plugin, parsed)
    }

    /// Mounts plugin `P` with a typed config as a child of this fiber (it need not be registered).
    pub fn mount_plugin<P: Plugin>(&self, config: P::Config) -> Result<FiberHandle, KernelError> {
        let kernel = self.kernel()?;
        self.mount_erased(&kernel, PluginRegistry::erased::<P>(), Arc::new(config))
    }

    fn mount_erased(
        &self,
        kernel: &Arc<KernelInner>,
        plugin: Arc<dyn crate::plugin::ErasedPlugin>,
        config: crate::plugin::AnyConfig,
    ) -> Result<FiberHandle, KernelError> {
        kernel.handle()?;
        let name = plugin.name();
        self.check(&format!("plugin `{name}`"))?;
        let fiber = kernel.create_plugin_fiber(plugin, config, &self.fiber);
        let child = fiber.clone();
        let registration = self.effect(
            format!("plugin:{name}"),
            Undo::Async(Box::pin(async move { child.dispose_self().await })),
        );
        match registration {
            Ok(reg) => {
                *fiber.parent_effect.lock() = Some((Arc::downgrade(&self.fiber), reg.effect));
            }
            Err(e) => {
                kernel.remove_fiber(fiber.id);
                return Err(e);
            }
        }
        if kernel.resolve(&fiber.deps, fiber.id).is_some() {
            kernel.schedule_start(fiber.clone());
        }
        Ok(FiberHandle { fiber })
    }

    /// The live config of a plugin with `LIVE_CONFIG = true`: the receiver sees every accepted
    /// update. `None` for other plugins or a wrong type.
    pub fn config_watch<C: Clone + Send + Sync + 'static>(&self) -> Option<watch::Receiver<C>> {
        let FiberKind::Plugin {
            slot: Some(slot), ..
        } = &self.fiber.kind
        else {
            return None;
        };
        slot.downcast_ref::<watch::Sender<C>>()
            .map(|tx| tx.subscribe())
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("owner", &self.fiber.name)
            .field("scope", &self.fiber.scope)
            .field("generation", &self.generation)
            .finish()
    }
}
