//! Every failure answer of the server: a status and a [`ProtocolError`] body.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use dsh_protocol::{ErrorCode, ProtocolError};

/// The one table from error codes to HTTP statuses. Provider failures reach clients as events,
/// not answers; when one does surface in an answer it is the upstream's fault (502/504).
pub fn status_of(code: &ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::SessionNotFound | ErrorCode::UnknownCommand | ErrorCode::UnknownRequest => {
            StatusCode::NOT_FOUND
        }
        // An owner lost: the session changed hands under the op, whose outcome is unknown.
        // Not 503: that invites a blind retry, which could apply the op twice; 409 says to
        // look at the session (its log) before sending it again, like `SESSION_LOCKED`.
        ErrorCode::SessionLocked
        | ErrorCode::SessionOwnerLost
        | ErrorCode::Conflict
        | ErrorCode::SubscriberLagged => StatusCode::CONFLICT,
        ErrorCode::SessionEnded => StatusCode::GONE,
        ErrorCode::CommandFailed | ErrorCode::ContextWindowExceeded => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::Auth
        | ErrorCode::Quota
        | ErrorCode::RateLimit
        | ErrorCode::Server
        | ErrorCode::Transport
        | ErrorCode::StreamClosed
        | ErrorCode::MalformedResponse
        | ErrorCode::EmptyResponse
        | ErrorCode::MissingCredential => StatusCode::BAD_GATEWAY,
        ErrorCode::Internal
        | ErrorCode::SessionCorrupt
        | ErrorCode::StorageFailed
        | ErrorCode::Other(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A failure answer. Its status comes from [`status_of`], except for the transport-level
/// refusals that have a status of their own (404 unknown route, 405, 413, 415), which carry the
/// closest code (`INVALID_REQUEST`).
#[derive(Debug)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub error: ProtocolError,
}

impl ApiError {
    /// An error whose status is the table's.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ProtocolError::new(code, message).into()
    }

    /// A transport-level refusal with its own status.
    pub fn with_status(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error: ProtocolError::new(code, message),
        }
    }

    /// A malformed request (400).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
}

impl From<ProtocolError> for ApiError {
    fn from(error: ProtocolError) -> Self {
        ApiError {
            status: status_of(&error.code),
            error,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, error = %self.error, "request failed");
        }
        (self.status, Json(self.error)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_owner_is_a_conflict_not_a_server_error() {
        let code = ErrorCode::from_wire("SESSION_OWNER_LOST");
        assert_eq!(code, ErrorCode::SessionOwnerLost);
        assert_eq!(code.as_str(), "SESSION_OWNER_LOST");
        assert_eq!(status_of(&code), StatusCode::CONFLICT);
        assert_eq!(
            status_of(&ErrorCode::Other("PLUGIN_CODE".into())),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
