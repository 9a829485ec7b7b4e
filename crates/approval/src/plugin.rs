//! The `approval` plugin: the policies on the tools pipeline.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agents;
use dsh_agent::events::{AgentDisposed, AgentSessionStart};
use dsh_kernel::{BoxError, Ctx, Plugin, schemars};
use dsh_sandbox::{FS_SANDBOX_DENIED, Sandbox, SandboxMode};
use dsh_session::feature::ApprovalPolicyEvent;
use dsh_session::{NewEvent, PluginEvent, Session};
use dsh_tools::{
    ApprovalOutcome, Approvals, CallInfo, ExecuteInput, PreDecision, ToolError, ToolOutput, Tools,
    ToolsExecute, ToolsPreExecute,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;

use crate::policy::ApprovalPolicy;
use crate::rules::{RuleMatcher, RuleStore, rules_for};
use dsh_approval_api::events::{ApprovalAsked, ApprovalDecided, DecidedOutcome, policy_is_pinned};
use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};

/// Tools judged by the host they reach (`rules::Rule::Host`): asked about per host under
/// `untrusted`, "allow always" stores the host.
pub const NETWORK_TOOLS: [&str; 1] = ["web_fetch"];

/// Config of the `approval` plugin.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApprovalConfig {
    /// When to ask (default `never`).
    #[serde(default)]
    pub policy: Option<ApprovalPolicy>,
    /// The allow-always rules file (the `dsh` binary sets `$DSH_HOME/permissions.json`);
    /// none: no rules are read or stored.
    #[serde(default)]
    pub rules_file: Option<PathBuf>,
    /// How long a question may stay unanswered, in milliseconds (default 300000, five
    /// minutes); then it is denied with that reason (logged `cancelled`).
    #[serde(default)]
    pub answer_timeout_ms: Option<u64>,
}

/// Default of [`ApprovalConfig::answer_timeout_ms`].
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// The `approval` plugin: applies each session's [`ApprovalPolicy`] on `tools/pre-execute`
/// (and on `tools/execute` for `on-failure`), asks the attached [`ApprovalAnswerer`], logs
/// `approval/asked` and `approval/decided`, stores allow-always rules, and provides the
/// `approvals` service of `dsh-tools` for other plugins' `Ask` decisions.
///
/// A session's policy is the one its log pins (`approval/policy` with `source` `delegation`,
/// written into sub-agents, or `session`, chosen for the session when it was opened), else the
/// configured one, logged at session start when the log's last policy differs.
#[derive(Debug)]
pub struct ApprovalPlugin;

impl Plugin for ApprovalPlugin {
    const NAME: &'static str = "approval";
    type Config = ApprovalConfig;

    async fn apply(ctx: Ctx, config: ApprovalConfig) -> Result<(), BoxError> {
        let engine = Arc::new(Engine {
            ctx: ctx.clone(),
            policy: config.policy.unwrap_or(ApprovalPolicy::Never),
            sessions: Mutex::new(HashMap::new()),
            store: config.rules_file.map(RuleStore::new),
            answer_timeout: config
                .answer_timeout_ms
                .map_or(DEFAULT_ANSWER_TIMEOUT, Duration::from_millis),
        });
        let pre = engine.clone();
        ctx.hook::<ToolsPreExecute, _, _>(move |call: Arc<CallInfo>, next| {
            let engine = pre.clone();
            async move {
                match engine.pre_execute(&call).await {
                    Some(deny) => deny,
                    None => next.run(call).await,
                }
            }
        })?;
        // Any session may have `on-failure`, whatever the configured policy.
        let around = engine.clone();
        ctx.hook::<ToolsExecute, _, _>(move |input: ExecuteInput, next| {
            let engine = around.clone();
            async move {
                if engine.policy_for(&input.call) != ApprovalPolicy::OnFailure {
                    return next.run(input).await;
                }
                let retry = input.clone();
                let out = next.run(input).await;
                engine.after_failure(retry, out).await
            }
        })?;
        // The session's policy is set at session start; the configured one is logged when the
        // log's last one differs and is not pinned, as the original does
        // (`[permission/preset, sandbox/mode, approval/policy]`).
        let lookup = ctx.clone();
        let started = engine.clone();
        ctx.on::<AgentSessionStart>(move |ev| {
            let Some(agent) = lookup.get::<dyn Agents>().and_then(|a| a.get(&ev.agent_id)) else {
                return Ok(());
            };
            let session = agent.session();
            // A sub-agent child: its policy is the delegation pin `dsh-subagent` writes after
            // the start, read from its log at each call.
            if session.header().delegation_depth > 0 {
                return Ok(());
            }
            let policy = started.start_session(&session)?;
            started.sessions.lock().insert(ev.agent_id.clone(), policy);
            Ok(())
        })?;
        let ended = engine.clone();
        ctx.on::<AgentDisposed>(move |ev| {
            ended.sessions.lock().remove(&ev.agent_id);
            Ok(())
        })?;
        ctx.provide::<dyn Approvals>(engine)?;
        Ok(())
    }
}

