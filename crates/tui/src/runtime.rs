//! The event loop: terminal input and the session's protocol events in, ops out, scrollback
//! inserts and viewport frames out. A frame is drawn only after something happened (no timer,
//! no idle redraw); bursts of events are folded before one frame.
//!
//! Everything shown comes from [`Client::subscribe`]; everything done is an [`Op`] sent
//! through one queue per session (so a withdrawal lands before the interrupt that follows it)
//! or a [`Client`] call (open, commands, sessions). Sub-agent cards subscribe to the child's
//! session.

use std::collections::HashMap;
use std::sync::Arc;

use crossterm::event::{Event as TermEvent, EventStream};
use dsh_protocol::{
    Client, CommandInfo, CommandSource, Effort, ErrorCode, Event, EventMsg, Op, OpAccepted,
    OpenSession, ProtocolError, SessionOptions, SessionQuery, SessionSettings, SessionState,
    SessionSummary, Snapshot,
};
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;

use crate::app::{Action, App, PendingSteer, Picker};
use crate::approval::{ApprovalPrompt, Question};
use crate::cells::{Cell, NoticeKind};
use crate::composer::Composer;
use crate::term::{self, Term};
use crate::transcript::Transcript;
use crate::{Target, TuiError, TuiOptions, TuiOutcome};

/// Scrollback lines inserted per frame (a long resumed history goes up in chunks).
const INSERT_CHUNK: usize = 2000;

/// Queued scrollback lines that make a burst of events (folded before one frame) go up before
/// the rest of it is folded. Without it, a long answer that arrived at once (dsh-bench's
/// 10,000-line transcript: 4 KB deltas read faster than drawn) was rendered whole into the queue
/// first: 2.5 MB of lines at the session's heap peak, for ~160 bytes a line.
const BURST_LINES: usize = 256;

/// What an op was, for its answer.
enum OpKind {
    /// A steer with this text.
    Steer(String),
    /// Anything else: a failure is shown as `/{0}: …` or `{0}: …`.
    Other(String),
    /// A command of the registry, by name (its answer may ask this UI a question: a `/rewind`
    /// preview's y/N).
    Command(String),
}

/// What the background tasks tell the UI.
enum Feed {
    /// An event of the shown session (of subscription `epoch`).
    Event(u64, Event),
    /// The shown session's event stream ended.
    Ended(u64),
    /// An event of a running child of the shown session.
    Child(u64, String, Event),
    /// An op's answer.
    OpDone(u64, OpKind, Result<OpAccepted, ProtocolError>),
    /// The session's commands.
    Commands(u64, Vec<CommandInfo>),
    /// The picker's rows.
    Picker(Vec<crate::app::PickItem>),
    /// The host's full-text hits for the picker's query.
    PickerFound(String, Vec<crate::app::PickItem>),
    /// A session to show (opened for `/new` or `/resume`).
    Opened(SessionSummary),
    /// Something failed outside the session.
    Failed(String),
}

/// The session being shown.
struct Shown {
    id: String,
    epoch: u64,
    ops: UnboundedSender<(Op, OpKind)>,
    reader: JoinHandle<()>,
    children: HashMap<String, JoinHandle<()>>,
    /// The welcome line was printed (after the first snapshot).
    welcomed: bool,
    /// The subscription's replay is over (its first snapshot came): events from now on
    /// happen while this UI watches.
    live: bool,
    /// The working directory and the settings in force.
    cwd: String,
    settings: SessionSettings,
}

impl Drop for Shown {
    fn drop(&mut self) {
        self.reader.abort();
        for (_, c) in self.children.drain() {
            c.abort();
        }
    }
}

struct Runtime {
    client: Arc<dyn Client>,
    app: App,
    tx: UnboundedSender<Feed>,
    shown: Option<Shown>,
    epoch: u64,
    /// Options of `/new` sessions.
    new_session: SessionOptions,
    /// Close the sessions this UI opened when it leaves them.
    close_on_leave: bool,
    height: u16,
    /// Terminal input. Dropped before the viewport is opened again (Ctrl-Z): that asks the
    /// terminal for the cursor position, and crossterm's stream thread holds the input reader
    /// while it waits, so the answer would not reach the query.
    input: Option<EventStream>,
    /// A session to show instead (the fork a conversation rewind continues the shown one in).
    switch_to: Option<String>,
    /// Input held while the UI moves to that fork.
    hold: crate::hold::Hold,
    /// What the stream showed of a rewind this UI applied (the rest is shown at the move).
    told: crate::hold::Told,
}

