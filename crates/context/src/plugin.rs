//! The `context` plugin: instructions, the skill catalog and tool, `/name` skills and custom
//! commands, and the `workspace` runtime-context section — all on existing seams
//! (`agent/pre-step`, `tools/result`, the `Tools` and `SystemPrompt` services).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::events::AgentDisposed;
use dsh_agent::hooks::{PreStep, PreStepDecision, PreStepInput};
use dsh_kernel::{BoxError, Ctx, Dep, Next, Plugin};
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_system_prompt::{Section, SystemPrompt};
use dsh_tools::{FnTool, ToolError, ToolOutput, Tools, ToolsResultEvent};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::instructions::{self, InstructionsConfig, Known, Scope};
use crate::project::ProjectPaths;
use crate::{commands, skills};

fn yes() -> bool {
    true
}

/// Config of [`ContextPlugin`].
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextConfig {
    /// Inject AGENTS.md / CLAUDE.md instructions (default true).
    #[serde(default = "yes")]
    pub load_instructions: bool,
    /// How instruction files are found and bounded.
    #[serde(default)]
    pub instructions: InstructionsConfig,
    /// Offer skills: the catalog, the `skill` tool and `/name` (default true).
    #[serde(default = "yes")]
    pub load_skills: bool,
    /// Extra skill roots (rank 300), relative to the project root unless absolute.
    #[serde(default)]
    pub custom_skill_dirs: Vec<PathBuf>,
    /// Expand custom `/name` commands in prompts (default true).
    #[serde(default = "yes")]
    pub load_commands: bool,
    /// Tell the model its working directory and project root as runtime context (default true).
    #[serde(default = "yes")]
    pub workspace_context: bool,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            load_instructions: true,
            instructions: InstructionsConfig::default(),
            load_skills: true,
            custom_skill_dirs: Vec::new(),
            load_commands: true,
            workspace_context: true,
        }
    }
}

/// Name of the runtime-context section with the working directory.
pub const WORKSPACE_SECTION: &str = "workspace";
/// Name of the skill tool.
pub const SKILL_TOOL: &str = "skill";
/// The skill tool's description.
pub const SKILL_DESCRIPTION: &str = "Load a skill listed in available_skills: its instructions \
and the paths of its resource files. Load one before acting on a task matching its description.";

/// What one agent's model has seen, tracked between steps.
#[derive(Default)]
struct AgentState {
    /// Whether `known` and `catalog` were rebuilt from the log in this turn.
    turn: u64,
    known: Known,
    catalog: Option<String>,
    /// Instruction files the agent's tools touched (beyond the root-to-cwd chain).
    tracked: BTreeSet<PathBuf>,
    /// A touched file not yet re-checked.
    dirty: bool,
}

struct Inner {
    config: ContextConfig,
    agents: Mutex<HashMap<String, AgentState>>,
}

fn user_message(text: String, source: MessageSource) -> Message {
    Message::new(
        format!("m-{}", uuid::Uuid::now_v7()),
        Role::User,
        vec![ContentBlock::text(text)],
        source,
    )
}

impl Inner {
    fn paths(&self, cwd: &std::path::Path) -> ProjectPaths {
        ProjectPaths::discover(cwd, &self.config.instructions.project_root_markers)
    }

    /// Rebuilds what the model has seen from the current history.
    fn rebuild(&self, state: &mut AgentState, history: &[Arc<Message>]) {
        state.known = Known::new();
        state.catalog = None;
        for m in history.iter().filter(|m| m.role == Role::User) {
            match m.source.kind.as_str() {
                instructions::SOURCE_KIND => instructions::fold_source(&mut state.known, &m.source),
                skills::CATALOG_KIND => state.catalog = Some(m.text()),
                _ => {}
            }
        }
        let known: Vec<PathBuf> = state.known.keys().cloned().collect();
        state.tracked.extend(known);
    }

    fn instruction_injection(
        &self,
        state: &mut AgentState,
        paths: &ProjectPaths,
        first_step: bool,
    ) -> Option<instructions::Injection> {
        let cfg = &self.config.instructions;
        let mut found = instructions::discover(paths, cfg);
        for p in &state.tracked {
            if found.files.iter().any(|f| &f.path == p)
                || found.skipped.iter().any(|s| &s.path == p)
            {
                continue;
            }
            let scope = state
                .known
                .get(p)
                .map(|(s, _)| *s)
                .unwrap_or(Scope::Project);
            match instructions::load_file(p, scope, cfg) {
                Ok(Some(f)) if !f.content.is_empty() => found.files.push(f),
                Ok(_) => {}
                Err(reason) => {
                    tracing::warn!(path = %p.display(), %reason, "instruction file skipped")
                }
            }
        }
        for s in &found.skipped {
            tracing::debug!(path = %s.path.display(), reason = %s.reason, "instruction file skipped");
        }
        let injection = if state.known.is_empty() && first_step {
            instructions::baseline(&found.files, cfg.max_bytes)
        } else {
            instructions::notice(
                &instructions::diff(&state.known, &found.files),
                cfg.max_bytes,
            )
        };
        if let Some(i) = &injection {
            instructions::fold_source(&mut state.known, &i.source);
        }
        injection
    }

