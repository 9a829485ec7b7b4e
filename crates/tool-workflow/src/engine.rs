//! The script engine: QuickJS (through `rquickjs`) on a thread of its own, with the run's
//! limits. The script sees the API of `prelude.js` over four host functions; it has no file,
//! process or network access (no `std`/`os` modules are loaded).
//!
//! The engine runs an event loop: it runs the script's pending jobs (promise reactions) and,
//! when none is left and the script has not settled, blocks for the next sub-agent to end and
//! resolves that sub-agent's promise. The sub-agents themselves run on the caller's tokio
//! runtime and start at once, so `await`, `Promise.all`, `Promise.race`, `Promise.any` and
//! `Promise.allSettled` over handles behave as in any JavaScript engine: a join of five waits
//! as long as the slowest, a race as long as the fastest. `tools.*` calls start at once too and
//! return promises the loop settles with the tool's answer, so a sub-agent that ends while a
//! tool runs is seen at once. `wait(run)` and `waitAll(runs)` block the engine thread until
//! their answer.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use rquickjs::{Context, Ctx, Exception, Function, Persistent, Runtime};
use serde_json::Value;

use crate::error::{HostError, WorkflowError};

const PRELUDE: &str = include_str!("prelude.js");

/// Bytes of an error text the model gets at most.
const MAX_ERROR_TEXT: usize = 4096;

/// Where a run's first stop reason is kept: set by a limit, a cancellation or the deadline;
/// the engine's interrupt handler sees it and ends the script (uncatchably).
#[derive(Debug, Default)]
pub struct StopSignal {
    set: AtomicBool,
    reason: Mutex<Option<WorkflowError>>,
}

impl StopSignal {
    /// Records `reason` unless one is already recorded (the first wins).
    pub fn stop(&self, reason: WorkflowError) {
        let mut slot = self.reason.lock();
        if slot.is_none() {
            *slot = Some(reason);
        }
        self.set.store(true, Ordering::Release);
    }

    /// Whether the run must stop.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// The recorded reason.
    pub fn reason(&self) -> Option<WorkflowError> {
        self.reason.lock().clone()
    }
}

/// What the engine asks of its host (the sub-agents and tools of a run). A call that blocks
/// ends with [`HostError::Stopped`] when the run must stop.
pub trait Host {
    /// Starts a sub-agent with the script's options (JSON); returns its seq.
    fn start_agent(&mut self, options: Value) -> Result<u64, HostError>;
    /// Blocks until sub-agent `seq` ended; its result object.
    fn wait_agent(&mut self, seq: u64) -> Result<Value, HostError>;
    /// Blocks until a sub-agent or a tool call ends whose result the script's promises have
    /// not been given yet (ended sub-agents first, in the order they ended, then answered
    /// tool calls); `None` when nothing runs and every result was given.
    fn next_settled(&mut self) -> Result<Option<Settled>, HostError>;
    /// Starts tool `name` with `arguments` (JSON text); returns the call's id (its answer
    /// comes through [`Host::next_settled`]).
    fn start_tool(&mut self, name: &str, arguments: String) -> Result<u64, HostError>;
    /// A line the script logged.
    fn log(&mut self, line: &str);
}

/// What ended, for the script's promises.
#[derive(Debug)]
pub enum Settled {
    /// Sub-agent `seq` ended with this result object.
    Agent(u64, Value),
    /// Tool call `id` answered: its text, or its error.
    Tool(u64, Result<String, HostError>),
}

/// A host with no sub-agents and no tools (engine start measurements, plain scripts).
#[derive(Debug, Default)]
pub struct NoHost;

impl Host for NoHost {
    fn start_agent(&mut self, _options: Value) -> Result<u64, HostError> {
        Err(HostError::NoSubagents)
    }
    fn wait_agent(&mut self, seq: u64) -> Result<Value, HostError> {
        Err(HostError::NoSuchAgent(seq))
    }
    fn next_settled(&mut self) -> Result<Option<Settled>, HostError> {
        Ok(None)
    }
    fn start_tool(&mut self, name: &str, _arguments: String) -> Result<u64, HostError> {
        Err(HostError::ToolNotAllowed {
            name: name.to_owned(),
            allowed: String::new(),
        })
    }
    fn log(&mut self, line: &str) {
        tracing::debug!(target: "dsh_tool_workflow::script", "{line}");
    }
}

