//! Resolving the shell program to a path before the spawn.
//!
//! Why: Rust's `std::process::Command` spawns with `posix_spawn` (on glibc: `clone` with
//! `CLONE_VM | CLONE_VFORK`, no copy of the harness's page tables) only when it can; one of the
//! cases where it falls back to `fork` + `exec` is a bare program name (`bash`) together with a
//! `PATH` set in the child's environment, because then the name must be looked up in the
//! child's `PATH`, which `posix_spawnp` would not do. The executor always sets the child's
//! whole environment, so a bare `bash` always forked, and a fork costs time proportional to the
//! harness's resident memory. Looking the name up here, in the child's `PATH`, keeps the same
//! meaning ("`bash`, looked up in the child's `PATH`") and lets std take its `posix_spawn` path.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The search path `execvp` uses when the environment has no `PATH` (glibc's default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The path to execute for `program` in a child with environment `env` and working directory
/// `cwd`: `program` itself when it contains a `/` (relative ones are taken relative to `cwd`,
/// as `exec` in the child would), else the first executable regular file named `program` in
/// the child's `PATH` (an empty `PATH` entry is the child's working directory). `None` when the
/// name is found nowhere.
pub(crate) fn resolve_program(
    program: &Path,
    env: &[(OsString, OsString)],
    cwd: &Path,
) -> Option<PathBuf> {
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return Some(if program.is_absolute() {
            program.to_path_buf()
        } else {
            cwd.join(program)
        });
    }
    if program.as_os_str().is_empty() {
        return None;
    }
    let search = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map_or_else(|| OsString::from(DEFAULT_PATH), |(_, value)| value.clone());
    std::env::split_paths(&search)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                cwd.join(program)
            } else if dir.is_absolute() {
                dir.join(program)
            } else {
                cwd.join(dir).join(program)
            }
        })
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_path(value: &str) -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), value.into())]
    }

    fn executable(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn looks_the_name_up_in_the_childs_path_in_order() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let in_b = executable(b.path(), "tool");
        // Not executable in `a`: skipped.
        std::fs::write(a.path().join("tool"), "").unwrap();
        let path = format!("{}:{}", a.path().display(), b.path().display());
        assert_eq!(
            resolve_program(Path::new("tool"), &env_path(&path), Path::new("/")),
            Some(in_b.clone())
        );
        let in_a = executable(a.path(), "tool");
        assert_eq!(
            resolve_program(Path::new("tool"), &env_path(&path), Path::new("/")),
            Some(in_a)
        );
        // A directory of that name is not a program.
        let c = tempfile::tempdir().unwrap();
        std::fs::create_dir(c.path().join("tool")).unwrap();
        let path = format!("{}:{}", c.path().display(), b.path().display());
        assert_eq!(
            resolve_program(Path::new("tool"), &env_path(&path), Path::new("/")),
            Some(in_b)
        );
    }

    #[test]
    fn empty_and_relative_entries_are_relative_to_the_childs_cwd() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir(cwd.path().join("bin")).unwrap();
        let here = executable(cwd.path(), "here");
        let in_bin = executable(&cwd.path().join("bin"), "there");
        assert_eq!(
            resolve_program(Path::new("here"), &env_path("/nonexistent:"), cwd.path()),
            Some(here)
        );
        assert_eq!(
            resolve_program(Path::new("there"), &env_path("bin"), cwd.path()),
            Some(cwd.path().join("bin").join("there"))
        );
        assert!(in_bin.exists());
    }

    #[test]
    fn paths_are_kept_and_missing_names_are_none() {
        assert_eq!(
            resolve_program(Path::new("/opt/x/bash"), &[], Path::new("/w")),
            Some(PathBuf::from("/opt/x/bash"))
        );
        assert_eq!(
            resolve_program(Path::new("./bash"), &[], Path::new("/w")),
            Some(PathBuf::from("/w/./bash"))
        );
        assert_eq!(
            resolve_program(
                Path::new("no-such-program-dsh"),
                &env_path("/bin"),
                Path::new("/")
            ),
            None
        );
        assert_eq!(
            resolve_program(Path::new(""), &env_path("/bin"), Path::new("/")),
            None
        );
    }

    #[test]
    fn without_path_the_default_search_path_is_used() {
        assert_eq!(
            resolve_program(Path::new("sh"), &[], Path::new("/")),
            Some(PathBuf::from("/bin/sh"))
        );
    }
}
