//! The event loop: terminal input and the agent feed in, scrollback inserts and viewport frames
//! out. A frame is drawn only after something happened (no timer, no idle redraw); bursts of
//! feed events are folded before one frame.

use std::sync::Arc;

use crossterm::event::{Event as TermEvent, EventStream};
use dsh_agent::events::{AgentStatusChanged, AgentStreamChunk};
use dsh_agent::hooks::{AgentRequest, PreStep};
use dsh_agent::{Agent, AgentOptions, AgentStatus, Agents, CancelCause, CreateAgent, ResumeAgent};
use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer};
use dsh_commands::{CommandCall, Commands};
use dsh_kernel::{Ctx, Registration};
use dsh_llm::service::CallSettings;
use dsh_llm::{Llm, Message, ReasoningEffort, StreamChunk};
use dsh_protocol::{CommandOutcome, CommandSource};
use dsh_session::plugin::SessionEvent;
use dsh_session::{Event, Sessions};
use dsh_subagent_api::events::{SubagentFinished, SubagentStarted};
use futures::{FutureExt, StreamExt};
use parking_lot::Mutex;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::app::{Action, App, Picker};
use crate::approval::{ApprovalPrompt, Asked, TuiAnswerer};
use crate::cells::{Cell, NoticeKind, git_diff_lines};
use crate::composer::Composer;
use crate::term::{self, Term};
use crate::transcript::{Pricer, Transcript};
use crate::{TuiError, TuiOptions, TuiOutcome};

/// Scrollback lines inserted per frame (a long resumed history goes up in chunks).
const INSERT_CHUNK: usize = 2000;

/// What the agent side tells the UI.
enum Feed {
    Session(Arc<Event>),
    Chunk(Box<StreamChunk>),
    Status(AgentStatus),
    Delivered,
    /// An approval question (any agent of this runtime).
    Approval(Asked),
    /// A child of the shown agent started (`subagent/start`): its session id and label.
    ChildStarted(String, String),
    /// A committed event of a running child.
    ChildEvent(Arc<str>, Arc<Event>),
    /// A child's run ended (`subagent/end`).
    ChildFinished(String),
}

/// `/model` and `/effort` choices, applied by the `agent/request` hook.
#[derive(Default)]
struct Overrides {
    model: Option<String>,
    effort: Option<ReasoningEffort>,
}

/// The agent being shown, and what is registered for it.
struct Attached {
    agent: Arc<dyn Agent>,
    registrations: Vec<Registration>,
    /// Feed events up to this seq were rendered from the snapshot.
    seen: u64,
}

struct Runtime {
    root: Ctx,
    app: App,
    tx: UnboundedSender<Feed>,
    overrides: Arc<Mutex<Overrides>>,
    attached: Option<Attached>,
    height: u16,
    /// Terminal input. Dropped before the viewport is opened again (Ctrl-Z): that asks the
    /// terminal for the cursor position, and crossterm's stream thread holds the input reader
    /// while it waits, so the answer would not reach the query.
    input: Option<EventStream>,
    /// Open approval questions: where each answer goes.
    questions: std::collections::HashMap<String, tokio::sync::oneshot::Sender<ApprovalAnswer>>,
}

