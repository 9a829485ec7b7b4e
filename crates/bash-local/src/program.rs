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

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

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
    let search = child_path(env).map_or_else(|| OsString::from(DEFAULT_PATH), Clone::clone);
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

/// What a lookup's answer depends on besides the file system: the name, the child's `PATH`
/// (`None`: unset) and, for relative or empty `PATH` entries, the child's working directory.
type LookupKey = (PathBuf, Option<OsString>, PathBuf);

/// Remembered `PATH` lookups, like a shell's `hash` table: a bare name found once is taken
/// from here while the file found is still an executable regular file (one `stat` instead of
/// one per `PATH` entry on every command); when it is gone the name is looked up again. As
/// with a shell's `hash`, a program of the same name placed later in an earlier `PATH`
/// directory is not noticed. Keyed on everything the answer depends on: the name, the
/// child's `PATH` value and the working directory (so an environment policy that changes
/// `PATH`, or a change of working directory, never reuses another key's answer).
#[derive(Debug, Default)]
pub(crate) struct ProgramCache {
    found: Mutex<HashMap<LookupKey, PathBuf>>,
}

impl ProgramCache {
    fn table(&self) -> MutexGuard<'_, HashMap<LookupKey, PathBuf>> {
        self.found.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`resolve_program`], answered from the table when the remembered file still qualifies.
    pub(crate) fn resolve(
        &self,
        program: &Path,
        env: &[(OsString, OsString)],
        cwd: &Path,
    ) -> Option<PathBuf> {
        if program.as_os_str().as_encoded_bytes().contains(&b'/') {
            return resolve_program(program, env, cwd);
        }
        let key = (
            program.to_path_buf(),
            child_path(env).cloned(),
            cwd.to_path_buf(),
        );
        if let Some(hit) = self.table().get(&key)
            && is_executable_file(hit)
        {
            return Some(hit.clone());
        }
        let found = resolve_program(program, env, cwd);
        let mut table = self.table();
        match &found {
            Some(path) => {
                // A bounded table: a session that keeps changing PATH or directories starts over.
                if table.len() >= MAX_REMEMBERED {
                    table.clear();
                }
                table.insert(key, path.clone());
            }
            None => {
                table.remove(&key);
            }
        }
        found
    }
}

/// At most this many remembered lookups per executor.
const MAX_REMEMBERED: usize = 64;

/// The child's `PATH` (the last one set wins, as in the spawn).
fn child_path(env: &[(OsString, OsString)]) -> Option<&OsString> {
    env.iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value)
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

    #[test]
    fn the_cache_answers_a_remembered_name_and_looks_again_when_it_is_gone() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let in_b = executable(b.path(), "tool");
        let path = format!("{}:{}", a.path().display(), b.path().display());
        let cache = ProgramCache::default();
        let env = env_path(&path);
        assert_eq!(
            cache.resolve(Path::new("tool"), &env, Path::new("/")),
            Some(in_b.clone())
        );
        // Remembered, as a shell's `hash` does: a later one earlier on PATH is not noticed...
        let in_a = executable(a.path(), "tool");
        assert_eq!(
            cache.resolve(Path::new("tool"), &env, Path::new("/")),
            Some(in_b.clone())
        );
        // ...until the remembered file is gone.
        std::fs::remove_file(&in_b).unwrap();
        assert_eq!(
            cache.resolve(Path::new("tool"), &env, Path::new("/")),
            Some(in_a.clone())
        );
        std::fs::remove_file(&in_a).unwrap();
        assert_eq!(cache.resolve(Path::new("tool"), &env, Path::new("/")), None);
    }

    #[test]
    fn the_cache_is_keyed_on_the_childs_path_and_cwd() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let in_a = executable(a.path(), "tool");
        let in_b = executable(b.path(), "tool");
        let cache = ProgramCache::default();
        let env_a = env_path(&a.path().display().to_string());
        let env_b = env_path(&b.path().display().to_string());
        assert_eq!(
            cache.resolve(Path::new("tool"), &env_a, Path::new("/")),
            Some(in_a.clone())
        );
        // Another PATH (an environment policy that changed it): its own answer.
        assert_eq!(
            cache.resolve(Path::new("tool"), &env_b, Path::new("/")),
            Some(in_b)
        );
        // A relative PATH entry is looked up in each working directory.
        let (w1, w2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let here = executable(w1.path(), "here");
        let rel = env_path(":");
        assert_eq!(
            cache.resolve(Path::new("here"), &rel, w1.path()),
            Some(here)
        );
        assert_eq!(cache.resolve(Path::new("here"), &rel, w2.path()), None);
    }
}