/// A one-shot escalation the model asked for.
struct Escalation {
    mode: SandboxMode,
    justification: String,
}

enum Asked {
    Allowed,
    Denied(String),
}

/// How the wait for an answer ended.
enum Waited {
    Answered(ApprovalAnswer),
    TimedOut,
    /// The call's turn was interrupted first.
    Interrupted,
}

/// Why a question closed when its turn was interrupted (logged, and in the tool result).
const INTERRUPTED: &str = "the turn was interrupted";

struct Engine {
    ctx: Ctx,
    /// The configured policy: sessions without a pinned one get it.
    policy: ApprovalPolicy,
    /// The policy of each started session (by id), until its agent is disposed.
    sessions: Mutex<HashMap<String, ApprovalPolicy>>,
    store: Option<RuleStore>,
    answer_timeout: Duration,
}

impl Engine {
    fn sandbox(&self) -> Option<Arc<dyn Sandbox>> {
        self.ctx.get::<dyn Sandbox>()
    }

    /// The policy of `session` as it starts: the one its log pins, else the configured one
    /// (logged when the log's last policy differs).
    fn start_session(&self, session: &Session) -> Result<ApprovalPolicy, BoxError> {
        let last = session
            .events()
            .iter()
            .rev()
            .find_map(|e| e.plugin::<ApprovalPolicyEvent>().and_then(Result::ok));
        if let Some(p) = last.as_ref().and_then(|p| self.pinned(p)) {
            return Ok(p);
        }
        let name = self.policy.wire_name();
        if last.map(|p| p.policy).as_ref() != Some(&name) {
            let event = ApprovalPolicyEvent {
                policy: name,
                source: None,
            };
            session.append(NewEvent::plugin(&event)?)?;
        }
        Ok(self.policy)
    }

    /// The policy a logged `approval/policy` pins for its session (`None`: not pinned).
    fn pinned(&self, event: &ApprovalPolicyEvent) -> Option<ApprovalPolicy> {
        if !policy_is_pinned(event) {
            return None;
        }
        let policy = ApprovalPolicy::from_wire(&event.policy);
        if policy.is_none() {
            tracing::warn!(
                policy = %event.policy,
                "approval: the session pins a policy this build does not know; using the \
                 configured one"
            );
        }
        policy
    }

    /// The policy of `call`'s session: set at its start; for a session started elsewhere (a
    /// sub-agent child), the one its log pins (`never` by delegation), else the configured one.
    fn policy_for(&self, call: &CallInfo) -> ApprovalPolicy {
        if let Some(p) = self.sessions.lock().get(&call.session_id) {
            return *p;
        }
        self.ctx
            .get::<dyn Agents>()
            .and_then(|a| a.get(&call.session_id))
            .and_then(|agent| {
                agent.session().with_log(|log| {
                    log.events()
                        .iter()
                        .rev()
                        .filter(|e| e.kind() == ApprovalPolicyEvent::TYPE)
                        .find_map(|e| e.plugin::<ApprovalPolicyEvent>().and_then(Result::ok))
                        .and_then(|p| self.pinned(&p))
                })
            })
            .unwrap_or(self.policy)
    }

