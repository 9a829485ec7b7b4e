//! The sandbox and approval flags every composing front end shares (`dsh exec`; the TUI
//! flattens the same struct): `--sandbox MODE`, `--network on|off`,
//! `--ask-for-approval POLICY`.

use clap::Args;
use dsh_approval::ApprovalPolicy;
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
    /// Network access of confined commands and of web_fetch / web_search (default off in the
    /// restricted modes).
    #[arg(long, value_name = "on|off", value_parser = parse_network)]
    pub(crate) network: Option<NetworkAccess>,
    /// When to ask the user: untrusted (before anything not read-only), on-request (when the
    /// model asks to leave the sandbox), on-failure (when the sandbox denied a call), never
    /// (the default of `dsh exec`: what the sandbox refuses stays refused).
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub(crate) ask_for_approval: Option<ApprovalPolicy>,
}

fn parse_policy(s: &str) -> Result<ApprovalPolicy, String> {
    s.parse()
        .map_err(|e: dsh_approval::policy::ParsePolicyError| e.to_string())
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
    /// Writes the flags into the composition's `sandbox` and `approval` rows, and points the
    /// `approval` rows without a `rulesFile` at `$DSH_HOME/permissions.json`.
    pub(crate) fn apply(&self, c: &mut Composition) {
        let rules = crate::permissions_cmd::store().path().display().to_string();
        for r in c.rows.iter_mut().filter(|r| r.row.name == "approval") {
            if !r.row.config.is_object() {
                r.row.config = Value::Object(Default::default());
            }
            if r.row.config.get("rulesFile").is_none() {
                r.row.config["rulesFile"] = Value::from(rules.clone());
            }
            if let Some(policy) = self.ask_for_approval {
                r.row.config["policy"] = Value::from(policy.as_str());
            }
        }
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
