//! Fibers: mounted plugin instances (and scopes) with their effect stacks and lifecycle.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::contain::{contain, contain_sync};
use crate::ctx::Ctx;
use crate::kernel::KernelInner;
use crate::plugin::{AnyConfig, ErasedPlugin};
use crate::scope::ScopeKey;
use crate::service::Dep;

/// The lifecycle state of a fiber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FiberState {
    /// Mounted, waiting for its dependencies (or for its deferred start).
    Pending,
    /// `apply` is running.
    Loading,
    /// `apply` finished; its services are visible.
    Active,
    /// Being torn down.
    Unloading,
    /// Gone for good.
    Disposed,
    /// `apply` failed; everything it registered was undone.
    Failed,
}

impl fmt::Display for FiberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pending => "pending",
            Self::Loading => "loading",
            Self::Active => "active",
            Self::Unloading => "unloading",
            Self::Disposed => "disposed",
            Self::Failed => "failed",
        })
    }
}

/// What a fiber is.
pub(crate) enum FiberKind {
    /// The kernel's own root: always active until the kernel is disposed.
    Root,
    /// A mounted plugin.
    Plugin {
        plugin: Arc<dyn ErasedPlugin>,
        config: Mutex<AnyConfig>,
        /// `watch::Sender<P::Config>` for plugins with live config.
        slot: Option<Box<dyn Any + Send + Sync>>,
    },
    /// A child scope.
    Scope,
}

pub(crate) enum Undo {
    Sync(Box<dyn FnOnce() + Send>),
    Async(BoxFuture<'static, ()>),
}

pub(crate) struct Effect {
    pub(crate) id: u64,
    pub(crate) label: String,
    pub(crate) undo: Undo,
}

/// The mutable part of a fiber: one activation's effects, token and tasks.
pub(crate) struct Activation {
    pub(crate) generation: u64,
    pub(crate) accepting: bool,
    pub(crate) effects: Vec<Effect>,
    pub(crate) token: CancellationToken,
    pub(crate) abort_apply: CancellationToken,
    pub(crate) tracker: TaskTracker,
    pub(crate) resolved: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    pub(crate) last_error: Option<String>,
}

pub(crate) struct FiberInner {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) kernel: Weak<KernelInner>,
    pub(crate) parent: Option<u64>,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) kind: FiberKind,
    pub(crate) deps: Vec<Dep>,
    pub(crate) state: watch::Sender<FiberState>,
    pub(crate) act: Mutex<Activation>,
    /// Serialises start and stop of this fiber.
    pub(crate) transition: tokio::sync::Mutex<()>,
    pub(crate) start_scheduled: AtomicBool,
    /// The effect on the parent that disposes this fiber (removed when disposed directly).
    pub(crate) parent_effect: Mutex<Option<(Weak<FiberInner>, u64)>>,
}

impl FiberInner {
    pub(crate) fn new(
        id: u64,
        name: Arc<str>,
        kernel: Weak<KernelInner>,
        parent: Option<u64>,
        scope: Option<ScopeKey>,
        kind: FiberKind,
        initial: FiberState,
    ) -> Self {
        let deps = match &kind {
            FiberKind::Plugin { plugin, .. } => plugin.deps(),
            _ => Vec::new(),
        };
        let accepting = initial == FiberState::Active;
        Self {
            id,
            name,
            kernel,
            parent,
            scope,
            kind,
            deps,
            state: watch::channel(initial).0,
            act: Mutex::new(Activation {
                generation: 1,
                accepting,
                effects: Vec::new(),
                token: CancellationToken::new(),
                abort_apply: CancellationToken::new(),
                tracker: TaskTracker::new(),
                resolved: HashMap::new(),
                last_error: None,
            }),
            transition: tokio::sync::Mutex::new(()),
            start_scheduled: AtomicBool::new(false),
            parent_effect: Mutex::new(None),
        }
    }

    pub(crate) fn state(&self) -> FiberState {
        *self.state.borrow()
    }

    fn set_state(&self, s: FiberState) {
        self.state.send_replace(s);
    }

    /// Records an effect of the activation `generation`; refused when that activation is over.
    pub(crate) fn push_effect(
        &self,
        generation: u64,
        label: String,
        undo: Undo,
        id: u64,
    ) -> Result<(), (Undo, String)> {
        let mut act = self.act.lock();
        if act.generation != generation || !act.accepting {
            let why = if act.generation != generation {
                "stale".to_owned()
            } else {
                self.state().to_string()
            };
            return Err((undo, why));
        }
        act.effects.push(Effect { id, label, undo });
        Ok(())
    }

    /// Removes and returns one effect (for early disposal of a registration).
    pub(crate) fn take_effect(&self, id: u64) -> Option<Effect> {
        let mut act = self.act.lock();
        let pos = act.effects.iter().position(|e| e.id == id)?;
        Some(act.effects.remove(pos))
    }

    /// Whether `generation` is the current, accepting activation.
    pub(crate) fn accepts(&self, generation: u64) -> Result<(), NotAccepting> {
        let act = self.act.lock();
        if act.generation != generation {
            Err(NotAccepting::Stale)
        } else if !act.accepting {
            Err(NotAccepting::State(self.state()))
        } else {
            Ok(())
        }
    }

    pub(crate) fn labels(&self) -> Vec<String> {
        let act = self.act.lock();
        let mut labels: Vec<String> = act.effects.iter().map(|e| e.label.clone()).collect();
        let tasks = act.tracker.len();
        if tasks > 0 {
            labels.push(format!("tasks:{tasks}"));
        }
        labels
    }

    pub(crate) fn task_count(&self) -> usize {
        self.act.lock().tracker.len()
    }

