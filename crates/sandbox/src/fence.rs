//! The fenced atomic write: a temp file and a rename, both made relative to a directory file
//! descriptor whose real path was checked against the policy.
//!
//! Why by descriptor: checking a path and then writing to it leaves a window in which a
//! component can be swapped for a symlink (TOCTOU). Here the parent directory is opened once,
//! its real path is read back from the kernel (`/proc/self/fd/N`), checked, and the temp file
//! is created (`O_EXCL | O_NOFOLLOW`) and renamed over the target with `openat`/`renameat` in
//! that same directory, so what was checked is what is written. The rename replaces the
//! directory entry: a hard link to a file outside the roots is broken, never written through.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::error::SandboxError;
use crate::policy::SandboxPolicy;

/// Why a fenced write failed.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The policy refused it.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The file system did.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename), creating parent
/// directories, keeping the permission bits of a file it replaces. With a `policy`, the write
/// is checked before any directory is created and again against the opened directory's real
/// path. `path` must be the final target (a final symlink already resolved by the caller).
pub fn write_atomically(
    policy: Option<&SandboxPolicy>,
    path: &Path,
    bytes: &[u8],
) -> Result<(), FenceError> {
    if let Some(policy) = policy {
        policy.check_write(path)?;
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?
        .to_owned();
    std::fs::create_dir_all(dir)?;
    let dir_file = File::open(dir)?;
    if let Some(policy) = policy {
        let real_dir = opened_path(&dir_file)?;
        let real = real_dir.join(&name);
        if !policy.allows_real(&real) {
            return Err(SandboxError::Denied {
                path: path.to_path_buf(),
                mode: policy.mode,
                why: format!(
                    "its directory is really \"{}\", outside the writable roots ({})",
                    real_dir.display(),
                    policy.roots_text()
                ),
            }
            .into());
        }
    }
    let existing_mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let stem = name.to_string_lossy().into_owned();
    let mut n = 0u32;
    let (file, tmp) = loop {
        let tmp = format!(".{stem}.dsh-tmp-{}-{n}", std::process::id());
        match openat(
            dir_file.as_fd(),
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => break (File::from(fd), tmp),
            Err(nix::errno::Errno::EEXIST) if n < 1000 => n += 1,
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    };
    let result = (|| -> std::io::Result<()> {
        let mut file = file;
        file.write_all(bytes)?;
        if let Some(perm) = existing_mode {
            file.set_permissions(perm)?;
        }
        file.sync_all()?;
        drop(file);
        renameat(
            dir_file.as_fd(),
            tmp.as_str(),
            dir_file.as_fd(),
            name.as_os_str(),
        )
        .map_err(std::io::Error::from)
    })();
    if let Err(e) = result {
        let _ = unlinkat(dir_file.as_fd(), tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e.into());
    }
    Ok(())
}

/// The real path of an open file, as the kernel records it.
fn opened_path(file: &File) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}
