//! Continuable children: one durable session, at most one live activation. Every message of
//! the parent is a later turn of the child (never a steer); a child with no live activation is
//! resumed from its log (also after a restart: its header names the parent, its descriptor says
//! `continuable`). When an activation's work ends the parent is told (`Background subagent <id>
//! …`, source `subagent-settled`: a new turn when idle, a steer when busy) unless it is waiting
//! for the answer in the foreground, and the activation is disposed.

use std::sync::Arc;

use dsh_agent::{Agent, AgentStatus, CancelCause, ResumeAgent, Target};
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_session::Session;
use futures::FutureExt;
use tokio::sync::oneshot;

use crate::inprocess::{Activation, Child, InProcessSubagents};
use crate::{
    Capabilities, SubagentDescriptor, SubagentError, SubagentMode, SubagentOutcome,
    SubagentRequest, ToolFilterSpec, texts,
};

fn relay(caller: &str, kind: &str, body: String) -> Message {
    let source = MessageSource::new(kind)
        .with("form", "relay".into())
        .with("senderSessionId", caller.into());
    Message::new("", Role::User, vec![ContentBlock::text(body)], source)
}

/// A live activation being driven.
struct Running {
    agent: Arc<dyn Agent>,
    session: Arc<Session>,
    start: u64,
}

impl InProcessSubagents {
    /// Starts a continuable child in the background: its id at once, a settlement notice later.
    pub(crate) async fn start_continuable(
        self: Arc<Self>,
        request: SubagentRequest,
    ) -> Result<String, SubagentError> {
        let request = SubagentRequest {
            continuable: true,
            ..request
        };
        let (parent, depth) = self.parent_and_depth(&request)?;
        let permit = self.slot(parent.id(), &request).await?;
        let (started, options) = self.start_child(&parent, &request, depth).await?;
        let child_id = started.session.id().to_owned();
        self.children.lock().insert(
            child_id.clone(),
            Child {
                parent_id: parent.id().to_owned(),
                depth,
                label: request.label.clone(),
                mode: request.mode,
                continuable: true,
                capabilities: request.capabilities.clone(),
                options,
                state: Activation::Live(started.agent.clone()),
            },
        );
        let start = started.session.len();
        if let Err(e) = started
            .agent
            .followup(Message::user_text("", request.prompt.clone()))
        {
            self.children.lock().remove(&child_id);
            started.agent.dispose().await;
            return Err(e.into());
        }
        let running = Running {
            agent: started.agent,
            session: started.session,
            start,
        };
        let me = self.clone();
        let id = child_id.clone();
        let drive = async move {
            let _permit = permit;
            me.drive(id, Some(running), None).await;
        };
        if let Err(error) = self.ctx.spawn(drive) {
            tracing::warn!(%error, "subagent: cannot drive the child");
        }
        Ok(child_id)
    }

    /// The first run of a continuable child in the foreground: its outcome is the call's
    /// result; later messages continue it in the background.
    pub(crate) async fn run_continuable_foreground(
        self: Arc<Self>,
        request: SubagentRequest,
        agent: Arc<dyn Agent>,
        session: Arc<Session>,
    ) -> Result<SubagentOutcome, SubagentError> {
        let child_id = session.id().to_owned();
        let start = session.len();
        if let Err(e) = agent.followup(Message::user_text("", request.prompt.clone())) {
            self.children.lock().remove(&child_id);
            agent.dispose().await;
            return Err(e.into());
        }
        let (tx, rx) = oneshot::channel();
        let running = Running {
            agent: agent.clone(),
            session,
            start,
        };
        let me = self.clone();
        let id = child_id.clone();
        self.ctx
            .spawn(async move { me.drive(id, Some(running), Some(tx)).await })
            .map_err(|e| SubagentError::Capability(format!("cannot drive the child: {e}")))?;
        let mut rx = rx;
        tokio::select! {
            r = &mut rx => return r.map_err(|_| SubagentError::Cancelled),
            () = request.cancel.cancelled() => agent.cancel(CancelCause::Parent, false),
        }
        rx.await.map_err(|_| SubagentError::Cancelled)
    }

