//! Creation and resume of agents: one rollback-covered initialisation for both.

use std::sync::Arc;

use dsh_agent::events::{AgentCreated, AgentSessionStart};
use dsh_agent::{
    Agent, AgentError, AgentFactory, AgentOptions, CreateAgent, ResumeAgent, SessionSeed, SetupFn,
};
use dsh_kernel::Ctx;
use dsh_session::{CreateOptions, Session, SessionError};
use futures::future::BoxFuture;

use crate::LoopShared;
use crate::agent::LoopAgent;

/// The loop's [`AgentFactory`], registered on the `agents` service.
pub struct LoopFactory {
    shared: Arc<LoopShared>,
}

impl LoopFactory {
    pub(crate) fn new(shared: Arc<LoopShared>) -> Self {
        Self { shared }
    }
}

impl std::fmt::Debug for LoopFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopFactory").finish_non_exhaustive()
    }
}

fn fresh_id(label: Option<&str>) -> String {
    match label {
        Some(l) if !l.is_empty() => format!("{l}-session-{}", uuid::Uuid::now_v7()),
        _ => dsh_session::new_session_id(),
    }
}

impl AgentFactory for LoopFactory {
    fn create(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        let shared = self.shared.clone();
        let caller = caller.clone();
        Box::pin(async move {
            let CreateAgent {
                session_id,
                label,
                mut options,
                setup,
            } = spec;
            if options.cwd.as_os_str().is_empty() {
                options.cwd = crate::default_cwd();
            }
            let (session, resumed) = match session_id {
                Some(id) => match shared.sessions.open(&id) {
                    Ok(s) => (s, true),
                    Err(SessionError::NotFound(_)) => {
                        (create_session(&shared, id, &options)?, false)
                    }
                    Err(e) => return Err(e.into()),
                },
                None => (
                    create_session(&shared, fresh_id(label.as_deref()), &options)?,
                    false,
                ),
            };
            publish(shared, &caller, session, options, setup, resumed).await
        })
    }

    fn create_seeded(
        &self,
        caller: &Ctx,
        spec: CreateAgent,
        seed: SessionSeed,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        let shared = self.shared.clone();
        let caller = caller.clone();
        Box::pin(async move {
            let CreateAgent {
                mut options, setup, ..
            } = spec;
            if options.cwd.as_os_str().is_empty() {
                options.cwd = crate::default_cwd();
            }
            let session = match seed {
                SessionSeed::Create(create) => shared.sessions.create(create)?,
                SessionSeed::Fork { from, options } => shared.sessions.fork(&from, options)?,
            };
            publish(shared, &caller, session, options, setup, false).await
        })
    }

    fn resume(
        &self,
        caller: &Ctx,
        spec: ResumeAgent,
    ) -> BoxFuture<'static, Result<Arc<dyn Agent>, AgentError>> {
        let shared = self.shared.clone();
        let caller = caller.clone();
        Box::pin(async move {
            let ResumeAgent {
                session_id,
                mut options,
                setup,
            } = spec;
            let session = shared.sessions.open(&session_id).map_err(|e| match e {
                SessionError::NotFound(id) => AgentError::NotFound(id),
                other => AgentError::Session(other),
            })?;
            if options.cwd.as_os_str().is_empty() {
                options.cwd = session
                    .header()
                    .cwd
                    .map(Into::into)
                    .unwrap_or_else(crate::default_cwd);
            }
            publish(shared, &caller, session, options, setup, true).await
        })
    }
}

fn create_session(
    shared: &LoopShared,
    id: String,
    options: &AgentOptions,
) -> Result<Arc<Session>, AgentError> {
    let cwd = options.cwd.to_string_lossy().into_owned();
    Ok(shared.sessions.create(CreateOptions {
        id: Some(id),
        cwd: Some(cwd),
        ..Default::default()
    })?)
}

async fn publish(
    shared: Arc<LoopShared>,
    caller: &Ctx,
    session: Arc<Session>,
    options: AgentOptions,
    setup: Option<SetupFn>,
    resumed: bool,
) -> Result<Arc<dyn Agent>, AgentError> {
    let id = session.id().to_owned();
    if shared.agents.get(&id).is_some() {
        drop(shared.sessions.close(&id).await);
        return Err(AgentError::Exists(id));
    }
    let scope = match shared.ctx.scope(id.clone()) {
        Ok(s) => s,
        Err(e) => {
            drop(shared.sessions.close(&id).await);
            return Err(e.into());
        }
    };
    let mut options = options;
    if resumed && let Some(cwd) = restored_cwd(&session) {
        options.cwd = cwd;
    }
    let agent = LoopAgent::new(shared.clone(), session, scope, options);
    let handle: Arc<dyn Agent> = agent.clone();
    let rollback = |agent: Arc<LoopAgent>| async move { agent.dispose_now().await };
    if let Some(setup) = setup
        && let Err(e) = setup(agent.ctx().clone(), handle.clone()).await
    {
        rollback(agent).await;
        return Err(AgentError::Setup(e.to_string()));
    }
    if let Err(e) = shared.agents.register(agent.ctx(), handle.clone()) {
        rollback(agent).await;
        return Err(e);
    }
    shared.live.lock().push(Arc::downgrade(&agent));
    // The caller owns the agent too: whichever unloads first disposes it.
    if !caller.same_fiber(&shared.ctx) {
        let a = agent.clone();
        if let Err(e) = caller.on_dispose_async(async move { a.dispose_now().await }) {
            rollback(agent).await;
            return Err(e.into());
        }
    }
    agent.ctx().emit(&AgentCreated {
        agent: handle.clone(),
    });
    agent.ctx().emit(&AgentSessionStart {
        agent_id: id,
        resumed,
    });
    agent.start();
    Ok(handle)
}

/// The working directory a resumed session had last: its latest `working-directory/change`
/// (written by the `working_directory` tool), when that directory still exists.
fn restored_cwd(session: &Session) -> Option<std::path::PathBuf> {
    let events = session.events();
    let change = events.iter().rev().find_map(|e| {
        e.plugin::<dsh_session::feature::WorkingDirectoryChange>()
            .and_then(Result::ok)
    })?;
    let dir = std::path::PathBuf::from(change.cwd);
    if dir.is_dir() {
        Some(dir)
    } else {
        tracing::warn!(
            cwd = %dir.display(),
            "the session's last working directory is gone; using the default"
        );
        None
    }
}
