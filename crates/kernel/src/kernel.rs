//! The kernel: fibers, the service registry, the event bus and dependency-driven activation.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::runtime::Handle;

use crate::ctx::Ctx;
use crate::error::KernelError;
use crate::events::EventBus;
use crate::fiber::{FiberInner, FiberKind, FiberState};
use crate::plugin::{AnyConfig, ErasedPlugin, Plugin, PluginRegistry};
use crate::scope::ScopeKey;
use crate::service::{Dep, ServiceEntry};

pub(crate) struct KernelInner {
    pub(crate) registry: PluginRegistry,
    pub(crate) services: Mutex<HashMap<TypeId, ServiceEntry>>,
    pub(crate) fibers: Mutex<BTreeMap<u64, Arc<FiberInner>>>,
    pub(crate) bus: EventBus,
    next_id: AtomicU64,
    handle: Mutex<Option<Handle>>,
}

impl KernelInner {
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The runtime the kernel spawns on (captured from the caller on first use).
    pub(crate) fn handle(&self) -> Result<Handle, KernelError> {
        let mut h = self.handle.lock();
        if let Some(h) = h.as_ref() {
            return Ok(h.clone());
        }
        let current = Handle::try_current().map_err(|_| KernelError::NoRuntime)?;
        *h = Some(current.clone());
        Ok(current)
    }

    /// Resolves every declared dependency, or `None` when one is missing.
    pub(crate) fn resolve(
        &self,
        deps: &[Dep],
        fiber: u64,
    ) -> Option<HashMap<TypeId, Arc<dyn Any + Send + Sync>>> {
        let services = self.services.lock();
        let mut out = HashMap::with_capacity(deps.len());
        for dep in deps {
            let entry = services.get(&dep.type_id)?;
            if !entry.published || entry.owner == fiber {
                return None;
            }
            out.insert(dep.type_id, entry.value.clone());
        }
        Some(out)
    }

    /// The names of `deps` that are not (yet) visible to `fiber`: absent, still loading, or
    /// provided by the fiber itself.
    pub(crate) fn missing(&self, deps: &[Dep], fiber: u64) -> Vec<&'static str> {
        let services = self.services.lock();
        deps.iter()
            .filter(|dep| {
                services
                    .get(&dep.type_id)
                    .is_none_or(|e| !e.published || e.owner == fiber)
            })
            .map(|dep| dep.name)
            .collect()
    }

    /// Makes the services a fiber provided while loading visible.
    pub(crate) fn publish(&self, fiber: u64) {
        for entry in self.services.lock().values_mut() {
            if entry.owner == fiber {
                entry.published = true;
            }
        }
    }

    /// Removes every service of a fiber and returns their ids.
    pub(crate) fn withdraw(&self, fiber: u64) -> Vec<TypeId> {
        let mut services = self.services.lock();
        let ids: Vec<TypeId> = services
            .iter()
            .filter(|(_, e)| e.owner == fiber)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            services.remove(id);
        }
        ids
    }

    /// Started fibers that depend on any of `services`.
    pub(crate) fn dependents(&self, services: &[TypeId], except: u64) -> Vec<Arc<FiberInner>> {
        self.fibers
            .lock()
            .values()
            .filter(|f| f.id != except)
            .filter(|f| matches!(f.state(), FiberState::Active | FiberState::Loading))
            .filter(|f| f.deps.iter().any(|d| services.contains(&d.type_id)))
            .cloned()
            .collect()
    }

    pub(crate) fn remove_fiber(&self, id: u64) {
        self.fibers.lock().remove(&id);
    }

    /// Schedules the start of every pending plugin fiber whose dependencies are all present.
    pub(crate) fn reconcile(&self) {
        let pending: Vec<Arc<FiberInner>> = self
            .fibers
            .lock()
            .values()
            .filter(|f| f.state() == FiberState::Pending)
            .filter(|f| matches!(f.kind, FiberKind::Plugin { .. }))
            .cloned()
            .collect();
        for fiber in pending {
            if self.resolve(&fiber.deps, fiber.id).is_some() {
                self.schedule_start(fiber);
            }
        }
    }

    /// Starts a fiber on the runtime, never inline (deferred apply).
    pub(crate) fn schedule_start(&self, fiber: Arc<FiberInner>) {
        if fiber.start_scheduled.swap(true, Ordering::SeqCst) {
            return;
        }
        match self.handle() {
            Ok(h) => {
                h.spawn(fiber.start());
            }
            Err(e) => {
                fiber.start_scheduled.store(false, Ordering::SeqCst);
                tracing::error!(plugin = %fiber.name, error = %e, "cannot start plugin");
            }
        }
    }

    /// Creates a plugin fiber owned by `parent` (its disposal is recorded on the parent by the caller).
    pub(crate) fn create_plugin_fiber(
        self: &Arc<Self>,
        plugin: Arc<dyn ErasedPlugin>,
        config: AnyConfig,
        parent: &FiberInner,
    ) -> Arc<FiberInner> {
        let slot = if plugin.live() {
            plugin.config_slot(&config)
        } else {
            None
        };
        let id = self.next_id();
        let fiber = Arc::new(FiberInner::new(
            id,
            Arc::from(plugin.name()),
            Arc::downgrade(self),
            Some(parent.id),
            parent.scope.clone(),
            FiberKind::Plugin {
                plugin,
                config: Mutex::new(config),
                slot,
            },
            FiberState::Pending,
        ));
        self.fibers.lock().insert(id, fiber.clone());
        fiber
    }

    pub(crate) fn create_scope_fiber(
        self: &Arc<Self>,
        key: ScopeKey,
        parent: &FiberInner,
    ) -> Arc<FiberInner> {
        let id = self.next_id();
        let fiber = Arc::new(FiberInner::new(
            id,
            Arc::from(format!("{}/scope:{key}", parent.name)),
            Arc::downgrade(self),
            Some(parent.id),
            Some(key),
            FiberKind::Scope,
            FiberState::Active,
        ));
        self.fibers.lock().insert(id, fiber.clone());
        fiber
    }
}

