//! Typed events. The mode of an event is the trait its type implements:
//! [`Notify`] (synchronous fan-out), [`Hook`] (waterfall middleware), [`Parallel`] (awaited fan-out).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;

use crate::contain::{contain, contain_sync};
use crate::error::{BoxError, KernelError, ListenerFailure};
use crate::scope::ScopeKey;

/// A synchronous notification: every listener runs, in registration order; an error or a panic in
/// one is logged with its owner's name and does not stop the others.
pub trait Notify: Send + Sync + 'static {
    /// Event name, e.g. `session/event`.
    const NAME: &'static str;
}

/// A waterfall: each listener gets the owned input and a [`Next`] taken by value. Call
/// `next.run(input)` to delegate, return without calling it to short-circuit, or map the output.
pub trait Hook: Send + Sync + 'static {
    /// Event name, e.g. `tools/execute`.
    const NAME: &'static str;
    /// What flows down the chain.
    type Input: Send + 'static;
    /// What flows back up.
    type Output: Send + 'static;
}

/// An awaited fan-out: all listeners run concurrently; their errors are aggregated.
pub trait Parallel: Send + Sync + 'static {
    /// Event name, e.g. `session/flush`.
    const NAME: &'static str;
}

/// Options of a hook registration.
#[derive(Clone, Copy, Debug, Default)]
pub struct HookOptions {
    /// Put the listener at the front of the chain (outermost) instead of the back.
    pub prepend: bool,
}

pub(crate) type NotifyFn<E> = Arc<dyn Fn(&E) -> Result<(), BoxError> + Send + Sync>;
pub(crate) type HookFn<H> = Arc<
    dyn Fn(<H as Hook>::Input, Next<H>) -> BoxFuture<'static, <H as Hook>::Output> + Send + Sync,
>;
pub(crate) type ParallelFn<E> =
    Arc<dyn Fn(Arc<E>) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;
type Terminal<H> =
    Box<dyn FnOnce(<H as Hook>::Input) -> BoxFuture<'static, <H as Hook>::Output> + Send>;

/// One registered listener.
pub(crate) struct Entry<F> {
    pub(crate) id: u64,
    pub(crate) owner: Arc<str>,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) f: F,
}

impl<F: Clone> Clone for Entry<F> {
    fn clone(&self) -> Self {
        Self {
            id: self.id,
            owner: self.owner.clone(),
            scope: self.scope.clone(),
            f: self.f.clone(),
        }
    }
}

fn visible(entry_scope: &Option<ScopeKey>, dispatch: Option<&ScopeKey>) -> bool {
    match entry_scope {
        None => true,
        Some(s) => dispatch == Some(s),
    }
}

/// Listeners of one event type; dispatch takes a snapshot (copy-on-write list).
struct List<F> {
    entries: RwLock<Arc<Vec<Entry<F>>>>,
}

impl<F: Clone> List<F> {
    fn snapshot(&self) -> Arc<Vec<Entry<F>>> {
        self.entries.read().clone()
    }

    fn insert(&self, entry: Entry<F>, prepend: bool) {
        let mut guard = self.entries.write();
        let mut next: Vec<Entry<F>> = Vec::with_capacity(guard.len() + 1);
        if prepend {
            next.push(entry);
            next.extend(guard.iter().cloned());
        } else {
            next.extend(guard.iter().cloned());
            next.push(entry);
        }
        *guard = Arc::new(next);
    }

    fn remove(&self, id: u64) -> bool {
        let mut guard = self.entries.write();
        if !guard.iter().any(|e| e.id == id) {
            return false;
        }
        let next: Vec<Entry<F>> = guard.iter().filter(|e| e.id != id).cloned().collect();
        *guard = Arc::new(next);
        true
    }

    fn len(&self) -> usize {
        self.entries.read().len()
    }
}

trait AnyList: Send + Sync {
    fn remove(&self, id: u64) -> bool;
    fn len(&self) -> usize;
    fn as_any(&self) -> &dyn Any;
}

