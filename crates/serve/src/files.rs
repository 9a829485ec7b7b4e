//! `GET /v1/sessions/{id}/files`: the files under a session's working directory, for `@`
//! mentions in a front end's composer.
//!
//! Confined to the directory: `dir` is relative, has no `..`, and must resolve (symlinks
//! followed) inside it; symbolic links met while walking are listed only when they resolve
//! inside it too. Ignored files are left out (`.gitignore`, `.ignore`, git's excludes, hidden
//! files, `.git`), the walk is bounded, and the answer sorted.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// The files of a session's working directory (`GET /v1/sessions/{id}/files`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileList {
    /// The session's working directory (absolute, on the server's machine).
    pub root: String,
    /// Paths relative to `root`, `/`-separated, in order.
    pub files: Vec<String>,
    /// More files matched than `limit`, or the walk stopped at its bound.
    pub truncated: bool,
}

/// The query of the files route.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilesQuery {
    /// A directory under the working directory to list (relative, no `..`); the whole
    /// directory when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// Only paths containing this text (case-insensitive), e.g. what follows an `@`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// At most this many paths (1 to 1000; default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

/// The default and the largest `limit`.
pub const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit`.
pub const MAX_LIMIT: u32 = 1000;
/// Directory entries a listing visits at most.
pub const MAX_VISITED: usize = 50_000;
/// How deep a listing walks.
const MAX_DEPTH: usize = 32;

/// Lists the files under `root` (a session's working directory) for `query`.
pub fn list(root: &str, query: &FilesQuery) -> Result<FileList, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::invalid(format!(
            "`limit` must be between 1 and {MAX_LIMIT} (got {limit})"
        )));
    }
    let base = Path::new(root);
    let real_root = base.canonicalize().map_err(|e| {
        ApiError::invalid(format!(
            "the session's working directory `{root}` cannot be listed: {e}"
        ))
    })?;
    let start = match query.dir.as_deref().filter(|d| !d.is_empty()) {
        None => real_root.clone(),
        Some(dir) => confined(&real_root, dir)?,
    };
    let needle = query.q.as_deref().unwrap_or_default().to_lowercase();
    let mut files = Vec::new();
    let mut truncated = false;
    let walk = ignore::WalkBuilder::new(&start)
        .standard_filters(true)
        .require_git(false)
        .follow_links(false)
        .max_depth(Some(MAX_DEPTH))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for (visited, entry) in walk.enumerate() {
        if visited >= MAX_VISITED {
            truncated = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            continue;
        }
        if kind.is_symlink() {
            // Listed only when it resolves to a file inside the directory.
            match path.canonicalize() {
                Ok(to) if to.starts_with(&real_root) && to.is_file() => {}
                _ => continue,
            }
        }
        let Ok(rel) = path.strip_prefix(&real_root) else {
            continue;
        };
        let rel = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        if !needle.is_empty() && !rel.to_lowercase().contains(&needle) {
            continue;
        }
        if files.len() >= limit as usize {
            truncated = true;
            break;
        }
        files.push(rel);
    }
    Ok(FileList {
        root: real_root.display().to_string(),
        files,
        truncated,
    })
}

/// `dir` under `root` (canonical), refused when it is absolute, climbs with `..`, or resolves
/// outside `root`.
fn confined(root: &Path, dir: &str) -> Result<PathBuf, ApiError> {
    let rel = Path::new(dir);
    for c in rel.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(ApiError::invalid(format!(
                    "`dir` `{dir}` climbs out with `..`: name a directory inside the session's \
                     working directory"
                )));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ApiError::invalid(format!(
                    "`dir` `{dir}` is absolute: name a directory relative to the session's \
                     working directory"
                )));
            }
        }
    }
    let joined = root.join(rel);
    let real = joined.canonicalize().map_err(|_| {
        ApiError::invalid(format!(
            "`dir` `{dir}` is not a directory in the session's working directory"
        ))
    })?;
    if !real.starts_with(root) {
        return Err(ApiError::invalid(format!(
            "`dir` `{dir}` leads outside the session's working directory (a symbolic link \
             out of it)"
        )));
    }
    if !real.is_dir() {
        return Err(ApiError::invalid(format!(
            "`dir` `{dir}` is not a directory in the session's working directory"
        )));
    }
    Ok(real)
}
