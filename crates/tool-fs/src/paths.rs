//! Path resolution, display, file versions and atomic writes shared by the fs tools.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use dsh_tools::ToolError;

/// Resolve `p` against `cwd` and normalise it lexically (`.` dropped, `..` pops), without
/// following symlinks. The result is absolute when `cwd` is.
pub fn resolve_path(cwd: &Path, p: &str) -> PathBuf {
    let joined = if Path::new(p).is_absolute() {
        PathBuf::from(p)
    } else {
        cwd.join(p)
    };
    let mut out = PathBuf::new();
    for comp in joined.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(comp);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` relative to `cwd` when it lies inside it, else absolute (glob and grep listings).
pub fn display_path(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        _ => path.to_string_lossy().into_owned(),
    }
}

/// A file version: changes whenever the file is replaced or modified (device, inode, size,
/// modification and change times). Cheap (one `stat`); `ctime` cannot be set by `touch`.
pub fn file_version(meta: &std::fs::Metadata) -> String {
    format!(
        "{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

/// The current version of the file at `path`, `None` when it does not exist.
pub fn current_version(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(file_version(&m))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Map an I/O error on `verb`ing `path` to a tool error with an fs code.
pub fn io_error(verb: &str, path: &Path, err: &std::io::Error) -> ToolError {
    use std::io::ErrorKind as K;
    let p = path.display();
    match err.kind() {
        K::NotFound => ToolError::new(
            codes::FS_NOT_FOUND,
            format!("cannot {verb} \"{p}\": not found"),
        ),
        K::PermissionDenied => ToolError::new(
            codes::FS_PERMISSION_DENIED,
            format!("cannot {verb} \"{p}\": permission denied"),
        ),
        K::IsADirectory => ToolError::new(
            codes::FS_NOT_A_FILE,
            format!("cannot {verb} \"{p}\": not a regular file"),
        ),
        K::NotADirectory => ToolError::new(
            codes::FS_NOT_FOUND,
            format!("cannot {verb} \"{p}\": a parent is not a directory"),
        ),
        _ => ToolError::new(codes::FS_IO_ERROR, format!("cannot {verb} \"{p}\": {err}")),
    }
}

/// Error codes of the fs tools.
pub mod codes {
    use dsh_tools::ToolErrorCode;

    pub use dsh_tools::codes::FS_NOT_OBSERVED;
    /// The file (or the offset) does not exist.
    pub const FS_NOT_FOUND: ToolErrorCode = ToolErrorCode::tool_defined("FS_NOT_FOUND");
    /// Binary or non-UTF-8 content.
    pub const FS_NOT_TEXT: ToolErrorCode = ToolErrorCode::tool_defined("FS_NOT_TEXT");
    /// A directory or other non-regular file where a file was expected.
    pub const FS_NOT_A_FILE: ToolErrorCode = ToolErrorCode::tool_defined("FS_NOT_A_FILE");
    /// The operating system refused access.
    pub const FS_PERMISSION_DENIED: ToolErrorCode =
        ToolErrorCode::tool_defined("FS_PERMISSION_DENIED");
    /// Any other I/O failure.
    pub const FS_IO_ERROR: ToolErrorCode = ToolErrorCode::tool_defined("FS_IO_ERROR");
    /// The file changed (or vanished) since it was last observed.
    pub const FS_STALE_VERSION: ToolErrorCode = ToolErrorCode::tool_defined("FS_STALE_VERSION");
    /// `edit`: the file is over the size `edit` will load.
    pub const FS_TOO_LARGE: ToolErrorCode = ToolErrorCode::tool_defined("FS_TOO_LARGE");
    /// `edit`: `old_string` not found.
    pub const FS_EDIT_NOT_FOUND: ToolErrorCode = ToolErrorCode::tool_defined("FS_EDIT_NOT_FOUND");
    /// `edit`: `old_string` matched several times without `replace_all`.
    pub const FS_AMBIGUOUS_EDIT: ToolErrorCode = ToolErrorCode::tool_defined("FS_AMBIGUOUS_EDIT");
    /// `grep`/`glob`: the regex or glob was rejected.
    pub const SEARCH_INVALID_PATTERN: ToolErrorCode =
        ToolErrorCode::tool_defined("SEARCH_INVALID_PATTERN");
    /// `grep`/`glob`: the search failed.
    pub const SEARCH_FAILED: ToolErrorCode = ToolErrorCode::tool_defined("SEARCH_FAILED");
    /// `grep`: more than 20,000,000 bytes of matching lines.
    pub const SEARCH_RAW_OUTPUT_OVERFLOW: ToolErrorCode =
        ToolErrorCode::tool_defined("SEARCH_RAW_OUTPUT_OVERFLOW");
}

/// Write `bytes` to `path` atomically: a temp file in the same directory, fsync, rename.
/// Keeps the permission bits of a file it replaces. Creates parent directories.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)?;
    let existing_mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut n = 0u32;
    let (mut file, tmp) = loop {
        let tmp = dir.join(format!(".{name}.dsh-tmp-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => break (f, tmp),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        file.write_all(bytes)?;
        if let Some(perm) = existing_mode {
            file.set_permissions(perm)?;
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_defined_codes_are_canonical_and_round_trip() {
        use super::codes::*;
        let all = [
            FS_NOT_FOUND,
            FS_NOT_TEXT,
            FS_NOT_A_FILE,
            FS_PERMISSION_DENIED,
            FS_IO_ERROR,
            FS_STALE_VERSION,
            FS_TOO_LARGE,
            FS_EDIT_NOT_FOUND,
            FS_AMBIGUOUS_EDIT,
            SEARCH_INVALID_PATTERN,
            SEARCH_FAILED,
            SEARCH_RAW_OUTPUT_OVERFLOW,
        ];
        for code in all {
            assert!(code.is_canonical(), "{code} has a named variant");
            let json = serde_json::to_string(&code).unwrap();
            let back: dsh_tools::ToolErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
        }
        assert_eq!(FS_NOT_OBSERVED, dsh_tools::ToolErrorCode::FsNotObserved);
    }

    #[test]
    fn resolves_and_displays() {
        let cwd = Path::new("/w/proj");
        assert_eq!(
            resolve_path(cwd, "a/./b/../c.txt"),
            PathBuf::from("/w/proj/a/c.txt")
        );
        assert_eq!(resolve_path(cwd, "../x"), PathBuf::from("/w/x"));
        assert_eq!(resolve_path(cwd, "/etc/hosts"), PathBuf::from("/etc/hosts"));
        assert_eq!(display_path(cwd, Path::new("/w/proj/src/a.rs")), "src/a.rs");
        assert_eq!(display_path(cwd, Path::new("/w/other")), "/w/other");
    }
}