/// The engine's limits.
#[derive(Clone, Debug)]
pub struct EngineLimits {
    /// When the script must have ended.
    pub deadline: Instant,
    /// The wall-time limit (for the error).
    pub max_wall_ms: u64,
    /// Heap limit, bytes.
    pub max_memory_bytes: u64,
    /// Stack limit, bytes.
    pub max_stack_bytes: u64,
}

/// One script to run.
#[derive(Debug)]
pub struct ScriptInput {
    /// The script: the body of an async function (`return` gives the result).
    pub script: String,
    /// The call's `args` (global `args`).
    pub args: Value,
    /// The call's `meta` (global `meta`).
    pub meta: Value,
    /// Names of the tools the script may call (`tools.<name>`).
    pub tools: Vec<String>,
}

type Outcome = Rc<RefCell<Option<Result<String, WorkflowError>>>>;

/// Runs `input` to its end on the current thread (the caller gives it a thread of its own):
/// the script's return value as JSON, or why it has none.
pub fn run_script(
    input: ScriptInput,
    host: Box<dyn Host>,
    limits: &EngineLimits,
    stop: &Arc<StopSignal>,
) -> Result<Value, WorkflowError> {
    let rt = Runtime::new().map_err(|e| WorkflowError::Engine(e.to_string()))?;
    rt.set_memory_limit(usize::try_from(limits.max_memory_bytes).unwrap_or(usize::MAX));
    rt.set_max_stack_size(usize::try_from(limits.max_stack_bytes).unwrap_or(usize::MAX));
    {
        let stop = stop.clone();
        let (deadline, ms) = (limits.deadline, limits.max_wall_ms);
        rt.set_interrupt_handler(Some(Box::new(move || {
            if stop.is_set() {
                return true;
            }
            if Instant::now() >= deadline {
                stop.stop(WorkflowError::WallTime { ms });
                return true;
            }
            false
        })));
    }
    let ctx = Context::full(&rt).map_err(|e| WorkflowError::Engine(e.to_string()))?;
    let outcome: Outcome = Rc::default();
    let host = Rc::new(RefCell::new(host));
    let started = ctx.with(|ctx| -> Result<Delivery, WorkflowError> {
        let deliver = install(&ctx, &input, &host, &outcome).map_err(|e| engine_error(&ctx, e))?;
        // The script is the body of an async function; its first line is line 1.
        let source = format!("__dsh_finish((async () => {{{}\n}})());", input.script);
        ctx.eval::<(), _>(source)
            .map_err(|e| script_error(&ctx, e, limits))?;
        Ok(deliver)
    });
    let result = started.and_then(|(deliver, deliver_tool)| {
        event_loop(&rt, &ctx, &host, &outcome, deliver, deliver_tool, limits)
    });
    let result = match (result, stop.reason()) {
        // A stop (limit, cancel, deadline) wins over what the script made of it.
        (_, Some(reason)) => Err(reason),
        (Err(e), None) => Err(e),
        (Ok(()), None) => match outcome.borrow_mut().take() {
            Some(Ok(json)) => {
                serde_json::from_str(&json).map_err(|e| WorkflowError::NotJson(e.to_string()))
            }
            Some(Err(e)) => Err(e),
            None => Err(WorkflowError::NeverSettled),
        },
    };
    match result {
        Err(WorkflowError::Script(text)) if is_out_of_memory(&text) => Err(WorkflowError::Memory {
            bytes: limits.max_memory_bytes,
        }),
        other => other,
    }
}

fn is_out_of_memory(text: &str) -> bool {
    text.contains("out of memory")
}

