//! The backends: how each one wraps a command line, and how it is probed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dsh_kernel::schemars;
use dsh_sandbox::{BackendReport, Enforcement, NetworkAccess, SandboxMode, SandboxPolicy};
use serde::Deserialize;

use crate::landlock_run::{PROBE_FULL, PROBE_PARTIAL};

/// A backend's name in config (`backends: [bwrap, landlock]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// bubblewrap: user, PID and (network off) network namespaces, the root bound read-only.
    Bwrap,
    /// Landlock file rules plus a seccomp socket filter, through the Landlock launcher.
    Landlock,
}

impl BackendKind {
    /// The name shown in reports.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Bwrap => "bwrap",
            BackendKind::Landlock => "landlock",
        }
    }
}

/// A usable backend, as selected by the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// bubblewrap at this path.
    Bwrap {
        /// The resolved `bwrap` program.
        program: PathBuf,
    },
    /// The Landlock launcher: program and leading arguments.
    Landlock {
        /// e.g. `[/usr/bin/dsh, sandbox, landlock-run]`.
        launcher: Vec<OsString>,
        /// What the probe reported for files.
        files: Enforcement,
    },
}

impl Backend {
    /// The backend's name.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Bwrap { .. } => "bwrap",
            Backend::Landlock { .. } => "landlock",
        }
    }

    /// File and network enforcement of this backend.
    pub fn enforcement(&self) -> (Enforcement, Enforcement) {
        match self {
            Backend::Bwrap { .. } => (Enforcement::Full, Enforcement::Full),
            Backend::Landlock { files, .. } => (*files, Enforcement::Full),
        }
    }

    /// The launcher prefix that runs a command under `policy` (a restricted mode).
    pub fn prefix(&self, policy: &SandboxPolicy) -> Vec<OsString> {
        match self {
            Backend::Bwrap { program } => bwrap_prefix(program, policy),
            Backend::Landlock { launcher, .. } => landlock_prefix(launcher, policy),
        }
    }
}

/// `bwrap` arguments for `policy`: a new user namespace with every capability dropped, a new
/// PID namespace with a fresh `/proc` (so dsh's `/proc/<pid>/environ` is out of reach, and
/// every process dies with the namespace's init when the command ends), a private `/dev`,
/// the root bound read-only, the writable roots bound read-write (the real `/tmp` among them:
/// files the command leaves there are visible to the file tools and the user), and in
/// network-off policies a new network namespace with only a loopback of its own.
pub fn bwrap_prefix(program: &Path, policy: &SandboxPolicy) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![program.into()];
    for flag in [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ] {
        args.push(flag.into());
    }
    let mut roots: Vec<&PathBuf> = policy.writable_roots.iter().collect();
    // Parents before children, so a root inside another is not hidden by the outer bind.
    roots.sort_by_key(|r| r.components().count());
    for root in roots {
        args.push("--bind".into());
        args.push(root.into());
        args.push(root.into());
    }
    if !policy.network_allowed() {
        args.push("--unshare-net".into());
    }
    args.push("--".into());
    args
}

/// Landlock launcher arguments for `policy`: `/` read-only, the writable roots read-write,
/// `--no-net` when the network is off.
pub fn landlock_prefix(launcher: &[OsString], policy: &SandboxPolicy) -> Vec<OsString> {
    let mut args = launcher.to_vec();
    args.push("--ro".into());
    args.push("/".into());
    for root in &policy.writable_roots {
        args.push("--rw".into());
        args.push(root.into());
    }
    if !policy.network_allowed() {
        args.push("--no-net".into());
    }
    args.push("--".into());
    args
}

