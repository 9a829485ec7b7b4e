//! The Landlock launcher (`landlock-run` in upstream §3.3): restricts itself, then `exec`s the
//! command, which inherits the restriction.
//!
//! `[--ro PATH]... [--rw PATH]... [--no-net] -- ARGV...` or `--probe`. `--ro` paths get read
//! and execute access, `--rw` paths every governed access; everything else is denied. With
//! `--no-net`, TCP bind/connect are denied through Landlock where the kernel's ABI has network
//! rules, and a seccomp filter makes `socket(2)` fail for `AF_INET`/`AF_INET6` (and denies
//! `io_uring_setup`) on every kernel, so UDP and raw sockets are covered too. Exit 125 with a
//! `landlock-run: ` line on stderr means the launcher failed and the command was not run.
//!
//! Kept in the library so the `dsh` binary can serve it as a hidden subcommand (no second
//! binary to install); `src/bin/dsh-landlock-run.rs` is the standalone form used by tests.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// Exit status of a launcher failure (the command did not run).
pub const LAUNCH_FAILED: i32 = 125;

/// The probe's line for a fully enforced ruleset.
pub const PROBE_FULL: &str = "landlock: fully enforced";
/// The probe's line for an older ABI that cannot govern every access.
pub const PROBE_PARTIAL: &str = "landlock: partially enforced (older ABI)";

/// The highest ABI this launcher asks for (best effort below it).
const ABI_WANTED: ABI = ABI::V5;

/// Why the launcher did not run the command.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The arguments are malformed.
    #[error("usage: {0} (expected [--ro PATH]... [--rw PATH]... [--no-net] -- ARGV... | --probe)")]
    Usage(String),
    /// Landlock refused the ruleset or is not enforced by this kernel.
    #[error("landlock: {0}")]
    Landlock(String),
    /// The seccomp socket filter could not be built or installed.
    #[error("seccomp: {0}")]
    Seccomp(String),
    /// The capabilities could not be dropped.
    #[error("dropping capabilities: {0}")]
    Capabilities(String),
    /// `exec` failed.
    #[error("cannot execute {program}: {source}")]
    Exec {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What the launcher was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LaunchArgs {
    /// Read + execute roots.
    pub ro: Vec<PathBuf>,
    /// Read-write roots.
    pub rw: Vec<PathBuf>,
    /// Deny the network.
    pub no_net: bool,
    /// Only probe: restrict self and report the enforcement.
    pub probe: bool,
    /// The command.
    pub argv: Vec<OsString>,
}

impl LaunchArgs {
    /// Parses the launcher's arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, LaunchError> {
        let mut out = LaunchArgs::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            match arg.to_str() {
                Some("--ro") | Some("--rw") => {
                    let path = it.next().ok_or_else(|| {
                        LaunchError::Usage(format!("{} needs a path", arg.to_string_lossy()))
                    })?;
                    if arg == "--ro" {
                        out.ro.push(path.into());
                    } else {
                        out.rw.push(path.into());
                    }
                }
                Some("--no-net") => out.no_net = true,
                Some("--probe") => out.probe = true,
                Some("--") => {
                    out.argv = it.collect();
                    break;
                }
                _ => {
                    return Err(LaunchError::Usage(format!(
                        "unknown argument \"{}\"",
                        arg.to_string_lossy()
                    )));
                }
            }
        }
        if !out.probe && out.argv.is_empty() {
            return Err(LaunchError::Usage("no command after --".into()));
        }
        Ok(out)
    }
}

/// What restricting self achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restricted {
    /// Every access the launcher asked to govern is governed.
    Full,
    /// An older ABI: some accesses (e.g. truncate, refer, ioctl) are not governed.
    Partial,
}

