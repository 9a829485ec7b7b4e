//! `dsh-agent`: the Agent vocabulary every plugin programs against.
//!
//! - [`Agent`]: the handle of one running agent (id = session id): options, session, status, its
//!   scoped [`Ctx`](dsh_kernel::Ctx), `send` with [`Target`] (followup / steer / inject),
//!   `cancel`, `when_idle`, `dispose`.
//! - [`Agents`]: the registry service with a factory slot that the agent loop fills; `create`,
//!   `create_seeded` (a child's lineage or a fork, created as new) and `resume` go through the
//!   factory.
//! - [`events`]: the `agent/*` notifications; [`hooks`]: `agent/pre-step`, `agent/request`,
//!   `agent/request-error`, `agent/turn-stopping`.
//!
//! Nothing here depends on the loop: a different driver can implement [`Agent`] and
//! [`AgentFactory`] and every plugin keeps working.

mod agent;
pub mod events;
pub mod hooks;
mod registry;

pub use agent::{
    Agent, AgentError, AgentOptions, AgentStatus, CancelCause, CreateAgent, ResumeAgent,
    SessionSeed, SetupFn, Target,
};
pub use registry::{AgentFactory, Agents, AgentsPlugin, AgentsService};
