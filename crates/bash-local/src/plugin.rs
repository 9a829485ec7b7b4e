//! `LocalShellPlugin`: provides [`LocalShell`] as the kernel's `dyn ShellExecutor` service.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Plugin, schemars};
use dsh_shell::ShellExecutor;
use serde::Deserialize;

use crate::executor::{LocalShell, LocalShellOptions};

/// Config of the `bash-local` plugin. Every field is optional; defaults follow the reference.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocalShellConfig {
    /// Shell program (default `bash`, looked up in `PATH`).
    #[serde(default)]
    pub program: Option<PathBuf>,
    /// Milliseconds between SIGTERM and SIGKILL (default 3000).
    #[serde(default)]
    pub kill_grace_ms: Option<u64>,
    /// Milliseconds background processes may hold the output pipes after the command exits
    /// (default 250).
    #[serde(default)]
    pub drain_window_ms: Option<u64>,
    /// Bytes of each stream kept in memory, the tail (default 64000).
    #[serde(default)]
    pub stream_capture_bytes: Option<usize>,
    /// Largest spill file per stream in bytes (default 64 MiB).
    #[serde(default)]
    pub spill_cap_bytes: Option<u64>,
    /// Directory for spill files when a request names none (default: a private temporary
    /// directory removed when the plugin unloads).
    #[serde(default)]
    pub spill_dir: Option<PathBuf>,
    /// Extra environment variable names never passed to commands (case-insensitive), on top
    /// of `DEEPSEEK_API_KEY` and every name containing KEY, PASSWORD, SECRET or TOKEN.
    #[serde(default)]
    pub scrub_env: Vec<String>,
    /// Idle warm sandboxes kept for reuse by confined calls (default 4; 0 starts a new
    /// confinement for every call).
    #[serde(default)]
    pub warm_sandboxes: Option<usize>,
}

impl LocalShellConfig {
    /// The executor options this config describes.
    pub fn options(&self) -> LocalShellOptions {
        let defaults = LocalShellOptions::default();
        LocalShellOptions {
            program: self.program.clone().unwrap_or(defaults.program),
            kill_grace: self
                .kill_grace_ms
                .map(Duration::from_millis)
                .unwrap_or(defaults.kill_grace),
            drain_window: self
                .drain_window_ms
                .map(Duration::from_millis)
                .unwrap_or(defaults.drain_window),
            stream_capture_bytes: self
                .stream_capture_bytes
                .unwrap_or(defaults.stream_capture_bytes),
            spill_cap_bytes: self.spill_cap_bytes.unwrap_or(defaults.spill_cap_bytes),
            spill_dir: self.spill_dir.clone(),
            scrub_env: self.scrub_env.clone(),
            base_env: None,
            warm_sandboxes: self.warm_sandboxes.unwrap_or(defaults.warm_sandboxes),
        }
    }
}

/// The `bash-local` plugin: provides the `shell` service backed by local processes.
#[derive(Debug)]
pub struct LocalShellPlugin;

impl Plugin for LocalShellPlugin {
    const NAME: &'static str = "bash-local";
    type Config = LocalShellConfig;

    async fn apply(ctx: Ctx, config: LocalShellConfig) -> Result<(), BoxError> {
        if config.stream_capture_bytes == Some(0) {
            return Err("streamCaptureBytes must be at least 1".into());
        }
        let shell: Arc<dyn ShellExecutor> = Arc::new(LocalShell::new(config.options()));
        ctx.provide::<dyn ShellExecutor>(shell)?;
        Ok(())
    }
}
