//! One run: the engine's host over the sub-agent and tools seams, the run's records in the
//! calling session, its limits and its end (what still runs is cancelled and awaited).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use dsh_agent::Agents;
use dsh_kernel::ScopeKey;
use dsh_session::{NewEvent, PluginEvent};
use dsh_subagent_api::{
    Capabilities, StopReason, SubagentError, SubagentMode, SubagentRequest, Subagents,
    ToolFilterSpec,
};
use dsh_tools::{ToolRequest, Tools};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::WorkflowConfig;
use crate::engine::{self, EngineLimits, Host, ScriptInput, Settled, StopSignal};
use crate::error::{HostError, WorkflowError};
use crate::events::{AgentEnd, AgentOutcome, AgentStart, RunEnd, RunStart, RunStopReason};

/// Stack of the engine's thread (QuickJS's own limit, `maxStackBytes`, is far below it).
const ENGINE_THREAD_STACK: usize = 8 << 20;

/// Sub-agents waiting for their `subagent/start` notification, by (parent, label): the
/// notification names the child's session, which the `agent-start` record needs; then the
/// running children by session, whose usage counts toward their run's `maxTokens` as it comes.
#[derive(Debug, Default)]
pub struct StartRegistry {
    pending: Mutex<HashMap<StartKey, (Weak<RunShared>, u64)>>,
    running: Mutex<HashMap<String, (Weak<RunShared>, u64)>>,
}

/// (parent session, label) of a pending start.
type StartKey = (String, String);

impl StartRegistry {
    /// A child of `parent` labelled `label` was created as `child_id`.
    pub fn started(&self, parent: &str, label: &str, child_id: &str) {
        let entry = self
            .pending
            .lock()
            .remove(&(parent.to_owned(), label.to_owned()));
        if let Some((weak, seq)) = entry
            && let Some(run) = weak.upgrade()
        {
            self.running.lock().insert(child_id.to_owned(), (weak, seq));
            run.agent_started(seq, child_id);
        }
    }

    /// Session `session_id` reported a response's `tokens`: counted at once when it is a
    /// running child of a run (its run stops when they pass `maxTokens`).
    pub fn usage(&self, session_id: &str, tokens: u64) {
        let entry = self.running.lock().get(session_id).cloned();
        if let Some((run, seq)) = entry
            && let Some(run) = run.upgrade()
        {
            run.count_live(seq, tokens);
        }
    }

    fn ended(&self, child_id: &str) {
        self.running.lock().remove(child_id);
    }

    /// Whether a start of `label` under `parent` is pending.
    fn taken(&self, parent: &str, label: &str) -> bool {
        self.pending
            .lock()
            .contains_key(&(parent.to_owned(), label.to_owned()))
    }

    fn expect(&self, parent: &str, label: &str, run: &Arc<RunShared>, seq: u64) {
        self.pending.lock().insert(
            (parent.to_owned(), label.to_owned()),
            (Arc::downgrade(run), seq),
        );
    }

    fn forget(&self, parent: &str, label: &str) {
        self.pending
            .lock()
            .remove(&(parent.to_owned(), label.to_owned()));
    }
}

/// A sub-agent of a run, for the call's `meta` and display.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRecord {
    /// The workflow's counter.
    pub seq: u64,
    /// Its label.
    pub label: String,
    /// Its phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its session, once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_id: Option<String>,
    /// How it ended (absent: it never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AgentOutcome>,
}

/// What the engine thread hears.
#[derive(Debug)]
enum Msg {
    Agent(u64, Value),
    Tool(u64, Result<String, HostError>),
    Wake,
}

/// Everything a run's host, its child tasks and its end share.
pub struct RunShared {
    pub(crate) subagents: Arc<dyn Subagents>,
    pub(crate) tools: Option<Arc<dyn Tools>>,
    pub(crate) agents: Option<Arc<dyn Agents>>,
    pub(crate) starts: Arc<StartRegistry>,
    pub(crate) config: Arc<WorkflowConfig>,
    pub(crate) session_id: String,
    pub(crate) call_id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) scratch_dir: Option<PathBuf>,
    pub(crate) run_id: String,
    pub(crate) name: String,
    /// Cancels the run's children and tool calls (a child of the call's token).
    pub(crate) token: CancellationToken,
    stop: Arc<StopSignal>,
    tokens_used: AtomicU64,
    /// Tokens counted from each running child's responses as they came, by seq (its end
    /// counts only what they did not).
    live_tokens: Mutex<HashMap<u64, u64>>,
    records: Mutex<BTreeMap<u64, AgentRecord>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    wake: Mutex<Sender<Msg>>,
}

