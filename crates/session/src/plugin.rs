//! Kernel integration: the `session/event` and `session/flush` events, the `sessions` and
//! `session-persistence` services, and [`SessionsPlugin`] which provides [`Sessions`].

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, EmptyConfig, Notify, Parallel, Plugin, Service};
use futures::future::BoxFuture;

use crate::error::SessionError;
use crate::event::Event;
use crate::persist::SessionPersistence;
use crate::service::{SessionStore, Sessions};
use crate::session::SessionSink;

impl Service for dyn Sessions {
    const NAME: &'static str = "sessions";
}

impl Service for dyn SessionPersistence {
    const NAME: &'static str = "session-persistence";
}

/// `session/event` (Notify): one committed event, sent after each commit, in seq order.
/// Listener failures are contained by the kernel.
#[derive(Debug, Clone)]
pub struct SessionEvent {
    /// The session.
    pub session_id: Arc<str>,
    /// The committed, immutable event.
    pub event: Arc<Event>,
}

impl Notify for SessionEvent {
    const NAME: &'static str = "session/event";
}

/// `session/flush` (Parallel): the durability barrier. Persistence backends make every event
/// of the session notified so far durable before their listener returns.
#[derive(Debug, Clone)]
pub struct SessionFlush {
    /// The session.
    pub session_id: Arc<str>,
    /// `true`: durable on disk (fsync); `false`: handed to the operating system only
    /// (a process-crash barrier, see `Session::write_through`).
    pub durable: bool,
}

impl Parallel for SessionFlush {
    const NAME: &'static str = "session/flush";
}

/// A sink that emits `session/event` and fires `session/flush` through the kernel.
pub struct KernelSink {
    ctx: Ctx,
}

impl std::fmt::Debug for KernelSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSink").finish_non_exhaustive()
    }
}

impl KernelSink {
    /// A sink dispatching in `ctx`'s scope.
    pub fn new(ctx: Ctx) -> Self {
        KernelSink { ctx }
    }
}

impl SessionSink for KernelSink {
    fn event(&self, session_id: &Arc<str>, event: &Arc<Event>) {
        self.ctx.emit(&SessionEvent {
            session_id: Arc::clone(session_id),
            event: Arc::clone(event),
        });
    }

    fn flush(&self, session_id: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        let ctx = self.ctx.clone();
        let ev = Arc::new(SessionFlush {
            session_id: Arc::clone(session_id),
            durable: true,
        });
        Box::pin(async move { ctx.fire(ev).await.map_err(SessionError::Flush) })
    }

    fn write_through(&self, session_id: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        let ctx = self.ctx.clone();
        let ev = Arc::new(SessionFlush {
            session_id: Arc::clone(session_id),
            durable: false,
        });
        Box::pin(async move { ctx.fire(ev).await.map_err(SessionError::Flush) })
    }
}

/// Provides the [`Sessions`] service. Storage is optional: the `session-persistence` service is
/// looked up at each create/open/list (without one, sessions live in memory). On unload every
/// open session is flushed and closed.
#[derive(Debug)]
pub struct SessionsPlugin;

impl Plugin for SessionsPlugin {
    const NAME: &'static str = "sessions";
    type Config = EmptyConfig;

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let lookup = ctx.clone();
        let store = Arc::new(SessionStore::with_resolver(
            move || lookup.get::<dyn SessionPersistence>(),
            Arc::new(KernelSink::new(ctx.clone())),
        ));
        ctx.provide::<dyn Sessions>(Arc::clone(&store) as Arc<dyn Sessions>)?;
        ctx.on_dispose_async(async move { store.close_all().await })?;
        Ok(())
    }
}