/// Runs the TUI until the user quits. With `close_on_leave`, the sessions it opened are closed
/// in the host (flushed) on every exit path, a panic included.
pub async fn run(opts: TuiOptions) -> Result<TuiOutcome, TuiError> {
    term::install_panic_hook();
    crate::highlight::warm_up();
    let (tx, rx) = unbounded_channel();
    let theme = opts.theme;
    let mut app = App::new(
        theme,
        Transcript::new(theme),
        Composer::new(opts.history_file.clone()),
    );
    app.extra_commands = opts.extra_commands.clone();
    app.files = opts
        .project_dir
        .as_deref()
        .map(crate::mentions::FileIndex::spawn);
    // The session is opened before the terminal is taken: a failure is an ordinary error.
    let first = open_target(opts.client.as_ref(), &opts.target, &opts.new_session).await?;
    let rows = crossterm::terminal::size().map(|(_, r)| r).unwrap_or(24);
    let height = App::viewport_height(rows);
    let mut rt = Runtime {
        client: opts.client.clone(),
        app,
        tx,
        shown: None,
        epoch: 0,
        new_session: opts.new_session.clone(),
        close_on_leave: opts.close_on_leave,
        height,
        input: None,
        switch_to: None,
        hold: crate::hold::Hold::default(),
        told: crate::hold::Told::default(),
    };
    let mut terminal = term::enter(height)?;
    let result = std::panic::AssertUnwindSafe(rt.main(&mut terminal, rx, opts, first))
        .catch_unwind()
        .await;
    term::leave(&mut terminal);
    let id = rt.app.session_id.clone();
    rt.leave().await;
    match result {
        Ok(r) => r.map(|()| TuiOutcome { session_id: id }),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Err(TuiError::Panicked(msg))
        }
    }
}

