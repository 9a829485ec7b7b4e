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
use dsh_kernel::{Composer, Composition, Kernel, Layer};
use dsh_sdk_server::{SdkServer, ServeEnd};

use crate::compose::{HEADLESS_PRESET, registry};
use crate::{ComposeArgs, Failure};

/// The built-in `sdk` profile's layer over the headless preset.
const SDK_PRESET: &str = include_str!("../presets/sdk.yaml");

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
        layers.push(Layer::parse("preset:headless", HEADLESS_PRESET).map_err(Failure::usage)?);
        layers.push(Layer::parse("profile:sdk", SDK_PRESET).map_err(Failure::usage)?);
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
    let end = dsh_sdk_server::serve(
        root,
        tokio::io::stdin(),
        tokio::io::stdout(),
        server.config(),
        stop,
    )
    .await;
    kernel.dispose().await;
    match end {
        Ok(ServeEnd::Stopped) if interrupted.load(std::sync::atomic::Ordering::SeqCst) => Ok(130),
        Ok(_) => Ok(0),
        Err(e) => Err(Failure::run(anyhow!(e))),
    }
}
