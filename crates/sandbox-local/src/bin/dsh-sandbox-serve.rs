//! Standalone warm sandbox supervisor (the `dsh` binary serves the same as `dsh sandbox
//! serve`): serves the shell executor on the socket that is its stdin.

#![allow(clippy::print_stderr)]

fn main() {
    if let Err(error) = dsh_sandbox_local::supervisor::serve_stdin() {
        eprintln!("sandbox serve: {error}");
        std::process::exit(1);
    }
}
