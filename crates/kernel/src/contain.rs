//! Panic containment: the one helper every dispatcher uses so that a panicking listener,
//! middleware, task or tool body becomes an error value instead of unwinding through the
//! caller.
//!
//! [`contain`] wraps a future, [`contain_sync`] a closure; both return
//! `Err(`[`Panicked`]`)` with the panic's message when the wrapped code panics. The kernel's own
//! dispatch (notify listeners, parallel listeners, tasks, disposers, `apply`) goes through
//! them, and so do the plugins that run foreign code (the tools pipeline, the system-prompt
//! service, the agent loop).
//!
//! Unwind safety: the wrapped code is asserted unwind-safe (`AssertUnwindSafe`). That is the
//! contract of a listener boundary: state a panicking listener leaves half-updated is its own;
//! the dispatcher only promises to keep running.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

/// A panic caught by [`contain`] or [`contain_sync`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {message}")]
pub struct Panicked {
    /// The panic's message (`&str` and `String` payloads; other payloads give
    /// `"non-string panic payload"`).
    pub message: String,
}

impl Panicked {
    /// The message of a caught panic `payload` (as returned by `std::panic::catch_unwind`).
    pub fn from_payload(payload: &(dyn Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_owned()
        };
        Self { message }
    }
}

/// Awaits `fut`; a panic while polling it becomes `Err(Panicked)`.
pub async fn contain<F: Future>(fut: F) -> Result<F::Output, Panicked> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .map_err(|payload| Panicked::from_payload(payload.as_ref()))
}

/// Calls `f`; a panic inside it becomes `Err(Panicked)`.
pub fn contain_sync<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| Panicked::from_payload(payload.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn contains_future_panics_with_their_message() {
        assert_eq!(contain(async { 7 }).await, Ok(7));
        let caught = contain(async { panic!("boom {}", 42) }).await;
        assert_eq!(
            caught,
            Err::<(), _>(Panicked {
                message: "boom 42".into()
            })
        );
        let caught = contain(async { std::panic::panic_any(5u8) }).await;
        assert_eq!(
            caught.map_err(|p| p.message),
            Err::<(), _>("non-string panic payload".to_owned())
        );
    }

    #[test]
    fn contains_closure_panics_with_their_message() {
        assert_eq!(contain_sync(|| "ok"), Ok("ok"));
        let caught = contain_sync(|| -> u8 { panic!("static text") });
        let err = caught.unwrap_err();
        assert_eq!(err.message, "static text");
        assert_eq!(err.to_string(), "panicked: static text");
    }
}
