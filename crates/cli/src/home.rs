//! `DSH_HOME` and the paths under it.

use std::path::PathBuf;

/// `$DSH_HOME`, default `~/.dsh`.
pub(crate) fn dsh_home() -> PathBuf {
    if let Some(h) = std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home).join(".dsh"),
        None => PathBuf::from(".dsh"),
    }
}

/// `$DSH_HOME/dsh.yaml`, the user's composition layer.
pub(crate) fn user_file() -> PathBuf {
    dsh_home().join("dsh.yaml")
}

/// `$DSH_HOME/sessions`.
pub(crate) fn sessions_root() -> PathBuf {
    dsh_home().join("sessions")
}
