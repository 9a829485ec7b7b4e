//! `LocalSandbox`: the `sandbox` service over the probed Linux backends.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use dsh_sandbox::{
    BackendReport, Confined, Enforcement, NetworkAccess, Sandbox, SandboxError, SandboxMode,
    SandboxPolicy, SandboxReport,
};
use parking_lot::Mutex;

use crate::backend::{Backend, BackendKind, probe_bwrap, probe_landlock};

/// Settings of the local sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalSandboxOptions {
    /// The default mode of new sessions.
    pub mode: SandboxMode,
    /// Network access in the restricted modes.
    pub network: NetworkAccess,
    /// Writable roots besides the workspace and the temp directories (`workspace-write`).
    pub writable_roots: Vec<PathBuf>,
    /// Backends to probe, in order; empty means none (every restricted call is refused).
    pub backends: Vec<BackendKind>,
    /// The `bwrap` program (looked up in `PATH`).
    pub bwrap: PathBuf,
    /// The Landlock launcher: program and leading arguments.
    pub landlock_launcher: Vec<OsString>,
    /// The warm sandbox supervisor (program and arguments) offered with every confinement
    /// (`Confined::supervisor`); empty: none, every command starts a new confinement.
    pub supervisor: Vec<OsString>,
}

impl Default for LocalSandboxOptions {
    fn default() -> Self {
        Self {
            mode: SandboxMode::WorkspaceWrite,
            network: NetworkAccess::Off,
            writable_roots: Vec::new(),
            backends: vec![BackendKind::Bwrap, BackendKind::Landlock],
            bwrap: PathBuf::from("bwrap"),
            landlock_launcher: default_launcher(),
            supervisor: default_supervisor(),
        }
    }
}

/// The Landlock launcher of the running `dsh` binary: `<current exe> sandbox landlock-run`.
pub fn default_launcher() -> Vec<OsString> {
    match std::env::current_exe() {
        Ok(exe) => vec![exe.into(), "sandbox".into(), "landlock-run".into()],
        Err(_) => Vec::new(),
    }
}

/// The warm sandbox supervisor of the running `dsh` binary: `<current exe> sandbox serve`.
pub fn default_supervisor() -> Vec<OsString> {
    match std::env::current_exe() {
        Ok(exe) => vec![exe.into(), "sandbox".into(), "serve".into()],
        Err(_) => Vec::new(),
    }
}

/// What the probe found: every backend's report and the one in use.
#[derive(Debug)]
struct Verdict {
    reports: Vec<BackendReport>,
    selected: Option<Backend>,
}

/// The local sandbox: probes its backends once and keeps the verdict for its lifetime.
#[derive(Debug)]
pub struct LocalSandbox {
    options: LocalSandboxOptions,
    verdict: Arc<OnceLock<Verdict>>,
    sessions: Mutex<HashMap<String, SandboxMode>>,
    grants: Mutex<HashMap<String, SandboxMode>>,
}

impl LocalSandbox {
    /// Probes the configured backends in order (blocking) and keeps the first usable one.
    pub fn probe(options: LocalSandboxOptions) -> Self {
        let verdict = Arc::new(OnceLock::new());
        let _ = verdict.set(probe_all(&options));
        Self::with_verdict(options, verdict)
    }

    /// Starts the probe on its own thread and returns at once, so the probe overlaps the
    /// harness's start-up (the first request to the model); the first `confine` or `report`
    /// waits for it.
    pub fn probe_in_background(options: LocalSandboxOptions) -> Self {
        let verdict = Arc::new(OnceLock::new());
        let filled = verdict.clone();
        let probing = options.clone();
        let spawned = std::thread::Builder::new()
            .name("dsh-sandbox-probe".into())
            .spawn(move || {
                let _ = filled.set(probe_all(&probing));
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the sandbox probe thread; probing now");
            let _ = verdict.set(probe_all(&options));
        }
        Self::with_verdict(options, verdict)
    }

    fn with_verdict(options: LocalSandboxOptions, verdict: Arc<OnceLock<Verdict>>) -> Self {
        Self {
            options,
            verdict,
            sessions: Mutex::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
        }
    }

    fn verdict(&self) -> &Verdict {
        self.verdict.wait()
    }

    /// The settings.
    pub fn options(&self) -> &LocalSandboxOptions {
        &self.options
    }

    /// The backend in use.
    pub fn backend(&self) -> Option<&Backend> {
        self.verdict().selected.as_ref()
    }

    fn unavailable_detail(&self) -> String {
        let reports = &self.verdict().reports;
        if reports.is_empty() {
            return "No backend is configured (sandbox `backends` is empty).".into();
        }
        reports
            .iter()
            .map(|r| format!("{}: {}", r.name, r.detail))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn probe_all(options: &LocalSandboxOptions) -> Verdict {
    let mut reports = Vec::new();
    let mut selected = None;
    for kind in &options.backends {
        if selected.is_some() {
            reports.push(BackendReport {
                name: kind.name(),
                usable: false,
                files: Enforcement::None,
                network: Enforcement::None,
                detail: "not probed: an earlier backend is in use".into(),
            });
            continue;
        }
        let (report, backend) = match kind {
            BackendKind::Bwrap => probe_bwrap(&options.bwrap),
            BackendKind::Landlock => probe_landlock(&options.landlock_launcher),
        };
        tracing::debug!(backend = report.name, usable = report.usable, detail = %report.detail, "sandbox probe");
        reports.push(report);
        selected = backend;
    }
    if selected.is_none() && options.mode.is_restricted() {
        tracing::warn!(
            mode = %options.mode,
            "no sandbox backend works on this host: restricted tool calls will be refused"
        );
    }
    Verdict { reports, selected }
}

impl Sandbox for LocalSandbox {
    fn policy(&self, session_id: &str, cwd: &Path, call_id: Option<&str>) -> SandboxPolicy {
        let granted = call_id.and_then(|id| self.grants.lock().remove(id));
        let mode = granted
            .or_else(|| self.sessions.lock().get(session_id).copied())
            .unwrap_or(self.options.mode);
        SandboxPolicy::new(
            mode,
            self.options.network,
            cwd,
            &self.options.writable_roots,
        )
    }

    fn confine(
        &self,
        policy: &SandboxPolicy,
        argv: Vec<OsString>,
    ) -> Result<Confined, SandboxError> {
        if !policy.mode.is_restricted() {
            return Ok(Confined {
                argv,
                backend: "none",
                files: Enforcement::None,
                network: Enforcement::None,
                supervisor: Vec::new(),
            });
        }
        let Some(backend) = &self.verdict().selected else {
            return Err(SandboxError::Unavailable {
                mode: policy.mode,
                detail: self.unavailable_detail(),
            });
        };
        let mut out = backend.prefix(policy);
        out.extend(argv);
        let (files, network) = backend.enforcement();
        Ok(Confined {
            argv: out,
            backend: backend.name(),
            files,
            network,
            supervisor: self.options.supervisor.clone(),
        })
    }

    fn set_session_mode(&self, session_id: &str, mode: SandboxMode) {
        self.sessions.lock().insert(session_id.to_owned(), mode);
    }

    fn forget_session(&self, session_id: &str) {
        self.sessions.lock().remove(session_id);
    }

    fn grant_once(&self, call_id: &str, mode: SandboxMode) {
        self.grants.lock().insert(call_id.to_owned(), mode);
    }

    fn report(&self) -> SandboxReport {
        SandboxReport {
            mode: self.options.mode,
            backends: self.verdict().reports.clone(),
        }
    }
}