    /// Starts the fiber if it is pending and its dependencies are present.
    pub(crate) async fn start(self: Arc<Self>) {
        let _guard = self.transition.lock().await;
        self.start_scheduled.store(false, Ordering::SeqCst);
        if self.state() != FiberState::Pending {
            return;
        }
        let Some(kernel) = self.kernel.upgrade() else {
            return;
        };
        let FiberKind::Plugin { plugin, config, .. } = &self.kind else {
            return;
        };
        let Some(resolved) = kernel.resolve(&self.deps, self.id) else {
            return;
        };
        let (generation, abort) = {
            let mut act = self.act.lock();
            act.generation += 1;
            act.accepting = true;
            act.token = CancellationToken::new();
            act.abort_apply = CancellationToken::new();
            act.tracker = TaskTracker::new();
            act.resolved = resolved;
            act.last_error = None;
            (act.generation, act.abort_apply.clone())
        };
        self.set_state(FiberState::Loading);
        let ctx = Ctx::new(self.kernel.clone(), self.clone(), generation);
        let config = config.lock().clone();
        let fut = plugin.apply(ctx, config);
        let outcome = tokio::select! {
            r = contain(fut) => Some(r),
            _ = abort.cancelled() => None,
        };
        match outcome {
            // A stop is waiting for the transition lock; it tears the activation down.
            None => {}
            Some(Ok(Ok(()))) => {
                if abort.is_cancelled() {
                    return;
                }
                kernel.publish(self.id);
                self.set_state(FiberState::Active);
                tracing::debug!(plugin = %self.name, "plugin active");
                kernel.reconcile();
            }
            Some(result) => {
                let message = match result {
                    Ok(Err(e)) => e.to_string(),
                    Err(panicked) => panicked.to_string(),
                    Ok(Ok(())) => String::new(),
                };
                tracing::error!(plugin = %self.name, error = %message, "plugin failed to apply");
                self.set_state(FiberState::Unloading);
                self.teardown(&kernel).await;
                self.act.lock().last_error = Some(message);
                self.set_state(FiberState::Failed);
                kernel.reconcile();
            }
        }
    }

    /// Stops the current activation and moves to `target` (`Pending` to wait for a restart,
    /// `Disposed` for good).
    pub(crate) async fn deactivate(self: Arc<Self>, target: FiberState) {
        let abort = self.act.lock().abort_apply.clone();
        abort.cancel();
        let _guard = self.transition.lock().await;
        let kernel = self.kernel.upgrade();
        match self.state() {
            FiberState::Active | FiberState::Loading => {
                self.set_state(FiberState::Unloading);
                if let Some(k) = &kernel {
                    self.teardown(k).await;
                } else {
                    self.teardown_effects().await;
                }
                self.set_state(target);
            }
            FiberState::Pending | FiberState::Failed => {
                if target == FiberState::Disposed {
                    self.act.lock().accepting = false;
                    self.set_state(FiberState::Disposed);
                }
            }
            FiberState::Unloading | FiberState::Disposed => {}
        }
        if let Some(k) = kernel {
            if target == FiberState::Disposed {
                k.remove_fiber(self.id);
            }
            k.reconcile();
        }
    }

    /// Disposes this fiber and removes the parent's reference to it.
    pub(crate) async fn dispose_self(self: Arc<Self>) {
        let parent = self.parent_effect.lock().take();
        if let Some(p) = parent.and_then(|(parent, effect)| Some((parent.upgrade()?, effect))) {
            drop(p.0.take_effect(p.1));
        }
        if matches!(self.kind, FiberKind::Root | FiberKind::Scope) {
            let _guard = self.transition.lock().await;
            if self.state() == FiberState::Disposed {
                return;
            }
            self.set_state(FiberState::Unloading);
            match self.kernel.upgrade() {
                Some(k) => {
                    self.teardown(&k).await;
                    k.remove_fiber(self.id);
                }
                None => self.teardown_effects().await,
            }
            self.set_state(FiberState::Disposed);
            return;
        }
        self.deactivate(FiberState::Disposed).await;
    }

    /// Teardown of one activation: withdraw services, unload dependents, undo effects newest first,
    /// then cancel and await tasks.
    async fn teardown(&self, kernel: &Arc<KernelInner>) {
        self.act.lock().accepting = false;
        let withdrawn = kernel.withdraw(self.id);
        if !withdrawn.is_empty() {
            let dependents = kernel.dependents(&withdrawn, self.id);
            futures::future::join_all(
                dependents
                    .into_iter()
                    .map(|d| d.deactivate(FiberState::Pending)),
            )
            .await;
        }
        self.teardown_effects().await;
    }

    async fn teardown_effects(&self) {
        self.act.lock().accepting = false;
        loop {
            let effect = self.act.lock().effects.pop();
            let Some(effect) = effect else { break };
            run_undo(&self.name, effect).await;
        }
        let (token, tracker) = {
            let act = self.act.lock();
            (act.token.clone(), act.tracker.clone())
        };
        token.cancel();
        tracker.close();
        tracker.wait().await;
        self.act.lock().resolved.clear();
    }
}

/// Why a fiber refuses a registration from a context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotAccepting {
    /// The context belongs to an earlier activation.
    #[error("stale")]
    Stale,
    /// The current activation is not accepting (unloading, disposed, failed).
    #[error("{0}")]
    State(FiberState),
}

/// Runs one undo, containing panics.
pub(crate) async fn run_undo(owner: &str, effect: Effect) {
    let label = effect.label;
    let result = match effect.undo {
        Undo::Sync(f) => contain_sync(f),
        Undo::Async(fut) => contain(fut).await,
    };
    if let Err(panicked) = result {
        tracing::error!(plugin = %owner, effect = %label, error = %panicked, "disposer failed");
    }
}