/// Runs the script's jobs and, while its result has not settled, hands it each sub-agent's
/// result as that sub-agent ends. Ends when the result settled, the run stops (its reason is
/// in the stop signal) or nothing is left that could settle it.
fn event_loop(
    rt: &Runtime,
    ctx: &Context,
    host: &Rc<RefCell<Box<dyn Host>>>,
    outcome: &Outcome,
    deliver: Persistent<Function<'static>>,
    deliver_tool: Persistent<Function<'static>>,
    limits: &EngineLimits,
) -> Result<(), WorkflowError> {
    loop {
        drain_jobs(rt, limits)?;
        if outcome.borrow().is_some() {
            return Ok(());
        }
        let next = host.borrow_mut().next_settled();
        let Ok(Some(settled)) = next else {
            // Stopped (the signal has the reason) or nothing left: never settled.
            return Ok(());
        };
        ctx.with(|ctx| match settled {
            Settled::Agent(seq, value) => {
                let deliver = deliver.clone().restore(&ctx)?;
                // `as` is exact: seqs are bounded by maxAgents.
                #[allow(clippy::cast_precision_loss)]
                deliver.call::<_, ()>((seq as f64, value.to_string()))
            }
            Settled::Tool(id, answer) => {
                let deliver = deliver_tool.clone().restore(&ctx)?;
                let (ok, text) = match answer {
                    Ok(text) => (true, text),
                    Err(e) => (false, e.to_string()),
                };
                // `as` is exact: ids count one run's calls.
                #[allow(clippy::cast_precision_loss)]
                deliver.call::<_, ()>((id as f64, ok, text))
            }
        })
        .map_err(|e| ctx.with(|ctx| script_error(&ctx, e, limits)))?;
    }
}

/// Runs pending jobs (promise reactions) until none is left.
fn drain_jobs(rt: &Runtime, limits: &EngineLimits) -> Result<(), WorkflowError> {
    loop {
        match rt.execute_pending_job() {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(job) => {
                return Err(job
                    .0
                    .with(|ctx| script_error(&ctx, rquickjs::Error::Exception, limits)));
            }
        }
    }
}

fn engine_error(ctx: &Ctx<'_>, e: rquickjs::Error) -> WorkflowError {
    match e {
        rquickjs::Error::Exception => WorkflowError::Engine(exception_text(ctx)),
        other => WorkflowError::Engine(other.to_string()),
    }
}

fn script_error(ctx: &Ctx<'_>, e: rquickjs::Error, limits: &EngineLimits) -> WorkflowError {
    let text = match e {
        rquickjs::Error::Exception => exception_text(ctx),
        other => other.to_string(),
    };
    if is_out_of_memory(&text) {
        return WorkflowError::Memory {
            bytes: limits.max_memory_bytes,
        };
    }
    WorkflowError::Script(cut(text))
}

fn exception_text(ctx: &Ctx<'_>) -> String {
    let value = ctx.catch();
    if let Some(exception) = value.as_exception() {
        let name: Option<String> = exception.as_object().get("name").ok();
        let message = exception.message().unwrap_or_default();
        let mut text = match name {
            Some(name) if !name.is_empty() => format!("{name}: {message}"),
            _ => message,
        };
        if let Some(stack) = exception.stack().filter(|s| !s.trim().is_empty()) {
            text.push('\n');
            text.push_str(&stack_head(&stack));
        }
        return text;
    }
    if let Some(s) = value.as_string().and_then(|s| s.to_string().ok()) {
        return s;
    }
    format!("uncaught {}", value.type_name())
}

/// Lines of a stack trace an error keeps (a runaway recursion repeats one frame).
const STACK_LINES: usize = 6;

fn stack_head(stack: &str) -> String {
    let lines: Vec<&str> = stack.trim_end().lines().collect();
    let mut head = lines[..lines.len().min(STACK_LINES)].join("\n");
    if lines.len() > STACK_LINES {
        head.push_str(&format!(
            "\n    … {} more frames",
            lines.len() - STACK_LINES
        ));
    }
    head
}

/// A failure text from the prelude (`Name: message` and the stack) with the stack's head.
fn fail_text(text: &str) -> String {
    match text.split_once('\n') {
        Some((first, stack)) => format!("{first}\n{}", stack_head(stack)),
        None => text.to_owned(),
    }
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_ERROR_TEXT {
        text.truncate(text.floor_char_boundary(MAX_ERROR_TEXT));
        text.push('…');
    }
    text
}

/// Throws `error` into the script: [`HostError::Stopped`] as an internal error (the interrupt
/// handler ends the script at once), the others as an `Error` with their text.
fn throw(ctx: &Ctx<'_>, error: HostError) -> rquickjs::Error {
    match error {
        HostError::Stopped => Exception::throw_internal(ctx, "workflow stopped"),
        other => Exception::throw_message(ctx, &other.to_string()),
    }
}