/// Opens what the command line asked for; `Attach` opens the session to drive it, or watches
/// it when another process holds it.
async fn open_target(
    client: &dyn Client,
    target: &Target,
    new_session: &SessionOptions,
) -> Result<(String, Option<String>), TuiError> {
    match target {
        Target::New => {
            let s = client
                .open(OpenSession::Create {
                    session_id: None,
                    options: new_session.clone(),
                    prompt: None,
                })
                .await?;
            Ok((s.id, None))
        }
        Target::Resume(id) => {
            let s = client
                .open(OpenSession::Resume {
                    session_id: id.clone(),
                    options: resume_options(new_session),
                })
                .await?;
            Ok((s.id, None))
        }
        Target::Attach(id) => {
            let open = client
                .open(OpenSession::Resume {
                    session_id: id.clone(),
                    options: SessionOptions::default(),
                })
                .await;
            match open {
                Ok(s) => Ok((s.id, None)),
                Err(e) if e.code == ErrorCode::SessionLocked => Ok((
                    id.clone(),
                    Some(format!(
                        "session {id} is driven by another process: watching only ({})",
                        e.message
                    )),
                )),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// A resumed session keeps its own directory; the command line's settings apply.
fn resume_options(new_session: &SessionOptions) -> SessionOptions {
    SessionOptions {
        cwd: None,
        settings: new_session.settings.clone(),
    }
}

/// Debug builds only, for the end-to-end test of the panic path: a prompt equal to
/// `DSH_TUI_TEST_PANIC` panics inside the UI loop instead of being sent. Release builds have
/// no trigger.
#[cfg(debug_assertions)]
fn test_panic(text: &str) {
    if std::env::var("DSH_TUI_TEST_PANIC").is_ok_and(|t| !t.is_empty() && t == text) {
        panic!("DSH_TUI_TEST_PANIC: the UI panicked on purpose");
    }
}

#[cfg(not(debug_assertions))]
fn test_panic(_: &str) {}

impl Runtime {
    fn width(term: &Term) -> u16 {
        term.size().map(|s| s.width).unwrap_or(80)
    }

    async fn main(
        &mut self,
        terminal: &mut Term,
        mut rx: UnboundedReceiver<Feed>,
        opts: TuiOptions,
        (id, note): (String, Option<String>),
    ) -> Result<(), TuiError> {
        self.show(id);
        if let Some(note) = note {
            let width = Self::width(terminal);
            self.notice(note, NoticeKind::Warn, width);
        }
        // The first frame before the (possibly long) history goes up.
        self.frame(terminal, 0)?;
        if opts.open_picker {
            self.act(Action::OpenPicker, terminal).await?;
        }
        if let Some(p) = opts.initial_prompt {
            self.act(Action::Send(p), terminal).await?;
        }
        let hung_up = term::hung_up();
        tokio::pin!(hung_up);
        loop {
            self.release_held(terminal).await?;
            self.frame(terminal, INSERT_CHUNK)?;
            // A long history goes up a chunk per frame, keys still served in between.
            let backlog = !self.app.inserts.is_empty();
            let input = self.input.get_or_insert_with(EventStream::new);
            tokio::select! {
                () = std::future::ready(()), if backlog => {}
                () = &mut hung_up => return Err(TuiError::HungUp),
                ev = input.next() => match ev {
                    Some(Ok(ev)) => {
                        if self.terminal_event(ev, terminal).await? {
                            return Ok(());
                        }
                    }
                    Some(Err(e)) => return Err(TuiError::Terminal(e)),
                    None => return Ok(()),
                },
                feed = rx.recv() => {
                    let Some(feed) = feed else { return Ok(()) };
                    let width = Self::width(terminal);
                    self.feed(feed, width);
                    // Fold the whole burst before drawing once; a burst that queues many
                    // lines sends them up as it goes, so the queue stays small.
                    while let Ok(more) = rx.try_recv() {
                        self.feed(more, width);
                        if self.app.inserts.len() >= BURST_LINES {
                            self.frame(terminal, INSERT_CHUNK)?;
                        }
                    }
                    // The UI that applied the rewind moves once its answer came and the
                    // stream showed where the session continues and the command's output.
                    if !self.hold.rewind_in_flight
                        && self.told.settled()
                        && let Some(id) = self.switch_to.take()
                    {
                        self.show_untold(width);
                        self.act(Action::Resume(id), terminal).await?;
                    }
                }
            }
        }
    }

    /// Inserts up to `max_lines` queued lines and draws the viewport.
    fn frame(&mut self, terminal: &mut Term, max_lines: usize) -> Result<(), TuiError> {
        if term::reenter_after_panic(terminal)? {
            tracing::warn!("a panic outside the TUI restored the terminal; taken back");
        }
        let now = crossterm::terminal::size().map_err(TuiError::Terminal)?;
        let known = terminal.size().map_err(TuiError::Terminal)?;
        if now != (known.width, known.height) {
            // The terminal may have reflowed or moved the viewport: place it again (at the
            // bottom, see `term::Backend`) and redraw it whole.
            terminal.autoresize().map_err(TuiError::Terminal)?;
            terminal.clear().map_err(TuiError::Terminal)?;
        }
        let n = self.app.inserts.len().min(max_lines);
        if n > 0 {
            // All of them: the queue itself goes too (a long answer's lines would otherwise keep
            // their capacity, ~80 bytes a line, for the rest of the session).
            let lines: Vec<_> = if n == self.app.inserts.len() {
                std::mem::take(&mut self.app.inserts)
            } else {
                self.app.inserts.drain(..n).collect()
            };
            term::insert(terminal, lines)?;
        }
        terminal
            .draw(|f| self.app.draw(f))
            .map_err(TuiError::Terminal)?;
        Ok(())
    }

    /// Returns whether to quit.
    async fn terminal_event(
        &mut self,
        ev: TermEvent,
        terminal: &mut Term,
    ) -> Result<bool, TuiError> {
        let width = Self::width(terminal);
        let actions = match ev {
            TermEvent::Key(k) => self.app.key(k, width),
            TermEvent::Paste(text) => {
                self.app.paste(&text);
                Vec::new()
            }
            // The next frame notices the new size.
            _ => Vec::new(),
        };
        for a in actions {
            if a == Action::Quit {
                return Ok(true);
            }
            self.act(a, terminal).await?;
        }
        Ok(false)
    }

    fn notice(&mut self, text: String, kind: NoticeKind, width: u16) {
        self.app.insert_cell(&Cell::Notice { text, kind }, width);
    }

    /// Sends `op` to the shown session (in order with the ops before it).
    fn op(&self, op: Op, kind: OpKind) {
        if let Some(s) = &self.shown {
            let _ = s.ops.send((op, kind));
        }
    }

    fn feed(&mut self, feed: Feed, width: u16) {
        let epoch = self.shown.as_ref().map(|s| s.epoch);
        match feed {
            Feed::Event(g, ev) if Some(g) == epoch => self.event(ev, width),
            Feed::Ended(g) if Some(g) == epoch => {
                self.told.lost();
                self.app.running = false;
                tracing::info!("the session's event stream ended");
            }
            Feed::Child(g, id, ev) if Some(g) == epoch => {
                if let EventMsg::SubagentFinished { .. } = ev.msg {
                    return;
                }
                self.app.agents.event(&id, &ev);
            }
            Feed::OpDone(g, kind, result) if Some(g) == epoch => self.op_done(kind, result, width),
            Feed::Commands(g, list) if Some(g) == epoch => self.commands(list),
            Feed::Picker(items) => {
                if let Some(p) = &mut self.app.picker {
                    p.items = items;
                }
            }
            Feed::PickerFound(query, items) => {
                if let Some(p) = self.app.picker.as_mut().filter(|p| p.query == query) {
                    p.found = Some((query, items));
                }
            }
            Feed::Opened(summary) => self.show(summary.id),
            Feed::Failed(text) => {
                self.told.lost();
                self.notice(text, NoticeKind::Error, width);
                if self.shown.is_none() && self.hold.holding() {
                    let n = self.hold.release().len();
                    self.notice(
                        format!("{n} input(s) typed during the switch not sent"),
                        NoticeKind::Error,
                        width,
                    );
                }
            }
            // From a session no longer shown.
            _ => {}
        }
    }

    fn op_done(&mut self, kind: OpKind, result: Result<OpAccepted, ProtocolError>, width: u16) {
        match (kind, result) {
            (OpKind::Steer(text), Ok(accepted)) => {
                let Some(id) = accepted.id else { return };
                let mut pending = self.app.pending.lock();
                if pending.iter().any(|p| p.id.as_deref() == Some(id.as_str())) {
                    // Its `steerQueued` came first.
                    if let Some(i) = pending
                        .iter()
                        .position(|p| p.id.is_none() && p.sent && p.text == text)
                    {
                        pending.remove(i);
                    }
                } else if let Some(p) = pending
                    .iter_mut()
                    .find(|p| p.id.is_none() && p.sent && p.text == text)
                {
                    p.id = Some(id);
                } else {
                    // Taken back (Up, an interrupt) while it was on its way: withdrawn now.
                    drop(pending);
                    self.op(
                        Op::WithdrawSteer { steer_id: id },
                        OpKind::Other("withdraw".into()),
                    );
                }
            }
            (OpKind::Steer(text), Err(e)) => {
                self.app
                    .pending
                    .lock()
                    .retain(|p| !(p.id.is_none() && p.sent && p.text == text));
                self.notice(
                    format!("the steer was not queued: {}", e.message),
                    NoticeKind::Error,
                    width,
                );
            }
            (OpKind::Other(_), Ok(_)) => {}
            // The preview itself is shown from its `commandRan` event (every client watching
            // sees it); only the UI that asked is asked whether to apply it.
            (OpKind::Command(name), Ok(accepted)) => {
                match &accepted.command {
                    Some(dsh_protocol::CommandOutcome::RewindPreview(p)) => {
                        self.app.rewind_confirm = Some(crate::confirm::RewindConfirm::new(p));
                    }
                    // The fork, also told by the old session's `sessionForked`: the UI moves
                    // once the stream has shown it and the command's output (`Told`).
                    Some(dsh_protocol::CommandOutcome::SwitchSession { session_id, text }) => {
                        self.told.answered(session_id, text);
                        self.switch_to = Some(session_id.clone());
                    }
                    _ => {}
                }
                if name == "rewind" {
                    self.hold.rewind_in_flight = false;
                }
            }
            (OpKind::Command(name), Err(e)) => {
                if name == "rewind" {
                    self.hold.rewind_in_flight = false;
                }
                self.notice(format!("/{name}: {}", e.message), NoticeKind::Error, width);
            }
            // A withdrawal that came too late (the steer was delivered) is no failure to show.
            (OpKind::Other(what), Err(e)) if what == "withdraw" => {
                tracing::debug!("withdraw: {}", e.message);
            }
            (OpKind::Other(what), Err(e)) => {
                self.notice(format!("{what}: {}", e.message), NoticeKind::Error, width);
            }
        }
    }

    /// The registry's commands, for completion and `/help`: builtins and plugins' run through
    /// the registry, skills and custom commands are sent as their `/name` prompt.
    fn commands(&mut self, list: Vec<CommandInfo>) {
        let mut names = Vec::new();
        for c in list {
            let slash = format!("/{}", c.name);
            if !crate::app::COMMANDS.iter().any(|(n, _)| *n == slash)
                && !self.app.extra_commands.iter().any(|(n, _)| *n == slash)
            {
                let hint = match (&c.argument_hint, c.source) {
                    (Some(h), _) => format!("{h} "),
                    (None, CommandSource::Skill) => "skill: ".to_owned(),
                    (None, _) => String::new(),
                };
                self.app
                    .extra_commands
                    .push((slash, format!("{hint}{}", c.description)));
            }
            if matches!(c.source, CommandSource::Plugin | CommandSource::Builtin) {
                names.push(c.name);
            }
        }
        self.app.registry_commands = names;
    }

    /// Folds one event of the shown session.
    fn event(&mut self, ev: Event, width: u16) {
        match &ev.msg {
            EventMsg::SessionForked { session_id, .. } => self.told.saw_notice(session_id),
            EventMsg::CommandRan {
                outcome: dsh_protocol::CommandOutcome::SwitchSession { session_id, .. },
                ..
            } => self.told.saw_output(session_id),
            _ => {}
        }
        match &ev.msg {
            EventMsg::Snapshot(s) => {
                self.snapshot(s, width);
                return;
            }
            EventMsg::SessionConfigured { cwd, settings, .. } => {
                self.configured(cwd.clone(), settings.clone());
                return;
            }
            EventMsg::State { state } => {
                self.app.running = running(*state);
                if *state != SessionState::WaitingForApproval {
                    // Answered here or by another client, or dismissed: no question is open.
                    self.app.approvals.clear();
                    self.app.questions.clear();
                }
                return;
            }
            EventMsg::ApprovalRequested(r) => self.ask(r),
            EventMsg::ApprovalResolved { request_id, .. } => {
                self.app.approvals.retain(|a| a.question.id != *request_id);
            }
            EventMsg::QuestionAsked(q) => self.question(q),
            EventMsg::QuestionAnswered { request_id, .. } => {
                self.app.questions.retain(|q| q.id() != request_id);
            }
            EventMsg::TurnStarted { .. } => self.app.running = true,
            EventMsg::SteerQueued { steer_id, text } => {
                let mut pending = self.app.pending.lock();
                if !pending.iter().any(|p| p.id.as_deref() == Some(steer_id)) {
                    match pending
                        .iter_mut()
                        .find(|p| p.id.is_none() && p.sent && p.text == *text)
                    {
                        Some(p) => p.id = Some(steer_id.clone()),
                        None => pending.push(PendingSteer {
                            id: Some(steer_id.clone()),
                            text: text.clone(),
                            sent: true,
                        }),
                    }
                }
                return;
            }
            EventMsg::SteerDelivered { steer_id } | EventMsg::SteerWithdrawn { steer_id } => {
                self.app
                    .pending
                    .lock()
                    .retain(|p| p.id.as_deref() != Some(steer_id));
                return;
            }
            EventMsg::SubagentStarted {
                session_id, label, ..
            } => {
                self.child_started(session_id.clone(), label);
                return;
            }
            EventMsg::WorkflowProgress { .. } => {
                self.app.agents.workflow(&ev.msg);
                return;
            }
            EventMsg::SubagentFinished { session_id, .. } => {
                self.app.agents.finished(session_id);
                if let Some(s) = &mut self.shown
                    && let Some(h) = s.children.remove(session_id)
                {
                    h.abort();
                }
            }
            // The reader subscribes again from the log; live events missed (a command's
            // output) do not come back.
            EventMsg::Error(e) if e.code == ErrorCode::SubscriberLagged => {
                self.told.lost();
                return;
            }
            // The session continues in a fork (a conversation rewind, here or in another
            // client): shown from now on, input held until it is. Replayed history only says
            // where it continues (the transcript's line).
            EventMsg::SessionForked { session_id, .. }
                if self.shown.as_ref().is_some_and(|s| s.live) =>
            {
                self.switch_to = Some(session_id.clone());
                self.hold.start();
            }
            _ => {}
        }
        let lines = self.app.transcript.on_event(&ev, width);
        self.app.inserts.extend(lines);
    }

    /// A question of the agent: queued on screen (once).
    fn question(&mut self, q: &dsh_protocol::QuestionRequest) {
        if self.app.questions.iter().any(|p| p.id() == q.request_id) {
            return;
        }
        self.app
            .questions
            .push_back(crate::question::QuestionPrompt::new(q.clone()));
    }

    /// An approval question: queued on screen (once).
    fn ask(&mut self, r: &dsh_protocol::ApprovalRequest) {
        if self
            .app
            .approvals
            .iter()
            .any(|a| a.question.id == r.request_id)
        {
            return;
        }
        self.app
            .approvals
            .push_back(ApprovalPrompt::new(Question::from_request(r)));
    }

    /// The live state after the replay: usage, pending questions and steers, the attempt in
    /// progress, the settings; the welcome line the first time.
    fn snapshot(&mut self, s: &Snapshot, width: u16) {
        if let Some(shown) = &mut self.shown {
            shown.live = true;
        }
        // Questions answered while the history replayed are gone; open ones are asked.
        let open: Vec<&str> = s
            .pending_approvals
            .iter()
            .map(|a| a.request_id.as_str())
            .collect();
        self.app
            .approvals
            .retain(|a| open.contains(&a.question.id.as_str()));
        let asked: Vec<&str> = s
            .pending_questions
            .iter()
            .map(|q| q.request_id.as_str())
            .collect();
        self.app.questions.retain(|q| asked.contains(&q.id()));
        for q in &s.pending_questions {
            self.question(q);
        }
        for a in &s.pending_approvals {
            let lines = self
                .app
                .transcript
                .on_msg(&EventMsg::ApprovalRequested(a.clone()), width);
            self.app.inserts.extend(lines);
            self.ask(a);
        }
        {
            let mut pending = self.app.pending.lock();
            pending.retain(|p| p.id.is_none());
            for q in &s.queued_steers {
                pending.push(PendingSteer {
                    id: Some(q.steer_id.clone()),
                    text: q.text.clone(),
                    sent: true,
                });
            }
        }
        self.app.running = running(s.session.state);
        if let Some(live) = &s.live {
            // The attempt in progress: what this UI has not seen of it yet (all of it for a
            // new subscriber, the missed deltas for one that fell behind).
            let t = &mut self.app.transcript;
            let (caught_up, lines) = t.catch_up(&live.text, width);
            self.app.inserts.extend(lines);
            if !caught_up {
                t.drop_live();
                if !live.text.is_empty() {
                    let lines = t.on_msg(
                        &EventMsg::TextDelta {
                            text: live.text.clone(),
                        },
                        width,
                    );
                    self.app.inserts.extend(lines);
                }
            }
            self.app
                .transcript
                .catch_up_reasoning(&live.reasoning, width);
        }
        self.configured(s.session.cwd.clone(), s.session.settings.clone());
        let Some(shown) = &mut self.shown else { return };
        if shown.welcomed {
            return;
        }
        shown.welcomed = true;
        let id = shown.id.clone();
        let welcome = self.welcome();
        self.notice(welcome, NoticeKind::Info, width);
        self.notice(
            format!("session {id} · /help for commands"),
            NoticeKind::Info,
            width,
        );
    }

    /// The settings in force: model, effort, window and prices of the route.
    fn configured(&mut self, cwd: String, settings: SessionSettings) {
        self.app.model = settings.model.clone().unwrap_or_default();
        self.app.effort = settings.effort.map(|e| e.as_str().to_owned());
        self.app.context_window = settings.context_window;
        self.app.priced = settings.priced.unwrap_or(false);
        if let Some(s) = &mut self.shown {
            s.cwd = cwd;
            s.settings = settings;
        }
    }

    /// The welcome line: model, effort, directory, sandbox mode and approval policy in force.
    fn welcome(&self) -> String {
        let (cwd, settings) = match &self.shown {
            Some(s) => (s.cwd.as_str(), &s.settings),
            None => ("", &SessionSettings::default()),
        };
        let effort = settings
            .effort
            .map(|e| format!(" · effort {}", e.as_str()))
            .unwrap_or_default();
        format!(
            "dsh · {}{effort} · {cwd} · sandbox {} · approvals {}",
            settings.model.as_deref().unwrap_or("(no model)"),
            settings.sandbox.map_or("none", |m| m.as_str()),
            settings.approval_policy.map_or("never", |p| p.as_str()),
        )
    }

    /// A child of the shown session started: its card, fed by a subscription to its session.
    fn child_started(&mut self, child: String, label: &str) {
        let Some(shown) = &mut self.shown else { return };
        if shown.children.contains_key(&child) {
            return;
        }
        self.app
            .agents
            .started(&child, label, std::time::Instant::now());
        let (client, tx, epoch, id) = (
            self.client.clone(),
            self.tx.clone(),
            shown.epoch,
            child.clone(),
        );
        let task = tokio::spawn(async move {
            let Ok(mut stream) = client.subscribe(&id, None).await else {
                return;
            };
            while let Some(ev) = stream.next().await {
                if tx.send(Feed::Child(epoch, id.clone(), ev)).is_err() {
                    return;
                }
            }
        });
        shown.children.insert(child, task);
    }

    /// Shows session `id`: its history (the subscription replays it), then its live events.
    fn show(&mut self, id: String) {
        self.epoch += 1;
        let epoch = self.epoch;
        let (ops_tx, mut ops_rx) = unbounded_channel::<(Op, OpKind)>();
        let (client, tx, sid) = (self.client.clone(), self.tx.clone(), id.clone());
        tokio::spawn(async move {
            while let Some((op, kind)) = ops_rx.recv().await {
                let r = client.send(&sid, op).await;
                if tx.send(Feed::OpDone(epoch, kind, r)).is_err() {
                    return;
                }
            }
        });
        let (client, tx, sid) = (self.client.clone(), self.tx.clone(), id.clone());
        let reader = tokio::spawn(async move {
            if let Ok(list) = client.commands(&sid).await {
                let _ = tx.send(Feed::Commands(epoch, list));
            }
            let mut after = None;
            loop {
                let mut stream = match client.subscribe(&sid, after).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Feed::Failed(format!(
                            "cannot follow session {sid}: {}",
                            e.message
                        )));
                        return;
                    }
                };
                let mut lagged = false;
                while let Some(ev) = stream.next().await {
                    if let EventMsg::Error(e) = &ev.msg
                        && e.code == ErrorCode::SubscriberLagged
                    {
                        // The log has everything: continue from the last committed event (the
                        // live text missed comes back with the commit or the snapshot).
                        tracing::debug!("session {sid}: fell behind, subscribing again");
                        lagged = true;
                        let _ = tx.send(Feed::Event(epoch, ev));
                        break;
                    }
                    if !ev.is_live() {
                        after = Some(ev.seq);
                    }
                    if tx.send(Feed::Event(epoch, ev)).is_err() {
                        return;
                    }
                }
                if !lagged {
                    let _ = tx.send(Feed::Ended(epoch));
                    return;
                }
            }
        });
        self.app.session_id = id.clone();
        self.shown = Some(Shown {
            id,
            epoch,
            ops: ops_tx,
            reader,
            children: HashMap::new(),
            welcomed: false,
            live: false,
            cwd: String::new(),
            settings: SessionSettings::default(),
        });
    }

    /// Leaves the shown session (closed in the host when this UI opened it there).
    async fn leave(&mut self) -> Option<String> {
        let shown = self.shown.take()?;
        let id = shown.id.clone();
        drop(shown);
        if self.close_on_leave
            && let Err(e) = self.client.close(&id).await
        {
            tracing::warn!("closing session {id}: {}", e.message);
        }
        Some(id)
    }

    /// Leaves the shown session for another: the screen starts over.
    async fn switch(&mut self, width: u16) {
        if let Some(id) = self.leave().await {
            self.app.agents.clear();
            self.notice(format!("session {id} saved"), NoticeKind::Info, width);
        }
        self.app.pending.lock().clear();
        self.app.approvals.clear();
        self.app.rewind_confirm = None;
        self.app.running = false;
        self.app.transcript = Transcript::new(self.app.theme);
    }

    /// Before the move to a rewind's fork: what the old session's stream lost of the rewind
    /// this UI applied (it fell behind or ended before showing it), from the answer: the
    /// command's output, then where the session continues.
    fn show_untold(&mut self, width: u16) {
        let Some(missing) = self.told.missing() else {
            return;
        };
        let mut msgs = Vec::new();
        if let Some(text) = missing.output {
            msgs.push(EventMsg::CommandRan {
                name: "rewind".into(),
                outcome: dsh_protocol::CommandOutcome::SwitchSession {
                    session_id: missing.session_id.clone(),
                    text,
                },
            });
        }
        if missing.notice {
            msgs.push(EventMsg::SessionForked {
                session_id: missing.session_id,
                reason: dsh_protocol::ForkReason::Rewind,
                to_turn: None,
                rewind_id: None,
            });
        }
        for msg in &msgs {
            let lines = self.app.transcript.on_msg(msg, width);
            self.app.inserts.extend(lines);
        }
    }

    /// Opens a session in the background (`/new`, `/resume`); it is shown once open.
    fn open(&self, request: OpenSession, what: String) {
        let (client, tx) = (self.client.clone(), self.tx.clone());
        tokio::spawn(async move {
            let feed = match client.open(request).await {
                Ok(s) => Feed::Opened(s),
                Err(e) => Feed::Failed(format!("{what}: {}", e.message)),
            };
            let _ = tx.send(feed);
        });
    }

    /// Delivers the input held during a move to a fork once the fork is shown (or, when the
    /// rewind did not fork, to the session still shown).
    async fn release_held(&mut self, terminal: &mut Term) -> Result<(), TuiError> {
        if !self.hold.holding()
            || self.hold.rewind_in_flight
            || self.switch_to.is_some()
            || self.shown.is_none()
        {
            return Ok(());
        }
        for action in self.hold.release() {
            self.act(action, terminal).await?;
        }
        Ok(())
    }

    async fn act(&mut self, action: Action, terminal: &mut Term) -> Result<(), TuiError> {
        let width = Self::width(terminal);
        let Some(action) = self.hold.take(action) else {
            return Ok(());
        };
        match action {
            Action::Send(text) => {
                test_panic(&text);
                self.op(
                    Op::Submit {
                        text,
                        attachments: Vec::new(),
                    },
                    OpKind::Other("the prompt was not sent".into()),
                );
                self.app.running = true;
            }
            Action::Steered => {
                let text = {
                    let mut pending = self.app.pending.lock();
                    pending
                        .iter_mut()
                        .rev()
                        .find(|p| p.id.is_none() && !p.sent)
                        .map(|p| {
                            p.sent = true;
                            p.text.clone()
                        })
                };
                if let Some(text) = text {
                    self.op(Op::Steer { text: text.clone() }, OpKind::Steer(text));
                }
            }
            Action::WithdrawSteer(steer_id) => {
                self.op(
                    Op::WithdrawSteer { steer_id },
                    OpKind::Other("withdraw".into()),
                );
            }
            Action::Cancel => self.op(Op::Interrupt, OpKind::Other("interrupt".into())),
            Action::Quit => {}
            Action::Answer { id, answer } => {
                // A dismissal is answered by the interrupt that follows it.
                if let Some(decision) = answer.decision() {
                    self.op(
                        Op::AnswerApproval {
                            request_id: id,
                            decision,
                        },
                        OpKind::Other("the answer was not taken".into()),
                    );
                }
            }
            Action::AnswerQuestion { id, answers } => self.op(
                Op::AnswerQuestion {
                    request_id: id,
                    answers,
                },
                OpKind::Other("the answer was not taken".into()),
            ),
            Action::Suspend => {
                self.input = None;
                term::suspend(terminal, self.height)?;
            }
            Action::New => {
                self.switch(width).await;
                self.open(
                    OpenSession::Create {
                        session_id: None,
                        options: self.new_session.clone(),
                        prompt: None,
                    },
                    "cannot start a new session".into(),
                );
            }
            Action::Resume(id) => {
                self.switch(width).await;
                self.open(
                    OpenSession::Resume {
                        session_id: id.clone(),
                        options: resume_options(&self.new_session),
                    },
                    format!("cannot resume {id}"),
                );
            }
            Action::OpenPicker => {
                self.app.picker = Some(Picker::default());
                let (client, tx) = (self.client.clone(), self.tx.clone());
                tokio::spawn(async move {
                    let items = picker_rows(client.as_ref(), None).await;
                    let _ = tx.send(Feed::Picker(items));
                });
            }
            Action::SearchSessions(query) => {
                let Some(text) = crate::picker::full_text_query(&query) else {
                    return Ok(());
                };
                let (client, tx) = (self.client.clone(), self.tx.clone());
                tokio::spawn(async move {
                    let items = picker_rows(client.as_ref(), Some(text)).await;
                    let _ = tx.send(Feed::PickerFound(query, items));
                });
            }
            Action::SetModel(model) => {
                self.op(Op::SetModel { model }, OpKind::Other("/model".into()));
            }
            Action::SetEffort(e) => match Effort::parse(&e) {
                Some(effort) => self.op(Op::SetEffort { effort }, OpKind::Other("/effort".into())),
                None => self.notice(
                    format!("unknown effort `{e}` (off, low, high, max)"),
                    NoticeKind::Error,
                    width,
                ),
            },
            Action::Compact => self.run_command("compact", String::new()),
            Action::TogglePlan => self.run_command("plan", String::new()),
            Action::RunCommand { name, args } => {
                if crate::hold::forks(&name, &args) {
                    // What is typed until the fork is shown goes to the fork.
                    self.hold.start();
                    self.hold.rewind_in_flight = true;
                }
                self.run_command(&name, args);
            }
            Action::Diff => self.run_command("diff", String::new()),
        }
        Ok(())
    }

    /// Runs a command of the registry in the shown session; what it says comes back as a
    /// `commandRan` event (to every client watching).
    fn run_command(&mut self, name: &str, args: String) {
        self.op(
            Op::RunCommand {
                name: name.to_owned(),
                args,
            },
            OpKind::Command(name.to_owned()),
        );
    }
}

/// Whether a session in `state` is working.
fn running(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Working | SessionState::WaitingForApproval
    )
}