    fn catalog_injection(&self, state: &mut AgentState, set: &skills::SkillSet) -> Option<Message> {
        let (text, names) = match skills::catalog(set) {
            Some(c) => c,
            None if state.catalog.is_some() => (
                "<system-reminder>\nNo skills are available any more; earlier skill lists no \
                 longer apply.\n</system-reminder>"
                    .to_owned(),
                Vec::new(),
            ),
            None => return None,
        };
        if state.catalog.as_deref() == Some(text.as_str()) {
            return None;
        }
        let update = state.catalog.is_some();
        state.catalog = Some(text.clone());
        let mut source = MessageSource::new(skills::CATALOG_KIND)
            .with("form", Value::from("catalog"))
            .with("entries", Value::from(names));
        if update {
            source = source.with("update", Value::Bool(true));
        }
        Some(user_message(text, source))
    }

    /// Expands a `/command` prompt in place and collects `/skill` invocations.
    fn prompt_features(
        &self,
        batch: &mut [Message],
        paths: &ProjectPaths,
        set: Option<&skills::SkillSet>,
    ) -> Vec<Message> {
        let commands = self
            .config
            .load_commands
            .then(|| commands::discover(&commands::folders(paths)));
        let mut extra = Vec::new();
        for m in batch
            .iter_mut()
            .filter(|m| m.role == Role::User && m.source.kind == "user")
        {
            let text = m.text();
            if let (Some(cmds), Some((name, args))) = (&commands, commands::parse_invocation(&text))
                && let Some(cmd) = cmds.get(name)
            {
                tracing::info!(command = %cmd.name, file = %cmd.file.display(), "custom command expanded");
                m.content = vec![ContentBlock::text(cmd.expand(args))];
                m.source
                    .extra
                    .insert("command".into(), Value::from(cmd.name.clone()));
                continue;
            }
            let Some(set) = set else { continue };
            for token in skills::slash_tokens(&text) {
                let Some(skill) = set.get(&token).filter(|s| s.user_invocable) else {
                    continue;
                };
                match skills::content(skill) {
                    Ok(block) => extra.push(user_message(
                        block,
                        MessageSource::new(skills::INVOCATION_KIND)
                            .with("name", Value::from(token)),
                    )),
                    Err(e) => tracing::warn!(skill = %skill.name, "skill invocation failed: {e}"),
                }
            }
        }
        extra
    }

    fn pre_step(&self, input: &mut PreStepInput) {
        if input.batch.is_empty() && input.step == 1 {
            return;
        }
        let agent = &input.agent;
        let mut map = self.agents.lock();
        let state = map.entry(agent.id().to_owned()).or_default();
        let first = input.step == 1;
        if first || state.turn != input.turn {
            state.turn = input.turn;
            self.rebuild(state, &agent.session().derive_messages());
        }
        // The project's paths (a walk up the directories for a root marker) only when this
        // step reads them: the first step, or instructions to check again. Most steps do not.
        let instructions_due = self.config.load_instructions && state.dirty;
        if !first && !instructions_due {
            return;
        }
        let paths = self.paths(&agent.options().cwd);
        let mut add: Vec<Message> = Vec::new();
        let set = (self.config.load_skills && first)
            .then(|| skills::discover(&skills::roots(&paths, &self.config.custom_skill_dirs)));
        if first {
            add.extend(self.prompt_features(&mut input.batch, &paths, set.as_ref()));
        }
        if self.config.load_instructions && (first || state.dirty) {
            state.dirty = false;
            if let Some(i) = self.instruction_injection(state, &paths, first) {
                add.insert(0, user_message(i.text, i.source));
            }
        }
        if let Some(set) = &set {
            for p in &set.problems {
                tracing::warn!(file = %p.file.display(), reason = %p.reason, "skill skipped");
            }
            if let Some(m) = self.catalog_injection(state, set) {
                add.insert(
                    usize::from(!add.is_empty() && add[0].source.kind == instructions::SOURCE_KIND),
                    m,
                );
            }
        }
        if add.is_empty() {
            return;
        }
        // After the claimed messages, before a trailing runtime-context snapshot.
        let at = match input.batch.last() {
            Some(m) if m.source.kind == dsh_system_prompt::runtime_context::SOURCE_KIND => {
                input.batch.len() - 1
            }
            _ => input.batch.len(),
        };
        input.batch.splice(at..at, add);
    }

