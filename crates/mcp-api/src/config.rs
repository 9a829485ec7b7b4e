//! The plugin row of one MCP server (upstream §4.1), and its checks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How dsh talks to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio,
    /// MCP streamable HTTP at `url`.
    StreamableHttp,
}

impl TransportKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::StreamableHttp => "streamable-http",
        }
    }
}

/// Reconnection after the transport closes: doubling backoff from `initialDelayMs` up to
/// `maxDelayMs`, at most `maxAttempts` attempts; an uptime longer than `maxDelayMs` resets the
/// budget.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReconnectConfig {
    /// Reconnect at all (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// First delay (default 500 ms).
    #[serde(default = "initial_delay")]
    pub initial_delay_ms: u64,
    /// Delay cap (default 30000 ms).
    #[serde(default = "max_delay")]
    pub max_delay_ms: u64,
    /// Attempts before the server's tools are removed (default 10).
    #[serde(default = "max_attempts")]
    pub max_attempts: u32,
}

fn yes() -> bool {
    true
}
fn initial_delay() -> u64 {
    500
}
fn max_delay() -> u64 {
    30_000
}
fn max_attempts() -> u32 {
    10
}
fn call_timeout() -> u64 {
    60_000
}
fn startup_grace() -> u64 {
    DEFAULT_STARTUP_GRACE_MS
}
fn startup_timeout() -> u64 {
    30_000
}

/// Default of [`McpServerConfig::startup_grace_ms`].
/// 500 ms: long enough for a local server (a compiled one, or node with its packages
/// installed) to be in the first request even when spawned under bwrap on a loaded machine
/// (measured 100–320 ms from dsh's start in a debug build at load 16), short enough that a slow
/// one costs the first prompt at most that (its tools are appended to the request's tools when
/// it is ready).
pub const DEFAULT_STARTUP_GRACE_MS: u64 = 500;

impl Default for ReconnectConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_delay_ms: initial_delay(),
            max_delay_ms: max_delay(),
            max_attempts: max_attempts(),
        }
    }
}

/// Config of one `mcp-client` row: one MCP server.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct McpServerConfig {
    /// `stdio` or `streamable-http`.
    pub transport: TransportKind,
    /// `[A-Za-z0-9_-]{1,32}`, unique: the `<server>` of `mcp__<server>__<tool>`.
    pub server_name: String,
    /// stdio: the program to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: variables set over the scrubbed parent environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory (default: dsh's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// streamable-http: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// streamable-http: extra request headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Budget of one `tools/call` (default 60000 ms); on expiry the call is cancelled on the
    /// server (`notifications/cancelled`) and the model gets `TOOL_TIMEOUT`.
    #[serde(default = "call_timeout")]
    pub tool_call_timeout_ms: u64,
    /// How long activation waits for the server's tools before the agent may start (default
    /// 500 ms); a slower server connects in the background and its tools appear when ready.
    #[serde(default = "startup_grace")]
    pub startup_grace_ms: u64,
    /// How long a connection attempt (spawn, initialize, tools/list) may take (default 30000 ms).
    #[serde(default = "startup_timeout")]
    pub startup_timeout_ms: u64,
    /// `true`: a server that fails to start within the grace fails the plugin's activation.
    #[serde(default)]
    pub fail_on_startup_error: bool,
    /// Reconnection after the transport closes.
    #[serde(default)]
    pub reconnect: ReconnectConfig,
    /// stdio: run the server under the `sandbox` service's policy, the one bash commands get
    /// (writable roots, network), when that service is mounted (default true). `false` runs
    /// it unconfined (e.g. an `npx` server that must write its cache or reach the network).
    #[serde(default = "yes")]
    pub sandbox: bool,
    /// Set by the composition root when it mounts a `sandbox` row: a confined server waits
    /// (at most `startupTimeoutMs`) for the `sandbox` service to be up before it is spawned,
    /// and fails to start if it never is (never runs unconfined by a start-up race).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox_required: bool,
}

