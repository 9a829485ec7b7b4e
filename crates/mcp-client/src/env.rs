//! The environment of a spawned stdio server: the parent's, scrubbed, plus the configured `env`.

use std::collections::BTreeMap;
use std::ffi::OsString;

/// Whether a parent variable is withheld from servers (upstream §4.1): names matching
/// `KEY|PASSWORD|SECRET|TOKEN` (case-insensitive) and every `DSH_*`. `DEEPSEEK_API_KEY` is
/// covered by `KEY`.
pub fn is_scrubbed(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("DSH_")
        || ["KEY", "PASSWORD", "SECRET", "TOKEN"]
            .iter()
            .any(|w| upper.contains(w))
}

/// The server's environment: `parent` without the scrubbed names, then `configured` over it
/// (an explicitly configured variable is passed even when its name would be scrubbed).
pub fn server_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    configured: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(k, _)| !is_scrubbed(&k.to_string_lossy()))
        .filter(|(k, _)| !configured.contains_key(k.to_string_lossy().as_ref()))
        .collect();
    out.extend(
        configured
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    #[test]
    fn secrets_and_dsh_names_are_dropped() {
        let parent = pairs(&[
            ("PATH", "/bin"),
            ("DEEPSEEK_API_KEY", "sk"),
            ("GITHUB_TOKEN", "t"),
            ("db_password", "p"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("DSH_HOME", "/h"),
            ("HOME", "/root"),
        ]);
        let env = server_env(parent, &BTreeMap::new());
        let names: Vec<_> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["PATH", "HOME"]);
    }

    #[test]
    fn configured_values_win_and_pass_even_secret_names() {
        let parent = pairs(&[("PATH", "/bin"), ("DEEPSEEK_API_KEY", "parent")]);
        let mut conf = BTreeMap::new();
        conf.insert("DEEPSEEK_API_KEY".to_owned(), "mine".to_owned());
        conf.insert("PATH".to_owned(), "/x".to_owned());
        let env = server_env(parent, &conf);
        assert_eq!(env, pairs(&[("DEEPSEEK_API_KEY", "mine"), ("PATH", "/x")]));
    }
}
