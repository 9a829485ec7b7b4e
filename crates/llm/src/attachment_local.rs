//! The local attachment store (plugin `attachment-local`), the original's layout: immutable,
//! owner-private objects under `$DSH_HOME/attachments/v1/objects/<2 hex>/<64 hex>`, written to
//! `tmp/` first, synced, made read-only and renamed into place (so a reader never sees a torn
//! object and a crash leaves at most a stray file in `tmp/`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_kernel::{BoxError, Ctx, Plugin};
use serde::Deserialize;

use crate::attachments::{AttachmentError, AttachmentStore, content_id};

/// A content-addressed store in a local directory (the original's `attachments/v1` layout).
#[derive(Clone, Debug)]
pub struct LocalAttachments {
    root: PathBuf,
}

static STAGED: AtomicU64 = AtomicU64::new(0);

impl LocalAttachments {
    /// The store rooted at `root` (`$DSH_HOME/attachments/v1` by default).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `$DSH_HOME/attachments/v1` (`DSH_HOME` defaults to `~/.dsh`).
    pub fn default_root() -> PathBuf {
        let home = std::env::var_os("DSH_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".dsh"))
            })
            .unwrap_or_else(|| PathBuf::from(".dsh"));
        home.join("attachments").join("v1")
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The object file of `attachment_id` (only well-formed ids: no path can escape the root).
    pub fn path_of(&self, attachment_id: &str) -> Result<PathBuf, AttachmentError> {
        let hex = attachment_id
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .ok_or_else(|| AttachmentError::BadId(attachment_id.to_owned()))?;
        Ok(self.root.join("objects").join(&hex[..2]).join(hex))
    }

    fn stage(&self, bytes: &[u8]) -> Result<PathBuf, AttachmentError> {
        let dir = self.root.join("tmp");
        private_dir(&dir)?;
        let n = STAGED.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{}-{n}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            set_mode(&path, 0o400)
        };
        write().map_err(|source| {
            let _ = std::fs::remove_file(&path);
            AttachmentError::Write {
                path: path.clone(),
                source,
            }
        })?;
        Ok(path)
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

fn private_dir(dir: &Path) -> Result<(), AttachmentError> {
    let make = || -> std::io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        std::fs::create_dir_all(dir)?;
        set_mode(dir, 0o700)
    };
    make().map_err(|source| AttachmentError::Write {
        path: dir.to_owned(),
        source,
    })
}

impl AttachmentStore for LocalAttachments {
    fn read(&self, attachment_id: &str) -> Result<Vec<u8>, AttachmentError> {
        crate::attachments::read_object(&self.path_of(attachment_id)?, attachment_id)
    }

    fn put(&self, bytes: &[u8]) -> Result<String, AttachmentError> {
        let id = content_id(bytes);
        let path = self.path_of(&id)?;
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(id);
        }
        if let Some(parent) = path.parent() {
            private_dir(parent)?;
        }
        let staged = self.stage(bytes)?;
        std::fs::rename(&staged, &path).map_err(|source| {
            let _ = std::fs::remove_file(&staged);
            AttachmentError::Write {
                path: path.clone(),
                source,
            }
        })?;
        sync_parent(&path);
        Ok(id)
    }
}

/// Syncs the directory entry of a published object (best effort).
fn sync_parent(path: &Path) {
    if let Some(parent) = path.parent()
        && let Ok(d) = std::fs::File::open(parent)
    {
        let _ = d.sync_all();
    }
}

/// Config of `attachment-local`.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AttachmentLocalConfig {
    /// The store's directory (default `$DSH_HOME/attachments/v1`).
    #[serde(default)]
    pub root: Option<PathBuf>,
}

/// Plugin `attachment-local`: provides the [`AttachmentStore`] service as a
/// [`LocalAttachments`] directory, where tools put image bytes and adapters read them.
#[derive(Debug)]
pub struct AttachmentLocalPlugin;

impl Plugin for AttachmentLocalPlugin {
    const NAME: &'static str = "attachment-local";
    type Config = AttachmentLocalConfig;

    async fn apply(ctx: Ctx, config: AttachmentLocalConfig) -> Result<(), BoxError> {
        let root = config.root.unwrap_or_else(LocalAttachments::default_root);
        let store: Arc<dyn AttachmentStore> = Arc::new(LocalAttachments::new(root));
        ctx.provide::<dyn AttachmentStore>(store)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_content_addressed_read_only_and_deduplicated() {
        let dir = std::env::temp_dir().join(format!("dsh-llm-local-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = LocalAttachments::new(&dir);
        let id = store.put(b"PNG bytes").unwrap();
        assert_eq!(id, content_id(b"PNG bytes"));
        let hex = &id[7..];
        let path = dir.join("objects").join(&hex[..2]).join(hex);
        assert_eq!(store.path_of(&id).unwrap(), path);
        assert_eq!(std::fs::read(&path).unwrap(), b"PNG bytes");
        assert_eq!(store.read(&id).unwrap(), b"PNG bytes");
        assert_eq!(store.put(b"PNG bytes").unwrap(), id);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o400);
        }
        assert_eq!(std::fs::read_dir(dir.join("tmp")).unwrap().count(), 0);
        assert!(matches!(
            store.read(&content_id(b"other")),
            Err(AttachmentError::NotFound(_))
        ));
        assert!(matches!(
            store.read("sha256:../../x"),
            Err(AttachmentError::BadId(_))
        ));
        // Upper-case hex is not an id of this store (ids are written lower-case).
        assert!(store.path_of(&id.to_ascii_uppercase()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