impl std::fmt::Debug for RunShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunShared")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// What a run needs from its call.
#[derive(Debug)]
pub struct RunSpec {
    pub(crate) session_id: String,
    pub(crate) call_id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) scratch_dir: Option<PathBuf>,
    pub(crate) name: String,
    pub(crate) input: ScriptInput,
}

/// How a run ended: its value (or why none) and its sub-agents.
#[derive(Debug)]
pub struct RunReport {
    /// The run's id.
    pub run_id: String,
    /// The script's return value, or why there is none.
    pub result: Result<Value, WorkflowError>,
    /// Its sub-agents, by seq.
    pub agents: Vec<AgentRecord>,
    /// Tokens its sub-agents used.
    pub tokens: u64,
}

impl RunShared {
    /// Writes `event` in the calling session (a warning when it cannot).
    fn log<T: PluginEvent>(&self, event: &T) {
        let Some(agent) = self.agents.as_ref().and_then(|a| a.get(&self.session_id)) else {
            tracing::warn!(session = %self.session_id, "workflow: no live agent to record {}", T::TYPE);
            return;
        };
        match NewEvent::plugin(event) {
            Ok(e) => {
                if let Err(error) = agent.session().append(e) {
                    tracing::warn!(%error, "workflow: cannot record {}", T::TYPE);
                }
            }
            Err(error) => tracing::warn!(%error, "workflow: cannot encode {}", T::TYPE),
        }
    }

    /// Stops the run with `reason` (the first reason wins) and wakes the engine.
    pub(crate) fn halt(&self, reason: WorkflowError) {
        self.stop.stop(reason);
        let _ = self.wake.lock().send(Msg::Wake);
    }

    /// Sub-agent `seq` has its session: recorded once, with its `agent-start`.
    fn agent_started(&self, seq: u64, child_id: &str) {
        let event = {
            let mut records = self.records.lock();
            let Some(record) = records.get_mut(&seq) else {
                return;
            };
            if record.child_id.is_some() {
                return;
            }
            record.child_id = Some(child_id.to_owned());
            AgentStart {
                run_id: self.run_id.clone(),
                seq,
                label: record.label.clone(),
                phase: record.phase.clone(),
                child_id: child_id.to_owned(),
            }
        };
        self.log(&event);
    }

    /// Adds `tokens` of child `seq`'s response to the run's count; past `maxTokens` the run
    /// stops.
    fn count_live(&self, seq: u64, tokens: u64) {
        let used = {
            let mut live = self.live_tokens.lock();
            *live.entry(seq).or_default() += tokens;
            self.tokens_used.fetch_add(tokens, Ordering::AcqRel) + tokens
        };
        self.check_tokens(used);
    }

    /// Child `seq` ended having used `tokens` in all: adds what was not counted live.
    fn count_end(&self, seq: u64, tokens: u64) {
        let used = {
            let counted = self.live_tokens.lock().remove(&seq).unwrap_or(0);
            let rest = tokens.saturating_sub(counted);
            self.tokens_used.fetch_add(rest, Ordering::AcqRel) + rest
        };
        self.check_tokens(used);
    }

    fn check_tokens(&self, used: u64) {
        if used > self.config.max_tokens {
            self.halt(WorkflowError::Tokens {
                used,
                max: self.config.max_tokens,
            });
        }
    }

    fn agent_ended(&self, seq: u64, outcome: AgentOutcome) {
        let started = {
            let mut records = self.records.lock();
            records.get_mut(&seq).is_some_and(|r| {
                r.outcome = Some(outcome);
                r.child_id.is_some()
            })
        };
        if started {
            self.log(&AgentEnd {
                run_id: self.run_id.clone(),
                seq,
                outcome,
            });
        }
    }
}

/// The options of `agent(...)` / `fork(...)`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AgentOptions {
    prompt: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    fork: bool,
    #[serde(default)]
    persona: Option<String>,
    #[serde(default, alias = "outputSchema")]
    schema: Option<Value>,
    #[serde(default)]
    phase: Option<String>,
}