    /// `Some(decision)` to stop the call here; `None` lets it through.
    async fn pre_execute(&self, call: &CallInfo) -> Option<PreDecision> {
        let escalation = match escalation(&call.args) {
            Ok(e) => e,
            Err(e) => {
                return Some(PreDecision::Deny {
                    reason: e.to_string(),
                });
            }
        };
        if let Some(esc) = escalation {
            let current = self
                .sandbox()
                .map(|s| s.policy(&call.session_id, &call.cwd, None).mode);
            let widens = current.is_some_and(|m| m.can_escalate_to(esc.mode));
            if widens {
                if self.policy_for(call) == ApprovalPolicy::Never {
                    return Some(PreDecision::Deny {
                        reason: format!(
                            "running \"{}\" under {} needs approval, and the approval policy is \
                             never: it was not run. Work within the sandbox instead.",
                            call.name, esc.mode
                        ),
                    });
                }
                let reason = format!("escalate sandbox to {}: {}", esc.mode, esc.justification);
                return match self.ask(call, reason, Some(esc.mode)).await {
                    Asked::Allowed => {
                        if let Some(s) = self.sandbox() {
                            s.grant_once(&call.call_id, esc.mode);
                        }
                        None
                    }
                    Asked::Denied(reason) => Some(PreDecision::Deny { reason }),
                };
            }
        }
        if self.policy_for(call) != ApprovalPolicy::Untrusted
            // The tool says it only reads (`Tool::read_only`).
            || call.read_only
        {
            return None;
        }
        if self.rules_allow(call) {
            return None;
        }
        let reason = match crate::rules::url_host(&call.args) {
            Some(host) if NETWORK_TOOLS.contains(&call.name.as_str()) => format!(
                "tool \"{}\" reaches the network (host {host}) and the approval policy is \
                 untrusted",
                call.name
            ),
            _ => format!(
                "tool \"{}\" is not read-only and the approval policy is untrusted",
                call.name
            ),
        };
        match self.ask(call, reason, None).await {
            Asked::Allowed => None,
            Asked::Denied(reason) => Some(PreDecision::Deny { reason }),
        }
    }

