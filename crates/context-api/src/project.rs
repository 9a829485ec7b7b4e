//! Where a session's context comes from: the project root, dsh's home and the user's home.

use std::path::{Path, PathBuf};

/// The directories context is loaded from, for one working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectPaths {
    /// The working directory.
    pub cwd: PathBuf,
    /// The nearest ancestor of `cwd` (itself included) holding a root marker (`.git`), else `cwd`.
    pub root: PathBuf,
    /// `$DSH_HOME` (default `~/.dsh`).
    pub dsh_home: PathBuf,
    /// The user's home (`$HOME`), for `~/.claude/…`; `None` when unset.
    pub user_home: Option<PathBuf>,
    /// `$DSH_AGENTS_HOME`, default `~/.agents`.
    pub agents_home: Option<PathBuf>,
}

impl ProjectPaths {
    /// Paths for `cwd` from the process environment, with `markers` naming a project root.
    pub fn discover(cwd: &Path, markers: &[String]) -> Self {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let user_home = env("HOME");
        let dsh_home = env("DSH_HOME").unwrap_or_else(|| {
            user_home
                .as_ref()
                .map(|h| h.join(".dsh"))
                .unwrap_or_else(|| PathBuf::from(".dsh"))
        });
        let agents_home =
            env("DSH_AGENTS_HOME").or_else(|| user_home.as_ref().map(|h| h.join(".agents")));
        Self::with_homes(cwd, markers, dsh_home, user_home, agents_home)
    }

    /// Paths for `cwd` with explicit homes (tests, benches).
    pub fn with_homes(
        cwd: &Path,
        markers: &[String],
        dsh_home: PathBuf,
        user_home: Option<PathBuf>,
        agents_home: Option<PathBuf>,
    ) -> Self {
        let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
        let root = project_root(&cwd, markers);
        Self {
            cwd,
            root,
            dsh_home,
            user_home,
            agents_home,
        }
    }

    /// The directories from the project root down to the working directory, root first.
    pub fn root_to_cwd(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .cwd
            .ancestors()
            .take_while(|d| d.starts_with(&self.root))
            .map(Path::to_path_buf)
            .collect();
        dirs.reverse();
        dirs
    }
}

/// The nearest ancestor of `cwd` (itself included) that holds one of `markers`, else `cwd`.
pub fn project_root(cwd: &Path, markers: &[String]) -> PathBuf {
    cwd.ancestors()
        .find(|d| markers.iter().any(|m| d.join(m).exists()))
        .unwrap_or(cwd)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_the_nearest_git_ancestor_and_dirs_run_root_to_cwd() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("repo/.git")).unwrap();
        std::fs::create_dir_all(base.join("repo/a/b")).unwrap();
        let p = ProjectPaths::with_homes(
            &base.join("repo/a/b"),
            &[".git".into()],
            base.join("home/.dsh"),
            None,
            None,
        );
        assert_eq!(p.root, base.join("repo"));
        assert_eq!(
            p.root_to_cwd(),
            vec![
                base.join("repo"),
                base.join("repo/a"),
                base.join("repo/a/b")
            ]
        );
        let none = ProjectPaths::with_homes(
            &base.join("home"),
            &[".nope".into()],
            base.clone(),
            None,
            None,
        );
        assert_eq!(none.root_to_cwd(), vec![none.cwd.clone()]);
    }
}
