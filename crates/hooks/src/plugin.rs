//! The `hooks` plugin: command hooks on the existing seams — `tools/pre-execute` (PreToolUse),
//! `tools/post-execute` (PostToolUse), `agent/pre-step` (SessionStart, UserPromptSubmit) and
//! `agent/turn-stopping` (Stop, with a loop guard).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::events::AgentDisposed;
use dsh_agent::hooks::{PreStep, PreStepDecision, PreStepInput, TurnStopping, TurnStoppingInput};
use dsh_agent::{Agent, Agents};
use dsh_context_api::ProjectPaths;
use dsh_kernel::{BoxError, Ctx, HookOptions, Next, Plugin};
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_session::{CoreEvent, NewEvent, PluginEvent, Session};
use dsh_tools::{
    CallInfo, PostDecision, PostExecuteInput, PreDecision, ToolsPostExecute, ToolsPreExecute,
};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{self, Dialect, HookEvent, HookSet};
use crate::events::{HookInvoked, HookResult, ResultDecision};
use crate::run::{self, Decision, Exit, HookReply};

fn default_timeout_ms() -> u64 {
    600_000
}
fn one() -> u32 {
    1
}

/// Config of [`HooksPlugin`].
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HooksConfig {
    /// Timeout of a handler without its own `timeout`, in ms (default 600000).
    #[serde(default = "default_timeout_ms")]
    pub default_timeout_ms: u64,
    /// How many times per turn Stop hooks may force another step (default 1); a further block
    /// is logged and the turn ends.
    #[serde(default = "one")]
    pub stop_hook_max_blocks: u32,
    /// More hook files (Claude Code dialect), relative to the project root unless absolute.
    #[serde(default)]
    pub files: Vec<PathBuf>,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            default_timeout_ms: default_timeout_ms(),
            stop_hook_max_blocks: 1,
            files: Vec::new(),
        }
    }
}

/// The Claude Code name of a dsh tool (`bash` → `Bash`), for matchers and payloads.
pub fn claude_tool_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "bash" => "Bash",
        "read" => "Read",
        "write" => "Write",
        "edit" => "Edit",
        "glob" => "Glob",
        "grep" => "Grep",
        "skill" => "Skill",
        _ => return None,
    })
}

#[derive(Default)]
struct AgentHooks {
    started: bool,
    stop_turn: u64,
    stop_blocks: u32,
}

struct Inner {
    ctx: Ctx,
    config: HooksConfig,
    sets: Mutex<HashMap<PathBuf, (PathBuf, Arc<HookSet>)>>,
    agents: Mutex<HashMap<String, AgentHooks>>,
}

/// The facts every payload carries, and the session whose open turn logs the runs.
struct Base<'a> {
    session_id: &'a str,
    cwd: &'a Path,
    model: Option<String>,
    turn: Option<u64>,
    session: Option<Arc<Session>>,
}

/// The agent type of a sub-agent for payloads and matchers (as the original names it).
const AGENT_TYPE: &str = "general-purpose";

/// The session's open turn.
fn open_turn(session: &Session) -> Option<u64> {
    session.with_log(|l| l.tracker().open_turn())
}

/// Appends a hook audit event inside the session's open turn (outside a turn: nothing).
fn audit<T: PluginEvent>(session: Option<&Arc<Session>>, event: &T) {
    let Some(session) = session else {
        return;
    };
    match NewEvent::plugin(event) {
        Ok(e) => {
            if let Err(error) = session.append(e) {
                tracing::warn!(%error, "hooks: cannot log {}", T::TYPE);
            }
        }
        Err(error) => tracing::warn!(%error, "hooks: cannot encode {}", T::TYPE),
    }
}

/// The parent id of a sub-agent's session (`None`: not a sub-agent).
fn parent_of(agent: &Arc<dyn Agent>) -> Option<String> {
    let h = agent.session().header();
    h.parent_session
        .filter(|_| h.origin.as_deref() == Some("subagent"))
}

