//! The file-backend seam as the file tools use it (the seam itself, [`FileBackend`] and the
//! [`FileBackends`] service, is `dsh-fs-backend`): the tool error of a backend failure, and
//! requests bounded by the call's cancellation.
//!
//! By default every session uses the local file system (the streaming, sandbox-fenced code paths
//! of the tools). Paths inside the session's working directory of a session with a backend are
//! read and written through it, with the same texts, limits and error codes. Paths outside it
//! stay local (and under the sandbox policy); `glob` and `grep` always search the local file
//! system.

use std::path::Path;

pub use dsh_fs_backend::{
    BackendError, BackendRegistration, FileBackend, FileBackends, text_version,
};
use dsh_tools::{ToolContext, ToolError};

use crate::paths::codes;

/// The tool error of a backend failure on `verb`ing `path`, with the local codes.
pub fn backend_error(
    backend: &dyn FileBackend,
    verb: &str,
    path: &Path,
    err: &BackendError,
) -> ToolError {
    let p = path.display();
    match err {
        BackendError::NotFound => ToolError::new(
            codes::FS_NOT_FOUND,
            format!("cannot {verb} \"{p}\": not found"),
        ),
        BackendError::PermissionDenied(why) => ToolError::new(
            codes::FS_PERMISSION_DENIED,
            format!(
                "cannot {verb} \"{p}\": permission denied ({}: {why})",
                backend.name()
            ),
        ),
        BackendError::Failed(why) => ToolError::new(
            codes::FS_IO_ERROR,
            format!("cannot {verb} \"{p}\": {}: {why}", backend.name()),
        ),
    }
}

/// Runs a backend request, aborted when the call is cancelled.
pub(crate) async fn bounded<T>(
    ctx: &ToolContext,
    fut: impl Future<Output = Result<T, BackendError>>,
) -> Result<Result<T, BackendError>, ToolError> {
    tokio::select! {
        r = fut => Ok(r),
        () = ctx.cancel_token().cancelled() => Err(ToolError::aborted()),
    }
}
