//! The concrete agent: inbox, status, cancellation, the driver task and teardown.

use std::sync::{Arc, Weak};

use dsh_agent::events::{
    AgentDisposed, AgentStatusChanged, InboxClaimed, InboxDiscarded, InboxInserted,
};
use dsh_agent::{Agent, AgentError, AgentOptions, AgentStatus, CancelCause, Target};
use dsh_kernel::{CancellationToken, Ctx, Scope};
use dsh_llm::{Message, Role};
use dsh_session::data::InboxSpliced;
use dsh_session::{Inbox, NewEvent, Session};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::LoopShared;
use crate::request::RequestState;

/// Mutable state guarded by one lock.
pub(crate) struct State {
    pub(crate) inbox: Inbox,
    /// A waking send arrived and has not been served yet.
    pub(crate) wake: bool,
    /// A turn is running.
    pub(crate) running: bool,
    /// Teardown started: no new turns.
    pub(crate) disposing: bool,
    /// The running turn's token.
    pub(crate) turn_cancel: Option<CancellationToken>,
    /// The first cancellation cause of the running turn.
    pub(crate) cancel_cause: Option<CancelCause>,
    /// The running turn was cancelled with `keep_inbox`.
    pub(crate) keep_inbox: bool,
    pub(crate) status: AgentStatus,
}

/// One agent driven by the loop.
pub(crate) struct LoopAgent {
    pub(crate) id: String,
    pub(crate) shared: Arc<LoopShared>,
    pub(crate) session: Arc<Session>,
    scope: Scope,
    pub(crate) options: Mutex<AgentOptions>,
    pub(crate) state: Mutex<State>,
    wake: Notify,
    busy: watch::Sender<bool>,
    me: Weak<LoopAgent>,
    driver: Mutex<Option<tokio::task::JoinHandle<()>>>,
    disposed: tokio::sync::Mutex<bool>,
}

impl LoopAgent {
    pub(crate) fn new(
        shared: Arc<LoopShared>,
        session: Arc<Session>,
        scope: Scope,
        options: AgentOptions,
    ) -> Arc<Self> {
        let inbox = session.with_log(|l| Inbox::replay(l.events()));
        let id = session.id().to_owned();
        Arc::new_cyclic(|me| LoopAgent {
            id,
            shared,
            session,
            scope,
            options: Mutex::new(options),
            state: Mutex::new(State {
                inbox,
                wake: false,
                running: false,
                disposing: false,
                turn_cancel: None,
                cancel_cause: None,
                keep_inbox: false,
                status: AgentStatus::Idle,
            }),
            wake: Notify::new(),
            busy: watch::channel(false).0,
            me: me.clone(),
            driver: Mutex::new(None),
            disposed: tokio::sync::Mutex::new(false),
        })
    }

    /// This agent as a shared handle (for hooks and notifications).
    pub(crate) fn handle(&self) -> Option<Arc<dyn Agent>> {
        self.me.upgrade().map(|a| a as Arc<dyn Agent>)
    }

    pub(crate) fn scope_ctx(&self) -> &Ctx {
        self.scope.ctx()
    }

    /// Starts the driver task.
    pub(crate) fn start(self: &Arc<Self>) {
        let me = self.clone();
        let handle = tokio::spawn(async move { me.drive().await });
        *self.driver.lock() = Some(handle);
    }

    fn update_busy(&self, st: &State) {
        let busy = st.running || (st.wake && !st.inbox.is_empty() && !st.disposing);
        self.busy.send_if_modified(|b| {
            let changed = *b != busy;
            *b = busy;
            changed
        });
    }

    fn set_status(&self, status: AgentStatus) {
        {
            let mut st = self.state.lock();
            if st.status == status {
                return;
            }
            st.status = status;
        }
        self.scope_ctx().emit(&AgentStatusChanged {
            agent_id: self.id.clone(),
            status,
        });
    }