impl<F: Clone + Send + Sync + 'static> AnyList for List<F> {
    fn remove(&self, id: u64) -> bool {
        List::remove(self, id)
    }
    fn len(&self) -> usize {
        List::len(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Every listener of every event, keyed by (mode, event type).
#[derive(Default)]
pub(crate) struct EventBus {
    lists: RwLock<HashMap<(u8, TypeId), Arc<dyn AnyList>>>,
}

const NOTIFY: u8 = 0;
const HOOK: u8 = 1;
const PARALLEL: u8 = 2;

impl EventBus {
    fn list(&self, key: (u8, TypeId)) -> Option<Arc<dyn AnyList>> {
        self.lists.read().get(&key).cloned()
    }

    fn list_or_insert<F: Clone + Send + Sync + 'static>(
        &self,
        key: (u8, TypeId),
    ) -> Arc<dyn AnyList> {
        if let Some(l) = self.list(key) {
            return l;
        }
        self.lists
            .write()
            .entry(key)
            .or_insert_with(|| {
                Arc::new(List::<F> {
                    entries: RwLock::new(Arc::new(Vec::new())),
                })
            })
            .clone()
    }

    fn snapshot<F: Clone + Send + Sync + 'static>(
        &self,
        key: (u8, TypeId),
    ) -> Option<Arc<Vec<Entry<F>>>> {
        let list = self.list(key)?;
        let typed = list.as_any().downcast_ref::<List<F>>()?;
        Some(typed.snapshot())
    }

    fn add<F: Clone + Send + Sync + 'static>(
        &self,
        key: (u8, TypeId),
        entry: Entry<F>,
        prepend: bool,
    ) {
        let list = self.list_or_insert::<F>(key);
        if let Some(typed) = list.as_any().downcast_ref::<List<F>>() {
            typed.insert(entry, prepend);
        }
    }

    /// Removes a listener; the key names which list it lives in.
    pub(crate) fn remove(&self, key: (u8, TypeId), id: u64) -> bool {
        match self.lists.read().get(&key) {
            Some(list) => list.remove(id),
            None => false,
        }
    }

    /// Total number of registered listeners (diagnostics, leak tests).
    pub(crate) fn listener_count(&self) -> usize {
        self.lists.read().values().map(|l| l.len()).sum()
    }

    pub(crate) fn add_notify<E: Notify>(&self, entry: Entry<NotifyFn<E>>) -> (u8, TypeId) {
        let key = (NOTIFY, TypeId::of::<E>());
        self.add(key, entry, false);
        key
    }

    pub(crate) fn add_hook<H: Hook>(&self, entry: Entry<HookFn<H>>, prepend: bool) -> (u8, TypeId) {
        let key = (HOOK, TypeId::of::<H>());
        self.add(key, entry, prepend);
        key
    }

    pub(crate) fn add_parallel<E: Parallel>(&self, entry: Entry<ParallelFn<E>>) -> (u8, TypeId) {
        let key = (PARALLEL, TypeId::of::<E>());
        self.add(key, entry, false);
        key
    }

    /// Runs every visible listener of `E`; failures are logged and contained.
    pub(crate) fn emit<E: Notify>(&self, event: &E, scope: Option<&ScopeKey>) {
        let Some(entries) = self.snapshot::<NotifyFn<E>>((NOTIFY, TypeId::of::<E>())) else {
            return;
        };
        for entry in entries.iter() {
            if !visible(&entry.scope, scope) {
                continue;
            }
            match contain_sync(|| (entry.f)(event)) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(plugin = %entry.owner, event = E::NAME, %error, "listener failed");
                }
                Err(panicked) => {
                    let error = panicked.to_string();
                    tracing::error!(plugin = %entry.owner, event = E::NAME, %error, "listener panicked");
                }
            }
        }
    }

    /// Runs the hook chain of `H` (a snapshot taken now) with `terminal` at its end.
    pub(crate) fn call<H, T, Fut>(
        &self,
        input: H::Input,
        scope: Option<&ScopeKey>,
        terminal: T,
    ) -> BoxFuture<'static, H::Output>
    where
        H: Hook,
        T: FnOnce(H::Input) -> Fut + Send + 'static,
        Fut: Future<Output = H::Output> + Send + 'static,
    {
        let chain = self
            .snapshot::<HookFn<H>>((HOOK, TypeId::of::<H>()))
            .unwrap_or_else(|| Arc::new(Vec::new()));
        let next = Next::<H> {
            chain,
            index: 0,
            scope: scope.cloned(),
            terminal: Box::new(move |input| Box::pin(terminal(input))),
        };
        next.run(input)
    }

    /// Runs every visible listener of `E` concurrently and aggregates their failures.
    pub(crate) async fn fire<E: Parallel>(
        &self,
        event: Arc<E>,
        scope: Option<&ScopeKey>,
    ) -> Result<(), KernelError> {
        let Some(entries) = self.snapshot::<ParallelFn<E>>((PARALLEL, TypeId::of::<E>())) else {
            return Ok(());
        };
        let futures = entries
            .iter()
            .filter(|e| visible(&e.scope, scope))
            .map(|entry| {
                let fut = (entry.f)(event.clone());
                let owner = entry.owner.clone();
                async move {
                    match contain(fut).await {
                        Ok(Ok(())) => None,
                        Ok(Err(error)) => Some(ListenerFailure {
                            owner: owner.to_string(),
                            error: error.to_string(),
                        }),
                        Err(panicked) => Some(ListenerFailure {
                            owner: owner.to_string(),
                            error: panicked.to_string(),
                        }),
                    }
                }
            });
        let failures: Vec<ListenerFailure> = futures::future::join_all(futures)
            .await
            .into_iter()
            .flatten()
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            for f in &failures {
                tracing::warn!(plugin = %f.owner, event = E::NAME, error = %f.error, "parallel listener failed");
            }
            Err(KernelError::Listeners {
                event: E::NAME,
                failures,
            })
        }
    }
}

/// The rest of a hook chain. Taken by value: a listener that does not call [`Next::run`] vetoes
/// everything after it, including the terminal.
pub struct Next<H: Hook> {
    chain: Arc<Vec<Entry<HookFn<H>>>>,
    index: usize,
    scope: Option<ScopeKey>,
    terminal: Terminal<H>,
}

impl<H: Hook> Next<H> {
    /// Delegates to the next listener (or the terminal at the end of the chain).
    pub fn run(mut self, input: H::Input) -> BoxFuture<'static, H::Output> {
        while self.index < self.chain.len() {
            let i = self.index;
            self.index += 1;
            let entry = &self.chain[i];
            if visible(&entry.scope, self.scope.as_ref()) {
                let f = entry.f.clone();
                return f(input, self);
            }
        }
        (self.terminal)(input)
    }

    /// The scope this dispatch runs in, if any.
    pub fn scope(&self) -> Option<&ScopeKey> {
        self.scope.as_ref()
    }
}

impl<H: Hook> std::fmt::Debug for Next<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("hook", &H::NAME)
            .field("index", &self.index)
            .finish()
    }
}
