//! The `Agents` service: registry plus the factory slot filled by the agent loop.

use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, EmptyConfig, Plugin, Service};
use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::{Agent, AgentError, CreateAgent, ResumeAgent, SessionSeed};

/// Creates and resumes agents (implemented by the agent loop).
pub trait AgentFactory: Send + Sync + 'static {
    /// A new agent (or, with an exact `session_id` that exists, that session resumed).
    /// The caller's fiber owns the agent: it is disposed when the caller unloads.
    fn create(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>>;

    /// An agent continuing a stored session (opened for write: a concurrent resume of the
    /// same id is refused).
    fn resume(
        &self,
        caller: &Ctx,
        spec: ResumeAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>>;

    /// A new agent on a session the factory makes from `seed` (`spec.session_id` and
    /// `spec.label` are ignored). Factories that cannot keep the default, which refuses.
    fn create_seeded(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
        seed: SessionSeed,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        let _ = (caller, spec, seed);
        Box::pin(async {
            Err(AgentError::Unsupported(
                "this agent factory cannot create seeded sessions".into(),
            ))
        })
    }
}

/// The agent registry (kernel service `agents`).
pub trait Agents: Send + Sync + 'static {
    /// Fills the factory slot (owned by `ctx`'s fiber; a second factory is an error).
    fn set_factory(&self, ctx: &Ctx, factory: Arc<dyn AgentFactory>) -> Result<(), AgentError>;

    /// Enters a published agent into the registry (owned by `ctx`'s fiber).
    fn register(&self, ctx: &Ctx, agent: Arc<dyn Agent>) -> Result<(), AgentError>;

    /// Creates an agent through the factory.
    fn create(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>>;

    /// Resumes a stored session through the factory.
    fn resume(
        &self,
        caller: &Ctx,
        spec: ResumeAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>>;

    /// Creates an agent on a session the factory makes from `seed` (a child's lineage, a
    /// fork): it starts as new, not resumed. The default refuses.
    fn create_seeded(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
        seed: SessionSeed,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        let _ = (caller, spec, seed);
        Box::pin(async {
            Err(AgentError::Unsupported(
                "this agent registry cannot create seeded sessions".into(),
            ))
        })
    }

    /// A live agent by id.
    fn get(&self, id: &str) -> Option<Arc<dyn Agent>>;

    /// Every live agent, by id.
    fn list(&self) -> Vec<Arc<dyn Agent>>;
}

impl Service for dyn Agents {
    const NAME: &'static str = "agents";
}

/// A registered agent with the id of its registration.
type Entry = (u64, Arc<dyn Agent>);

/// The standard [`Agents`] implementation.
#[derive(Default)]
pub struct AgentsService {
    factory: Mutex<Option<(u64, Arc<dyn AgentFactory>)>>,
    agents: Mutex<BTreeMap<String, Entry>>,
    next: Mutex<u64>,
}

impl AgentsService {
    fn next_id(&self) -> u64 {
        let mut n = self.next.lock();
        *n += 1;
        *n
    }
}

impl Agents for Arc<AgentsService> {
    fn set_factory(&self, ctx: &Ctx, factory: Arc<dyn AgentFactory>) -> Result<(), AgentError> {
        let id = self.next_id();
        {
            let mut slot = self.factory.lock();
            if slot.is_some() {
                return Err(AgentError::Exists("agent factory".into()));
            }
            *slot = Some((id, factory));
        }
        let me = Arc::downgrade(self);
        let reg = ctx.on_dispose(move || {
            if let Some(me) = me.upgrade() {
                let mut slot = me.factory.lock();
                if slot.as_ref().is_some_and(|(i, _)| *i == id) {
                    *slot = None;
                }
            }
        });
        if let Err(e) = reg {
            *self.factory.lock() = None;
            return Err(e.into());
        }
        Ok(())
    }

    fn register(&self, ctx: &Ctx, agent: Arc<dyn Agent>) -> Result<(), AgentError> {
        let id = self.next_id();
        let key = agent.id().to_owned();
        {
            let mut agents = self.agents.lock();
            if agents.contains_key(&key) {
                return Err(AgentError::Exists(key));
            }
            agents.insert(key.clone(), (id, agent));
        }
        let me = Arc::downgrade(self);
        let k = key.clone();
        let reg = ctx.on_dispose(move || {
            if let Some(me) = me.upgrade() {
                let mut agents = me.agents.lock();
                if agents.get(&k).is_some_and(|(i, _)| *i == id) {
                    agents.remove(&k);
                }
            }
        });
        if let Err(e) = reg {
            self.agents.lock().remove(&key);
            return Err(e.into());
        }
        Ok(())
    }

    fn create(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        match self.factory.lock().as_ref() {
            Some((_, f)) => f.create(caller, spec),
            None => Box::pin(async { Err(AgentError::NoFactory) }),
        }
    }

    fn resume(
        &self,
        caller: &Ctx,
        spec: ResumeAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        match self.factory.lock().as_ref() {
            Some((_, f)) => f.resume(caller, spec),
            None => Box::pin(async { Err(AgentError::NoFactory) }),
        }
    }

    fn create_seeded(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
        seed: SessionSeed,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        match self.factory.lock().as_ref() {
            Some((_, f)) => f.create_seeded(caller, spec, seed),
            None => Box::pin(async { Err(AgentError::NoFactory) }),
        }
    }

    fn get(&self, id: &str) -> Option<Arc<dyn Agent>> {
        self.agents.lock().get(id).map(|(_, a)| a.clone())
    }

    fn list(&self) -> Vec<Arc<dyn Agent>> {
        self.agents
            .lock()
            .values()
            .map(|(_, a)| a.clone())
            .collect()
    }
}

/// Provides the `agents` service.
pub struct AgentsPlugin;

impl Plugin for AgentsPlugin {
    const NAME: &'static str = "agents";
    type Config = EmptyConfig;

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let service: Arc<dyn Agents> = Arc::new(Arc::new(AgentsService::default()));
        ctx.provide::<dyn Agents>(service)?;
        Ok(())
    }
}