    async fn drive(self: Arc<Self>) {
        let mut request = RequestState::attach(&self.session);
        loop {
            // Wait for a waking send with input to serve (or teardown).
            loop {
                let notified = self.wake.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let mut st = self.state.lock();
                    if st.disposing {
                        st.running = false;
                        self.update_busy(&st);
                        return;
                    }
                    if st.wake && !st.inbox.is_empty() {
                        st.wake = false;
                        st.running = true;
                        st.turn_cancel = Some(CancellationToken::new());
                        st.cancel_cause = None;
                        st.keep_inbox = false;
                        self.update_busy(&st);
                        break;
                    }
                    st.wake = false;
                    self.update_busy(&st);
                }
                self.set_status(AgentStatus::Idle);
                notified.await;
            }
            self.set_status(AgentStatus::Running);
            crate::turn::run_turn(&self, &mut request).await;
            let another = {
                let mut st = self.state.lock();
                st.turn_cancel = None;
                // Burst sends: each queued next-turn message gets its own turn. After a
                // cancel, kept input stays parked until the next waking send (a send that
                // arrived after the cancel has set `wake` again by itself).
                if st.cancel_cause.is_none() && !st.inbox.next_turn.is_empty() {
                    st.wake = true;
                }
                st.cancel_cause = None;
                st.wake && !st.inbox.is_empty() && !st.disposing
            };
            // The status is idle before `when_idle` resolves, so a caller woken by it (a
            // manual compaction, say) finds the agent idle.
            if !another {
                self.set_status(AgentStatus::Idle);
            }
            let mut st = self.state.lock();
            st.running = false;
            self.update_busy(&st);
        }
    }

    /// The running turn's token and whether it is cancelled.
    pub(crate) fn turn_token(&self) -> CancellationToken {
        self.state.lock().turn_cancel.clone().unwrap_or_default()
    }

    /// Whether input produced by the running turn may still be queued: not after a cancel
    /// that discarded the inbox.
    pub(crate) fn may_queue(&self) -> bool {
        let st = self.state.lock();
        st.cancel_cause.is_none() || st.keep_inbox
    }

    /// The first cancellation cause of the running turn.
    pub(crate) fn cancel_cause(&self) -> CancelCause {
        self.state
            .lock()
            .cancel_cause
            .clone()
            .unwrap_or(CancelCause::User)
    }

    /// Appends one inbox splice and applies it to the live list. The splice is durable first.
    fn splice(
        &self,
        st: &mut State,
        target: Target,
        start: usize,
        removed: usize,
        inserted: Vec<Message>,
        canceled: bool,
    ) -> Result<Vec<Message>, AgentError> {
        let inserted: Vec<Arc<Message>> = inserted.into_iter().map(Arc::new).collect();
        st.inbox
            .check(target, start, removed, &inserted)
            .map_err(|e| AgentError::InvalidMessage(format!("inbox splice: {e}")))?;
        self.session.append(NewEvent::core(InboxSpliced {
            target,
            start: start as u64,
            removed_count: (removed > 0).then_some(removed as u64),
            inserted: inserted.clone(),
            outcome: canceled.then_some(dsh_session::data::InboxOutcome::Canceled),
        }))?;
        let removed = st
            .inbox
            .splice(target, start, removed, inserted)
            .map_err(|e| AgentError::InvalidMessage(format!("inbox splice: {e}")))?;
        Ok(removed.into_iter().map(Arc::unwrap_or_clone).collect())
    }

    /// Claims every next-step message, plus one next-turn message at a turn's first step.
    pub(crate) fn claim(&self, first_step: bool) -> Result<Vec<Message>, AgentError> {
        let mut batch = Vec::new();
        let mut claimed_events = Vec::new();
        {
            let mut st = self.state.lock();
            let n = st.inbox.next_step.len();
            if n > 0 {
                let got = self.splice(&mut st, Target::NextStep, 0, n, Vec::new(), false)?;
                claimed_events.push((Target::NextStep, got.clone()));
                batch.extend(got);
            }
            if first_step && !st.inbox.next_turn.is_empty() {
                let got = self.splice(&mut st, Target::NextTurn, 0, 1, Vec::new(), false)?;
                claimed_events.push((Target::NextTurn, got.clone()));
                batch.extend(got);
            }
        }
        for (target, messages) in claimed_events {
            self.scope_ctx().emit(&InboxClaimed {
                agent_id: self.id.clone(),
                target,
                messages,
            });
        }
        Ok(batch)
    }

    /// Whether next-step input is pending.
    pub(crate) fn has_next_step(&self) -> bool {
        !self.state.lock().inbox.next_step.is_empty()
    }

    /// Discards every pending message (`outcome: canceled`).
    fn discard_all(&self, st: &mut State) -> Vec<Message> {
        let mut out = Vec::new();
        for target in [Target::NextStep, Target::NextTurn] {
            let n = st.inbox.list(target).len();
            if n == 0 {
                continue;
            }
            match self.splice(st, target, 0, n, Vec::new(), true) {
                Ok(removed) => out.extend(removed),
                Err(e) => tracing::error!(agent = %self.id, error = %e, "could not discard inbox"),
            }
        }
        out
    }

    /// Full teardown, once: cancel (cause `disposed`, inbox kept), let the driver commit the
    /// closing events, flush, release the session, undo the scope.
    pub(crate) async fn dispose_now(&self) {
        let mut done = self.disposed.lock().await;
        if *done {
            return;
        }
        *done = true;
        self.scope_ctx().emit(&dsh_agent::events::AgentDisposing {
            agent_id: self.id.clone(),
        });
        {
            let mut st = self.state.lock();
            st.disposing = true;
            if st.running {
                if st.cancel_cause.is_none() {
                    st.cancel_cause = Some(CancelCause::Disposed);
                }
                if let Some(t) = &st.turn_cancel {
                    t.cancel();
                }
            }
        }
        self.wake.notify_one();
        let driver = self.driver.lock().take();
        if let Some(Err(e)) = match driver {
            Some(d) => Some(d.await),
            None => None,
        } {
            tracing::error!(agent = %self.id, error = %e, "agent driver ended abnormally");
        }
        if let Err(e) = self.session.flush().await {
            tracing::error!(agent = %self.id, error = %e, "final session flush failed");
        }
        if let Err(e) = self.shared.sessions.close(&self.id).await {
            tracing::warn!(agent = %self.id, error = %e, "session close failed");
        }
        self.set_status(AgentStatus::Disposed);
        self.scope_ctx().emit(&AgentDisposed {
            agent_id: self.id.clone(),
        });
        self.scope.dispose().await;
        {
            let mut st = self.state.lock();
            st.running = false;
            self.update_busy(&st);
        }
        self.shared
            .live
            .lock()
            .retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), self));
    }
}

