//! The in-process provider: children are agents of this process, created through `agents`.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::{Agent, AgentStatus, Agents, CancelCause, CreateAgent};
use dsh_kernel::Ctx;
use dsh_llm::{Message, TokenUsage};
use dsh_sandbox::{Sandbox, SandboxModeEvent};
use dsh_session::data::TurnEnd;
use dsh_session::feature::ApprovalPolicyEvent;
use dsh_session::wire::ApprovalPolicyName;
use dsh_session::wire::TurnEndReason;
use dsh_session::{CoreEvent, CreateOptions, Event, ForkOptions, NewEvent, Session, Sessions};
use dsh_system_prompt::{Section, SystemPrompt};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use crate::texts::clip_diagnostic;
use crate::{
    ChildInfo, StopReason, SubagentCatalog, SubagentDescriptor, SubagentError, SubagentMode,
    SubagentOutcome, SubagentRequest, Subagents,
};

/// Name of the child's runtime-context section.
pub const DELEGATION_SECTION: &str = "subagent:delegation";
/// Its order (the original's 120).
pub const DELEGATION_ORDER: i32 = 120;

/// A live child.
struct Child {
    parent_id: String,
    depth: u64,
    label: String,
    agent: Arc<dyn Agent>,
}

/// The in-process [`Subagents`] provider.
pub struct InProcessSubagents {
    ctx: Ctx,
    agents: Arc<dyn Agents>,
    sessions: Arc<dyn Sessions>,
    max_depth: u64,
    max_concurrent: usize,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    live: Mutex<HashMap<String, Child>>,
}

impl std::fmt::Debug for InProcessSubagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessSubagents")
            .field("max_depth", &self.max_depth)
            .field("max_concurrent", &self.max_concurrent)
            .finish_non_exhaustive()
    }
}

impl InProcessSubagents {
    /// A provider whose children are owned by `ctx`'s fiber (disposed when it unloads).
    pub fn new(
        ctx: Ctx,
        agents: Arc<dyn Agents>,
        sessions: Arc<dyn Sessions>,
        max_depth: u64,
        max_concurrent: usize,
    ) -> Self {
        Self {
            ctx,
            agents,
            sessions,
            max_depth,
            max_concurrent: max_concurrent.max(1),
            slots: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
        }
    }

