//! The `Sandbox` service: the effective policy of a call and the confinement of a command.

use std::ffi::OsString;
use std::fmt;
use std::path::Path;

use dsh_kernel::Service;

use crate::error::SandboxError;
use crate::mode::SandboxMode;
use crate::policy::SandboxPolicy;

/// How completely a backend enforces one dimension (files or network).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// Everything the policy says is enforced by the kernel.
    Full,
    /// Part of it (e.g. an older Landlock ABI that cannot govern every access).
    Partial,
    /// Not enforced at all.
    None,
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Enforcement::Full => "full",
            Enforcement::Partial => "partial",
            Enforcement::None => "none",
        })
    }
}

/// A command line ready to spawn under a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confined {
    /// The argv to spawn: the backend's launcher and its arguments, then the original argv
    /// (the original argv alone when the mode confines nothing).
    pub argv: Vec<OsString>,
    /// The backend that confines it (`none` for `danger-full-access`).
    pub backend: &'static str,
    /// How completely file effects are confined.
    pub files: Enforcement,
    /// How completely network denial is enforced (`Full` also when the network is allowed).
    pub network: Enforcement,
    /// A supervisor program that can run under the launcher (`argv` without the original
    /// command) and keep this confinement warm, so an executor may reuse one confinement for
    /// many commands (`dsh_shell::supervisor` protocol). Empty: spawn the launcher each time.
    pub supervisor: Vec<OsString>,
}

/// What a probe found about one backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendReport {
    /// `bwrap`, `landlock`.
    pub name: &'static str,
    /// Whether confining `true` worked.
    pub usable: bool,
    /// File confinement it gives.
    pub files: Enforcement,
    /// Network denial it gives.
    pub network: Enforcement,
    /// Why it is unusable, or notes on a partial enforcement.
    pub detail: String,
}

/// The probe verdicts, in the order the backends are tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxReport {
    /// The configured default mode.
    pub mode: SandboxMode,
    /// Every backend probed, in order; the first usable one is used.
    pub backends: Vec<BackendReport>,
}

impl SandboxReport {
    /// The backend in use, if any.
    pub fn selected(&self) -> Option<&BackendReport> {
        self.backends.iter().find(|b| b.usable)
    }
}

/// The sandbox service (kernel name `sandbox`). Consumers look it up softly
/// (`ctx.get::<dyn Sandbox>()`) at call time: without it nothing is confined.
pub trait Sandbox: Send + Sync + 'static {
    /// The effective policy of a call in `session_id` working in `cwd`: an escalation granted
    /// to `call_id` wins, then the session's last `sandbox/mode`, then the configured mode.
    fn policy(&self, session_id: &str, cwd: &Path, call_id: Option<&str>) -> SandboxPolicy;

    /// `argv` wrapped so that it runs under `policy`. A restricted mode without a usable
    /// backend is [`SandboxError::Unavailable`]: the caller must not run anything.
    fn confine(
        &self,
        policy: &SandboxPolicy,
        argv: Vec<OsString>,
    ) -> Result<Confined, SandboxError>;

    /// Records that the session's mode is now `mode` (a `sandbox/mode` event was logged).
    fn set_session_mode(&self, session_id: &str, mode: SandboxMode);

    /// Forgets the session's mode (its agent was disposed): a long-lived host opens many
    /// sessions. A session started again sets its mode again.
    fn forget_session(&self, session_id: &str);

    /// Grants `call_id` one run under `mode` (an approved `sandbox_permissions` escalation).
    fn grant_once(&self, call_id: &str, mode: SandboxMode);

    /// The probe verdicts (for `dsh sandbox check`).
    fn report(&self) -> SandboxReport;
}

impl Service for dyn Sandbox {
    const NAME: &'static str = "sandbox";
}

/// The `sandbox:policy` runtime-context text for `policy` (upstream §3.4.2): changes only
/// when the mode, the network setting or the workspace changes, so the snapshot is re-sent only
/// then.
pub fn runtime_context_text(policy: &SandboxPolicy) -> String {
    let network = if policy.network_allowed() {
        "Network access is allowed."
    } else {
        "Network access is disabled: connections fail."
    };
    match policy.mode {
        SandboxMode::ReadOnly => format!(
            "Sandbox: read-only. You cannot modify files; still try tools that only read, and \
             follow their guidance when one is refused. {network}"
        ),
        SandboxMode::WorkspaceWrite => format!(
            "Sandbox: workspace-write. You may modify files under \"{}\" and the temporary \
             directories ({}); writes elsewhere are refused. {network}",
            policy.workspace_root.display(),
            policy.roots_text()
        ),
        SandboxMode::DangerFullAccess => {
            "Sandbox: danger-full-access. File and network access are unrestricted.".into()
        }
    }
}

/// The argument properties of a confined tool (`bash`, `write`, `edit`) through which the model
/// asks to run one call outside its sandbox (upstream §3.1.5): `sandbox_permissions` (the wider
/// mode) and `justification`, together or neither. Approval policies decide.
pub fn escalation_properties() -> [(&'static str, serde_json::Value); 2] {
    [
        (
            "sandbox_permissions",
            serde_json::json!({
                "type": "string",
                "enum": ["workspace-write", "danger-full-access"],
                "description": "Retry a sandbox-denied call once in this wider mode (asks the user)."
            }),
        ),
        (
            "justification",
            serde_json::json!({
                "type": "string",
                "description": "Why (shown to the user)."
            }),
        ),
    ]
}

/// [`escalation_properties`] without their descriptions: for `write` and `edit`, declared
/// next to `bash`, whose same two arguments say what they mean (the tool set's bytes).
pub fn escalation_properties_plain() -> [(&'static str, serde_json::Value); 2] {
    escalation_properties().map(|(name, mut prop)| {
        if let Some(o) = prop.as_object_mut() {
            o.remove("description");
        }
        (name, prop)
    })
}