    /// Drives a child's activations until it has nothing left to do: waits for the run to end,
    /// settles it (usage record, notice or foreground answer), disposes the activation, and
    /// resumes it again while messages are waiting.
    async fn drive(
        self: Arc<Self>,
        child_id: String,
        mut current: Option<Running>,
        mut first: Option<oneshot::Sender<SubagentOutcome>>,
    ) {
        loop {
            let running = match current.take() {
                Some(r) => r,
                None => match self.reactivate(&child_id).await {
                    Ok(r) => r,
                    Err(error) => {
                        tracing::warn!(child = %child_id, %error, "subagent: cannot resume the child");
                        self.fail_activation(&child_id, &error);
                        break;
                    }
                },
            };
            loop {
                running.agent.when_idle().await;
                let mut children = self.children.lock();
                // A message sent meanwhile made it busy again: keep waiting.
                if running.agent.status() != AgentStatus::Disposed
                    && running.agent.when_idle().now_or_never().is_none()
                {
                    continue;
                }
                if let Some(c) = children.get_mut(&child_id) {
                    c.state = Activation::Busy(Vec::new());
                }
                break;
            }
            let (parent_id, mode) = match self.children.lock().get(&child_id) {
                Some(c) => (c.parent_id.clone(), c.mode),
                None => break,
            };
            let outcome = self.finish_run(
                &child_id,
                &parent_id,
                mode,
                &running.session,
                running.start,
                None,
            );
            running.agent.dispose().await;
            match first.take() {
                Some(tx) => {
                    if let Err(outcome) = tx.send(outcome) {
                        self.notify_parent(&parent_id, &outcome);
                    }
                }
                None => self.notify_parent(&parent_id, &outcome),
            }
            let again = {
                let mut children = self.children.lock();
                match children.get_mut(&child_id) {
                    Some(c) => match &c.state {
                        Activation::Busy(q) if !q.is_empty() => true,
                        _ => {
                            c.state = Activation::Dormant;
                            false
                        }
                    },
                    None => false,
                }
            };
            self.settled.notify_waiters();
            if !again {
                break;
            }
        }
    }

    /// A resume that failed: the waiting messages are dropped (logged) and the child is left
    /// dormant; the parent is told.
    fn fail_activation(&self, child_id: &str, error: &SubagentError) {
        let parent = {
            let mut children = self.children.lock();
            let Some(c) = children.get_mut(child_id) else {
                return;
            };
            c.state = Activation::Dormant;
            c.parent_id.clone()
        };
        self.settled.notify_waiters();
        let outcome = SubagentOutcome {
            child_id: child_id.to_owned(),
            output: String::new(),
            stop_reason: crate::StopReason::Error,
            diagnostic: Some(error.to_string()),
            usage: Default::default(),
            requests: 0,
            model: None,
            structured: None,
        };
        self.notify_parent(&parent, &outcome);
    }

    /// The settlement notice to the direct parent: a new turn when idle, a steer when busy.
    fn notify_parent(&self, parent_id: &str, outcome: &SubagentOutcome) {
        let Some(parent) = self.agents.get(parent_id) else {
            tracing::debug!(parent = parent_id, "subagent: parent gone; notice dropped");
            return;
        };
        let mut closing = outcome.output.clone();
        if let Some(d) = outcome.diagnostic.as_deref().filter(|d| !d.is_empty()) {
            if !closing.is_empty() {
                closing.push('\n');
            }
            closing.push_str("Diagnostic: ");
            closing.push_str(d);
        }
        let text = texts::settled_notice(&outcome.child_id, outcome.stop_reason, &closing);
        let source = MessageSource::new("subagent-settled")
            .with("form", "notice".into())
            .with("senderSessionId", outcome.child_id.as_str().into());
        let message = Message::new("", Role::User, vec![ContentBlock::text(text)], source);
        let sent = if parent.status() == AgentStatus::Running {
            parent.steer(message)
        } else {
            parent.followup(message)
        };
        if let Err(error) = sent {
            tracing::warn!(%error, parent = parent_id, "subagent: cannot deliver the settlement notice");
        }
    }

    /// Resumes a dormant child from its log and hands it the messages waiting for it.
    async fn reactivate(&self, child_id: &str) -> Result<Running, SubagentError> {
        let (parent_id, depth, capabilities, options) = {
            let children = self.children.lock();
            let c = children
                .get(child_id)
                .ok_or_else(|| SubagentError::NotDeliverable {
                    target: child_id.to_owned(),
                })?;
            (
                c.parent_id.clone(),
                c.depth,
                c.capabilities.clone(),
                c.options.clone(),
            )
        };
        let agent = self
            .agents
            .resume(
                &self.ctx,
                ResumeAgent {
                    session_id: child_id.to_owned(),
                    options: options.clone(),
                    setup: None,
                },
            )
            .await?;
        let session = agent.session();
        self.delegate_sandbox(&parent_id, &session, &options.cwd);
        if let Err(e) = self.configure(&agent, &parent_id, depth, true, &capabilities) {
            agent.dispose().await;
            return Err(e);
        }
        let start = session.len();
        let waiting = {
            let mut children = self.children.lock();
            match children.get_mut(child_id) {
                Some(c) => match std::mem::replace(&mut c.state, Activation::Live(agent.clone())) {
                    Activation::Busy(q) => q,
                    _ => Vec::new(),
                },
                None => Vec::new(),
            }
        };
        for message in waiting {
            if let Err(error) = agent.send(message, Target::NextTurn, true) {
                tracing::warn!(%error, child = child_id, "subagent: a message for the child was lost");
            }
        }
        Ok(Running {
            agent,
            session,
            start,
        })
    }