    fn slots_of(&self, parent: &str) -> Arc<Semaphore> {
        self.slots
            .lock()
            .entry(parent.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.max_concurrent)))
            .clone()
    }

    /// Creates the child session: empty (spawn) or seeded with the parent's completed turns.
    fn child_session(
        &self,
        parent: &Arc<dyn Agent>,
        mode: SubagentMode,
        cwd: &str,
        depth: u64,
    ) -> Result<Arc<Session>, SubagentError> {
        let header = parent.session().header();
        let session = match mode {
            SubagentMode::Spawn => self.sessions.create(CreateOptions {
                id: None,
                cwd: Some(cwd.to_owned()),
                parent_session: Some(parent.id().to_owned()),
                origin: Some("subagent".to_owned()),
                delegation_depth: depth,
                agent_preset: header.agent_preset,
            })?,
            SubagentMode::Fork => self.sessions.fork(
                parent.id(),
                ForkOptions {
                    boundary: None,
                    child_id: None,
                    cwd: Some(cwd.to_owned()),
                    subagent: true,
                },
            )?,
        };
        Ok(session)
    }

    /// The parent's sandbox mode, logged in the child with `source: "delegation"`.
    fn delegate_sandbox(&self, parent: &Arc<dyn Agent>, child: &Session, cwd: &std::path::Path) {
        let Some(sandbox) = self.ctx.get::<dyn Sandbox>() else {
            return;
        };
        let mode = sandbox.policy(parent.id(), cwd, None).mode;
        let logged = child
            .events()
            .iter()
            .rev()
            .find_map(|e| e.plugin::<SandboxModeEvent>().and_then(Result::ok));
        let already = logged
            .as_ref()
            .is_some_and(|e| e.mode == mode && e.source.as_deref() == Some("delegation"));
        if !already {
            let event = SandboxModeEvent {
                mode,
                source: Some("delegation".to_owned()),
            };
            match NewEvent::plugin(&event) {
                Ok(e) => {
                    if let Err(error) = child.append(e) {
                        tracing::warn!(%error, "subagent: cannot log the delegated sandbox mode");
                    }
                }
                Err(error) => tracing::warn!(%error, "subagent: cannot encode sandbox/mode"),
            }
        }
        sandbox.set_session_mode(child.id(), mode);
    }

    /// Approvals pinned to `never` (logged; `dsh-approval` honours it) and the
    /// `subagent:delegation` runtime-context section in the child's scope.
    fn delegation_context(&self, agent: &Arc<dyn Agent>, depth: u64) {
        let pin = ApprovalPolicyEvent {
            policy: ApprovalPolicyName::Never,
            source: Some("delegation".to_owned()),
        };
        match NewEvent::plugin(&pin) {
            Ok(e) => {
                if let Err(error) = agent.session().append(e) {
                    tracing::warn!(%error, "subagent: cannot log the delegated approval policy");
                }
            }
            Err(error) => tracing::warn!(%error, "subagent: cannot encode approval/policy"),
        }
        let Some(prompt) = self.ctx.get::<dyn SystemPrompt>() else {
            return;
        };
        let section = Section::new(DELEGATION_SECTION, crate::texts::delegation_context(depth))
            .with_order(DELEGATION_ORDER)
            .raw();
        if let Err(error) = prompt.runtime_context(agent.ctx(), section) {
            tracing::warn!(%error, "subagent: cannot add the delegation context");
        }
    }

    async fn run_child(
        self: Arc<Self>,
        request: SubagentRequest,
    ) -> Result<SubagentOutcome, SubagentError> {
        let parent = self
            .agents
            .get(&request.parent_id)
            .ok_or_else(|| SubagentError::ParentUnavailable(request.parent_id.clone()))?;
        let parent_depth = parent.session().header().delegation_depth;
        let depth = parent_depth + 1;
        if depth > self.max_depth {
            return Err(SubagentError::DepthExceeded {
                depth,
                max: self.max_depth,
            });
        }
        let slots = self.slots_of(parent.id());
        let _permit = tokio::select! {
            p = slots.acquire_owned() => p.map_err(|_| SubagentError::Cancelled)?,
            () = request.cancel.cancelled() => return Err(SubagentError::Cancelled),
        };
        let mut options = parent.options();
        if let Some(cwd) = &request.cwd {
            options.cwd = if cwd.is_absolute() {
                cwd.clone()
            } else {
                options.cwd.join(cwd)
            };
        }
        let cwd_text = options.cwd.to_string_lossy().into_owned();
        let session = self.child_session(&parent, request.mode, &cwd_text, depth)?;
        let child_id = session.id().to_owned();
        // Observers hear of the child before its first event.
        self.ctx.emit(&crate::events::SubagentStarted {
            parent_id: parent.id().to_owned(),
            child_id: child_id.clone(),
            mode: request.mode,
            label: request.label.clone(),
        });
        let descriptor = SubagentDescriptor {
            version: 3,
            mode: "one-shot".to_owned(),
            provider: request.mode.provider().to_owned(),
            label: Some(request.label.clone()),
            agent_provider: options.provider.clone(),
            agent_model: options.model.clone(),
        };
        match NewEvent::plugin(&descriptor) {
            Ok(e) => {
                if let Err(error) = session.append(e) {
                    drop(self.sessions.close(&child_id).await);
                    return Err(error.into());
                }
            }
            Err(error) => tracing::warn!(%error, "subagent: cannot encode the descriptor"),
        }
        let catalog = SubagentCatalog {
            version: 0,
            child_id: child_id.clone(),
            child_created_at: session.header().created_at,
            mode: "one-shot".to_owned(),
            label: Some(request.label.clone()),
        };
        match NewEvent::plugin(&catalog) {
            Ok(e) => {
                if let Err(error) = parent.session().append(e) {
                    tracing::warn!(%error, "subagent: cannot log the child in the parent's catalog");
                }
            }
            Err(error) => tracing::warn!(%error, "subagent: cannot encode subagent/catalog"),
        }
        self.delegate_sandbox(&parent, &session, &options.cwd);
        let agent = match self
            .agents
            .create(
                &self.ctx,
                CreateAgent {
                    session_id: Some(child_id.clone()),
                    label: None,
                    options: options.clone(),
                    setup: None,
                },
            )
            .await
        {
            Ok(a) => a,
            Err(e) => {
                drop(self.sessions.close(&child_id).await);
                return Err(e.into());
            }
        };
        // The sandbox plugin logs its configured mode at session start: the parent's wins.
        self.delegate_sandbox(&parent, &session, &options.cwd);
        self.delegation_context(&agent, depth);
        self.live.lock().insert(
            child_id.clone(),
            Child {
                parent_id: parent.id().to_owned(),
                depth,
                label: request.label.clone(),
                agent: agent.clone(),
            },
        );
        let start = session.len();
        let prompt = Message::user_text("", request.prompt.clone());
        let outcome = match agent.followup(prompt) {
            Ok(_) => {
                tokio::select! {
                    () = agent.when_idle() => {}
                    () = request.cancel.cancelled() => {
                        agent.cancel(CancelCause::Parent, false);
                        agent.when_idle().await;
                    }
                }
                Ok(outcome_of(&child_id, &session.events_since(start)))
            }
            Err(e) => Err(SubagentError::Agent(e)),
        };
        self.live.lock().remove(&child_id);
        if let Ok(o) = &outcome {
            self.ctx.emit(&crate::events::SubagentFinished {
                parent_id: parent.id().to_owned(),
                mode: request.mode,
                outcome: o.clone(),
            });
        }
        agent.dispose().await;
        outcome
    }
}