impl Agent for LoopAgent {
    fn id(&self) -> &str {
        &self.id
    }

    fn options(&self) -> AgentOptions {
        self.options.lock().clone()
    }

    fn set_cwd(&self, cwd: std::path::PathBuf) -> Result<(), AgentError> {
        if self.state.lock().disposing {
            return Err(AgentError::Disposed(self.id.clone()));
        }
        self.options.lock().cwd = cwd;
        Ok(())
    }

    fn session(&self) -> Arc<Session> {
        self.session.clone()
    }

    fn status(&self) -> AgentStatus {
        self.state.lock().status
    }

    fn ctx(&self) -> &Ctx {
        self.scope.ctx()
    }

    fn cancel(&self, cause: CancelCause, keep_inbox: bool) {
        let discarded = {
            let mut st = self.state.lock();
            if !st.running {
                // Woken with input whose turn has not started yet: without `keep_inbox` that
                // input is discarded, so the turn never starts (a cancel in this window was
                // lost: the turn then ran with a fresh token). Otherwise cancelling an idle
                // agent is a no-op that arms nothing.
                if keep_inbox || !st.wake || st.inbox.is_empty() {
                    return;
                }
                st.wake = false;
                let discarded = self.discard_all(&mut st);
                self.update_busy(&st);
                discarded
            } else {
                if st.cancel_cause.is_none() {
                    st.cancel_cause = Some(cause);
                }
                if let Some(t) = &st.turn_cancel {
                    t.cancel();
                }
                // Waking sends that arrived before the cancel are served by it; later ones latch
                // again and run when the turn has converged.
                st.wake = false;
                st.keep_inbox = keep_inbox;
                if keep_inbox {
                    Vec::new()
                } else {
                    self.discard_all(&mut st)
                }
            }
        };
        for message in discarded {
            self.scope_ctx().emit(&InboxDiscarded {
                agent_id: self.id.clone(),
                message,
            });
        }
    }

    fn when_idle(&self) -> BoxFuture<'static, ()> {
        let mut rx = self.busy.subscribe();
        Box::pin(async move {
            // A closed channel means the agent is gone: that is idle too.
            let _ = rx.wait_for(|busy| !*busy).await;
        })
    }

    fn send(
        &self,
        mut message: Message,
        target: Target,
        wakeup: bool,
    ) -> Result<String, AgentError> {
        if message.role != Role::User {
            return Err(AgentError::InvalidMessage(format!(
                "only user messages can be sent, not {}",
                message.role.as_str()
            )));
        }
        if message.source.kind.is_empty() {
            message.source = dsh_llm::MessageSource::user();
        }
        let id = {
            let mut st = self.state.lock();
            if st.disposing {
                return Err(AgentError::Disposed(self.id.clone()));
            }
            if message.id.is_empty() || st.inbox.contains_id(&message.id) {
                message.id = dsh_session::ids::message_id();
            }
            let id = message.id.clone();
            let start = st.inbox.list(target).len();
            self.splice(&mut st, target, start, 0, vec![message.clone()], false)?;
            if wakeup {
                st.wake = true;
            }
            self.update_busy(&st);
            id
        };
        self.scope_ctx().emit(&InboxInserted {
            agent_id: self.id.clone(),
            target,
            message,
        });
        if wakeup {
            self.wake.notify_one();
        }
        Ok(id)
    }

    fn dispose(&self) -> BoxFuture<'static, ()> {
        let me = self.me.upgrade();
        Box::pin(async move {
            if let Some(me) = me {
                me.dispose_now().await;
            }
        })
    }
}
