//! `dsh --profile NAME [--patch FILE]...`: the SDK runtime (the original harness's JSON-RPC
//! protocol on stdio, `dsh-sdk-server`), and `--dump-default-config`.
//!
//! Profiles live under `$DSH_HOME/profiles/NAME/`: `cordis.yml` (optional, replaces the
//! built-in base of `sdk`; required for any other name) and the user patch
//! `cordis.patch.yml`. `DSH_HOME` is required: `~/.dsh` is never used implicitly here, as the
//! SDK demands.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use dsh_agent::AgentOptions;
use dsh_host::{Host, HostOptions};
use dsh_kernel::{BoxError, Composer, Composition, Ctx, Kernel, Layer, Plugin, Service};
use dsh_llm::{CallSettings, Llm, ReasoningEffort};
use dsh_protocol::Client;
use dsh_sdk_server::{ConnectError, Connector, Init, SdkServerConfig, ServeEnd, aliases};
use parking_lot::Mutex;

use crate::compose::{headless_preset, registry};
use crate::{ComposeArgs, Failure};

/// The built-in `sdk` profile's layer over the headless preset (`presets/sdk.yaml`, converted
/// to JSON by build.rs).
const SDK_PRESET_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/sdk.json"));

/// Profile options of the top-level command.
#[derive(Debug, Args, Default)]
pub(crate) struct ProfileArgs {
    /// Run a profile: `sdk` serves the SDK runtime protocol on stdio.
    #[arg(long, value_name = "NAME")]
    pub(crate) profile: Option<String>,
    /// With --profile: print the profile's composed configuration and exit.
    #[arg(long, requires = "profile")]
    pub(crate) dump_default_config: bool,
}

/// `$DSH_HOME`, required in profile mode.
fn required_home() -> Result<PathBuf, Failure> {
    match std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h)),
        None => Err(Failure::usage(anyhow!(
            "DSH_HOME must be set for --profile (the SDK runtime never uses ~/.dsh implicitly)"
        ))),
    }
}

fn read_layer(path: &Path) -> Result<Layer, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(anyhow!("cannot read {}: {e}", path.display())))?;
    Layer::parse(path.display().to_string(), &text).map_err(Failure::usage)
}

/// The profile's layers: its base (the profile's `cordis.yml`, else the built-in one), its
/// user patch, then each `--patch`.
pub(crate) fn profile_layers(
    home: &Path,
    name: &str,
    patches: &[PathBuf],
) -> Result<Vec<Layer>, Failure> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Failure::usage(anyhow!("invalid profile name \"{name}\"")));
    }
    let dir = home.join("profiles").join(name);
    let base = dir.join("cordis.yml");
    let mut layers = Vec::new();
    if base.is_file() {
        layers.push(read_layer(&base)?);
    } else if name == "sdk" {
        layers.push(headless_preset()?);
        layers.push(Layer::parse_json("profile:sdk", SDK_PRESET_JSON).map_err(Failure::usage)?);
    } else {
        return Err(Failure::usage(anyhow!(
            "profile \"{name}\" does not exist (built in: sdk; or create {})",
            base.display()
        )));
    }
    let patch = dir.join("cordis.patch.yml");
    if patch.is_file() {
        layers.push(read_layer(&patch)?);
    }
    for p in patches {
        layers.push(read_layer(p)?);
    }
    Ok(layers)
}