/// The kernel: owns every fiber, service and listener. Keep it alive for as long as the program
/// runs, and call [`Kernel::dispose`] to unload everything in order.
pub struct Kernel {
    inner: Arc<KernelInner>,
    root: Arc<FiberInner>,
}

impl Kernel {
    /// A kernel that mounts plugins from `registry`. Must be used within a tokio runtime.
    pub fn new(registry: PluginRegistry) -> Self {
        let inner = Arc::new(KernelInner {
            registry,
            services: Mutex::new(HashMap::new()),
            fibers: Mutex::new(BTreeMap::new()),
            bus: EventBus::default(),
            next_id: AtomicU64::new(1),
            handle: Mutex::new(Handle::try_current().ok()),
        });
        let root = Arc::new(FiberInner::new(
            0,
            Arc::from("root"),
            Arc::downgrade(&inner),
            None,
            None,
            FiberKind::Root,
            FiberState::Active,
        ));
        inner.fibers.lock().insert(0, root.clone());
        Self { inner, root }
    }

    /// The root context: registrations through it live until the kernel is disposed.
    pub fn root(&self) -> Ctx {
        let generation = self.root.act.lock().generation;
        Ctx::new(Arc::downgrade(&self.inner), self.root.clone(), generation)
    }

    /// Mounts a registered plugin by name with a JSON config (`null` means `{}`).
    pub fn mount(&self, name: &str, config: serde_json::Value) -> Result<FiberHandle, KernelError> {
        self.root().mount(name, config)
    }

    /// Mounts a plugin by type with a typed config.
    pub fn mount_plugin<P: Plugin>(&self, config: P::Config) -> Result<FiberHandle, KernelError> {
        self.root().mount_plugin::<P>(config)
    }

    /// The plugin registry.
    pub fn registry(&self) -> &PluginRegistry {
        &self.inner.registry
    }

    /// Every live fiber with its state, owner and effect labels, in creation order.
    pub fn fibers(&self) -> Vec<FiberInfo> {
        let fibers: Vec<Arc<FiberInner>> = self.inner.fibers.lock().values().cloned().collect();
        let services = self.inner.services.lock();
        fibers
            .iter()
            .map(|f| {
                let mut effects: Vec<String> = services
                    .values()
                    .filter(|s| s.owner == f.id)
                    .map(|s| format!("service:{}", s.name))
                    .collect();
                effects.sort();
                effects.extend(f.labels());
                FiberInfo {
                    id: f.id,
                    name: f.name.to_string(),
                    state: f.state(),
                    parent: f.parent,
                    scope: f.scope.clone(),
                    deps: f.deps.iter().map(|d| d.name).collect(),
                    effects,
                }
            })
            .collect()
    }

    /// Counts of what is registered (diagnostics and leak tests).
    pub fn stats(&self) -> KernelStats {
        let fibers: Vec<Arc<FiberInner>> = self.inner.fibers.lock().values().cloned().collect();
        KernelStats {
            fibers: fibers.len(),
            services: self.inner.services.lock().len(),
            listeners: self.inner.bus.listener_count(),
            effects: fibers.iter().map(|f| f.act.lock().effects.len()).sum(),
            tasks: fibers.iter().map(|f| f.task_count()).sum(),
        }
    }

