//! The in-process provider: children are agents of this process, created through `agents`.
//!
//! One-shot children live for one run. Continuable children (see `continuable.rs`) are one
//! durable session with at most one live activation: every message of their parent is a later
//! turn, and a child with no activation is resumed from its log.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::{Agent, AgentOptions, AgentStatus, Agents, CancelCause, CreateAgent, SessionSeed};
use dsh_kernel::Ctx;
use dsh_llm::Message;
use dsh_sandbox::{Sandbox, SandboxModeEvent};
use dsh_session::feature::ApprovalPolicyEvent;
use dsh_session::wire::ApprovalPolicyName;
use dsh_session::{CreateOptions, ForkOptions, NewEvent, PluginEvent, Session, Sessions};
use dsh_system_prompt::{Section, SystemPrompt};
use dsh_tools::{ToolFilter, Tools};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};

use crate::child_tools::{
    REPORT_TOOL, ReportTool, STRUCTURED_OUTPUT_TOOL, StructuredOutputTool, StructuredSlot,
};
use crate::usage::outcome_of;
use crate::{
    Capabilities, ChildInfo, ChildStatus, StopReason, SubagentCatalog, SubagentDescriptor,
    SubagentError, SubagentMode, SubagentOutcome, SubagentRequest, SubagentUsage, Subagents,
};

/// Name of the child's runtime-context section.
pub const DELEGATION_SECTION: &str = "subagent:delegation";
/// Its order (the original's 120).
pub const DELEGATION_ORDER: i32 = 120;

/// What a child is doing now.
pub(crate) enum Activation {
    /// A live agent: messages go straight to its inbox.
    Live(Arc<dyn Agent>),
    /// Being wound down or resumed: messages wait here for the next activation.
    Busy(Vec<Message>),
    /// A continuable child with no activation.
    Dormant,
}

/// A child known to this process.
pub(crate) struct Child {
    pub(crate) parent_id: String,
    pub(crate) depth: u64,
    pub(crate) label: String,
    pub(crate) mode: SubagentMode,
    pub(crate) continuable: bool,
    pub(crate) capabilities: Capabilities,
    /// Route of its activations (the parent's when it was started).
    pub(crate) options: AgentOptions,
    pub(crate) state: Activation,
}

/// The in-process [`Subagents`] provider.
pub struct InProcessSubagents {
    pub(crate) ctx: Ctx,
    pub(crate) agents: Arc<dyn Agents>,
    pub(crate) sessions: Arc<dyn Sessions>,
    max_depth: u64,
    max_concurrent: usize,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    pub(crate) children: Mutex<HashMap<String, Child>>,
    /// Notified whenever a child's run ends (for [`Subagents::when_children_settled`]).
    pub(crate) settled: Notify,
}

impl std::fmt::Debug for InProcessSubagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessSubagents")
            .field("max_depth", &self.max_depth)
            .field("max_concurrent", &self.max_concurrent)
            .finish_non_exhaustive()
    }
}

/// Appends a plugin record to `session`, logging a failure (records are never worth a crash).
pub(crate) fn append_record<T: PluginEvent>(session: &Session, record: &T, what: &str) {
    match NewEvent::plugin(record) {
        Ok(e) => {
            if let Err(error) = session.append(e) {
                tracing::warn!(%error, "subagent: cannot log {what}");
            }
        }
        Err(error) => tracing::warn!(%error, "subagent: cannot encode {what}"),
    }
}

/// The parent's sandbox mode, logged in the child with `source: "delegation"` (unless its last
/// `sandbox/mode` already says so) and set on the `sandbox` service for the child's session.
fn delegate_sandbox(ctx: &Ctx, parent_id: &str, child: &Session, cwd: &std::path::Path) {
    let Some(sandbox) = ctx.get::<dyn Sandbox>() else {
        return;
    };
    let mode = sandbox.policy(parent_id, cwd, None).mode;
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
        append_record(child, &event, "the delegated sandbox mode");
    }
    sandbox.set_session_mode(child.id(), mode);
}