    fn rules_allow(&self, call: &CallInfo) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        match store.rules(&call.cwd) {
            Ok(rules) => RuleMatcher::new(&rules).allows(&call.name, &call.args, &call.cwd),
            Err(error) => {
                tracing::warn!(%error, "permission rules unreadable; asking instead");
                false
            }
        }
    }

    /// `on-failure`: a call the sandbox denied is asked about once and, when allowed, run again
    /// outside the sandbox.
    async fn after_failure(
        &self,
        input: ExecuteInput,
        out: Result<ToolOutput, ToolError>,
    ) -> Result<ToolOutput, ToolError> {
        let denied = match &out {
            Err(e) => e.code == FS_SANDBOX_DENIED,
            Ok(o) => o
                .meta
                .as_ref()
                .and_then(|m| m.get("sandboxDenied"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        if !denied || input.ctx.cancel_token().is_cancelled() {
            return out;
        }
        let call = input.call.clone();
        let reason = format!(
            "the sandbox denied tool \"{}\"; run it again without the sandbox ({})",
            call.name,
            SandboxMode::DangerFullAccess
        );
        match self
            .ask(&call, reason, Some(SandboxMode::DangerFullAccess))
            .await
        {
            Asked::Allowed => {
                let Some(tool) = self
                    .ctx
                    .get::<dyn Tools>()
                    .and_then(|t| t.lookup(call.scope.as_ref(), &call.name))
                else {
                    return out;
                };
                if let Some(s) = self.sandbox() {
                    s.grant_once(&call.call_id, SandboxMode::DangerFullAccess);
                }
                tool.execute(input.ctx, Value::clone(&call.args)).await
            }
            Asked::Denied(_) => out,
        }
    }

    /// Asks the attached answerer, logging the question and the answer.
    async fn ask(&self, call: &CallInfo, reason: String, escalation: Option<SandboxMode>) -> Asked {
        let id = format!("approval-{}", uuid::Uuid::now_v7());
        let session = self
            .ctx
            .get::<dyn Agents>()
            .and_then(|a| a.get(&call.session_id))
            .map(|a| a.session());
        let log = |event: NewEvent| {
            if let Some(s) = &session
                && let Err(error) = s.append(event)
            {
                tracing::warn!(%error, "approval: cannot log the decision");
            }
        };
        if let Ok(e) = NewEvent::plugin(&ApprovalAsked {
            id: id.clone(),
            tool_name: call.name.clone(),
            call_id: Some(call.call_id.clone()),
            reason: Some(reason.clone()),
        }) {
            log(e);
        }
        let name = &call.name;
        let (outcome, always, user_reason, result) = match self.ctx.get::<dyn ApprovalAnswerer>() {
            None => (
                DecidedOutcome::Unavailable,
                false,
                None,
                Asked::Denied(format!(
                    "tool \"{name}\" requires approval ({reason}), but no approval channel is \
                     available: it was not run"
                )),
            ),
            Some(answerer) => {
                let request = ApprovalRequest {
                    id: id.clone(),
                    session_id: call.session_id.clone(),
                    call_id: call.call_id.clone(),
                    tool_name: call.name.clone(),
                    arguments: Value::clone(&call.args),
                    reason: reason.clone(),
                    escalation,
                };
                // The turn's interruption ends the wait, whichever answerer holds the
                // question: dropping its future closes the question on its side.
                let answer = tokio::select! {
                    biased;
                    () = call.cancel.cancelled() => Waited::Interrupted,
                    answer = tokio::time::timeout(self.answer_timeout, answerer.answer(&request)) => {
                        answer.map_or(Waited::TimedOut, Waited::Answered)
                    }
                };
                match answer {
                    Waited::Interrupted => (
                        DecidedOutcome::Cancelled,
                        false,
                        Some(INTERRUPTED.to_owned()),
                        Asked::Denied(format!(
                            "approval for tool \"{name}\" was cancelled: {INTERRUPTED}; it was not \
                             run"
                        )),
                    ),
                    Waited::TimedOut => {
                        let secs = self.answer_timeout.as_secs_f64();
                        let why = format!("no answer within {secs}s");
                        (
                            DecidedOutcome::Cancelled,
                            false,
                            Some(why.clone()),
                            Asked::Denied(format!(
                                "approval for tool \"{name}\" got {why}; it was not run"
                            )),
                        )
                    }
                    Waited::Answered(ApprovalAnswer::AllowOnce) => {
                        (DecidedOutcome::AllowedOnce, false, None, Asked::Allowed)
                    }
                    Waited::Answered(ApprovalAnswer::AllowAlways) => {
                        let stored = escalation.is_none() && self.store_rules(call);
                        (DecidedOutcome::AllowedOnce, stored, None, Asked::Allowed)
                    }
                    Waited::Answered(ApprovalAnswer::Deny { reason }) => {
                        let why = reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default();
                        (
                            DecidedOutcome::Rejected,
                            false,
                            reason.clone(),
                            Asked::Denied(format!(
                                "the user rejected tool \"{name}\"{why}; it was not run"
                            )),
                        )
                    }
                    Waited::Answered(ApprovalAnswer::Cancelled) => (
                        DecidedOutcome::Cancelled,
                        false,
                        None,
                        Asked::Denied(format!(
                            "approval for tool \"{name}\" was cancelled; it was not run"
                        )),
                    ),
                }
            }
        };
        if let Ok(e) = NewEvent::plugin(&ApprovalDecided {
            id,
            outcome,
            always,
            reason: user_reason,
        }) {
            log(e);
        }
        result
    }

    fn store_rules(&self, call: &CallInfo) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        let rules = rules_for(&call.name, &call.args, &call.cwd);
        let mut stored = !rules.is_empty();
        for rule in rules {
            if let Err(error) = store.add(&call.cwd, rule) {
                tracing::warn!(%error, "approval: cannot store the allow-always rule");
                stored = false;
            }
        }
        stored
    }
}

impl Approvals for Engine {
    fn ask<'a>(
        &'a self,
        call: &'a CallInfo,
        reason: Option<&'a str>,
    ) -> BoxFuture<'a, ApprovalOutcome> {
        Box::pin(async move {
            let reason =
                reason.map_or_else(|| format!("tool \"{}\" asks", call.name), str::to_owned);
            match Engine::ask(self, call, reason, None).await {
                Asked::Allowed => ApprovalOutcome::AllowedOnce,
                Asked::Denied(_) if call.cancel.is_cancelled() => ApprovalOutcome::Cancelled,
                Asked::Denied(_) => ApprovalOutcome::Rejected,
            }
        })
    }
}

/// Why a call's escalation arguments are refused (the text the model sees).
#[derive(Debug, thiserror::Error)]
enum EscalationArgsError {
    /// `sandbox_permissions` names no sandbox mode.
    #[error("invalid sandbox_permissions: {0}")]
    Mode(#[source] dsh_sandbox::ParseModeError),
    /// One of the two arguments without the other.
    #[error("invalid arguments: sandbox_permissions and justification must be given together")]
    Unpaired,
}

/// The `sandbox_permissions` + `justification` arguments (together or neither).
fn escalation(args: &Value) -> Result<Option<Escalation>, EscalationArgsError> {
    let mode = args.get("sandbox_permissions").and_then(Value::as_str);
    let justification = args
        .get("justification")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|j| !j.is_empty());
    match (mode, justification) {
        (None, None) => Ok(None),
        (Some(mode), Some(justification)) => {
            let mode = mode
                .parse::<SandboxMode>()
                .map_err(EscalationArgsError::Mode)?;
            Ok(Some(Escalation {
                mode,
                justification: justification.to_owned(),
            }))
        }
        _ => Err(EscalationArgsError::Unpaired),
    }
}