/// The engine's host for one run (lives on the engine thread).
struct RunHost {
    shared: Arc<RunShared>,
    handle: tokio::runtime::Handle,
    inbox: Receiver<Msg>,
    deadline: Instant,
    started: u64,
    labels: HashSet<String>,
    agents_done: HashMap<u64, Value>,
    /// Ended sub-agents whose result the script's promises have not been given, in the order
    /// they ended.
    undelivered: VecDeque<u64>,
    tools_done: HashMap<u64, Result<String, HostError>>,
    /// Tool calls started whose answer the script's promises have not been given.
    tools_running: HashSet<u64>,
    next_tool: u64,
}

impl RunHost {
    /// Waits for the next message; `Stopped` when the run must stop (or the deadline passed).
    fn pump(&mut self) -> Result<(), HostError> {
        if self.shared.stop.is_set() {
            return Err(HostError::Stopped);
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.inbox.recv_timeout(left) {
            Ok(Msg::Agent(seq, v)) => {
                self.agents_done.insert(seq, v);
                self.undelivered.push_back(seq);
            }
            Ok(Msg::Tool(id, r)) => {
                self.tools_done.insert(id, r);
            }
            Ok(Msg::Wake) => {}
            Err(RecvTimeoutError::Timeout) => {
                self.shared.halt(WorkflowError::WallTime {
                    ms: self.shared.config.max_wall_ms,
                });
            }
            Err(RecvTimeoutError::Disconnected) => {
                // Unreachable while the run holds its sender; treated as a lost engine.
                self.shared.halt(WorkflowError::ThreadLost);
            }
        }
        if self.shared.stop.is_set() {
            return Err(HostError::Stopped);
        }
        Ok(())
    }

    fn unique_label(&mut self, wanted: String) -> String {
        let mut label = wanted.clone();
        let mut n = 2;
        while self.labels.contains(&label)
            || self.shared.starts.taken(&self.shared.session_id, &label)
        {
            label = format!("{wanted} ({n})");
            n += 1;
        }
        self.labels.insert(label.clone());
        label
    }
}

fn agent_result(
    seq: u64,
    label: &str,
    outcome: Result<dsh_subagent_api::SubagentOutcome, SubagentError>,
) -> (Value, AgentOutcome, Option<String>, u64) {
    match outcome {
        Ok(o) => {
            let kind = match o.stop_reason {
                StopReason::Completed => AgentOutcome::Completed,
                StopReason::Aborted => AgentOutcome::Cancelled,
                _ => AgentOutcome::Failed,
            };
            let tokens = o.usage.input_tokens.saturating_add(o.usage.output_tokens);
            let error = (kind != AgentOutcome::Completed).then(|| {
                dsh_subagent_api::texts::failure_text(
                    o.stop_reason,
                    o.diagnostic.as_deref(),
                    &o.output,
                )
            });
            let value = json!({
                "seq": seq,
                "label": label,
                "ok": kind == AgentOutcome::Completed,
                "childId": o.child_id,
                "stopReason": o.stop_reason.as_str(),
                "text": o.output,
                "value": o.structured,
                "error": error,
            });
            (value, kind, Some(o.child_id), tokens)
        }
        Err(e) => {
            let kind = if matches!(e, SubagentError::Cancelled) {
                AgentOutcome::Cancelled
            } else {
                AgentOutcome::Failed
            };
            let value = json!({
                "seq": seq,
                "label": label,
                "ok": false,
                "childId": null,
                "stopReason": if kind == AgentOutcome::Cancelled { "aborted" } else { "error" },
                "text": "",
                "value": null,
                "error": e.to_string(),
            });
            (value, kind, None, 0)
        }
    }
}

impl RunHost {
    /// Stops the run with `limit`; the error the script's call ends with.
    fn limit(&self, limit: WorkflowError) -> HostError {
        self.shared.halt(limit.clone());
        HostError::Limit(limit)
    }
}

impl Host for RunHost {
    fn start_agent(&mut self, options: Value) -> Result<u64, HostError> {
        if self.shared.stop.is_set() {
            return Err(HostError::Stopped);
        }
        let o: AgentOptions = serde_json::from_value(options).map_err(HostError::Options)?;
        let prompt = o
            .prompt
            .filter(|p| !p.trim().is_empty())
            .ok_or(HostError::NoPrompt)?;
        let config = self.shared.config.clone();
        if self.started >= config.max_agents {
            return Err(self.limit(WorkflowError::Agents {
                max: config.max_agents,
            }));
        }
        let used = self.shared.tokens_used.load(Ordering::Acquire);
        if used > config.max_tokens {
            return Err(self.limit(WorkflowError::Tokens {
                used,
                max: config.max_tokens,
            }));
        }
        if let Some(schema) = &o.schema {
            dsh_tools::schema::check_schema(schema).map_err(HostError::Schema)?;
        }
        if o.persona.as_ref().is_some_and(|p| p.trim().is_empty()) {
            return Err(HostError::EmptyPersona);
        }
        self.started += 1;
        let seq = self.started;
        let wanted = o
            .label
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| format!("{} #{seq}", self.shared.name));
        let label = self.unique_label(wanted);
        let shared = self.shared.clone();
        shared.records.lock().insert(
            seq,
            AgentRecord {
                seq,
                label: label.clone(),
                phase: o.phase.clone(),
                child_id: None,
                outcome: None,
            },
        );
        shared
            .starts
            .expect(&shared.session_id, &label, &shared, seq);
        let tool_filter = (!config.child_deny.is_empty()).then(|| ToolFilterSpec {
            allow: None,
            deny: config.child_deny.clone(),
        });
        let request = SubagentRequest {
            parent_id: shared.session_id.clone(),
            mode: if o.fork {
                SubagentMode::Fork
            } else {
                SubagentMode::Spawn
            },
            label: label.clone(),
            prompt,
            cwd: None,
            cancel: shared.token.child_token(),
            continuable: false,
            capabilities: Capabilities {
                persona: o.persona,
                tool_filter,
                output_schema: o.schema,
            },
        };
        let task = {
            let shared = shared.clone();
            self.handle.spawn(async move {
                let outcome = shared.subagents.run(request).await;
                shared.starts.forget(&shared.session_id, &label);
                let (value, kind, child_id, tokens) = agent_result(seq, &label, outcome);
                if let Some(child_id) = &child_id {
                    shared.starts.ended(child_id);
                    // Logged here when the start notification was missed.
                    shared.agent_started(seq, child_id);
                }
                shared.agent_ended(seq, kind);
                shared.count_end(seq, tokens);
                let _ = shared.wake.lock().send(Msg::Agent(seq, value));
            })
        };
        shared.tasks.lock().push(task);
        Ok(seq)
    }