/// Runs `dsh --profile NAME`: its own runtime, shut down without waiting for a blocked stdin
/// read once the server is done.
pub(crate) fn main(args: ProfileArgs, compose: ComposeArgs) -> Result<u8, Failure> {
    let Some(name) = args.profile else {
        return Err(Failure::usage(anyhow!("--profile NAME is required")));
    };
    if compose.config.is_some() {
        return Err(Failure::usage(anyhow!(
            "--config does not apply to --profile (use --patch, or the profile's cordis.patch.yml)"
        )));
    }
    let home = required_home()?;
    let registry = registry();
    let layers = profile_layers(&home, &name, &compose.patch)?;
    let composition = Composition::compose(&layers, &registry).map_err(Failure::usage)?;
    if args.dump_default_config {
        return crate::config_cmd::print_composition(&composition);
    }
    crate::init_logging();
    let rt = crate::runtime()?;
    let code = rt.block_on(serve(name, composition));
    // The blocking stdin reader may still wait for a line nobody sends.
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn serve(name: String, composition: Composition) -> Result<u8, Failure> {
    let registry = registry();
    let kernel = Kernel::new(registry);
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
    }
    let root = kernel.root();
    let Some(server) = root.get::<dyn SdkServer>() else {
        kernel.dispose().await;
        return Err(Failure::usage(anyhow!(
            "profile \"{name}\" does not mount the SDK JSON-RPC server (row `sdk-jsonrpc-server`)"
        )));
    };
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = interrupted.clone();
    let stop = async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => tokio::select! {
                    _ = term.recv() => {}
                    r = tokio::signal::ctrl_c() => if r.is_ok() { flag.store(true, std::sync::atomic::Ordering::SeqCst) },
                },
                Err(_) => {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_ok() {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    };
    let connector = Arc::new(SdkConnector {
        root: root.clone(),
        host: Mutex::new(None),
    });
    let end = dsh_sdk_server::serve(
        connector.clone(),
        tokio::io::stdin(),
        tokio::io::stdout(),
        server.config(),
        stop,
    )
    .await;
    let host = connector.host.lock().take();
    if let Some(host) = host {
        host.shutdown().await;
    }
    kernel.dispose().await;
    match end {
        ServeEnd::Stopped if interrupted.load(std::sync::atomic::Ordering::SeqCst) => Ok(130),
        _ => Ok(0),
    }
}

/// The SDK server's `initialize`: the client's route checked against the mounted providers
/// (the original's names mapped onto dsh's), then an in-process host whose new sessions use
/// it. Approvals follow the profile's policy (nobody answers them over this protocol).
struct SdkConnector {
    root: Ctx,
    host: Mutex<Option<Host>>,
}

impl Connector for SdkConnector {
    fn connect(&self, init: Init) -> Result<Arc<dyn Client>, ConnectError> {
        let Some(llm) = self.root.get::<dyn Llm>() else {
            return Err(ConnectError(
                "the composition mounts no `llm` service".into(),
            ));
        };
        let routes = llm.routes();
        let provider = aliases::provider(&init.provider, &routes).ok_or_else(|| {
            ConnectError(format!(
                "no adapter registered for provider \"{}\"",
                init.provider
            ))
        })?;
        // The original's model names are served under dsh's ids (`deepseek-v4-flash` is
        // `deepseek-flash`).
        let model = init
            .model
            .map(|m| aliases::model(&m).map(str::to_owned).unwrap_or(m));
        let effort = init
            .reasoning_effort
            .as_deref()
            .map(ReasoningEffort::from_wire);
        if let Err(e) = llm.prepare_call(&CallSettings {
            provider: provider.clone(),
            model: model.clone(),
            effort: effort.clone(),
            max_tokens: init.max_tokens,
            ..Default::default()
        }) {
            return Err(ConnectError(format!(
                "initialize: {} ({})",
                e.message,
                e.code.as_str()
            )));
        }
        tracing::info!(%provider, ?model, "SDK runtime initialized");
        let host = Host::new(
            self.root.clone(),
            HostOptions {
                defaults: AgentOptions {
                    provider: Some(provider),
                    model,
                    reasoning_effort: effort,
                    max_tokens: init.max_tokens,
                    temperature: None,
                    cwd: init.cwd,
                },
                answer_approvals: false,
            },
        )
        .map_err(|e| ConnectError(e.message))?;
        let client = host.client();
        *self.host.lock() = Some(host);
        Ok(client)
    }
}

/// The mounted SDK server: its configuration (the binary serves stdio with it).
pub(crate) trait SdkServer: Send + Sync + 'static {
    /// The row's configuration.
    fn config(&self) -> SdkServerConfig;
}

impl Service for dyn SdkServer {
    const NAME: &'static str = "sdk-server";
}

struct Mounted(SdkServerConfig);

impl SdkServer for Mounted {
    fn config(&self) -> SdkServerConfig {
        self.0.clone()
    }
}

/// `sdk-jsonrpc-server`: the row that makes a composition an SDK profile; provides the
/// `sdk-server` service with the server's configuration.
pub(crate) struct SdkServerPlugin;

impl Plugin for SdkServerPlugin {
    const NAME: &'static str = "sdk-jsonrpc-server";
    type Config = SdkServerConfig;

    async fn apply(ctx: Ctx, config: SdkServerConfig) -> Result<(), BoxError> {
        config.validate()?;
        let service: Arc<dyn SdkServer> = Arc::new(Mounted(config));
        ctx.provide::<dyn SdkServer>(service)?;
        Ok(())
    }
}
