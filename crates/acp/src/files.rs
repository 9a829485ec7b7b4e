//! The client's files (`fs/read_text_file`, `fs/write_text_file`) as the session's
//! [`FileBackend`]: when the client advertises both capabilities, `read`, `write` and `edit`
//! (and the read-before-write guard) see the editor's buffers, unsaved changes included, and
//! writes land in them. dsh's own checks still run first (the sandbox policy of `write`/`edit`,
//! approvals); `glob` and `grep` search the local disk.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, SessionId, WriteTextFileRequest};
use dsh_fs_backend::{BackendError, FileBackend};
use futures::future::BoxFuture;

/// One session's files, served by the ACP client.
pub(crate) struct ClientFiles {
    pub(crate) connection: ConnectionTo<Client>,
    pub(crate) session: String,
}

/// A client's error as a backend error. "Not found" is `-32002` (ACP's resource-not-found) or
/// a message saying so (clients often answer a missing file with an internal error carrying
/// the OS's `ENOENT` text).
fn classify(e: &agent_client_protocol::Error) -> BackendError {
    let mut text = e.message.clone();
    if let Some(data) = &e.data {
        let detail = data
            .get("details")
            .and_then(serde_json::Value::as_str)
            .map_or_else(|| data.to_string(), str::to_owned);
        if !detail.is_empty() && detail != "null" && !text.contains(&detail) {
            text = format!("{text} ({detail})");
        }
    }
    let lower = text.to_lowercase();
    if e.code == agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND
        || lower.contains("enoent")
        || lower.contains("no such file")
        || lower.contains("not found")
    {
        return BackendError::NotFound;
    }
    if lower.contains("permission denied") || lower.contains("eacces") {
        return BackendError::PermissionDenied(text);
    }
    BackendError::Failed(text)
}

impl FileBackend for ClientFiles {
    fn name(&self) -> &str {
        "the ACP client"
    }

    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, BackendError>> {
        Box::pin(async move {
            let request = ReadTextFileRequest::new(SessionId::new(self.session.as_str()), path);
            self.connection
                .send_request(request)
                .block_task()
                .await
                .map(|r| r.content)
                .map_err(|e| classify(&e))
        })
    }

    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let request =
                WriteTextFileRequest::new(SessionId::new(self.session.as_str()), path, content);
            self.connection
                .send_request(request)
                .block_task()
                .await
                .map(|_| ())
                .map_err(|e| classify(&e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::Error;

    #[test]
    fn client_errors_are_classified() {
        assert_eq!(
            classify(&Error::new(-32002, "Resource not found")),
            BackendError::NotFound
        );
        let enoent = Error::new(-32603, "Internal error")
            .data(serde_json::json!({"details": "ENOENT: no such file or directory, open '/x'"}));
        assert_eq!(classify(&enoent), BackendError::NotFound);
        let outside = Error::new(-32603, "Internal error")
            .data(serde_json::json!({"details": "Path is outside allowed cwd subtree: /etc/x"}));
        assert_eq!(
            classify(&outside),
            BackendError::Failed(
                "Internal error (Path is outside allowed cwd subtree: /etc/x)".into()
            )
        );
        assert!(matches!(
            classify(&Error::new(-32603, "EACCES: permission denied")),
            BackendError::PermissionDenied(_)
        ));
    }
}
