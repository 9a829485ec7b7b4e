//! The `sdk-jsonrpc-server` row's configuration (the row itself, the `Plugin` that makes a
//! composition an SDK profile, is mounted by the composition root: `dsh-cli`'s `sdk_cmd`).

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

impl SdkServerConfig {
    /// Checks the limits (both must be positive).
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.max_line_bytes == 0 || self.max_pending_responses == 0 {
            return Err(InvalidConfig);
        }
        Ok(())
    }
}

/// A configuration with a zero limit.
#[derive(Debug, thiserror::Error)]
#[error("sdk-jsonrpc-server: maxLineBytes and maxPendingResponses must be positive")]
pub struct InvalidConfig;
