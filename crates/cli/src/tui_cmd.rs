//! `dsh [PROMPT]`: the interactive terminal UI (dsh-tui) over a composed harness, through an
//! in-process host (dsh-host); `dsh --attach URL [SESSION]`: the same UI over a `dsh serve`
//! (dsh-serve's remote client).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;
use dsh_agent::AgentOptions;
use dsh_host::{Host, HostOptions};
use dsh_kernel::{Composer, Composition, Kernel};
use dsh_protocol::{Client, SessionOptions, SessionSettings};
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
    /// Run the UI against a `dsh serve` at URL (`http://HOST:PORT` or `unix:/path/to.sock`;
    /// token from `DSH_SERVER_TOKEN`). The positional argument is then the session to attach
    /// to (default: a new session on the server).
    #[arg(long, value_name = "URL", conflicts_with_all = ["resume", "continue_latest"])]
    pub(crate) attach: Option<String>,
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
    if let Some(url) = args.attach.clone() {
        return attach(args, &url).await;
    }
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
    let result = run_local(&kernel, args, cwd).await;
    kernel.dispose().await;
    result
}

/// A host over the composed kernel that asks approval questions through the protocol (unless
/// the composition answers them itself, e.g. `approval-scripted`).
fn host(kernel: &Kernel, defaults: AgentOptions) -> Result<Host, Failure> {
    let options = |answer_approvals| HostOptions {
        defaults: defaults.clone(),
        answer_approvals,
    };
    match Host::new(kernel.root(), options(true)) {
        Ok(h) => Ok(h),
        Err(e) => {
            tracing::warn!("approval questions are not asked in the TUI: {}", e.message);
            Host::new(kernel.root(), options(false)).map_err(|e| Failure::usage(anyhow!("{e}")))
        }
    }
}

async fn run_local(kernel: &Kernel, args: TuiArgs, cwd: PathBuf) -> Result<u8, Failure> {
    let root = kernel.root();
    if root.get::<dyn Sessions>().is_none() {
        return Err(Failure::usage(anyhow!(
            "the composition mounts no `sessions` service"
        )));
    }
    let defaults = AgentOptions {
        provider: Some(args.provider.clone()),
        model: args.model.clone(),
        reasoning_effort: args.effort.map(Into::into),
        max_tokens: None,
        temperature: None,
        cwd: cwd.clone(),
    };
    let host = host(kernel, defaults)?;
    let mut open_picker = false;
    let target = match (&args.resume, args.continue_latest) {
        (Some(id), _) if !id.is_empty() => dsh_tui::Target::Resume(id.clone()),
        (Some(_), _) => {
            open_picker = true;
            dsh_tui::Target::New
        }
        (None, true) => {
            dsh_tui::Target::Resume(latest_for(&*host.client(), &cwd.to_string_lossy()).await?)
        }
        (None, false) => dsh_tui::Target::New,
    };
    let opts = TuiRun {
        target,
        new_session: session_options(&args, Some(&cwd)),
        close_on_leave: true,
        initial_prompt: args.prompt.clone(),
        open_picker,
        project_dir: Some(cwd),
        reopen: Reopen::Resume,
    };
    let result = run_with_client(host.client(), opts).await;
    host.shutdown().await;
    result
}

/// The options of new sessions from the command line.
fn session_options(args: &TuiArgs, cwd: Option<&std::path::Path>) -> SessionOptions {
    SessionOptions {
        cwd: cwd.map(|c| c.display().to_string()),
        settings: SessionSettings {
            route: Some(args.provider.clone()),
            model: args.model.clone(),
            effort: args.effort.map(|e| match e {
                Effort::Off => dsh_protocol::Effort::Off,
                Effort::Low => dsh_protocol::Effort::Low,
                Effort::High => dsh_protocol::Effort::High,
                Effort::Max => dsh_protocol::Effort::Max,
            }),
            ..Default::default()
        },
    }
}

