//! The `sandbox` plugin (provides the service, logs `sandbox/mode`) and the `sandbox-context`
//! plugin (tells the model its mode through the runtime context).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::Agents;
use dsh_agent::events::{AgentDisposed, AgentSessionStart};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin, schemars};
use dsh_sandbox::{NetworkAccess, Sandbox, SandboxMode, SandboxModeEvent, runtime_context_text};
use dsh_session::{NewEvent, Session};
use dsh_system_prompt::{Section, SystemPrompt};
use serde::Deserialize;

use crate::backend::BackendKind;
use crate::service::{LocalSandbox, LocalSandboxOptions, default_launcher, default_supervisor};

/// Order of the `sandbox:policy` runtime-context section (upstream §3.4.2).
pub const CONTEXT_ORDER: i32 = 110;
/// Name of the runtime-context section.
pub const CONTEXT_SECTION: &str = "sandbox:policy";

/// Config of the `sandbox` plugin.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxConfig {
    /// Default mode of new sessions (default `workspace-write`).
    #[serde(default)]
    pub mode: Option<SandboxMode>,
    /// Network access in the restricted modes (default `off`).
    #[serde(default)]
    pub network: Option<NetworkAccess>,
    /// Extra writable roots in `workspace-write` (besides the workspace and the temp dirs).
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// Backends to probe, in order (default `[bwrap, landlock]`). `[]` configures none: every
    /// call in a restricted mode is then refused with `SANDBOX_UNAVAILABLE`.
    #[serde(default)]
    pub backends: Option<Vec<BackendKind>>,
    /// The bubblewrap program (default `bwrap`, looked up in `PATH`).
    #[serde(default)]
    pub bwrap_program: Option<PathBuf>,
    /// The Landlock launcher and its leading arguments (default: this `dsh` binary's
    /// `sandbox landlock-run`).
    #[serde(default)]
    pub landlock_launcher: Option<Vec<PathBuf>>,
    /// The warm sandbox supervisor and its leading arguments (default: this `dsh` binary's
    /// `sandbox serve`); `[]` turns warm sandboxes off (every bash call starts a new one).
    #[serde(default)]
    pub supervisor: Option<Vec<PathBuf>>,
}

impl SandboxConfig {
    /// The options this config describes.
    pub fn options(&self) -> LocalSandboxOptions {
        let defaults = LocalSandboxOptions::default();
        LocalSandboxOptions {
            mode: self.mode.unwrap_or(defaults.mode),
            network: self.network.unwrap_or(defaults.network),
            writable_roots: self.writable_roots.clone(),
            backends: self.backends.clone().unwrap_or(defaults.backends),
            bwrap: self.bwrap_program.clone().unwrap_or(defaults.bwrap),
            landlock_launcher: match &self.landlock_launcher {
                Some(argv) => argv.iter().map(OsString::from).collect(),
                None => default_launcher(),
            },
            supervisor: match &self.supervisor {
                Some(argv) => argv.iter().map(OsString::from).collect(),
                None => default_supervisor(),
            },
        }
    }
}

/// The `sandbox` plugin: probes the backends (in the background: the first confined call
/// waits for the verdict), provides `dyn Sandbox`, and at each session start sets the
/// session's mode: the one its log pins (`sandbox/mode` with `source` `delegation` or
/// `session`: a parent's, or one chosen for the session when it was opened), else the
/// configured mode, logged when it differs from the log's last one. A disposed agent's mode is
/// forgotten.
#[derive(Debug)]
pub struct SandboxPlugin;

impl Plugin for SandboxPlugin {
    const NAME: &'static str = "sandbox";
    type Config = SandboxConfig;

    async fn apply(ctx: Ctx, config: SandboxConfig) -> Result<(), BoxError> {
        let options = config.options();
        let sandbox = LocalSandbox::probe_in_background(options);
        let mode = sandbox.options().mode;
        let sandbox: Arc<dyn Sandbox> = Arc::new(sandbox);
        ctx.provide::<dyn Sandbox>(sandbox.clone())?;
        let lookup = ctx.clone();
        let started = sandbox.clone();
        ctx.on::<AgentSessionStart>(move |ev| {
            let Some(agent) = lookup.get::<dyn Agents>().and_then(|a| a.get(&ev.agent_id)) else {
                return Ok(());
            };
            let mode = session_mode(&agent.session(), mode)?;
            started.set_session_mode(&ev.agent_id, mode);
            Ok(())
        })?;
        ctx.on::<AgentDisposed>(move |ev| {
            sandbox.forget_session(&ev.agent_id);
            Ok(())
        })?;
        Ok(())
    }
}

/// The mode of `session` as it starts: the one its log pins, else `configured` (logged when the
/// log's last mode differs).
fn session_mode(session: &Session, configured: SandboxMode) -> Result<SandboxMode, BoxError> {
    let logged = session
        .events()
        .iter()
        .rev()
        .find_map(|e| e.plugin::<SandboxModeEvent>().and_then(Result::ok));
    match logged {
        Some(e) if e.is_pinned() => Ok(e.mode),
        Some(e) if e.mode == configured => Ok(configured),
        _ => {
            let event = SandboxModeEvent {
                mode: configured,
                source: None,
            };
            session.append(NewEvent::plugin(&event)?)?;
            Ok(configured)
        }
    }
}

/// The `sandbox-context` plugin: the `sandbox:policy` runtime-context section (order 110).
/// Its text changes only with the mode, the network setting or the workspace, so the
/// snapshot is re-sent only then and the prefix cache holds.
#[derive(Debug)]
pub struct SandboxContextPlugin;

impl Plugin for SandboxContextPlugin {
    const NAME: &'static str = "sandbox-context";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Sandbox>(), Dep::on::<dyn SystemPrompt>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let sandbox = ctx.dep::<dyn Sandbox>()?;
        let prompt = ctx.dep::<dyn SystemPrompt>()?;
        let section = Section::computed(CONTEXT_SECTION, move |assembly| {
            let cwd = assembly.cwd.as_deref().unwrap_or("/");
            let session = assembly.agent_id.as_deref().unwrap_or("");
            Ok(runtime_context_text(&sandbox.policy(
                session,
                Path::new(cwd),
                None,
            )))
        })
        .with_order(CONTEXT_ORDER)
        .raw();
        prompt.runtime_context(&ctx, section)?;
        Ok(())
    }
}