    /// Unloads everything: every mounted plugin (newest first) and the root's own registrations.
    pub async fn dispose(&self) {
        self.root.clone().dispose_self().await;
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Counts of live registrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelStats {
    /// Live fibers, the root included.
    pub fibers: usize,
    /// Registered services (published or staged).
    pub services: usize,
    /// Registered event listeners of all modes.
    pub listeners: usize,
    /// Recorded effects over all fibers.
    pub effects: usize,
    /// Spawned tasks still running.
    pub tasks: usize,
}

/// A description of one fiber, for `dsh config dump` and diagnostics.
#[derive(Clone, Debug)]
pub struct FiberInfo {
    /// Fiber id (0 is the root).
    pub id: u64,
    /// Plugin name (or `root`, or `<parent>/scope:<key>`).
    pub name: String,
    /// Lifecycle state.
    pub state: FiberState,
    /// The owning fiber.
    pub parent: Option<u64>,
    /// The scope it registers in.
    pub scope: Option<ScopeKey>,
    /// Declared dependencies.
    pub deps: Vec<&'static str>,
    /// Its services and effects, e.g. `service:tools`, `notify:session/event`, `tasks:2`.
    pub effects: Vec<String>,
}

/// A handle on a mounted plugin.
#[derive(Clone)]
pub struct FiberHandle {
    pub(crate) fiber: Arc<FiberInner>,
}

impl FiberHandle {
    /// The fiber id.
    pub fn id(&self) -> u64 {
        self.fiber.id
    }

    /// The plugin name.
    pub fn name(&self) -> &str {
        &self.fiber.name
    }

    /// The current state.
    pub fn state(&self) -> FiberState {
        self.fiber.state()
    }

    /// The services the plugin waits for that no active fiber provides (empty unless it is
    /// pending on them).
    pub fn missing_dependencies(&self) -> Vec<&'static str> {
        if self.fiber.state() != FiberState::Pending {
            return Vec::new();
        }
        match self.fiber.kernel.upgrade() {
            Some(kernel) => kernel.missing(&self.fiber.deps, self.fiber.id),
            None => Vec::new(),
        }
    }

    /// The error of the last failed `apply`, if any.
    pub fn last_error(&self) -> Option<String> {
        self.fiber.act.lock().last_error.clone()
    }

    /// Waits until the plugin is active. Fails when it failed to apply or was disposed. A plugin
    /// whose dependencies never arrive stays pending: bound the wait with a timeout if needed.
    pub async fn ready(&self) -> Result<(), KernelError> {
        let mut rx = self.fiber.state.subscribe();
        loop {
            let state = *rx.borrow_and_update();
            match state {
                FiberState::Active => return Ok(()),
                FiberState::Failed => {
                    return Err(KernelError::ApplyFailed {
                        plugin: self.fiber.name.to_string(),
                        message: self.last_error().unwrap_or_default(),
                    });
                }
                FiberState::Disposed => {
                    return Err(KernelError::Disposed(self.fiber.name.to_string()));
                }
                _ => {}
            }
            if rx.changed().await.is_err() {
                return Err(KernelError::KernelGone);
            }
        }
    }

    /// Unloads the plugin for good and waits for its teardown.
    pub async fn dispose(&self) {
        self.fiber.clone().dispose_self().await;
    }

    /// Validates `config`, then applies it: in place through the config watch for plugins with
    /// `LIVE_CONFIG`, otherwise by restarting the plugin (awaits the unload; the new start is
    /// deferred). An invalid config is refused and the running plugin keeps its config.
    pub async fn update_config(&self, config: serde_json::Value) -> Result<(), KernelError> {
        let FiberKind::Plugin {
            plugin,
            config: current,
            slot,
        } = &self.fiber.kind
        else {
            return Ok(());
        };
        let parsed = plugin.parse(&config)?;
        *current.lock() = parsed.clone();
        if let (true, Some(slot)) = (plugin.live(), slot) {
            plugin.send_config(slot.as_ref(), &parsed);
            if self.fiber.state() != FiberState::Failed {
                return Ok(());
            }
        }
        self.restart().await;
        Ok(())
    }

    /// Unloads the plugin and starts it again (also recovers a failed plugin).
    pub async fn restart(&self) {
        self.fiber.clone().deactivate(FiberState::Pending).await;
        let _guard = self.fiber.transition.lock().await;
        if self.fiber.state() == FiberState::Failed {
            self.fiber.state.send_replace(FiberState::Pending);
        }
        drop(_guard);
        if let Some(k) = self.fiber.kernel.upgrade() {
            k.reconcile();
        }
    }
}

impl std::fmt::Debug for FiberHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FiberHandle")
            .field("name", &self.fiber.name)
            .field("state", &self.state())
            .finish()
    }
}