/// Looks `name` up in `PATH` (a path is taken as is).
pub fn find_program(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The policy a probe confines `true` with: the narrowest one.
fn probe_policy() -> SandboxPolicy {
    SandboxPolicy::new(
        SandboxMode::ReadOnly,
        NetworkAccess::Off,
        Path::new("/"),
        &[],
    )
}

fn stderr_line(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    match output.status.code() {
        Some(code) => format!("exit {code}: {line}"),
        None => format!("killed by a signal: {line}"),
    }
}

/// Probes bubblewrap: `bwrap <read-only profile> -- true` must exit 0.
pub fn probe_bwrap(program: &Path) -> (BackendReport, Option<Backend>) {
    let unusable = |detail: String| BackendReport {
        name: "bwrap",
        usable: false,
        files: Enforcement::None,
        network: Enforcement::None,
        detail,
    };
    let Some(resolved) = find_program(program) else {
        return (
            unusable(format!(
                "{} was not found in PATH (install it: apt-get install bubblewrap)",
                program.display()
            )),
            None,
        );
    };
    let mut argv = bwrap_prefix(&resolved, &probe_policy());
    argv.push("true".into());
    match run_probe(&argv) {
        Ok(output) if output.status.success() => (
            BackendReport {
                name: "bwrap",
                usable: true,
                files: Enforcement::Full,
                network: Enforcement::Full,
                detail: format!(
                    "{} confines with user, PID and network namespaces",
                    resolved.display()
                ),
            },
            Some(Backend::Bwrap { program: resolved }),
        ),
        Ok(output) => (
            unusable(format!(
                "confining `true` failed ({}); user namespaces may be disabled \
                 (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)",
                stderr_line(&output)
            )),
            None,
        ),
        Err(e) => (
            unusable(format!("cannot run {}: {e}", resolved.display())),
            None,
        ),
    }
}

/// Probes the Landlock launcher: `<launcher> --probe` must exit 0 and say how much it
/// enforces.
pub fn probe_landlock(launcher: &[OsString]) -> (BackendReport, Option<Backend>) {
    let unusable = |detail: String| BackendReport {
        name: "landlock",
        usable: false,
        files: Enforcement::None,
        network: Enforcement::None,
        detail,
    };
    if launcher.is_empty() {
        return (unusable("no launcher configured".into()), None);
    }
    let mut argv = launcher.to_vec();
    argv.push("--probe".into());
    match run_probe(&argv) {
        Ok(output) if output.status.success() => {
            let out = String::from_utf8_lossy(&output.stdout);
            let files = if out.contains(PROBE_FULL) {
                Enforcement::Full
            } else if out.contains(PROBE_PARTIAL) {
                Enforcement::Partial
            } else {
                return (
                    unusable(format!("unexpected probe output: {}", out.trim())),
                    None,
                );
            };
            let detail = match files {
                Enforcement::Full => {
                    "Landlock file rules fully enforced; network denied by a seccomp socket filter (and Landlock TCP rules); capabilities dropped; no PID namespace: processes a command leaves behind are ended by the warm sandbox supervisor (child subreaper), but a call that runs cold (warm sandboxes off, a command over 64 KiB) can leave a setsid daemon behind"
                }
                _ => {
                    "Landlock partially enforced (older kernel ABI: some accesses are not governed); network denied by a seccomp socket filter; capabilities dropped; no PID namespace (leftover processes are ended by the warm sandbox supervisor only)"
                }
            };
            (
                BackendReport {
                    name: "landlock",
                    usable: true,
                    files,
                    network: Enforcement::Full,
                    detail: detail.into(),
                },
                Some(Backend::Landlock {
                    launcher: launcher.to_vec(),
                    files,
                }),
            )
        }
        Ok(output) => (
            unusable(format!(
                "the Landlock probe failed ({})",
                stderr_line(&output)
            )),
            None,
        ),
        Err(e) => (
            unusable(format!(
                "cannot run the Landlock launcher {}: {e}",
                launcher[0].to_string_lossy()
            )),
            None,
        ),
    }
}

fn run_probe(argv: &[OsString]) -> std::io::Result<std::process::Output> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty command line"))?;
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
}
