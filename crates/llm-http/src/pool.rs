//! One keep-alive connection, exactly: the client waits for a finished connection's return to
//! the pool instead of racing it with a new connect.
//!
//! hyper returns an HTTP/1.1 connection to its pool from a task of its own, spawned when the
//! response head arrives and woken when the body has been read to its end. That task sits in
//! the waking worker's LIFO slot, which other workers cannot steal: when the OS preempts that
//! thread at that moment, the next request finds the pool empty and connects again. hyper's
//! checkout waits for a returned connection and a connect at the same time; a connect that
//! loses is finished in the background and its connection kept as a second idle one.
//!
//! [`ConnectionReturns`] closes that window. The attempt engine reports every HTTP/1.1 body read
//! to its end ([`ConnectionReturns::body_ended`], keyed by the connection's local address) and
//! every response head ([`ConnectionReturns::response_started`], which retires its connection's
//! entry: it was reused). The client's connector ([`ReturnLayer`]) asked for a new connection
//! while a body ended less than [`RETURN_GRACE`] ago and its connection was not seen again
//! claims that connection and waits for it: until it is reused, the grace runs out, or hyper
//! gives the request the returned connection — hyper then moves the connect future into a
//! task of its own to finish it, and the connect, seeing that it runs in another task than
//! the one that asked, gives up instead of opening a second socket.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long after a body's end a new connect waits for that connection's return. hyper returns
/// it within microseconds unless its worker thread is preempted; this bounds the wait when the
/// connection was instead closed, or reused by a concurrent request.
pub const RETURN_GRACE: Duration = Duration::from_millis(250);

#[derive(Debug)]
struct Ended {
    local: SocketAddr,
    at: Instant,
    claimed: bool,
}

/// The connections of one client whose last body ended and that were not seen again.
#[derive(Debug, Default)]
pub struct ConnectionReturns {
    ended: Mutex<Vec<Ended>>,
    changed: Notify,
}

impl ConnectionReturns {
    /// A response body was read to its end on the HTTP/1.1 connection from `local`: hyper is
    /// returning it to the pool.
    pub fn body_ended(&self, local: SocketAddr) {
        let now = Instant::now();
        let mut ended = self.ended.lock();
        ended.retain(|e| e.local != local && now.duration_since(e.at) < RETURN_GRACE);
        ended.push(Ended {
            local,
            at: now,
            claimed: false,
        });
    }

    /// A response head arrived on the connection from `local`: if it had ended a body, it was
    /// reused.
    pub fn response_started(&self, local: SocketAddr) {
        let mut ended = self.ended.lock();
        let before = ended.len();
        ended.retain(|e| e.local != local);
        if ended.len() != before {
            drop(ended);
            self.changed.notify_waiters();
        }
    }

    /// Claims the oldest connection being returned (ended within the grace, unclaimed):
    /// its address and the end of the wait.
    fn claim(&self) -> Option<(SocketAddr, Instant)> {
        let now = Instant::now();
        let mut ended = self.ended.lock();
        ended.retain(|e| now.duration_since(e.at) < RETURN_GRACE);
        let e = ended.iter_mut().find(|e| !e.claimed)?;
        e.claimed = true;
        Some((e.local, e.at + RETURN_GRACE))
    }

    fn pending(&self, local: SocketAddr) -> bool {
        self.ended.lock().iter().any(|e| e.local == local)
    }

    /// Waits until the claimed connection is seen again or `until`.
    async fn wait(self: Arc<Self>, local: SocketAddr, until: Instant) {
        loop {
            let changed = self.changed.notified();
            if !self.pending(local) {
                return;
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(until) => return,
            }
        }
    }
}

/// The connect of a request that got a pooled connection first: dropped by hyper.
#[derive(Debug, thiserror::Error)]
#[error("a pooled connection was returned first; this connect is not needed")]
pub struct NotNeeded;

/// A future that ends with [`NotNeeded`] as soon as it is polled by another task than the one
/// that created it.
struct SameTask<F> {
    origin: Option<tokio::task::Id>,
    inner: Pin<Box<F>>,
}

impl<F: Future<Output = ()>> Future for SameTask<F> {
    type Output = Result<(), NotNeeded>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if tokio::task::try_id() != self.origin {
            return Poll::Ready(Err(NotNeeded));
        }
        self.inner.as_mut().poll(cx).map(Ok)
    }
}

/// The connector layer of [`ConnectionReturns`] (see the module docs).
#[derive(Clone, Debug)]
pub struct ReturnLayer(pub Arc<ConnectionReturns>);

impl<S> tower::Layer<S> for ReturnLayer {
    type Service = ReturnService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReturnService {
            inner,
            returns: self.0.clone(),
        }
    }
}

/// The connector service of [`ReturnLayer`].
#[derive(Clone, Debug)]
pub struct ReturnService<S> {
    inner: S,
    returns: Arc<ConnectionReturns>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, R> tower::Service<R> for ReturnService<S>
where
    S: tower::Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let wait = self.returns.claim().map(|(local, until)| SameTask {
            origin: tokio::task::try_id(),
            inner: Box::pin(self.returns.clone().wait(local, until)),
        });
        // The inner service was polled ready; keep that one and leave a clone in its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            if let Some(wait) = wait {
                wait.await?;
            }
            inner.call(req).await.map_err(Into::into)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[tokio::test(start_paused = true)]
    async fn a_connect_waits_for_the_returning_connection_and_gives_up_in_another_task() {
        let returns = Arc::new(ConnectionReturns::default());
        returns.body_ended(addr(1));
        let (local, until) = returns.claim().expect("a connection is being returned");
        assert_eq!(local, addr(1));
        assert!(
            returns.claim().is_none(),
            "one waiter per returning connection"
        );
        let wait = SameTask {
            origin: tokio::task::try_id(),
            inner: Box::pin(returns.clone().wait(local, until)),
        };
        // hyper moves the started connect into a task of its own when the checkout wins.
        let moved = tokio::spawn(wait).await.expect("task");
        assert!(moved.is_err(), "polled by another task: not needed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connect_goes_ahead_once_the_connection_is_reused_or_the_grace_ends() {
        let returns = Arc::new(ConnectionReturns::default());
        returns.body_ended(addr(1));
        let (local, until) = returns.claim().expect("claim");
        let r = returns.clone();
        let reuse = async move {
            tokio::task::yield_now().await;
            r.response_started(addr(1));
        };
        let started = Instant::now();
        tokio::join!(returns.clone().wait(local, until), reuse);
        assert!(started.elapsed() < RETURN_GRACE);

        returns.body_ended(addr(2));
        let (local, until) = returns.claim().expect("claim");
        let started = Instant::now();
        returns.clone().wait(local, until).await;
        assert!(started.elapsed() >= RETURN_GRACE - Duration::from_millis(1));
        tokio::time::advance(RETURN_GRACE).await;
        assert!(returns.claim().is_none(), "stale ends are not waited for");
    }
}