/// Runs the TUI until the user quits; the shown agent is disposed (its session flushed) on
/// every exit path, a panic included.
pub async fn run(opts: TuiOptions) -> Result<TuiOutcome, TuiError> {
    term::install_panic_hook();
    crate::highlight::warm_up();
    let (tx, rx) = unbounded_channel();
    let theme = opts.theme;
    let pricer = pricer(
        &opts.root,
        opts.agent.options().provider.unwrap_or_default(),
    );
    // Approval questions are answered by the inline prompt (unless the composition already
    // mounts an answerer, e.g. `approval-scripted`).
    let approvals_tx = tx.clone();
    let tools = opts.root.get::<dyn dsh_tools::Tools>();
    let answerer: Arc<dyn ApprovalAnswerer> = Arc::new(TuiAnswerer {
        send: Box::new(move |asked| approvals_tx.send(Feed::Approval(asked)).is_ok()),
        // The call as the asking session's tools describe it.
        display: Box::new(move |request| {
            let displayer = match &tools {
                Some(t) => crate::tool_display::from_tools(
                    t.clone(),
                    Some(dsh_kernel::ScopeKey::new(request.session_id.as_str())),
                ),
                None => crate::tool_display::generic(),
            };
            crate::approval::request_display(request, &displayer)
        }),
    });
    let answerer_note = opts
        .root
        .provide::<dyn ApprovalAnswerer>(answerer)
        .err()
        .map(|e| format!("approval questions are not asked here: {e}"));
    let mut app = App::new(
        theme,
        Transcript::new(theme, pricer),
        Composer::new(opts.history_file.clone()),
    );
    app.extra_commands = opts.extra_commands.clone();
    app.files = opts
        .project_dir
        .as_deref()
        .map(crate::mentions::FileIndex::spawn);
    if let Some(note) = answerer_note {
        tracing::warn!("{note}");
        let width = crossterm::terminal::size().map(|(w, _)| w).unwrap_or(80);
        app.insert_cell(
            &Cell::Notice {
                text: note,
                kind: NoticeKind::Warn,
            },
            width,
        );
    }
    let rows = crossterm::terminal::size().map(|(_, r)| r).unwrap_or(24);
    let height = App::viewport_height(rows);
    let mut rt = Runtime {
        root: opts.root.clone(),
        app,
        tx,
        overrides: Arc::new(Mutex::new(Overrides::default())),
        attached: None,
        height,
        input: None,
        questions: std::collections::HashMap::new(),
    };
    let mut terminal = term::enter(height)?;
    let result = std::panic::AssertUnwindSafe(rt.main(&mut terminal, rx, opts))
        .catch_unwind()
        .await;
    term::leave(&mut terminal);
    let id = rt.app.session_id.clone();
    if let Some(a) = rt.attached.take() {
        detach(a).await;
    }
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

/// Prices of the route's models, as the composition's `llm` service knows them.
fn pricer(root: &Ctx, provider: String) -> Pricer {
    let llm = root.get::<dyn Llm>();
    Box::new(move |model: &str| llm.as_ref()?.pricing(&provider, model))
}

async fn detach(a: Attached) {
    for r in a.registrations {
        r.dispose();
    }
    a.agent.dispose().await;
}

impl Runtime {
    fn width(term: &Term) -> u16 {
        term.size().map(|s| s.width).unwrap_or(80)
    }

    async fn main(
        &mut self,
        terminal: &mut Term,
        mut rx: UnboundedReceiver<Feed>,
        opts: TuiOptions,
    ) -> Result<(), TuiError> {
        let width = Self::width(terminal);
        self.attach(opts.agent, width)?;
        // The first frame before the (possibly long) history goes up.
        self.frame(terminal, 0)?;
        if opts.open_picker {
            self.act(Action::OpenPicker, terminal).await?;
        }
        if let Some(p) = opts.initial_prompt {
            self.act(Action::Send(p), terminal).await?;
        }
        loop {
            self.frame(terminal, INSERT_CHUNK)?;
            // A long history goes up a chunk per frame, keys still served in between.
            let backlog = !self.app.inserts.is_empty();
            let input = self.input.get_or_insert_with(EventStream::new);
            tokio::select! {
                () = std::future::ready(()), if backlog => {}
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
                    // Fold the whole burst before drawing once.
                    while let Ok(more) = rx.try_recv() {
                        self.feed(more, width);
                    }
                    self.flush_pending_if_idle()?;
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
        // Questions whose call went away (the turn ended) leave the screen.
        self.questions.retain(|_, reply| !reply.is_closed());
        let open = &self.questions;
        self.app
            .approvals
            .retain(|a| open.contains_key(&a.question.id));
        let n = self.app.inserts.len().min(max_lines);
        if n > 0 {
            let lines: Vec<_> = self.app.inserts.drain(..n).collect();
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
            TermEvent::Resize(_, _) => Vec::new(),
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

    fn feed(&mut self, feed: Feed, width: u16) {
        match feed {
            Feed::Session(ev) => {
                let seen = self.attached.as_ref().map_or(0, |a| a.seen);
                if ev.seq() > seen || seen == 0 {
                    let lines = self.app.transcript.on_event(&ev, width);
                    self.app.inserts.extend(lines);
                    if let Some(a) = &mut self.attached {
                        a.seen = a.seen.max(ev.seq());
                    }
                }
            }
            Feed::Chunk(c) => {
                let lines = self.app.transcript.on_chunk(&c, width);
                self.app.inserts.extend(lines);
            }
            Feed::Status(s) => self.app.running = s == AgentStatus::Running,
            Feed::Delivered => {}
            Feed::ChildStarted(id, label) => {
                self.app
                    .agents
                    .started(&id, &label, std::time::Instant::now());
            }
            Feed::ChildEvent(id, ev) => self.app.agents.event(&id, &ev),
            Feed::ChildFinished(id) => self.app.agents.finished(&id),
            Feed::Approval(asked) => {
                if let Some(plan) = &asked.question.plan {
                    let lines = self
                        .app
                        .transcript
                        .show_plan(&asked.question.call_id, plan, width);
                    self.app.inserts.extend(lines);
                }
                self.app
                    .approvals
                    .push_back(ApprovalPrompt::new(asked.question.clone()));
                self.questions.insert(asked.question.id, asked.reply);
            }
        }
    }

    /// Steers left when the turn ended without another step become the next prompt.
    fn flush_pending_if_idle(&mut self) -> Result<(), TuiError> {
        if self.app.running {
            return Ok(());
        }
        let Some(a) = &self.attached else {
            return Ok(());
        };
        if a.agent.status() != AgentStatus::Idle {
            return Ok(());
        }
        let pending: Vec<String> = std::mem::take(&mut *self.app.pending.lock());
        if pending.is_empty() {
            return Ok(());
        }
        for text in pending {
            a.agent.followup(Message::user_text("", text))?;
        }
        self.app.running = true;
        Ok(())
    }

    async fn act(&mut self, action: Action, terminal: &mut Term) -> Result<(), TuiError> {
        let width = Self::width(terminal);
        match action {
            Action::Send(text) => {
                test_panic(&text);
                if let Some(a) = &self.attached {
                    a.agent.followup(Message::user_text("", text))?;
                    self.app.running = true;
                }
            }
            Action::Steered => self.flush_pending_if_idle()?,
            Action::Cancel => {
                if let Some(a) = &self.attached {
                    a.agent.cancel(CancelCause::User, true);
                }
            }
            Action::Quit => {}
            Action::Answer { id, answer } => {
                if let Some(reply) = self.questions.remove(&id) {
                    let _ = reply.send(answer);
                }
            }
            Action::Suspend => {
                self.input = None;
                term::suspend(terminal, self.height)?;
            }
            Action::New => {
                let options = self.options();
                self.switch(terminal).await;
                let agents = self.agents()?;
                let agent = agents
                    .create(
                        &self.root,
                        CreateAgent {
                            options,
                            ..Default::default()
                        },
                    )
                    .await?;
                self.attach(agent, width)?;
            }
            Action::Resume(id) => {
                let mut options = self.options();
                options.cwd = std::path::PathBuf::new();
                let agents = self.agents()?;
                self.switch(terminal).await;
                match agents
                    .resume(
                        &self.root,
                        ResumeAgent {
                            session_id: id.clone(),
                            options: options.clone(),
                            setup: None,
                        },
                    )
                    .await
                {
                    Ok(agent) => self.attach(agent, width)?,
                    Err(e) => {
                        self.app.insert_cell(
                            &Cell::Notice {
                                text: format!("cannot resume {id}: {e}"),
                                kind: NoticeKind::Error,
                            },
                            width,
                        );
                        let agent = agents
                            .create(
                                &self.root,
                                CreateAgent {
                                    options,
                                    ..Default::default()
                                },
                            )
                            .await?;
                        self.attach(agent, width)?;
                    }
                }
            }
            Action::OpenPicker => {
                let sessions = self
                    .root
                    .get::<dyn Sessions>()
                    .ok_or(TuiError::MissingService("sessions"))?;
                let now = dsh_session::log::now_ms();
                let items = tokio::task::spawn_blocking(move || {
                    crate::picker::rows(sessions.as_ref(), now)
                })
                .await
                .unwrap_or_default();
                self.app.picker = Some(Picker {
                    items,
                    ..Default::default()
                });
            }
            Action::SetModel(m) => {
                self.overrides.lock().model = Some(m);
                self.refresh_route(width);
            }
            Action::SetEffort(e) => {
                self.overrides.lock().effort = Some(ReasoningEffort::from(e));
                self.refresh_route(width);
            }
            Action::Compact => self.run_command("compact", String::new(), width).await,
            Action::TogglePlan => self.run_command("plan", String::new(), width).await,
            Action::RunCommand { name, args } => self.run_command(&name, args, width).await,
            Action::Diff => {
                let cwd = self.options().cwd;
                let out = tokio::task::spawn_blocking(move || {
                    std::process::Command::new("git")
                        .args(["diff", "--no-color", "--no-ext-diff"])
                        .current_dir(cwd)
                        .output()
                })
                .await;
                let cell = match out {
                    Ok(Ok(o)) if o.status.success() => {
                        let text = String::from_utf8_lossy(&o.stdout);
                        if text.trim().is_empty() {
                            Cell::Notice {
                                text: "no changes in the workspace".into(),
                                kind: NoticeKind::Info,
                            }
                        } else {
                            let mut lines = git_diff_lines(&text, self.app.theme);
                            let total = lines.len();
                            lines.truncate(2000);
                            if total > 2000 {
                                lines.push(ratatui::text::Line::from(format!(
                                    "… {} more lines (run git diff)",
                                    total - 2000
                                )));
                            }
                            Cell::Lines(lines)
                        }
                    }
                    Ok(Ok(o)) => Cell::Notice {
                        text: format!("git diff: {}", String::from_utf8_lossy(&o.stderr).trim()),
                        kind: NoticeKind::Error,
                    },
                    Ok(Err(e)) => Cell::Notice {
                        text: format!("cannot run git: {e}"),
                        kind: NoticeKind::Error,
                    },
                    Err(e) => Cell::Notice {
                        text: format!("cannot run git: {e}"),
                        kind: NoticeKind::Error,
                    },
                };
                self.app.insert_cell(&cell, width);
            }
        }
        Ok(())
    }

    /// Runs a command of the registry (`dsh-commands`) in the shown session and shows what it
    /// says.
    async fn run_command(&mut self, name: &str, args: String, width: u16) {
        let notice = |text: String, kind: NoticeKind| Cell::Notice { text, kind };
        let Some(commands) = self.root.get::<dyn Commands>() else {
            let cell = notice(
                format!("/{name} is not available: no command registry is composed"),
                NoticeKind::Error,
            );
            self.app.insert_cell(&cell, width);
            return;
        };
        let Some(agent) = self.attached.as_ref().map(|a| a.agent.clone()) else {
            return;
        };
        let call = CommandCall {
            agent,
            args,
            cancel: tokio_util::sync::CancellationToken::new(),
        };
        let cell = match commands.run(name, call).await {
            Ok(CommandOutcome::Done { text }) if !text.is_empty() => {
                Some(notice(text, NoticeKind::Info))
            }
            Ok(CommandOutcome::Submitted { .. }) => {
                self.app.running = true;
                None
            }
            Ok(_) => None,
            Err(e) => Some(notice(format!("/{name}: {e}"), NoticeKind::Error)),
        };
        if let Some(cell) = cell {
            self.app.insert_cell(&cell, width);
        }
    }

    /// The registry's plugin commands, for completion and `/help` (custom commands and skills
    /// come through `extra_commands` and are sent as prompts).
    fn refresh_commands(&mut self, agent: &Arc<dyn Agent>) {
        let Some(commands) = self.root.get::<dyn Commands>() else {
            return;
        };
        let mut names = Vec::new();
        for c in commands.list(agent) {
            if c.source != CommandSource::Plugin && c.source != CommandSource::Builtin {
                continue;
            }
            let slash = format!("/{}", c.name);
            if !crate::app::COMMANDS.iter().any(|(n, _)| *n == slash)
                && !self.app.extra_commands.iter().any(|(n, _)| *n == slash)
            {
                let hint = c.argument_hint.map(|h| format!("{h} ")).unwrap_or_default();
                self.app
                    .extra_commands
                    .push((slash, format!("{hint}{}", c.description)));
            }
            names.push(c.name);
        }
        self.app.registry_commands = names;
    }

    fn agents(&self) -> Result<Arc<dyn Agents>, TuiError> {
        self.root
            .get::<dyn Agents>()
            .ok_or(TuiError::MissingService("agents"))
    }

    fn options(&self) -> AgentOptions {
        self.attached
            .as_ref()
            .map(|a| a.agent.options())
            .unwrap_or_default()
    }

    /// Leaves the shown agent (disposed: flushed and unlocked).
    async fn switch(&mut self, terminal: &mut Term) {
        if let Some(a) = self.attached.take() {
            let id = a.agent.id().to_owned();
            detach(a).await;
            self.app.agents.clear();
            let width = Self::width(terminal);
            self.app.insert_cell(
                &Cell::Notice {
                    text: format!("session {id} saved"),
                    kind: NoticeKind::Info,
                },
                width,
            );
        }
        self.app.pending.lock().clear();
        self.app.running = false;
        let theme = self.app.theme;
        let usage_reset = Transcript::new(theme, self.app_pricer());
        self.app.transcript = usage_reset;
    }

    fn app_pricer(&self) -> Pricer {
        pricer(&self.root, self.options().provider.unwrap_or_default())
    }

    /// Model, effort, window and prices of the route as the next request will use it.
    fn refresh_route(&mut self, width: u16) {
        let options = self.options();
        let o = self.overrides.lock();
        let settings = CallSettings {
            provider: options.provider.clone().unwrap_or_default(),
            model: o.model.clone().or(options.model.clone()),
            effort: o.effort.clone().or(options.reasoning_effort.clone()),
            ..Default::default()
        };
        drop(o);
        let Some(llm) = self.root.get::<dyn Llm>() else {
            return;
        };
        match llm.prepare_call(&settings) {
            Ok(p) => {
                self.app.model = p.model.id.clone();
                self.app.transcript.model = p.model.id.clone();
                self.app.effort = p.effort.as_ref().map(|e| e.to_string());
                self.app.context_window = Some(p.model.context_window);
                self.app.priced = p.model.pricing.is_some();
            }
            Err(f) => {
                self.app.model = settings.model.unwrap_or_default();
                self.app.insert_cell(
                    &Cell::Notice {
                        text: format!("{}: {}", f.code, f.message),
                        kind: NoticeKind::Error,
                    },
                    width,
                );
            }
        }
    }

    /// Shows `agent`: its history from the log, then its live feed.
    fn attach(&mut self, agent: Arc<dyn Agent>, width: u16) -> Result<(), TuiError> {
        let id: Arc<str> = Arc::from(agent.id());
        // Tool cards as this agent's tools describe its calls.
        let displayer = crate::tool_display::from_ctx(agent.ctx());
        self.app.transcript.set_displayer(displayer.clone());
        self.app.agents.set_displayer(displayer);
        let mut registrations = Vec::new();
        let tx = self.tx.clone();
        let sid = id.clone();
        // The running children of this agent, whose events feed their live cards.
        let children: Arc<Mutex<std::collections::HashSet<String>>> = Arc::default();
        let kids = children.clone();
        registrations.push(self.root.on::<SessionEvent>(move |e| {
            if e.session_id == sid {
                let _ = tx.send(Feed::Session(e.event.clone()));
            } else if kids.lock().contains(&*e.session_id) {
                let _ = tx.send(Feed::ChildEvent(e.session_id.clone(), e.event.clone()));
            }
            Ok(())
        })?);
        let tx = self.tx.clone();
        let sid = id.clone();
        let kids = children.clone();
        registrations.push(self.root.on::<SubagentStarted>(move |e| {
            if *e.parent_id == *sid {
                kids.lock().insert(e.child_id.clone());
                let _ = tx.send(Feed::ChildStarted(e.child_id.clone(), e.label.clone()));
            }
            Ok(())
        })?);
        let tx = self.tx.clone();
        let sid = id.clone();
        registrations.push(self.root.on::<SubagentFinished>(move |e| {
            if *e.parent_id == *sid {
                children.lock().remove(&e.outcome.child_id);
                let _ = tx.send(Feed::ChildFinished(e.outcome.child_id.clone()));
            }
            Ok(())
        })?);
        let tx = self.tx.clone();
        let sid = id.clone();
        registrations.push(self.root.on::<AgentStreamChunk>(move |e| {
            if *e.agent_id == *sid {
                let _ = tx.send(Feed::Chunk(Box::new(e.chunk.clone())));
            }
            Ok(())
        })?);
        let tx = self.tx.clone();
        let sid = id.clone();
        registrations.push(self.root.on::<AgentStatusChanged>(move |e| {
            if *e.agent_id == *sid {
                let _ = tx.send(Feed::Status(e.status));
            }
            Ok(())
        })?);
        // Steers typed while the agent works join the next step's batch (agent scope: disposed
        // with the agent).
        let pending = self.app.pending.clone();
        let tx = self.tx.clone();
        agent.ctx().hook::<PreStep, _, _>(move |mut input, next| {
            let steers: Vec<String> = std::mem::take(&mut *pending.lock());
            if !steers.is_empty() {
                for s in steers {
                    input
                        .batch
                        .push(Message::user_text(dsh_session::ids::message_id(), s));
                }
                let _ = tx.send(Feed::Delivered);
            }
            next.run(input)
        })?;
        let overrides = self.overrides.clone();
        agent
            .ctx()
            .hook::<AgentRequest, _, _>(move |mut input, next| {
                {
                    let o = overrides.lock();
                    if let Some(m) = &o.model {
                        input.settings.model = Some(m.clone());
                    }
                    if let Some(e) = &o.effort {
                        input.settings.effort = Some(e.clone());
                    }
                }
                next.run(input)
            })?;
        // The history: everything already in the log.
        let events = agent.session().events();
        let seen = events.last().map_or(0, |e| e.seq());
        for e in &events {
            let lines = self.app.transcript.on_event(e, width);
            self.app.inserts.extend(lines);
        }
        self.app.session_id = id.to_string();
        self.app.running = agent.status() == AgentStatus::Running;
        self.attached = Some(Attached {
            agent,
            registrations,
            seen: seen.max(1),
        });
        self.refresh_route(width);
        if let Some(a) = self.attached.as_ref().map(|a| a.agent.clone()) {
            self.refresh_commands(&a);
        }
        let welcome = self.welcome(&events);
        self.app.insert_cell(
            &Cell::Notice {
                text: welcome,
                kind: NoticeKind::Info,
            },
            width,
        );
        self.app.insert_cell(
            &Cell::Notice {
                text: format!("session {id} · /help for commands"),
                kind: NoticeKind::Info,
            },
            width,
        );
        Ok(())
    }

    /// The welcome line: model, effort, directory, sandbox mode and approval policy in force
    /// (the last `sandbox/mode` and `approval/policy` the session logged).
    fn welcome(&self, events: &[Arc<Event>]) -> String {
        let sandbox = events.iter().rev().find_map(|e| {
            e.plugin::<dsh_sandbox::SandboxModeEvent>()
                .and_then(Result::ok)
                .map(|m| m.mode.as_str().to_owned())
        });
        let policy = events.iter().rev().find_map(|e| {
            e.plugin::<dsh_session::feature::ApprovalPolicyEvent>()
                .and_then(Result::ok)
                .map(|p| p.policy.as_str().to_owned())
        });
        let effort = self
            .app
            .effort
            .as_deref()
            .map(|e| format!(" · effort {e}"))
            .unwrap_or_default();
        format!(
            "dsh · {}{effort} · {} · sandbox {} · approvals {}",
            if self.app.model.is_empty() {
                "(no model)"
            } else {
                &self.app.model
            },
            self.options().cwd.display(),
            sandbox.as_deref().unwrap_or("none"),
            policy.as_deref().unwrap_or("never"),
        )
    }
}