/// Installs the script's API; returns the prelude's function that resolves a sub-agent's
/// promise (taken off the global object).
fn install<'js>(
    ctx: &Ctx<'js>,
    input: &ScriptInput,
    host: &Rc<RefCell<Box<dyn Host>>>,
    outcome: &Outcome,
) -> rquickjs::Result<Delivery> {
    let g = ctx.globals();
    let json = |v: &Value| ctx.json_parse(v.to_string());
    g.set("args", json(&input.args)?)?;
    g.set("meta", json(&input.meta)?)?;
    let names = rquickjs::Array::new(ctx.clone())?;
    for (i, name) in input.tools.iter().enumerate() {
        names.set(i, name.as_str())?;
    }
    g.set("__dsh_tool_names", names)?;
    {
        let host = host.clone();
        g.set(
            "__dsh_start",
            Function::new(
                ctx.clone(),
                move |ctx: Ctx<'js>, options: String| -> rquickjs::Result<f64> {
                    let options: Value = serde_json::from_str(&options).unwrap_or(Value::Null);
                    // `as` is exact: seqs are bounded by maxAgents.
                    #[allow(clippy::cast_precision_loss)]
                    host.borrow_mut()
                        .start_agent(options)
                        .map(|seq| seq as f64)
                        .map_err(|e| throw(&ctx, e))
                },
            )?,
        )?;
    }
    {
        let host = host.clone();
        g.set(
            "__dsh_wait",
            Function::new(
                ctx.clone(),
                move |ctx: Ctx<'js>, seq: f64| -> rquickjs::Result<String> {
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    let seq = seq as u64;
                    host.borrow_mut()
                        .wait_agent(seq)
                        .map(|v| v.to_string())
                        .map_err(|e| throw(&ctx, e))
                },
            )?,
        )?;
    }
    {
        let host = host.clone();
        g.set(
            "__dsh_tool",
            Function::new(
                ctx.clone(),
                move |ctx: Ctx<'js>, name: String, arguments: String| -> rquickjs::Result<f64> {
                    host.borrow_mut()
                        .start_tool(&name, arguments)
                        // `as` is exact: ids count one run's calls.
                        .map(|id| {
                            #[allow(clippy::cast_precision_loss)]
                            let id = id as f64;
                            id
                        })
                        .map_err(|e| throw(&ctx, e))
                },
            )?,
        )?;
    }
    {
        let host = host.clone();
        g.set(
            "__dsh_log",
            Function::new(ctx.clone(), move |line: String| {
                host.borrow_mut().log(&line);
            })?,
        )?;
    }
    {
        let outcome = outcome.clone();
        g.set(
            "__dsh_done",
            Function::new(ctx.clone(), move |json: String| {
                outcome.borrow_mut().get_or_insert(Ok(json));
            })?,
        )?;
    }
    {
        let outcome = outcome.clone();
        g.set(
            "__dsh_fail",
            Function::new(ctx.clone(), move |text: String| {
                outcome
                    .borrow_mut()
                    .get_or_insert(Err(WorkflowError::Script(cut(fail_text(&text)))));
            })?,
        )?;
    }
    {
        let outcome = outcome.clone();
        g.set(
            "__dsh_not_json",
            Function::new(ctx.clone(), move |text: String| {
                outcome
                    .borrow_mut()
                    .get_or_insert(Err(WorkflowError::NotJson(text)));
            })?,
        )?;
    }
    ctx.eval::<(), _>(PRELUDE)?;
    let deliver: Function<'js> = g.get("__dsh_deliver")?;
    g.remove("__dsh_deliver")?;
    let deliver_tool: Function<'js> = g.get("__dsh_deliver_tool")?;
    g.remove("__dsh_deliver_tool")?;
    Ok((
        Persistent::save(ctx, deliver),
        Persistent::save(ctx, deliver_tool),
    ))
}

/// The prelude's functions that settle a sub-agent's promise and a tool call's.
type Delivery = (Persistent<Function<'static>>, Persistent<Function<'static>>);

/// Starts an engine and runs a script that returns at once, with no host: what a run costs
/// before its script does anything (dsh-bench's engine-start row).
pub fn probe(limits: &EngineLimits) -> Result<Value, WorkflowError> {
    run_script(
        ScriptInput {
            script: "return { ready: typeof agent === 'function' };".to_owned(),
            args: Value::Object(Default::default()),
            meta: Value::Object(Default::default()),
            tools: Vec::new(),
        },
        Box::new(NoHost),
        limits,
        &Arc::new(StopSignal::default()),
    )
}
