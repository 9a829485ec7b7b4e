//! The child environment: inherited, minus secrets, plus the managed `DSH_*` facts.
//!
//! Policy (`docs/behaviours.md` BA-2): start from the harness's environment; drop
//! every variable whose name contains `KEY`, `PASSWORD`, `SECRET` or `TOKEN`
//! (case-insensitive), every name in the configured scrub list (always including
//! `DEEPSEEK_API_KEY`, and `BASH_ENV`/`ENV` so no startup file runs), and every inherited
//! `DSH_*` variable; then set `NO_COLOR=1`,
//! `TERM=dumb`, `PAGER=cat`, `GIT_PAGER=cat`; then the managed facts `DSH_HOME` (the harness's
//! `DSH_HOME`, else `$HOME/.dsh`), `DSH_SHELL=1` and `DSH_SESSION_ID` (when the run has a
//! session); then the request's own extra variables.

use std::ffi::{OsStr, OsString};

/// Substrings (upper case) that mark an inherited variable as a secret.
pub const SECRET_NAME_PATTERNS: [&str; 4] = ["KEY", "PASSWORD", "SECRET", "TOKEN"];

/// Names always removed, whatever the configuration says: the harness's own API key, and the
/// startup files a non-interactive bash would source despite `--norc` (`BASH_ENV`; `ENV` for
/// `sh` mode).
pub const ALWAYS_SCRUBBED: [&str; 3] = ["DEEPSEEK_API_KEY", "BASH_ENV", "ENV"];

/// Fixed variables that make tools behave well without a terminal.
pub const QUIET_DEFAULTS: [(&str, &str); 4] = [
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// Decides which inherited variables a child may see.
#[derive(Debug, Clone, Default)]
pub struct EnvPolicy {
    /// Extra exact names to remove (compared case-insensitively), on top of the patterns.
    pub scrub: Vec<String>,
}

impl EnvPolicy {
    /// True when an inherited variable named `name` must not reach the child.
    pub fn is_scrubbed(&self, name: &OsStr) -> bool {
        let upper = name.to_string_lossy().to_ascii_uppercase();
        upper.starts_with("DSH_")
            || SECRET_NAME_PATTERNS.iter().any(|p| upper.contains(p))
            || ALWAYS_SCRUBBED.iter().any(|n| upper == *n)
            || self.scrub.iter().any(|n| n.eq_ignore_ascii_case(&upper))
    }

    /// The complete environment of a child, from the inherited `vars`.
    pub fn build(
        &self,
        inherited: impl IntoIterator<Item = (OsString, OsString)>,
        session_id: Option<&str>,
        extra: &[(String, String)],
    ) -> Vec<(OsString, OsString)> {
        let inherited: Vec<(OsString, OsString)> = inherited.into_iter().collect();
        let lookup = |name: &str| {
            inherited
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        // The harness's home, re-exported as a managed fact (the inherited DSH_* are dropped).
        let dsh_home = lookup("DSH_HOME").or_else(|| {
            lookup("HOME").map(|home| {
                let mut path = std::path::PathBuf::from(home);
                path.push(".dsh");
                path.into_os_string()
            })
        });
        let mut out: Vec<(OsString, OsString)> = inherited
            .iter()
            .filter(|(name, _)| !self.is_scrubbed(name))
            .cloned()
            .collect();
        let mut set = |name: &str, value: &OsStr| {
            out.retain(|(n, _)| n != name);
            out.push((name.into(), value.to_os_string()));
        };
        for (name, value) in QUIET_DEFAULTS {
            set(name, OsStr::new(value));
        }
        if let Some(home) = &dsh_home {
            set("DSH_HOME", home);
        }
        set("DSH_SHELL", OsStr::new("1"));
        if let Some(id) = session_id {
            set("DSH_SESSION_ID", OsStr::new(id));
        }
        for (name, value) in extra {
            set(name, OsStr::new(value));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(a, b)| (OsString::from(a), OsString::from(b)))
            .collect()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsStr> {
        env.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_os_str())
    }

    #[test]
    fn scrubs_secrets_and_inherited_dsh_vars() {
        let policy = EnvPolicy {
            scrub: vec!["corp_login".into()],
        };
        let env = policy.build(
            vars(&[
                ("PATH", "/bin"),
                ("DEEPSEEK_API_KEY", "sk-1"),
                ("github_token", "t"),
                ("MyPassword", "p"),
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("CORP_LOGIN", "x"),
                ("DSH_SESSION_ID", "stale"),
                ("DSH_HOME", "/h"),
                ("TERM", "xterm"),
                ("HOME", "/root"),
                ("BASH_ENV", "/rc"),
            ]),
            Some("s-1"),
            &[("EXTRA".into(), "e".into())],
        );
        assert_eq!(get(&env, "PATH"), Some(OsStr::new("/bin")));
        assert_eq!(get(&env, "HOME"), Some(OsStr::new("/root")));
        for gone in [
            "DEEPSEEK_API_KEY",
            "github_token",
            "MyPassword",
            "AWS_SECRET_ACCESS_KEY",
            "CORP_LOGIN",
            "BASH_ENV",
        ] {
            assert_eq!(get(&env, gone), None, "{gone} leaked");
        }
        assert_eq!(get(&env, "DSH_SESSION_ID"), Some(OsStr::new("s-1")));
        assert_eq!(
            get(&env, "DSH_HOME"),
            Some(OsStr::new("/h")),
            "managed, re-exported"
        );
        assert_eq!(get(&env, "DSH_SHELL"), Some(OsStr::new("1")));
        assert_eq!(get(&env, "TERM"), Some(OsStr::new("dumb")));
        assert_eq!(get(&env, "NO_COLOR"), Some(OsStr::new("1")));
        assert_eq!(get(&env, "EXTRA"), Some(OsStr::new("e")));
        assert_eq!(env.iter().filter(|(n, _)| n == "TERM").count(), 1);
    }

    #[test]
    fn no_session_means_no_session_var() {
        let env = EnvPolicy::default().build(vars(&[("DSH_SESSION_ID", "x")]), None, &[]);
        assert_eq!(get(&env, "DSH_SESSION_ID"), None);
        assert_eq!(get(&env, "DSH_HOME"), None, "no DSH_HOME and no HOME");
    }

    #[test]
    fn dsh_home_defaults_under_home() {
        let env = EnvPolicy::default().build(vars(&[("HOME", "/u")]), None, &[]);
        assert_eq!(get(&env, "DSH_HOME"), Some(OsStr::new("/u/.dsh")));
        assert_eq!(env.iter().filter(|(n, _)| n == "DSH_HOME").count(), 1);
    }
}