/// The outcome of the child's run from the events it logged.
fn outcome_of(child_id: &str, events: &[Arc<Event>]) -> SubagentOutcome {
    let mut usage = TokenUsage::default();
    let mut requests = 0u64;
    let mut last_text = String::new();
    let mut all_text = String::new();
    let mut end: Option<TurnEnd> = None;
    let mut model: Option<String> = None;
    for e in events {
        match e.core() {
            Some(CoreEvent::AssistantMessage(m)) => {
                requests += 1;
                if let Some(id) = m.message.source.model_id() {
                    model = Some(id.to_owned());
                }
                if let Some(u) = &m.usage {
                    add_usage(&mut usage, u);
                }
                let text = m.message.text();
                if !text.trim().is_empty() {
                    all_text.push_str(&text);
                    last_text = text;
                }
            }
            Some(CoreEvent::TurnEnd(t)) => end = Some((**t).clone()),
            _ => {}
        }
    }
    let (stop_reason, diagnostic) = match end.map(|t| t.reason) {
        Some(TurnEndReason::Completed) => (StopReason::Completed, None),
        Some(TurnEndReason::MaxTokens) => (StopReason::MaxTokens, None),
        Some(TurnEndReason::Error { error }) => (
            StopReason::Error,
            Some(clip_diagnostic(&format!(
                "{}: {}",
                error.code, error.message
            ))),
        ),
        Some(TurnEndReason::Blocked) => (
            StopReason::Error,
            Some("the child's turn was blocked before it started".to_owned()),
        ),
        Some(TurnEndReason::Aborted { .. }) | Some(TurnEndReason::Interrupted) => {
            (StopReason::Aborted, None)
        }
        Some(other) => (
            StopReason::Error,
            Some(format!("the child's turn ended as {}", other.kind())),
        ),
        None => (
            StopReason::Aborted,
            Some("the child ended without finishing its turn".to_owned()),
        ),
    };
    let output = if last_text.is_empty() {
        all_text
    } else {
        last_text
    };
    SubagentOutcome {
        child_id: child_id.to_owned(),
        output,
        stop_reason,
        diagnostic,
        usage,
        requests,
        model,
    }
}