    fn wait_agent(&mut self, seq: u64) -> Result<Value, HostError> {
        if seq == 0 || seq > self.started {
            return Err(HostError::NoSuchAgent(seq));
        }
        loop {
            if let Some(v) = self.agents_done.get(&seq) {
                return Ok(v.clone());
            }
            self.pump()?;
        }
    }

    fn next_settled(&mut self) -> Result<Option<Settled>, HostError> {
        loop {
            if let Some(seq) = self.undelivered.pop_front() {
                let value = self.agents_done.get(&seq).cloned().unwrap_or(Value::Null);
                return Ok(Some(Settled::Agent(seq, value)));
            }
            if let Some(id) = self.tools_done.keys().min().copied()
                && let Some(answer) = self.tools_done.remove(&id)
            {
                self.tools_running.remove(&id);
                return Ok(Some(Settled::Tool(id, answer)));
            }
            // Every seq up to `started` reports exactly once, and so does every tool call.
            if self.agents_done.len() as u64 >= self.started && self.tools_running.is_empty() {
                return Ok(None);
            }
            self.pump()?;
        }
    }

    fn start_tool(&mut self, name: &str, arguments: String) -> Result<u64, HostError> {
        if !self.shared.config.tools.iter().any(|t| t == name) {
            return Err(HostError::ToolNotAllowed {
                name: name.to_owned(),
                allowed: self.shared.config.tools.join(", "),
            });
        }
        let Some(tools) = self.shared.tools.clone() else {
            return Err(HostError::NoTools(name.to_owned()));
        };
        self.next_tool += 1;
        let id = self.next_tool;
        let shared = &self.shared;
        let mut request = ToolRequest::new(
            format!("{}:wf:{id}", shared.call_id),
            name,
            arguments,
            shared.session_id.clone(),
            shared.cwd.clone(),
        );
        request.scope = shared.scope.clone();
        request.cancel = shared.token.child_token();
        request.scratch_dir = shared.scratch_dir.clone();
        let wake = shared.wake.lock().clone();
        let task = self.handle.spawn(async move {
            let result = tools.execute(request).await;
            let text = result.text();
            let answer = if result.is_error {
                Err(HostError::Tool(text))
            } else {
                Ok(text)
            };
            let _ = wake.send(Msg::Tool(id, answer));
        });
        shared.tasks.lock().push(task);
        self.tools_running.insert(id);
        Ok(id)
    }