/// The child's provider (`spawn` / `fork`) from its `subagent/descriptor`.
fn provider_of(session: &Session) -> Option<String> {
    session.with_log(|l| {
        l.events().iter().find_map(|e| {
            (e.kind() == "subagent/descriptor")
                .then(|| {
                    e.data()
                        .get("provider")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .flatten()
        })
    })
}

/// The text of the session's last assistant message with text.
fn last_assistant_text(session: &Session) -> Option<String> {
    session.with_log(|l| {
        l.events().iter().rev().find_map(|e| match e.core() {
            Some(CoreEvent::AssistantMessage(m)) => {
                let t = m.message.text();
                (!t.trim().is_empty()).then_some(t)
            }
            _ => None,
        })
    })
}

fn payload(
    dialect: Dialect,
    event: HookEvent,
    base: &Base<'_>,
    extra: &Map<String, Value>,
) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("session_id".into(), Value::from(base.session_id));
    m.insert(
        "transcript_path".into(),
        match dialect {
            Dialect::ClaudeCode => Value::from(""),
            Dialect::Codex => Value::Null,
        },
    );
    m.insert("cwd".into(), Value::from(base.cwd.display().to_string()));
    m.insert("hook_event_name".into(), Value::from(event.as_str()));
    if dialect == Dialect::Codex {
        m.insert(
            "model".into(),
            Value::from(base.model.clone().unwrap_or_default()),
        );
        m.insert(
            "turn_id".into(),
            base.turn
                .map(|t| Value::from(t.to_string()))
                .unwrap_or(Value::Null),
        );
    }
    for (k, v) in extra {
        m.insert(k.clone(), v.clone());
    }
    let mut out = serde_json::to_vec(&Value::Object(m)).unwrap_or_default();
    if dialect == Dialect::ClaudeCode {
        out.push(b'\n');
    }
    out
}

fn context_text(event: HookEvent, context: &str) -> String {
    format!(
        "<system-reminder>\n{} hook additional context: {context}\n</system-reminder>",
        event.as_str()
    )
}

fn hook_message(dialect: Dialect, event: HookEvent, text: String) -> Message {
    Message::new(
        format!("m-{}", uuid::Uuid::now_v7()),
        Role::User,
        vec![ContentBlock::text(text)],
        MessageSource::new(dialect.source_kind())
            .with("form", Value::from("notice"))
            .with("summary", Value::from(format!("{} hook", event.as_str())))
            .with("event", Value::from(event.as_str())),
    )
}

impl Inner {
    /// The hooks for `cwd` (parsed once per directory) and its project root.
    fn set_for(&self, cwd: &Path) -> (PathBuf, Arc<HookSet>) {
        let mut sets = self.sets.lock();
        sets.entry(cwd.to_path_buf())
            .or_insert_with(|| {
                let paths = ProjectPaths::discover(cwd, &[".git".to_owned()]);
                let set = config::load(&paths, &self.config.files);
                (paths.root, Arc::new(set))
            })
            .clone()
    }

    /// Runs the matching handlers of `event` serially and merges their replies. Returns the
    /// dialect of the first handler that ran, for the source of injected context. Each run is
    /// logged as `hook/invoked` + `hook/result` in the session's open turn.
    async fn fire(
        &self,
        event: HookEvent,
        names: &[&str],
        base: &Base<'_>,
        extra: Map<String, Value>,
    ) -> (HookReply, Dialect) {
        let (root, set) = self.set_for(base.cwd);
        let handlers = set.handlers(event, names);
        let mut replies = Vec::new();
        let mut first = Dialect::ClaudeCode;
        let turn = base.session.as_deref().and_then(open_turn);
        let logged = turn.and(base.session.as_ref());
        let turn = turn.or(base.turn);
        let base = Base {
            session_id: base.session_id,
            cwd: base.cwd,
            model: base.model.clone(),
            turn,
            session: None,
        };
        for (i, (dialect, h)) in handlers.iter().enumerate() {
            if i == 0 {
                first = *dialect;
            }
            let body = payload(*dialect, event, &base, &extra);
            let timeout = h
                .timeout
                .unwrap_or(Duration::from_millis(self.config.default_timeout_ms));
            if let Some(turn) = turn {
                audit(
                    logged,
                    &HookInvoked {
                        turn,
                        point: event.as_str().to_owned(),
                        dialect: dialect.as_str().to_owned(),
                        matcher: h.matcher.clone(),
                        handler_id: h.id.clone(),
                    },
                );
            }
            let started = std::time::Instant::now();
            let out = run::run(&h.command, base.cwd, &root, &body, timeout).await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let exit_code = match out.exit {
                Exit::Code(c) => Some(c),
                _ => None,
            };
            let (decision, stderr_summary) = match run::interpret(event, *dialect, &out) {
                Ok(reply) => {
                    tracing::debug!(handler = %h.id, decision = ?reply.decision, "hook ran");
                    let d = match reply.decision {
                        Some(Decision::Block) => ResultDecision::Block,
                        Some(Decision::Ask) => ResultDecision::Ask,
                        Some(Decision::Allow) => ResultDecision::Allow,
                        None if reply.stop => ResultDecision::Stop,
                        None => ResultDecision::Pass,
                    };
                    replies.push(reply);
                    (d, Some(run::summary(&out.stderr)).filter(|s| !s.is_empty()))
                }
                Err(why) => {
                    tracing::warn!(handler = %h.id, command = %h.command, "hook {why}");
                    (ResultDecision::Pass, Some(run::summary(&why.to_string())))
                }
            };
            if let Some(turn) = turn {
                audit(
                    logged,
                    &HookResult {
                        turn,
                        point: event.as_str().to_owned(),
                        handler_id: h.id.clone(),
                        decision,
                        exit_code,
                        stderr_summary,
                        duration_ms,
                    },
                );
            }
        }
        (run::merge(&replies), first)
    }

    /// The live session of `session_id` (for the audit events of tool hooks).
    fn session_of(&self, session_id: &str) -> Option<Arc<Session>> {
        self.ctx
            .get::<dyn Agents>()
            .and_then(|a| a.get(session_id))
            .map(|a| a.session())
    }

    /// Whether any hook of `event` matches `names` in `cwd` (without one, the payload, which
    /// copies the tool's arguments, is not built).
    fn has_handlers(&self, event: HookEvent, names: &[&str], cwd: &Path) -> bool {
        !self.set_for(cwd).1.handlers(event, names).is_empty()
    }

    async fn pre_tool(&self, call: &CallInfo) -> Option<PreDecision> {
        let alias = claude_tool_name(&call.name);
        let names: Vec<&str> = std::iter::once(call.name.as_str()).chain(alias).collect();
        if !self.has_handlers(HookEvent::PreToolUse, &names, &call.cwd) {
            return None;
        }
        let mut extra = Map::new();
        extra.insert("tool_name".into(), Value::from(alias.unwrap_or(&call.name)));
        extra.insert("tool_input".into(), Value::clone(&call.args));
        extra.insert("tool_use_id".into(), Value::from(call.call_id.clone()));
        let base = Base {
            session_id: &call.session_id,
            cwd: &call.cwd,
            model: None,
            turn: None,
            session: self.session_of(&call.session_id),
        };
        let (reply, _) = self.fire(HookEvent::PreToolUse, &names, &base, extra).await;
        match reply.decision {
            Some(Decision::Block) => Some(PreDecision::Deny {
                reason: reply
                    .reason
                    .unwrap_or_else(|| "blocked by PreToolUse hook".into()),
            }),
            Some(Decision::Ask) => Some(PreDecision::Ask {
                reason: reply.reason,
            }),
            _ => reply
                .updated_input
                .map(|args| PreDecision::Rewrite { args }),
        }
    }

    async fn post_tool(&self, input: &PostExecuteInput) -> HookReply {
        let call = &input.call;
        let alias = claude_tool_name(&call.name);
        let names: Vec<&str> = std::iter::once(call.name.as_str()).chain(alias).collect();
        if !self.has_handlers(HookEvent::PostToolUse, &names, &call.cwd) {
            return HookReply::default();
        }
        let mut extra = Map::new();
        extra.insert("tool_name".into(), Value::from(alias.unwrap_or(&call.name)));
        extra.insert("tool_input".into(), Value::clone(&call.args));
        extra.insert("tool_use_id".into(), Value::from(call.call_id.clone()));
        extra.insert("tool_response".into(), Value::from(input.result.text()));
        let base = Base {
            session_id: &call.session_id,
            cwd: &call.cwd,
            model: None,
            turn: None,
            session: self.session_of(&call.session_id),
        };
        self.fire(HookEvent::PostToolUse, &names, &base, extra)
            .await
            .0
    }

    async fn pre_step(&self, input: &mut PreStepInput) -> Option<String> {
        if input.step == 1 && input.batch.is_empty() {
            return None;
        }
        let agent = input.agent.clone();
        let options = agent.options();
        let parent = parent_of(&agent);
        let base = Base {
            session_id: agent.id(),
            cwd: &options.cwd,
            model: options.model.clone(),
            turn: Some(input.turn),
            session: Some(agent.session()),
        };
        let mut add = Vec::new();
        let start = {
            let mut agents = self.agents.lock();
            let st = agents.entry(agent.id().to_owned()).or_default();
            !std::mem::replace(&mut st.started, true)
        };
        if start && let Some(parent) = &parent {
            // A sub-agent: SubagentStart (its context goes into the child), not SessionStart.
            let provider = provider_of(&agent.session());
            let names: Vec<&str> = std::iter::once(AGENT_TYPE)
                .chain(provider.as_deref())
                .collect();
            let mut extra = Map::new();
            extra.insert("agent_id".into(), Value::from(agent.id()));
            extra.insert("agent_type".into(), Value::from(AGENT_TYPE));
            let child_base = Base {
                session_id: parent,
                cwd: &options.cwd,
                model: options.model.clone(),
                turn: Some(input.turn),
                session: Some(agent.session()),
            };
            let (reply, d) = self
                .fire(HookEvent::SubagentStart, &names, &child_base, extra)
                .await;
            if let Some(c) = reply.context {
                add.push(hook_message(
                    d,
                    HookEvent::SubagentStart,
                    context_text(HookEvent::SubagentStart, &c),
                ));
            }
        } else if start {
            let source = if input.turn > 1 { "resume" } else { "startup" };
            let mut extra = Map::new();
            extra.insert("source".into(), Value::from(source));
            let (reply, d) = self
                .fire(HookEvent::SessionStart, &[source], &base, extra)
                .await;
            if let Some(c) = reply.context {
                add.push(hook_message(
                    d,
                    HookEvent::SessionStart,
                    context_text(HookEvent::SessionStart, &c),
                ));
            }
        }
        // A sub-agent's prompt comes from its parent's model, not from a user.
        if input.step == 1 && parent.is_none() {
            let prompt: Vec<String> = input
                .batch
                .iter()
                .filter(|m| m.role == Role::User && m.source.kind == "user")
                .map(Message::text)
                .collect();
            if !prompt.is_empty() {
                let mut extra = Map::new();
                extra.insert("prompt".into(), Value::from(prompt.join("\n\n")));
                let (reply, d) = self
                    .fire(HookEvent::UserPromptSubmit, &[], &base, extra)
                    .await;
                if reply.decision == Some(Decision::Block) {
                    let why = reply
                        .reason
                        .unwrap_or_else(|| "blocked by UserPromptSubmit hook".into());
                    return Some(why);
                }
                if let Some(c) = reply.context {
                    add.push(hook_message(
                        d,
                        HookEvent::UserPromptSubmit,
                        context_text(HookEvent::UserPromptSubmit, &c),
                    ));
                }
            }
        }
        let at = match input.batch.last() {
            Some(m) if m.source.kind == dsh_system_prompt::runtime_context::SOURCE_KIND => {
                input.batch.len() - 1
            }
            _ => input.batch.len(),
        };
        input.batch.splice(at..at, add);
        None
    }

    async fn stop(&self, input: &TurnStoppingInput) {
        let agent = input.agent.clone();
        let active = {
            let mut agents = self.agents.lock();
            let st = agents.entry(agent.id().to_owned()).or_default();
            if st.stop_turn != input.turn {
                st.stop_turn = input.turn;
                st.stop_blocks = 0;
            }
            st.stop_blocks > 0
        };
        let options = agent.options();
        let parent = parent_of(&agent);
        let base = Base {
            session_id: parent.as_deref().unwrap_or(agent.id()),
            cwd: &options.cwd,
            model: options.model.clone(),
            turn: Some(input.turn),
            session: Some(agent.session()),
        };
        let mut extra = Map::new();
        extra.insert("stop_hook_active".into(), Value::Bool(active));
        let (event, names) = match &parent {
            // A sub-agent ends its turn: SubagentStop, matched on the agent type.
            Some(_) => {
                extra.insert("agent_id".into(), Value::from(agent.id()));
                extra.insert("agent_type".into(), Value::from(AGENT_TYPE));
                extra.insert(
                    "last_assistant_message".into(),
                    last_assistant_text(&agent.session())
                        .map(Value::from)
                        .unwrap_or(Value::Null),
                );
                let provider = provider_of(&agent.session());
                let names: Vec<String> = std::iter::once(AGENT_TYPE.to_owned())
                    .chain(provider)
                    .collect();
                (HookEvent::SubagentStop, names)
            }
            None => {
                extra.insert("last_assistant_message".into(), Value::Null);
                (HookEvent::Stop, Vec::new())
            }
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (reply, d) = self.fire(event, &names, &base, extra).await;
        if reply.decision != Some(Decision::Block) {
            return;
        }
        let allowed = {
            let mut agents = self.agents.lock();
            let st = agents.entry(agent.id().to_owned()).or_default();
            if st.stop_blocks < self.config.stop_hook_max_blocks {
                st.stop_blocks += 1;
                true
            } else {
                false
            }
        };
        if !allowed {
            tracing::warn!(
                agent = %agent.id(),
                turn = input.turn,
                max = self.config.stop_hook_max_blocks,
                "Stop hook loop guard: the hook blocked again; ending the turn"
            );
            return;
        }
        let text = reply
            .reason
            .unwrap_or_else(|| format!("continue: blocked by {} hook", event.as_str()));
        if let Err(e) = agent.steer(hook_message(d, event, text)) {
            tracing::warn!(agent = %agent.id(), "Stop hook could not steer: {e}");
        }
    }
}

/// Plugin `hooks`: Claude Code and Codex command hooks.
#[derive(Debug)]
pub struct HooksPlugin;

impl Plugin for HooksPlugin {
    const NAME: &'static str = "hooks";
    type Config = HooksConfig;

    async fn apply(ctx: Ctx, config: HooksConfig) -> Result<(), BoxError> {
        let inner = Arc::new(Inner {
            ctx: ctx.clone(),
            config,
            sets: Mutex::new(HashMap::new()),
            agents: Mutex::new(HashMap::new()),
        });
        let i = inner.clone();
        // First in the chain: a hook's veto comes before an approval question, and later
        // listeners (approvals) judge the rewritten arguments.
        ctx.hook_with::<ToolsPreExecute, _, _>(
            HookOptions { prepend: true },
            move |call: Arc<CallInfo>, next: Next<ToolsPreExecute>| {
                let i = i.clone();
                async move {
                    match i.pre_tool(&call).await {
                        Some(d @ (PreDecision::Deny { .. } | PreDecision::Ask { .. })) => d,
                        Some(PreDecision::Rewrite { args }) => {
                            let mut rewritten = (*call).clone();
                            rewritten.arguments = args.to_string().into();
                            rewritten.args = Arc::new(args.clone());
                            match next.run(Arc::new(rewritten)).await {
                                PreDecision::Allow => PreDecision::Rewrite { args },
                                other => other,
                            }
                        }
                        _ => next.run(call).await,
                    }
                }
            },
        )?;
        let i = inner.clone();
        ctx.hook::<ToolsPostExecute, _, _>(
            move |input: PostExecuteInput, next: Next<ToolsPostExecute>| {
                let i = i.clone();
                async move {
                    let reply = i.post_tool(&input).await;
                    let out = next.run(input).await;
                    match (out, reply.decision) {
                        (b @ PostDecision::Block { .. }, _) => b,
                        (_, Some(Decision::Block)) => PostDecision::Block {
                            feedback: reply
                                .reason
                                .unwrap_or_else(|| "blocked by PostToolUse hook".into()),
                        },
                        (
                            PostDecision::Accept {
                                content,
                                value,
                                mut additional_contexts,
                            },
                            _,
                        ) => {
                            if let Some(c) = reply.context {
                                additional_contexts.push(context_text(HookEvent::PostToolUse, &c));
                            }
                            PostDecision::Accept {
                                content,
                                value,
                                additional_contexts,
                            }
                        }
                    }
                }
            },
        )?;
        let i = inner.clone();
        ctx.hook::<PreStep, _, _>(move |mut input: PreStepInput, next: Next<PreStep>| {
            let i = i.clone();
            async move {
                if let Some(reason) = i.pre_step(&mut input).await {
                    tracing::warn!(agent = %input.agent.id(), "prompt blocked by a UserPromptSubmit hook: {reason}");
                    return PreStepDecision::Reject { reason };
                }
                next.run(input).await
            }
        })?;
        let i = inner.clone();
        ctx.hook::<TurnStopping, _, _>(
            move |input: TurnStoppingInput, next: Next<TurnStopping>| {
                let i = i.clone();
                async move {
                    i.stop(&input).await;
                    next.run(input).await
                }
            },
        )?;
        let i = inner;
        ctx.on::<AgentDisposed>(move |e| {
            i.agents.lock().remove(&e.agent_id);
            Ok(())
        })?;
        Ok(())
    }
}