/// `dsh --attach URL [SESSION]`: the UI over a server's remote client.
async fn attach(args: TuiArgs, url: &str) -> Result<u8, Failure> {
    let token = std::env::var("DSH_SERVER_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let client =
        remote_client(url, token).map_err(|e| Failure::usage(anyhow!("--attach {url}: {e}")))?;
    let target = match args.prompt.clone().filter(|s| !s.trim().is_empty()) {
        Some(id) => dsh_tui::Target::Attach(id),
        None => dsh_tui::Target::New,
    };
    // The directory is the server's: passed as given (or this one), checked there.
    let cwd = match &args.cwd {
        Some(d) => Some(d.clone()),
        None => std::env::current_dir().ok(),
    };
    let opts = TuiRun {
        new_session: session_options(&args, cwd.as_deref()),
        target,
        close_on_leave: false,
        initial_prompt: None,
        open_picker: false,
        project_dir: None,
        reopen: Reopen::Attach(url.to_owned()),
    };
    run_with_client(client, opts).await
}

/// The client of the server at `url`: `unix:/path` (the socket's mode is the access control)
/// or `http(s)://…` (with the bearer token).
fn remote_client(
    url: &str,
    token: Option<String>,
) -> Result<Arc<dyn Client>, dsh_serve::RemoteError> {
    let client = match url.strip_prefix("unix:") {
        Some(path) => dsh_serve::RemoteClient::unix(std::path::Path::new(path))?,
        None => dsh_serve::RemoteClient::new(url, token)?,
    };
    Ok(Arc::new(client))
}

/// What to show and how, besides the client.
#[derive(Debug)]
pub(crate) struct TuiRun {
    /// The session shown first.
    pub(crate) target: dsh_tui::Target,
    /// Options of new sessions (the first, and `/new`).
    pub(crate) new_session: SessionOptions,
    /// Close the sessions the UI leaves (an in-process host: yes; a server: no, other clients
    /// may be watching).
    pub(crate) close_on_leave: bool,
    /// A first prompt, sent at once.
    pub(crate) initial_prompt: Option<String>,
    /// Open the session picker at once.
    pub(crate) open_picker: bool,
    /// The project whose files `@` mentions offer (`None`: a remote host's files are not here).
    pub(crate) project_dir: Option<PathBuf>,
    /// How the session the UI leaves is opened again (the hint printed when it quits).
    pub(crate) reopen: Reopen,
}

/// Where the session the UI leaves lives, so the hint printed when it quits opens it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reopen {
    /// In this process, stored on leaving: `dsh --resume ID`.
    Resume,
    /// On the server at this URL, where it goes on: `dsh --attach URL ID`.
    Attach(String),
    /// In the per-user background server, where it goes on: `dsh attach ID`.
    Background,
}

impl Reopen {
    /// The line printed when the UI quits on session `id`.
    pub(crate) fn hint(&self, id: &str) -> String {
        match self {
            Reopen::Resume => format!("session {id} saved · continue with: dsh --resume {id}"),
            Reopen::Attach(url) => format!(
                "session {id} stays on the server {url} · attach again with: dsh --attach {url} {id}"
            ),
            Reopen::Background => format!(
                "session {id} stays in the background server · attach again with: dsh attach {id}"
            ),
        }
    }
}

impl TuiRun {
    /// Attach to session `id` of the per-user background server: drive it, or watch it when
    /// another process holds it (what `dsh attach ID` runs).
    pub(crate) fn attach(id: impl Into<String>) -> Self {
        TuiRun {
            target: dsh_tui::Target::Attach(id.into()),
            new_session: SessionOptions::default(),
            close_on_leave: false,
            initial_prompt: None,
            open_picker: false,
            project_dir: None,
            reopen: Reopen::Background,
        }
    }
}

/// Runs the interactive UI over any protocol client (the in-process host, a server's remote
/// client) and prints where the session is saved. The one entry for every way to open the UI:
/// `dsh`, `dsh --attach URL [SESSION]`, and `dsh attach ID`, which calls
/// `tui_cmd::run_with_client(client, TuiRun::attach(id))` with the per-user server's client.
pub(crate) async fn run_with_client(client: Arc<dyn Client>, run: TuiRun) -> Result<u8, Failure> {
    let history = match (&run.project_dir, &run.new_session.cwd) {
        (Some(d), _) => Some(history_file(d)),
        (None, Some(c)) => Some(history_file(std::path::Path::new(c))),
        (None, None) => None,
    };
    let outcome = dsh_tui::run(dsh_tui::TuiOptions {
        client,
        target: run.target,
        new_session: run.new_session,
        close_on_leave: run.close_on_leave,
        initial_prompt: run.initial_prompt.filter(|p| !p.trim().is_empty()),
        history_file: history,
        theme: dsh_tui::Theme::from_env(),
        open_picker: run.open_picker,
        project_dir: run.project_dir,
        extra_commands: Vec::new(),
    })
    .await
    .map_err(|e| Failure::run(anyhow!(e)))?;
    // Not `println!`: it panics when stdout is gone (the terminal hung up as the TUI ended).
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        run.reopen.hint(&outcome.session_id)
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

#[cfg(test)]
mod tests {
    use super::Reopen;

    #[test]
    fn the_quit_hint_opens_the_session_again_where_it_lives() {
        let id = "session-1";
        assert_eq!(
            Reopen::Resume.hint(id),
            "session session-1 saved · continue with: dsh --resume session-1"
        );
        let attach = Reopen::Attach("unix:/run/s.sock".into()).hint(id);
        assert!(
            attach.ends_with("dsh --attach unix:/run/s.sock session-1"),
            "{attach}"
        );
        assert!(!attach.contains("--resume"), "{attach}");
        let bg = Reopen::Background.hint(id);
        assert!(bg.ends_with("dsh attach session-1"), "{bg}");
        assert!(!bg.contains("--resume"), "{bg}");
    }
}