fn add_usage(total: &mut TokenUsage, u: &TokenUsage) {
    total.input_tokens += u.input_tokens;
    total.output_tokens += u.output_tokens;
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    total.total_tokens = sum(total.total_tokens, u.total_tokens);
    total.cache_read_tokens = sum(total.cache_read_tokens, u.cache_read_tokens);
    total.cache_write_tokens = sum(total.cache_write_tokens, u.cache_write_tokens);
    total.reasoning_tokens = sum(total.reasoning_tokens, u.reasoning_tokens);
}

/// The handle the plugin provides (the provider behind an `Arc`, so runs can outlive a borrow).
pub(crate) struct Provider(pub(crate) Arc<InProcessSubagents>);

impl Subagents for Provider {
    fn run(
        &self,
        request: SubagentRequest,
    ) -> BoxFuture<'static, Result<SubagentOutcome, SubagentError>> {
        Box::pin(self.0.clone().run_child(request))
    }

    fn children(&self, parent_id: &str, descendants: bool) -> Vec<ChildInfo> {
        let live = self.0.live.lock();
        let mut out = Vec::new();
        let mut stack: Vec<String> = vec![parent_id.to_owned()];
        while let Some(p) = stack.pop() {
            let mut direct: Vec<(&String, &Child)> =
                live.iter().filter(|(_, c)| c.parent_id == p).collect();
            direct.sort_by(|a, b| a.0.cmp(b.0));
            for (id, c) in direct.into_iter().rev() {
                out.push(ChildInfo {
                    id: id.clone(),
                    parent_id: c.parent_id.clone(),
                    depth: c.depth,
                    label: c.label.clone(),
                    running: c.agent.status() == AgentStatus::Running,
                });
                if descendants {
                    stack.push(id.clone());
                }
            }
        }
        out
    }

    fn send_message(
        &self,
        caller_id: &str,
        target_id: &str,
        text: &str,
    ) -> Result<String, SubagentError> {
        let relay = |kind: &str, body: String| {
            let source = dsh_llm::MessageSource::new(kind)
                .with("form", "relay".into())
                .with("senderSessionId", caller_id.into());
            Message::new(
                "",
                dsh_llm::Role::User,
                vec![dsh_llm::ContentBlock::text(body)],
                source,
            )
        };
        let child = self
            .0
            .live
            .lock()
            .get(target_id)
            .filter(|c| c.parent_id == caller_id)
            .map(|c| c.agent.clone());
        if let Some(child) = child {
            child.send(
                relay("coordinator", text.to_owned()),
                dsh_agent::Target::NextTurn,
                true,
            )?;
            return Ok(crate::texts::message_queued(target_id));
        }
        let parent_of_caller = self
            .0
            .agents
            .get(caller_id)
            .and_then(|a| a.session().header().parent_session);
        if parent_of_caller.as_deref() == Some(target_id)
            && let Some(parent) = self.0.agents.get(target_id)
        {
            let message = relay(
                "agent-message",
                crate::texts::message_from_child(caller_id, text),
            );
            if parent.status() == AgentStatus::Running {
                parent.steer(message)?;
            } else {
                parent.followup(message)?;
            }
            return Ok(crate::texts::message_sent_to_parent(target_id));
        }
        Err(SubagentError::NotDeliverable {
            target: target_id.to_owned(),
        })
    }

    fn interrupt(&self, caller_id: &str, child_id: &str) -> Result<bool, SubagentError> {
        let live = self.0.live.lock();
        let Some(child) = live.get(child_id) else {
            return Ok(false);
        };
        let mut ancestor = Some(child.parent_id.clone());
        while let Some(a) = ancestor {
            if a == caller_id {
                child.agent.cancel(CancelCause::Parent, true);
                return Ok(true);
            }
            ancestor = live.get(&a).map(|c| c.parent_id.clone());
        }
        Err(SubagentError::Unauthorized {
            caller: caller_id.to_owned(),
            target: child_id.to_owned(),
        })
    }
}
