//! The `plan-mode` plugin: the [`PlanMode`] service, the guard and the `exit_plan_mode` tool.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::events::AgentSessionStart;
use dsh_agent::{Agent, Agents};
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_plan_mode_api::{PlanAccept, PlanMode, PlanModeError};
use dsh_session::NewEvent;
use dsh_session::feature::PlanModeChange;
use dsh_tools::{CallInfo, Guard, ToolError, Tools, codes};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;

use crate::readonly::bash_is_read_only;
use crate::{ExitPlanModeTool, SOURCE_KIND};

/// Config of the `plan-mode` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanModeConfig {
    /// New sessions start in plan mode, and a resumed one enters it (`dsh exec --plan`).
    #[serde(default)]
    pub start_active: bool,
    /// What `exit_plan_mode` does with the plan.
    #[serde(default)]
    pub accept: PlanAccept,
    /// Tools that run in plan mode (besides `bash` with a read-only command line).
    #[serde(default = "default_read_only")]
    pub read_only_tools: Vec<String>,
}

fn default_read_only() -> Vec<String> {
    [
        "exit_plan_mode",
        "glob",
        "grep",
        "job_list",
        "job_output",
        "list_agents",
        "read",
        "read_image",
        "skill",
        "todo_write",
        "web_fetch",
        "web_search",
        "working_directory",
    ]
    .map(String::from)
    .to_vec()
}

impl Default for PlanModeConfig {
    fn default() -> Self {
        Self {
            start_active: false,
            accept: PlanAccept::Ask,
            read_only_tools: default_read_only(),
        }
    }
}

/// The notice the model gets when the user turns plan mode on or off.
pub(crate) fn notice(active: bool) -> &'static str {
    if active {
        "[plan mode on: only read-only tools run. Investigate, then call exit_plan_mode with \
         your plan; make no changes until it is accepted]"
    } else {
        "[plan mode off: you may make changes now]"
    }
}

pub(crate) struct State {
    config: PlanModeConfig,
    active: Mutex<HashMap<String, bool>>,
}

impl State {
    fn load(&self, agent: &Arc<dyn Agent>) -> bool {
        let session = agent.session();
        let events = session.events();
        events
            .iter()
            .rev()
            .find_map(|e| e.plugin::<PlanModeChange>().and_then(Result::ok))
            .is_some_and(|c| c.active)
    }

    fn refusal(&self, call: &CallInfo) -> Option<String> {
        if call.name == "bash" {
            let line = call
                .args
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("");
            return bash_is_read_only(line).err().map(|why| {
                format!(
                    "plan mode: this bash command is refused because {why}. Only read-only \
                     commands run until your plan is accepted; call exit_plan_mode with the plan"
                )
            });
        }
        if self.config.read_only_tools.contains(&call.name) {
            return None;
        }
        Some(format!(
            "plan mode: `{}` is refused: only read-only tools run until your plan is accepted; \
             call exit_plan_mode with the plan",
            call.name
        ))
    }
}

impl PlanMode for State {
    fn is_active(&self, session_id: &str) -> bool {
        self.active.lock().get(session_id).copied().unwrap_or(false)
    }

    fn set(
        &self,
        agent: &Arc<dyn Agent>,
        active: bool,
        notify: bool,
    ) -> Result<bool, PlanModeError> {
        let was = {
            let map = self.active.lock();
            map.get(agent.id()).copied()
        };
        let was = match was {
            Some(w) => w,
            None => self.load(agent),
        };
        if was == active {
            self.active.lock().insert(agent.id().to_owned(), active);
            return Ok(false);
        }
        agent
            .session()
            .append(NewEvent::plugin(&PlanModeChange { active })?)?;
        self.active.lock().insert(agent.id().to_owned(), active);
        if notify {
            agent.inject(Message::new(
                "",
                Role::User,
                vec![ContentBlock::text(notice(active))],
                MessageSource::new(SOURCE_KIND),
            ))?;
        }
        Ok(true)
    }

    fn accept_policy(&self) -> PlanAccept {
        self.config.accept
    }
}

struct PlanGuard(Arc<State>);

impl Guard for PlanGuard {
    fn check<'a>(&'a self, call: &'a CallInfo) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            if !self.0.is_active(&call.session_id) {
                return Ok(());
            }
            match self.0.refusal(call) {
                None => Ok(()),
                Some(reason) => Err(ToolError::new(codes::TOOL_DENIED, reason)),
            }
        })
    }
}

/// Provides [`PlanMode`], guards every call and registers `exit_plan_mode`.
#[derive(Debug)]
pub struct PlanModePlugin;

impl Plugin for PlanModePlugin {
    const NAME: &'static str = "plan-mode";
    type Config = PlanModeConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn Agents>()]
    }

    async fn apply(ctx: Ctx, config: PlanModeConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let start_active = config.start_active;
        let state = Arc::new(State {
            config,
            active: Mutex::new(HashMap::new()),
        });
        ctx.provide::<dyn PlanMode>(state.clone())?;
        tools.guard(&ctx, Arc::new(PlanGuard(state.clone())))?;
        tools.register(&ctx, Arc::new(ExitPlanModeTool::new(ctx.clone())))?;
        let s = state.clone();
        let c = ctx.clone();
        ctx.on::<AgentSessionStart>(move |e| {
            let Some(agent) = c.get::<dyn Agents>().and_then(|a| a.get(&e.agent_id)) else {
                return Ok(());
            };
            let restored = s.load(&agent);
            s.active.lock().insert(agent.id().to_owned(), restored);
            if start_active && !restored {
                s.set(&agent, true, true)?;
            }
            Ok(())
        })?;
        Ok(())
    }
}