/// Restricts the calling thread (and what it execs) as `args` say. Landlock not enforced at
/// all is an error: the launcher fails closed.
pub fn restrict(args: &LaunchArgs) -> Result<Restricted, LaunchError> {
    let abi = ABI_WANTED;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| LaunchError::Landlock(e.to_string()))?;
    if args.no_net {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| LaunchError::Landlock(e.to_string()))?;
    }
    let mut rw = args.rw.clone();
    rw.push(PathBuf::from("/dev/null"));
    let status = ruleset
        .create()
        .map_err(|e| LaunchError::Landlock(e.to_string()))?
        .add_rules(path_beneath_rules(&args.ro, AccessFs::from_read(abi)))
        .map_err(|e| LaunchError::Landlock(e.to_string()))?
        .add_rules(path_beneath_rules(&rw, AccessFs::from_all(abi)))
        .map_err(|e| LaunchError::Landlock(e.to_string()))?
        .restrict_self()
        .map_err(|e| LaunchError::Landlock(e.to_string()))?;
    let restricted = match status.ruleset {
        RulesetStatus::FullyEnforced => Restricted::Full,
        RulesetStatus::PartiallyEnforced => Restricted::Partial,
        RulesetStatus::NotEnforced => {
            return Err(LaunchError::Landlock(format!(
                "not enforced by this kernel ({:?})",
                status.landlock
            )));
        }
    };
    drop_capabilities()?;
    if args.no_net {
        deny_sockets()?;
    }
    Ok(restricted)
}

/// Drops every capability: the bounding set (so an `exec` by root gains none back) and the
/// effective, permitted, inheritable and ambient sets. Without this a command run by root would
/// keep `CAP_SYS_PTRACE` and could read `/proc/<dsh>/environ` past Landlock's ptrace scoping.
/// Unprivileged callers cannot change the bounding set (`EPERM`) and hold no capabilities.
fn drop_capabilities() -> Result<(), LaunchError> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let err = |what: &str, e: rustix::io::Errno| LaunchError::Capabilities(format!("{what}: {e}"));
    for bit in 0..64 {
        let cap = CapabilitySet::from_bits_retain(1 << bit);
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            // EINVAL: a capability this kernel does not know; EPERM: not privileged.
            Ok(()) | Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::PERM) => {}
            Err(e) => return Err(err("bounding set", e)),
        }
    }
    rustix::thread::clear_ambient_capability_set().map_err(|e| err("ambient set", e))?;
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(|e| err("capability sets", e))
}

/// Installs the seccomp filter: `socket(AF_INET | AF_INET6, ..)` and `io_uring_setup` fail
/// with `EACCES`.
fn deny_sockets() -> Result<(), LaunchError> {
    let err = |e: seccompiler::BackendError| LaunchError::Seccomp(e.to_string());
    let family = |af: i32| -> Result<SeccompRule, LaunchError> {
        let value = u64::try_from(af).map_err(|e| LaunchError::Seccomp(e.to_string()))?;
        SeccompRule::new(vec![
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
                .map_err(err)?,
        ])
        .map_err(err)
    };
    let mut rules = BTreeMap::new();
    rules.insert(
        libc::SYS_socket,
        vec![family(libc::AF_INET)?, family(libc::AF_INET6)?],
    );
    rules.insert(libc::SYS_io_uring_setup, vec![]);
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| LaunchError::Seccomp(e.to_string()))?;
    let errno = u32::try_from(libc::EACCES).map_err(|e| LaunchError::Seccomp(e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch,
    )
    .map_err(err)?;
    let program: BpfProgram = filter.try_into().map_err(err)?;
    seccompiler::apply_filter(&program).map_err(|e| LaunchError::Seccomp(e.to_string()))
}

/// Runs the launcher: restricts self and `exec`s the command (returns only on failure), or,
/// with `--probe`, returns the probe line.
pub fn run(args: impl IntoIterator<Item = OsString>) -> Result<&'static str, LaunchError> {
    let args = LaunchArgs::parse(args)?;
    let restricted = restrict(&args)?;
    if args.probe {
        return Ok(match restricted {
            Restricted::Full => PROBE_FULL,
            Restricted::Partial => PROBE_PARTIAL,
        });
    }
    let (program, rest) = args
        .argv
        .split_first()
        .ok_or_else(|| LaunchError::Usage("no command after --".into()))?;
    let source = std::process::Command::new(program).args(rest).exec();
    Err(LaunchError::Exec {
        program: program.to_string_lossy().into_owned(),
        source,
    })
}