/// A row that cannot describe a server.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The server name breaks `[A-Za-z0-9_-]{1,32}`.
    #[error("serverName {0:?} must match [A-Za-z0-9_-]{{1,32}}")]
    BadServerName(String),
    /// A field the transport requires is missing.
    #[error("server {server:?}: transport {transport} needs {field:?}")]
    Missing {
        /// The server.
        server: String,
        /// Its transport.
        transport: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// A field of the other transport is set.
    #[error("server {server:?}: {field:?} does not apply to transport {transport}")]
    Foreign {
        /// The server.
        server: String,
        /// Its transport.
        transport: &'static str,
        /// The field.
        field: &'static str,
    },
}

impl McpServerConfig {
    /// A stdio server running `command args…`.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self::base(name, TransportKind::Stdio, Some(command.into()), args, None)
    }

    /// A streamable-HTTP server at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::base(
            name,
            TransportKind::StreamableHttp,
            None,
            Vec::new(),
            Some(url.into()),
        )
    }

    fn base(
        name: impl Into<String>,
        transport: TransportKind,
        command: Option<String>,
        args: Vec<String>,
        url: Option<String>,
    ) -> Self {
        Self {
            transport,
            server_name: name.into(),
            command,
            args,
            env: BTreeMap::new(),
            cwd: None,
            url,
            headers: BTreeMap::new(),
            tool_call_timeout_ms: call_timeout(),
            startup_grace_ms: startup_grace(),
            startup_timeout_ms: startup_timeout(),
            fail_on_startup_error: false,
            reconnect: ReconnectConfig::default(),
            sandbox: true,
            sandbox_required: false,
        }
    }

    /// Checks the name and that the fields fit the transport.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !valid_server_name(&self.server_name) {
            return Err(ConfigError::BadServerName(self.server_name.clone()));
        }
        let server = self.server_name.clone();
        let transport = self.transport.as_str();
        let missing = |field| ConfigError::Missing {
            server: server.clone(),
            transport,
            field,
        };
        let foreign = |field| ConfigError::Foreign {
            server: server.clone(),
            transport,
            field,
        };
        match self.transport {
            TransportKind::Stdio => {
                if self.command.as_deref().is_none_or(str::is_empty) {
                    return Err(missing("command"));
                }
                if self.url.is_some() {
                    return Err(foreign("url"));
                }
                if !self.headers.is_empty() {
                    return Err(foreign("headers"));
                }
            }
            TransportKind::StreamableHttp => {
                if self.url.as_deref().is_none_or(str::is_empty) {
                    return Err(missing("url"));
                }
                if self.command.is_some() {
                    return Err(foreign("command"));
                }
                if !self.args.is_empty() {
                    return Err(foreign("args"));
                }
                if !self.env.is_empty() {
                    return Err(foreign("env"));
                }
            }
        }
        Ok(())
    }

    /// [`McpServerConfig::tool_call_timeout_ms`] as a duration.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.tool_call_timeout_ms)
    }
}

/// Whether `name` is a valid server name: `[A-Za-z0-9_-]{1,32}`.
pub fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_validation() {
        let c: McpServerConfig = match serde_json::from_value(json!({
            "transport": "stdio", "serverName": "fs", "command": "srv"
        })) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(c.tool_call_timeout_ms, 60_000);
        assert_eq!(c.reconnect, ReconnectConfig::default());
        assert_eq!(c.validate(), Ok(()));
        let mut bad = c.clone();
        bad.server_name = "a b".into();
        assert!(matches!(bad.validate(), Err(ConfigError::BadServerName(_))));
        let mut bad = c;
        bad.url = Some("http://x".into());
        assert_eq!(
            bad.validate().map_err(|e| e.to_string()),
            Err(r#"server "fs": "url" does not apply to transport stdio"#.to_owned())
        );
        let h = McpServerConfig::http("web", "");
        assert_eq!(
            h.validate().map_err(|e| e.to_string()),
            Err(r#"server "web": transport streamable-http needs "url""#.to_owned())
        );
    }
}
