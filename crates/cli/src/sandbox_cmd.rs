//! `dsh sandbox check`, the hidden Landlock launcher `dsh sandbox landlock-run` and the hidden
//! warm sandbox supervisor `dsh sandbox serve`.

use std::ffi::OsString;

use anyhow::anyhow;
use dsh_sandbox::{Enforcement, Sandbox};
use dsh_sandbox_local::{LocalSandbox, SandboxConfig};

use crate::compose::{compose, registry};
use crate::config_cmd::write_stdout;
use crate::sandbox_args::SandboxArgs;
use crate::{ComposeArgs, Failure};

/// Serves `dsh sandbox landlock-run ARGS...` when `args` (without the program name) start
/// with it: restricts this process and execs the command. Checked before the CLI parser so the
/// launcher costs one exec and no parsing of the command's own arguments.
pub(crate) fn landlock_run_if_asked(args: &[OsString]) -> Option<u8> {
    if args.len() < 2 || args[0] != "sandbox" || args[1] != "landlock-run" {
        return None;
    }
    match dsh_sandbox_local::landlock_run::run(args[2..].iter().cloned()) {
        Ok(line) => {
            println!("{line}");
            Some(0)
        }
        Err(error) => {
            eprintln!("landlock-run: {error}");
            Some(125)
        }
    }
}

/// Serves `dsh sandbox serve` (the warm sandbox supervisor the shell executor starts inside a
/// confinement, on the socket that is its stdin). Checked before the CLI parser, like
/// `landlock-run`: no logging, no composition.
pub(crate) fn serve_if_asked(args: &[OsString]) -> Option<u8> {
    if args.len() != 2 || args[0] != "sandbox" || args[1] != "serve" {
        return None;
    }
    match dsh_sandbox_local::supervisor::serve_stdin() {
        Ok(()) => Some(0),
        Err(error) => {
            eprintln!("sandbox serve: {error}");
            Some(1)
        }
    }
}

/// `dsh sandbox check`: probes the backends of the composed `sandbox` row and prints the
/// backend in use, what it enforces, and why each other backend was skipped.
pub(crate) fn check(compose_args: &ComposeArgs, sandbox: &SandboxArgs) -> Result<u8, Failure> {
    let registry = registry();
    let mut composition = compose(compose_args, None, &registry)?;
    sandbox.apply(&mut composition);
    let row = composition
        .rows
        .iter()
        .find(|r| r.row.name == "sandbox" && !r.row.disabled);
    let Some(row) = row else {
        return write_stdout(
            "sandbox: not mounted (no `sandbox` row): tool effects are NOT confined\n",
        );
    };
    let config: SandboxConfig = if row.row.config.is_null() {
        SandboxConfig::default()
    } else {
        serde_json::from_value(row.row.config.clone())
            .map_err(|e| Failure::usage(anyhow!("the sandbox row's config is invalid: {e}")))?
    };
    let options = config.options();
    let network = options.network;
    let sandbox = LocalSandbox::probe(options);
    let report = sandbox.report();
    let mut out = format!("mode: {}\nnetwork: {network}\n", report.mode);
    match report.selected() {
        Some(b) => {
            let level = if b.files == Enforcement::Full && b.network == Enforcement::Full {
                "full"
            } else {
                "partial"
            };
            out.push_str(&format!(
                "backend: {} (enforcement: {level}; files: {}, network: {})\n  {}\n",
                b.name, b.files, b.network, b.detail
            ));
        }
        None if report.mode.is_restricted() => out.push_str(
            "backend: none: every tool call in this mode is refused (SANDBOX_UNAVAILABLE); \
             install bubblewrap or use a kernel with Landlock, or choose \
             --sandbox danger-full-access\n",
        ),
        None => out.push_str("backend: none (danger-full-access confines nothing)\n"),
    }
    for b in report.backends.iter().filter(|b| !b.usable) {
        out.push_str(&format!("skipped {}: {}\n", b.name, b.detail));
    }
    write_stdout(&out)
}