    fn tool_result(&self, event: &ToolsResultEvent) {
        let call = &event.call;
        if event.result.is_error || !matches!(call.name.as_str(), "read" | "write" | "edit") {
            return;
        }
        let Some(p) = call.args.get("file_path").and_then(Value::as_str) else {
            return;
        };
        let path = call.cwd.join(p);
        if !self.config.instructions.is_candidate(&path) {
            return;
        }
        let path = path.canonicalize().unwrap_or(path);
        let mut map = self.agents.lock();
        let state = map.entry(call.session_id.clone()).or_default();
        state.tracked.insert(path);
        state.dirty = true;
    }
}

fn skill_tool(inner: Arc<Inner>) -> FnTool {
    let params = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Its name in available_skills."}},
        "required": ["name"]
    });
    FnTool::new(SKILL_TOOL, SKILL_DESCRIPTION, params, move |ctx, args| {
        let inner = inner.clone();
        async move {
            let args: SkillArgs = serde_json::from_value(args).unwrap_or_default();
            let name = args.name.as_str();
            let code = dsh_tools::ToolErrorCode::tool_defined("SKILL_UNAVAILABLE");
            if !skills::valid_name(name) {
                return Err(ToolError::new(
                    code,
                    format!("invalid skill name \"{name}\""),
                ));
            }
            let paths = inner.paths(ctx.cwd());
            let set = skills::discover(&skills::roots(&paths, &inner.config.custom_skill_dirs));
            let Some(skill) = set.get(name) else {
                return Err(ToolError::new(
                    code,
                    format!("skill \"{name}\" is unknown or no longer available"),
                ));
            };
            if !skill.model_invocable {
                return Err(ToolError::new(
                    code,
                    format!("skill \"{name}\" is not available for model invocation"),
                ));
            }
            skills::content(skill)
                .map(ToolOutput::text)
                .map_err(|e| ToolError::new(code, e.to_string()))
        }
    })
    .parallel_safe()
    .with_display(skill_display)
}

/// The arguments of the skill tool (the schema checked their shape).
#[derive(Default, serde::Deserialize)]
struct SkillArgs {
    #[serde(default)]
    name: String,
}

/// The display of a `skill` call: the skill's name.
fn skill_display(call: &dsh_tools::DisplayInput<'_>) -> dsh_tools::ToolDisplay {
    let mut d = dsh_tools::ToolDisplay::new(dsh_tools::ToolKind::Read, SKILL_TOOL);
    d.subject = call.parse::<SkillArgs>().map(|a| a.name);
    d
}

/// Plugin `context`: project instructions, skills, custom commands and the workspace context.
#[derive(Debug)]
pub struct ContextPlugin;

impl Plugin for ContextPlugin {
    const NAME: &'static str = "context";
    type Config = ContextConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn SystemPrompt>()]
    }

    async fn apply(ctx: Ctx, config: ContextConfig) -> Result<(), BoxError> {
        let inner = Arc::new(Inner {
            config,
            agents: Mutex::new(HashMap::new()),
        });
        if inner.config.workspace_context {
            let prompt = ctx.dep::<dyn SystemPrompt>()?;
            let markers = inner.config.instructions.project_root_markers.clone();
            prompt.runtime_context(
                &ctx,
                Section::computed(WORKSPACE_SECTION, move |cx| {
                    let Some(cwd) = &cx.cwd else {
                        return Ok(String::new());
                    };
                    let paths = ProjectPaths::discover(std::path::Path::new(cwd), &markers);
                    let mut text = format!("Working directory: {cwd}");
                    if paths.root.as_os_str() != std::ffi::OsStr::new(cwd) {
                        text.push_str(&format!("\nProject root: {}", paths.root.display()));
                    }
                    Ok(text)
                })
                .with_order(90)
                .raw(),
            )?;
        }
        if inner.config.load_skills {
            let tools = ctx.dep::<dyn Tools>()?;
            tools.register(&ctx, Arc::new(skill_tool(inner.clone())))?;
        }
        let i = inner.clone();
        ctx.hook::<PreStep, _, _>(move |mut input: PreStepInput, next: Next<PreStep>| {
            let i = i.clone();
            async move {
                if let Err(p) = dsh_kernel::contain_sync(|| i.pre_step(&mut input)) {
                    tracing::error!(agent = %input.agent.id(), "context pre-step failed: {p}");
                }
                let out = next.run(input).await;
                if let PreStepDecision::Reject { .. } = &out {
                    tracing::debug!("a later pre-step listener rejected the turn");
                }
                out
            }
        })?;
        let i = inner.clone();
        ctx.on::<ToolsResultEvent>(move |e| {
            i.tool_result(e);
            Ok(())
        })?;
        let i = inner;
        ctx.on::<AgentDisposed>(move |e| {
            i.agents.lock().remove(&e.agent_id);
            Ok(())
        })?;
        Ok(())
    }
}
