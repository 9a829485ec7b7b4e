//! The session's own artefact storage (spill files of tool output): `<session dir>/spill/`.
//!
//! Spill files belong to the session: they live under the session's directory in the store's
//! root (so under `$DSH_HOME`, keyed by the same injective directory name as the log, never
//! shared between homes), are removed with the session ([`JsonlStore::remove_session`]), and
//! their total size per session is capped ([`JsonlStore::spill_cap`], checked by the producer
//! against [`JsonlStore::spill_usage`]). The directory is not a log generation: readers ignore
//! it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::JsonlStore;
use crate::error::StoreError;
use crate::store::SPILL_DIR;

impl JsonlStore {
    /// The session's directory (where its log, lock and artefacts live), for a session open for
    /// write in this store or stored under the root.
    pub fn session_dir_of(&self, id: &str) -> Result<PathBuf, StoreError> {
        if let Some(dir) = self.open.dir(id) {
            return Ok(dir);
        }
        self.find_dir(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }

    /// The session's spill directory, `<session dir>/spill/`, created (mode 0700 on Unix) if
    /// needed. Fails with `NotFound` for a session this store neither holds open nor stores.
    pub fn spill_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        let dir = self.session_dir_of(id)?.join(SPILL_DIR);
        create_private_dir(&dir)?;
        Ok(dir)
    }

    /// The cap on the total size of one session's spill files, in bytes (default
    /// [`crate::store::DEFAULT_SPILL_CAP_BYTES`], configurable with
    /// [`JsonlStore::with_spill_cap`] or the plugin's `spillCapBytes`).
    pub fn spill_cap(&self) -> u64 {
        self.spill_cap
    }

    /// Bytes currently used by the session's spill files (0 when there are none).
    pub fn spill_usage(&self, id: &str) -> Result<u64, StoreError> {
        let dir = self.session_dir_of(id)?.join(SPILL_DIR);
        dir_size(&dir)
    }

    /// Deletes a stored session with everything it owns (log generations, lock file, spill
    /// files): its whole directory. Refused with `Locked` while a writer (this process or
    /// another) holds it. Only the session directory is touched.
    pub fn remove_session(&self, id: &str) -> Result<PathBuf, StoreError> {
        let busy = self.open.reserve(id)?;
        let dir = self
            .find_dir(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let lock = crate::store::take_lock(&dir, id)?;
        fs::remove_dir_all(&dir).map_err(|e| StoreError::io("removing", &dir, e))?;
        drop(lock);
        drop(busy);
        Ok(dir)
    }
}

fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|e| StoreError::io("creating", dir, e))
}

fn dir_size(dir: &Path) -> Result<u64, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(StoreError::io("listing", dir, e)),
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("listing", dir, e))?;
        let meta = entry
            .metadata()
            .map_err(|e| StoreError::io("inspecting", entry.path(), e))?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
