//! `dsh [PROMPT]`: the interactive terminal UI (dsh-tui) over a composed harness.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;
use dsh_agent::{AgentOptions, Agents};
use dsh_kernel::{Composer, Composition, Kernel};
use dsh_session::Sessions;

use crate::compose::{compose, registry};
use crate::exec::{latest_for, working_dir};
use crate::{ComposeArgs, Effort, Failure};

/// Arguments of the interactive UI (the top-level `dsh` without a subcommand).
#[derive(Debug, Args, Default)]
pub(crate) struct TuiArgs {
    /// A first prompt, sent at once.
    #[arg(value_name = "PROMPT")]
    pub(crate) prompt: Option<String>,
    /// Model id (default: the provider's default model).
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,
    /// Provider route.
    #[arg(long, value_name = "P", default_value = "deepseek-official")]
    pub(crate) provider: String,
    /// Reasoning effort.
    #[arg(long, value_enum)]
    pub(crate) effort: Option<Effort>,
    /// Working directory of the session (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Continue a stored session; without an ID, pick one.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "",
          conflicts_with = "continue_latest")]
    pub(crate) resume: Option<String>,
    /// Continue the latest session of the working directory.
    #[arg(long = "continue")]
    pub(crate) continue_latest: bool,
    #[command(flatten)]
    pub(crate) compose: ComposeArgs,
    #[command(flatten)]
    pub(crate) sandbox: crate::sandbox_args::SandboxArgs,
}

/// `$DSH_HOME/history/<hash of cwd>.jsonl`: the composer history of one project.
fn history_file(cwd: &std::path::Path) -> PathBuf {
    // FNV-1a: stable across runs and builds (std's hasher is not).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cwd.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    crate::home::dsh_home()
        .join("history")
        .join(format!("{h:016x}.jsonl"))
}

/// Logs go to `$DSH_HOME/tui.log` (only when `DSH_LOG` is set): stderr is the screen.
fn init_file_logging() {
    use tracing_subscriber::EnvFilter;
    let Ok(filter) = EnvFilter::try_from_env("DSH_LOG") else {
        return;
    };
    let path = crate::home::dsh_home().join("tui.log");
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .try_init();
}

/// Runs the TUI.
pub(crate) async fn run(args: TuiArgs) -> Result<u8, Failure> {
    init_file_logging();
    if let Some(id) = args.resume.as_deref().filter(|id| !id.is_empty()) {
        // As `dsh exec --resume`: the log is read while the composition starts.
        dsh_session_jsonl::prefetch::start(dsh_session_jsonl::default_root(), id);
    }
    let cwd = working_dir(args.cwd.as_ref())?;
    let registry = registry();
    // Command-line settings applied over every composition (also on live reloads).
    let sandbox = args.sandbox.clone();
    let extra: Arc<dyn Fn(&mut Composition) + Send + Sync> =
        Arc::new(move |c: &mut Composition| {
            sandbox.apply(c);
            titles_from_the_model(c);
        });
    let mut composition = compose(&args.compose, None, &registry)?;
    extra(&mut composition);
    let kernel = Kernel::new(registry.clone());
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
    }
    let _watcher = crate::watch::watch(
        crate::home::user_file(),
        args.compose.clone(),
        extra,
        registry,
        composer.clone(),
        composition,
    );
    let result = run_tui(&kernel, args, cwd).await;
    kernel.dispose().await;
    result
}

async fn run_tui(kernel: &Kernel, args: TuiArgs, cwd: PathBuf) -> Result<u8, Failure> {
    let root = kernel.root();
    let agents = root
        .get::<dyn Agents>()
        .ok_or_else(|| Failure::usage(anyhow!("the composition mounts no `agents` service")))?;
    let sessions = root
        .get::<dyn Sessions>()
        .ok_or_else(|| Failure::usage(anyhow!("the composition mounts no `sessions` service")))?;
    let options = AgentOptions {
        provider: Some(args.provider.clone()),
        model: args.model.clone(),
        reasoning_effort: args.effort.map(Into::into),
        max_tokens: None,
        temperature: None,
        cwd: cwd.clone(),
    };
    let mut open_picker = false;
    let resume_id = match (&args.resume, args.continue_latest) {
        (Some(id), _) if !id.is_empty() => Some(id.clone()),
        (Some(_), _) => {
            open_picker = true;
            None
        }
        (None, true) => Some(latest_for(sessions.as_ref(), &cwd.to_string_lossy())?),
        (None, false) => None,
    };
    let agent = crate::exec::open_agent(agents.as_ref(), &root, resume_id, None, options).await?;
    // The write path is tested before any token is spent (as `dsh exec` does).
    if let Err(e) = agent.session().write_through().await {
        let id = agent.id().to_owned();
        agent.dispose().await;
        return Err(Failure::run(anyhow!(
            "cannot write session {id}: {e} (nothing was sent to the model)"
        )));
    }
    // Custom commands and user-invocable skills, for completion (the `context` plugin expands
    // them when they are sent).
    let context = dsh_context::ContextConfig::default();
    let extra_commands = dsh_context::report::load(
        dsh_context::ProjectPaths::discover(&cwd, &context.instructions.project_root_markers),
        &context.instructions,
        &context.custom_skill_dirs,
    )
    .slash_commands();
    let outcome = dsh_tui::run(dsh_tui::TuiOptions {
        root: root.clone(),
        agent,
        initial_prompt: args.prompt.filter(|p| !p.trim().is_empty()),
        history_file: Some(history_file(&cwd)),
        theme: dsh_tui::Theme::from_env(),
        open_picker,
        project_dir: Some(cwd.clone()),
        extra_commands,
    })
    .await
    .map_err(|e| Failure::run(anyhow!(e)))?;
    println!(
        "session {id} saved · continue with: dsh --resume {id}",
        id = outcome.session_id
    );
    Ok(0)
}

/// Interactive sessions get a model-made title unless the user configured `llm` themselves.
fn titles_from_the_model(c: &mut Composition) {
    for r in c.rows.iter_mut().filter(|r| r.row.name == "session-title") {
        if !r.row.config.is_object() {
            r.row.config = serde_json::Value::Object(Default::default());
        }
        if r.row.config.get("llm").is_none() {
            r.row.config["llm"] = serde_json::Value::Bool(true);
        }
    }
}