/// A child created and configured, before its first prompt.
pub(crate) struct Started {
    pub(crate) agent: Arc<dyn Agent>,
    pub(crate) session: Arc<Session>,
    pub(crate) slot: Option<StructuredSlot>,
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
            children: Mutex::new(HashMap::new()),
            settled: Notify::new(),
        }
    }

    fn slots_of(&self, parent: &str) -> Arc<Semaphore> {
        self.slots
            .lock()
            .entry(parent.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.max_concurrent)))
            .clone()
    }

    /// How the child session is made: empty with the child's lineage (spawn), or a fork at
    /// the parent's last completed turn.
    fn child_seed(
        &self,
        parent: &Arc<dyn Agent>,
        mode: SubagentMode,
        cwd: &str,
        depth: u64,
    ) -> SessionSeed {
        match mode {
            SubagentMode::Spawn => SessionSeed::Create(CreateOptions {
                id: None,
                cwd: Some(cwd.to_owned()),
                parent_session: Some(parent.id().to_owned()),
                origin: Some("subagent".to_owned()),
                delegation_depth: depth,
                agent_preset: parent.session().header().agent_preset,
            }),
            SubagentMode::Fork => SessionSeed::Fork {
                from: parent.id().to_owned(),
                options: ForkOptions {
                    boundary: None,
                    child_id: None,
                    cwd: Some(cwd.to_owned()),
                    subagent: true,
                },
            },
        }
    }

    /// The parent's sandbox mode, logged in the child with `source: "delegation"`.
    pub(crate) fn delegate_sandbox(&self, parent_id: &str, child: &Session, cwd: &std::path::Path) {
        delegate_sandbox(&self.ctx, parent_id, child, cwd);
    }

    /// Everything a child's scope gets, on creation and on every resume: approvals pinned to
    /// `never` (logged once; `dsh-approval` honours it), the `subagent:delegation` runtime
    /// context, and the capabilities (persona, tool filter, `report`, `structured_output`).
    pub(crate) fn configure(
        &self,
        agent: &Arc<dyn Agent>,
        parent_id: &str,
        depth: u64,
        continuable: bool,
        capabilities: &Capabilities,
    ) -> Result<Option<StructuredSlot>, SubagentError> {
        let session = agent.session();
        let pinned = session
            .events()
            .iter()
            .rev()
            .find_map(|e| e.plugin::<ApprovalPolicyEvent>().and_then(Result::ok))
            .is_some_and(|p| {
                p.policy == ApprovalPolicyName::Never && p.source.as_deref() == Some("delegation")
            });
        if !pinned {
            let pin = ApprovalPolicyEvent {
                policy: ApprovalPolicyName::Never,
                source: Some("delegation".to_owned()),
            };
            append_record(&session, &pin, "the delegated approval policy");
        }
        let scope = agent.ctx();
        if let Some(prompt) = self.ctx.get::<dyn SystemPrompt>() {
            let section = Section::new(DELEGATION_SECTION, crate::texts::delegation_context(depth))
                .with_order(DELEGATION_ORDER)
                .raw();
            if let Err(error) = prompt.runtime_context(scope, section) {
                tracing::warn!(%error, "subagent: cannot add the delegation context");
            }
            if let Some(persona) = &capabilities.persona {
                let section = Section::new(dsh_system_prompt::PERSONA_SECTION, persona.clone())
                    .with_order(0)
                    .raw();
                prompt
                    .section(scope, section)
                    .map_err(|e| SubagentError::Capability(format!("persona: {e}")))?;
            }
        } else if capabilities.persona.is_some() {
            return Err(SubagentError::Capability(
                "persona: no system-prompt service is mounted".to_owned(),
            ));
        }
        let needs_tools = continuable
            || capabilities.tool_filter.is_some()
            || capabilities.output_schema.is_some();
        if !needs_tools {
            return Ok(None);
        }
        let tools = self
            .ctx
            .get::<dyn Tools>()
            .ok_or_else(|| SubagentError::Capability("no tools service is mounted".to_owned()))?;
        let tool_error = |e: dsh_tools::ToolsError| SubagentError::Capability(e.to_string());
        if let Some(spec) = &capabilities.tool_filter {
            let mut filter = ToolFilter {
                allow: spec.allow.as_ref().map(|a| a.iter().cloned().collect()),
                deny: spec.deny.iter().cloned().collect(),
            };
            // The child-only tools survive the filter (as the original's `report` does).
            for name in [REPORT_TOOL, STRUCTURED_OUTPUT_TOOL] {
                filter.deny.remove(name);
                if let Some(a) = &mut filter.allow {
                    a.insert(name.to_owned());
                }
            }
            tools.restrict(scope, filter).map_err(tool_error)?;
        }
        if continuable {
            let report = ReportTool::new(self.agents.clone(), parent_id.to_owned());
            tools
                .register(scope, Arc::new(report))
                .map_err(tool_error)?;
        }
        let mut slot = None;
        if let Some(schema) = &capabilities.output_schema {
            let s: StructuredSlot = Arc::default();
            let tool = StructuredOutputTool::new(schema.clone(), s.clone());
            tools.register(scope, Arc::new(tool)).map_err(tool_error)?;
            slot = Some(s);
        }
        Ok(slot)
    }

    /// Checks the depth, creates and configures the child (logging its descriptor and the
    /// parent's catalog entry), without prompting it.
    pub(crate) async fn start_child(
        &self,
        parent: &Arc<dyn Agent>,
        request: &SubagentRequest,
        depth: u64,
    ) -> Result<(Started, AgentOptions), SubagentError> {
        let mut options = parent.options();
        if let Some(cwd) = &request.cwd {
            options.cwd = if cwd.is_absolute() {
                cwd.clone()
            } else {
                options.cwd.join(cwd)
            };
        }
        let cwd_text = options.cwd.to_string_lossy().into_owned();
        let seed = self.child_seed(parent, request.mode, &cwd_text, depth);
        let (ctx, parent_id, cwd) = (
            self.ctx.clone(),
            parent.id().to_owned(),
            options.cwd.clone(),
        );
        let (started_mode, started_label) = (request.mode, request.label.clone());
        // A brand-new agent on the child's session (created as new, never "resumed").
        let agent = self
            .agents
            .create_seeded(
                &self.ctx,
                CreateAgent {
                    session_id: None,
                    label: None,
                    options: options.clone(),
                    // Before the agent is published (and the sandbox plugin logs its own mode
                    // at session start), the child's first `sandbox/mode` is the delegated one.
                    setup: Some(Box::new(move |_scope, child: Arc<dyn Agent>| {
                        Box::pin(async move {
                            // Observers hear of the child before its first event.
                            ctx.emit(&crate::events::SubagentStarted {
                                parent_id: parent_id.clone(),
                                child_id: child.session().id().to_owned(),
                                mode: started_mode,
                                label: started_label,
                            });
                            delegate_sandbox(&ctx, &parent_id, &child.session(), &cwd);
                            Ok(())
                        })
                    })),
                },
                seed,
            )
            .await
            .map_err(|e| match e {
                dsh_agent::AgentError::Session(s) => SubagentError::Session(s),
                other => SubagentError::Agent(other),
            })?;
        let session = agent.session();
        let child_id = session.id().to_owned();
        let mode = if request.continuable {
            "continuable"
        } else {
            "one-shot"
        };
        let descriptor = SubagentDescriptor {
            version: 3,
            mode: mode.to_owned(),
            provider: request.mode.provider().to_owned(),
            label: Some(request.label.clone()),
            agent_provider: options.provider.clone(),
            agent_model: options.model.clone(),
            persona: request.capabilities.persona.clone(),
            tool_filter: request.capabilities.tool_filter.clone(),
        };
        match NewEvent::plugin(&descriptor) {
            Ok(e) => {
                if let Err(error) = session.append(e) {
                    agent.dispose().await;
                    return Err(error.into());
                }
            }
            Err(error) => tracing::warn!(%error, "subagent: cannot encode the descriptor"),
        }
        let catalog = SubagentCatalog {
            version: 0,
            child_id: child_id.clone(),
            child_created_at: session.header().created_at,
            mode: mode.to_owned(),
            label: Some(request.label.clone()),
        };
        append_record(
            &parent.session(),
            &catalog,
            "the child in the parent's catalog",
        );
        // Durable before the child's first turn: crash repair finds a parent's children
        // through these entries (`repair_children`).
        if let Err(error) = parent.session().flush().await {
            tracing::warn!(%error, "subagent: cannot flush the parent's catalog");
        }
        // The sandbox plugin logs its configured mode at session start: the parent's wins.
        self.delegate_sandbox(parent.id(), &session, &options.cwd);
        let slot = match self.configure(
            &agent,
            parent.id(),
            depth,
            request.continuable,
            &request.capabilities,
        ) {
            Ok(s) => s,
            Err(e) => {
                agent.dispose().await;
                return Err(e);
            }
        };
        Ok((
            Started {
                agent,
                session,
                slot,
            },
            options,
        ))
    }

    /// The live parent and the child's depth, refused beyond `maxDepth`.
    pub(crate) fn parent_and_depth(
        &self,
        request: &SubagentRequest,
    ) -> Result<(Arc<dyn Agent>, u64), SubagentError> {
        let parent = self
            .agents
            .get(&request.parent_id)
            .ok_or_else(|| SubagentError::ParentUnavailable(request.parent_id.clone()))?;
        let depth = parent.session().header().delegation_depth + 1;
        if depth > self.max_depth {
            return Err(SubagentError::DepthExceeded {
                depth,
                max: self.max_depth,
            });
        }
        if request.continuable && request.capabilities.output_schema.is_some() {
            return Err(SubagentError::Capability(
                "outputSchema needs a one-shot subagent (not continuable)".to_owned(),
            ));
        }
        Ok((parent, depth))
    }

    /// Waits for a concurrency slot of the parent (or the call's cancellation).
    pub(crate) async fn slot(
        &self,
        parent: &str,
        request: &SubagentRequest,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, SubagentError> {
        let slots = self.slots_of(parent);
        tokio::select! {
            p = slots.acquire_owned() => p.map_err(|_| SubagentError::Cancelled),
            () = request.cancel.cancelled() => Err(SubagentError::Cancelled),
        }
    }

    /// The outcome of the run logged in `session` from `start`, with its structured value
    /// checked; logs `dsh/subagent-usage` in the parent.
    pub(crate) fn finish_run(
        &self,
        child_id: &str,
        parent_id: &str,
        mode: SubagentMode,
        session: &Session,
        start: u64,
        slot: Option<&StructuredSlot>,
    ) -> SubagentOutcome {
        let (mut outcome, nested) = outcome_of(child_id, &session.events_since(start));
        if let Some(slot) = slot {
            outcome.structured = slot.lock().take();
            if outcome.stop_reason == StopReason::Completed && outcome.structured.is_none() {
                outcome.stop_reason = StopReason::Error;
                outcome.diagnostic = Some(crate::texts::STRUCTURED_MISSING.to_owned());
            }
        }
        let record = SubagentUsage {
            child_id: child_id.to_owned(),
            provider: mode.provider().to_owned(),
            stop_reason: outcome.stop_reason,
            requests: outcome.requests,
            usage: outcome.usage,
            model: outcome.model.clone(),
            nested,
        };
        match self.agents.get(parent_id) {
            Some(parent) => append_record(&parent.session(), &record, "the child's usage"),
            None => tracing::warn!(
                child = child_id,
                parent = parent_id,
                "subagent: the parent is gone; the child's usage is only in its own log"
            ),
        }
        outcome
    }

    /// A one-shot run (or the first, foreground run of a continuable child).
    async fn run_child(
        self: Arc<Self>,
        request: SubagentRequest,
    ) -> Result<SubagentOutcome, SubagentError> {
        let (parent, depth) = self.parent_and_depth(&request)?;
        let _permit = self.slot(parent.id(), &request).await?;
        let (started, options) = self.start_child(&parent, &request, depth).await?;
        let Started {
            agent,
            session,
            slot,
        } = started;
        let child_id = session.id().to_owned();
        self.children.lock().insert(
            child_id.clone(),
            Child {
                parent_id: parent.id().to_owned(),
                depth,
                label: request.label.clone(),
                mode: request.mode,
                continuable: request.continuable,
                capabilities: request.capabilities.clone(),
                options,
                state: Activation::Live(agent.clone()),
            },
        );
        if request.continuable {
            return self
                .run_continuable_foreground(request, agent, session)
                .await;
        }
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
                Ok(self.finish_run(
                    &child_id,
                    parent.id(),
                    request.mode,
                    &session,
                    start,
                    slot.as_ref(),
                ))
            }
            Err(e) => Err(SubagentError::Agent(e)),
        };
        self.children.lock().remove(&child_id);
        if let Ok(o) = &outcome {
            self.ctx.emit(&crate::events::SubagentFinished {
                parent_id: parent.id().to_owned(),
                mode: request.mode,
                outcome: o.clone(),
            });
        }
        agent.dispose().await;
        self.settled.notify_waiters();
        outcome
    }

    /// Cancels the live children of a parent being torn down (their runs end as `aborted`).
    pub(crate) fn parent_disposing(&self, parent_id: &str) {
        let children = self.children.lock();
        for c in children.values().filter(|c| c.parent_id == parent_id) {
            if let Activation::Live(agent) = &c.state {
                agent.cancel(CancelCause::Parent, false);
            }
        }
    }
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

    fn start(&self, request: SubagentRequest) -> BoxFuture<'static, Result<String, SubagentError>> {
        Box::pin(self.0.clone().start_continuable(request))
    }

    fn children(&self, parent_id: &str, descendants: bool) -> Vec<ChildInfo> {
        let children = self.0.children.lock();
        let mut out = Vec::new();
        let mut stack: Vec<String> = vec![parent_id.to_owned()];
        while let Some(p) = stack.pop() {
            let mut direct: Vec<(&String, &Child)> =
                children.iter().filter(|(_, c)| c.parent_id == p).collect();
            direct.sort_by(|a, b| a.0.cmp(b.0));
            for (id, c) in direct.into_iter().rev() {
                let status = match &c.state {
                    Activation::Live(a) if a.status() == AgentStatus::Running => {
                        ChildStatus::Running
                    }
                    Activation::Live(_) => ChildStatus::Idle,
                    Activation::Busy(q) if !q.is_empty() => ChildStatus::Running,
                    Activation::Busy(_) | Activation::Dormant => ChildStatus::Ready,
                };
                out.push(ChildInfo {
                    id: id.clone(),
                    parent_id: c.parent_id.clone(),
                    depth: c.depth,
                    label: c.label.clone(),
                    status,
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
    ) -> BoxFuture<'static, Result<String, SubagentError>> {
        let me = self.0.clone();
        let (caller, target, text) = (caller_id.to_owned(), target_id.to_owned(), text.to_owned());
        Box::pin(async move { me.send_message(&caller, &target, &text) })
    }

    fn interrupt(&self, caller_id: &str, child_id: &str) -> Result<bool, SubagentError> {
        let children = self.0.children.lock();
        let Some(child) = children.get(child_id) else {
            return Ok(false);
        };
        let mut ancestor = Some(child.parent_id.clone());
        while let Some(a) = ancestor {
            if a == caller_id {
                if let Activation::Live(agent) = &child.state {
                    agent.cancel(CancelCause::Parent, true);
                    return Ok(true);
                }
                return Ok(false);
            }
            ancestor = children.get(&a).map(|c| c.parent_id.clone());
        }
        Err(SubagentError::Unauthorized {
            caller: caller_id.to_owned(),
            target: child_id.to_owned(),
        })
    }

    fn busy_children(&self, parent_id: &str) -> usize {
        self.0.busy_children(parent_id)
    }

    fn when_children_settled(&self, parent_id: &str) -> BoxFuture<'static, ()> {
        let me = self.0.clone();
        let parent = parent_id.to_owned();
        Box::pin(async move {
            loop {
                let settled = me.settled.notified();
                tokio::pin!(settled);
                settled.as_mut().enable();
                if me.busy_children(&parent) == 0 {
                    return;
                }
                settled.await;
            }
        })
    }
}
