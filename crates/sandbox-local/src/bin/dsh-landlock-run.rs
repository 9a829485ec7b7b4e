//! Standalone Landlock launcher (the `dsh` binary serves the same as `dsh sandbox landlock-run`).

#![allow(clippy::print_stderr, clippy::print_stdout)]

fn main() {
    match dsh_sandbox_local::landlock_run::run(std::env::args_os().skip(1)) {
        Ok(line) => println!("{line}"),
        Err(error) => {
            eprintln!("landlock-run: {error}");
            std::process::exit(dsh_sandbox_local::landlock_run::LAUNCH_FAILED);
        }
    }
}