/// The picker's rows: top-level sessions, newest first (`q`: those whose text matches, through
/// the host's catalog); the details of the newest ones the listing lacks (no catalog) are read
/// from their logs.
async fn picker_rows(client: &dyn Client, q: Option<String>) -> Vec<crate::app::PickItem> {
    let query = SessionQuery {
        q,
        ..Default::default()
    };
    let list = match client.sessions(query).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("listing sessions: {}", e.message);
            return Vec::new();
        }
    };
    let now = crate::picker::now_ms();
    let mut rows = Vec::new();
    for (i, s) in list
        .into_iter()
        .filter(|s| s.parent_id.is_none())
        .enumerate()
    {
        if crate::picker::listed_in_full(&s) {
            rows.push(crate::picker::item(&s, true, now));
            continue;
        }
        let detailed = if i < crate::picker::DETAILED {
            client.session(&s.id).await.ok()
        } else {
            None
        };
        rows.push(match &detailed {
            Some(d) => crate::picker::item(&merge(&s, d), true, now),
            None => crate::picker::item(&s, false, now),
        });
    }
    rows
}

/// The listing's entry completed with what its log says.
fn merge(listed: &SessionSummary, read: &SessionSummary) -> SessionSummary {
    let mut s = read.clone();
    if s.title.is_none() {
        s.title.clone_from(&listed.title);
    }
    if s.cwd.is_empty() {
        s.cwd.clone_from(&listed.cwd);
    }
    s
}
