//! The `sdk-jsonrpc-server` plugin: the row that makes a composition an SDK profile.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Plugin, Service};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Configuration of the SDK server.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SdkServerConfig {
    /// `serverInfo.name` (upstream's wire-stable `deepseek-harness-sdk-runtime`).
    pub server_name: String,
    /// `serverInfo.version`.
    pub server_version: String,
    /// Longest accepted frame in bytes; a longer line is answered with an error and dropped.
    pub max_line_bytes: usize,
    /// Responses queued for a client that is not reading before the server stops reading
    /// requests.
    pub max_pending_responses: usize,
}

impl Default for SdkServerConfig {
    fn default() -> Self {
        Self {
            server_name: "deepseek-harness-sdk-runtime".into(),
            server_version: "0.0.1".into(),
            max_line_bytes: 16 * 1024 * 1024,
            max_pending_responses: 64,
        }
    }
}

/// The mounted SDK server: its configuration (the binary serves stdio with it).
pub trait SdkServer: Send + Sync + 'static {
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

/// Provides the `sdk-server` service.
pub struct SdkServerPlugin;

impl Plugin for SdkServerPlugin {
    const NAME: &'static str = "sdk-jsonrpc-server";
    type Config = SdkServerConfig;

    async fn apply(ctx: Ctx, config: SdkServerConfig) -> Result<(), BoxError> {
        if config.max_line_bytes == 0 || config.max_pending_responses == 0 {
            return Err(
                "sdk-jsonrpc-server: maxLineBytes and maxPendingResponses must be positive".into(),
            );
        }
        let service: Arc<dyn SdkServer> = Arc::new(Mounted(config));
        ctx.provide::<dyn SdkServer>(service)?;
        Ok(())
    }
}
