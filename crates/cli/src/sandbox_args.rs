//! The sandbox and approval flags every composing front end shares (`dsh exec`; the TUI
//! flattens the same struct): `--sandbox MODE`, `--network on|off`.

use clap::Args;
use dsh_kernel::Composition;
use dsh_sandbox::{NetworkAccess, SandboxMode};
use serde_json::Value;

/// The sandbox flags. Each one set overrides the `sandbox` row's config of the composition.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct SandboxArgs {
    /// Sandbox mode of tool effects: read-only, workspace-write (the default: writes under the
    /// working directory and the temp dirs only) or danger-full-access (no sandbox).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub(crate) sandbox: Option<SandboxMode>,
    /// Network access of confined commands (default off in the restricted modes).
    #[arg(long, value_name = "on|off", value_parser = parse_network)]
    pub(crate) network: Option<NetworkAccess>,
}

fn parse_mode(s: &str) -> Result<SandboxMode, String> {
    s.parse()
        .map_err(|e: dsh_sandbox::ParseModeError| e.to_string())
}

fn parse_network(s: &str) -> Result<NetworkAccess, String> {
    s.parse()
        .map_err(|e: dsh_sandbox::ParseModeError| e.to_string())
}

impl SandboxArgs {
    /// Writes the flags into the composition's `sandbox` rows.
    pub(crate) fn apply(&self, c: &mut Composition) {
        let mut set = |key: &str, value: Value| {
            for r in c.rows.iter_mut().filter(|r| r.row.name == "sandbox") {
                if !r.row.config.is_object() {
                    r.row.config = Value::Object(Default::default());
                }
                r.row.config[key] = value.clone();
            }
        };
        if let Some(mode) = self.sandbox {
            set("mode", Value::from(mode.as_str()));
        }
        if let Some(network) = self.network {
            set("network", Value::from(network.as_str()));
        }
    }
}