    /// A stored continuable child of `caller` (its header names the caller as parent and its
    /// descriptor says `continuable`), entered as a dormant child.
    fn stored_child(&self, caller: &Arc<dyn Agent>, target: &str) -> Option<Child> {
        let log = self.sessions.read(target).ok()?;
        let header = log.header();
        if header.parent_session.as_deref() != Some(caller.id())
            || header.origin.as_deref() != Some("subagent")
        {
            return None;
        }
        let descriptor = log
            .events()
            .iter()
            .rev()
            .find_map(|e| e.plugin::<SubagentDescriptor>().and_then(Result::ok))?;
        if descriptor.mode != "continuable" {
            return None;
        }
        let mode = match descriptor.provider.as_str() {
            "fork" => SubagentMode::Fork,
            _ => SubagentMode::Spawn,
        };
        let mut options = caller.options();
        if let Some(cwd) = &header.cwd {
            options.cwd = cwd.into();
        }
        Some(Child {
            parent_id: caller.id().to_owned(),
            depth: header.delegation_depth,
            label: descriptor.label.clone().unwrap_or_default(),
            mode,
            continuable: true,
            capabilities: Capabilities {
                persona: descriptor.persona.clone(),
                tool_filter: descriptor
                    .tool_filter
                    .clone()
                    .filter(|f: &ToolFilterSpec| !f.is_empty()),
                output_schema: None,
            },
            options,
            state: Activation::Dormant,
        })
    }

    /// `send_message`: a direct child's next turn (resumed when dormant), or a steer for the
    /// caller's live parent.
    pub(crate) fn send_message(
        self: &Arc<Self>,
        caller: &str,
        target: &str,
        text: &str,
    ) -> Result<String, SubagentError> {
        let message = relay(caller, "coordinator", text.to_owned());
        let wake = {
            let mut children = self.children.lock();
            match children.get_mut(target).filter(|c| c.parent_id == caller) {
                Some(c) => match &mut c.state {
                    Activation::Live(agent) => {
                        agent.send(message, Target::NextTurn, true)?;
                        return Ok(texts::message_queued(target));
                    }
                    Activation::Busy(q) => {
                        q.push(message);
                        return Ok(texts::message_queued(target));
                    }
                    Activation::Dormant => {
                        c.state = Activation::Busy(vec![message]);
                        true
                    }
                },
                None => false,
            }
        };
        if wake {
            self.spawn_activation(target);
            return Ok(texts::message_queued(target));
        }
        let caller_agent = self
            .agents
            .get(caller)
            .ok_or_else(|| SubagentError::ParentUnavailable(caller.to_owned()))?;
        let parent_of_caller = caller_agent.session().header().parent_session;
        if parent_of_caller.as_deref() == Some(target)
            && let Some(parent) = self.agents.get(target)
        {
            let message = relay(
                caller,
                "agent-message",
                texts::message_from_child(caller, text),
            );
            if parent.status() == AgentStatus::Running {
                parent.steer(message)?;
            } else {
                parent.followup(message)?;
            }
            return Ok(texts::message_sent_to_parent(target));
        }
        if let Some(mut child) = self.stored_child(&caller_agent, target) {
            child.state = Activation::Busy(vec![relay(caller, "coordinator", text.to_owned())]);
            {
                let mut children = self.children.lock();
                if children.contains_key(target) {
                    // Entered meanwhile by another message: deliver through it.
                    drop(children);
                    return self.send_message(caller, target, text);
                }
                children.insert(target.to_owned(), child);
            }
            self.spawn_activation(target);
            return Ok(texts::message_queued(target));
        }
        Err(SubagentError::NotDeliverable {
            target: target.to_owned(),
        })
    }

    fn spawn_activation(self: &Arc<Self>, child_id: &str) {
        let me = self.clone();
        let id = child_id.to_owned();
        if let Err(error) = self
            .ctx
            .spawn(async move { me.drive(id, None, None).await })
        {
            tracing::warn!(%error, "subagent: cannot resume the child");
        }
    }

    /// Children of `parent` with work in progress (running, or messages waiting).
    pub(crate) fn busy_children(&self, parent: &str) -> usize {
        self.children
            .lock()
            .values()
            .filter(|c| c.parent_id == parent && c.continuable)
            .filter(|c| match &c.state {
                Activation::Live(_) => true,
                Activation::Busy(_) => true,
                Activation::Dormant => false,
            })
            .count()
    }
}