    fn log(&mut self, line: &str) {
        tracing::debug!(target: "dsh_tool_workflow::script", run = %self.shared.run_id, "{line}");
    }
}

/// The parts of a run that come from the tool (services, registry, config).
#[derive(Clone)]
pub struct RunServices {
    pub(crate) subagents: Arc<dyn Subagents>,
    pub(crate) tools: Option<Arc<dyn Tools>>,
    pub(crate) agents: Option<Arc<dyn Agents>>,
    pub(crate) starts: Arc<StartRegistry>,
    pub(crate) config: Arc<WorkflowConfig>,
}

/// Runs one script to its end; `cancel` stops it. Its sub-agents still running at the end
/// are cancelled and awaited, so every `agent-end` precedes `run-end`.
pub async fn run(services: RunServices, spec: RunSpec, cancel: CancellationToken) -> RunReport {
    let (tx, rx) = std::sync::mpsc::channel();
    let config = services.config.clone();
    let shared = Arc::new(RunShared {
        subagents: services.subagents,
        tools: services.tools,
        agents: services.agents,
        starts: services.starts,
        config: config.clone(),
        session_id: spec.session_id,
        run_id: format!("wf-{}", spec.call_id),
        call_id: spec.call_id,
        cwd: spec.cwd,
        scope: spec.scope,
        scratch_dir: spec.scratch_dir,
        name: spec.name,
        token: cancel.child_token(),
        stop: Arc::new(StopSignal::default()),
        tokens_used: AtomicU64::new(0),
        live_tokens: Mutex::new(HashMap::new()),
        records: Mutex::new(BTreeMap::new()),
        tasks: Mutex::new(Vec::new()),
        wake: Mutex::new(tx),
    });
    shared.log(&RunStart {
        run_id: shared.run_id.clone(),
        name: shared.name.clone(),
    });
    let limits = EngineLimits {
        deadline: Instant::now() + Duration::from_millis(config.max_wall_ms),
        max_wall_ms: config.max_wall_ms,
        max_memory_bytes: config.max_memory_bytes,
        max_stack_bytes: config.max_stack_bytes,
    };
    let watcher = {
        let shared = shared.clone();
        tokio::spawn(async move {
            cancel.cancelled().await;
            shared.halt(WorkflowError::Cancelled);
        })
    };
    let result = match spawn_engine(&shared, rx, spec.input, limits) {
        Ok(done) => done.await.unwrap_or(Err(WorkflowError::ThreadLost)),
        Err(e) => Err(e),
    };
    watcher.abort();
    // The run is over: what still runs is cancelled, and awaited.
    shared.token.cancel();
    let tasks = std::mem::take(&mut *shared.tasks.lock());
    for task in tasks {
        let _ = task.await;
    }
    let stop_reason = match &result {
        Ok(_) => RunStopReason::Completed,
        Err(e) => e.stop_reason(),
    };
    shared.log(&RunEnd {
        run_id: shared.run_id.clone(),
        stop_reason,
    });
    let agents = shared.records.lock().values().cloned().collect();
    RunReport {
        run_id: shared.run_id.clone(),
        result,
        agents,
        tokens: shared.tokens_used.load(Ordering::Acquire),
    }
}

fn spawn_engine(
    shared: &Arc<RunShared>,
    inbox: Receiver<Msg>,
    input: ScriptInput,
    limits: EngineLimits,
) -> Result<tokio::sync::oneshot::Receiver<Result<Value, WorkflowError>>, WorkflowError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let host = RunHost {
        shared: shared.clone(),
        handle: tokio::runtime::Handle::current(),
        inbox,
        deadline: limits.deadline,
        started: 0,
        labels: HashSet::new(),
        agents_done: HashMap::new(),
        undelivered: VecDeque::new(),
        tools_done: HashMap::new(),
        tools_running: HashSet::new(),
        next_tool: 0,
    };
    let stop = shared.stop.clone();
    std::thread::Builder::new()
        .name("dsh-workflow".to_owned())
        .stack_size(ENGINE_THREAD_STACK)
        .spawn(move || {
            let result = engine::run_script(input, Box::new(host), &limits, &stop);
            let _ = tx.send(result);
        })
        .map_err(|e| WorkflowError::Thread(e.to_string()))?;
    Ok(rx)
}
