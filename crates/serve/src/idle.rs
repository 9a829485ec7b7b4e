//! A server that goes away when nobody uses it: the per-user background server of
//! `dsh exec --bg` (`dsh serve --unix PATH --idle-exit DURATION`).
//!
//! Idle means, continuously for the configured duration: no request in flight (an open event
//! stream counts as one until its connection closes) and no open session working or waiting
//! for an approval (asked of the client every tick). Then the server stops accepting and
//! returns; the caller closes (flushes) its sessions as on SIGTERM.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use dsh_protocol::{Client, SessionQuery, SessionState};
use futures::StreamExt;
use parking_lot::Mutex;

use crate::{Bound, ServeConfig, ServeError};

/// Requests in flight and when the server was last used.
#[derive(Debug)]
pub struct Activity {
    in_flight: AtomicUsize,
    last: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }
}

impl Activity {
    /// Marks the server used now.
    pub fn touch(&self) {
        *self.last.lock() = Instant::now();
    }

    /// Requests (and event streams) in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// How long since the server was last used.
    pub fn idle_for(&self) -> Duration {
        self.last.lock().elapsed()
    }

    fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
        InFlight(self.clone())
    }
}

/// One request in flight, until its response body is dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn track(State(activity): State<Arc<Activity>>, req: Request, next: Next) -> Response {
    let in_flight = activity.enter();
    let response = next.run(req).await;
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streaming {
        // A JSON answer is complete here.
        return response;
    }
    // An event stream is in flight until its body is dropped (the connection closed or the
    // stream ended).
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &in_flight;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether any open session of `client` is working or waiting for a person. A failed listing
/// counts as busy (the server stays rather than dropping work it cannot see).
async fn busy(client: &dyn Client) -> bool {
    match client.sessions(SessionQuery::default()).await {
        Ok(list) => list.iter().any(|s| {
            matches!(
                s.state,
                SessionState::Working | SessionState::WaitingForApproval
            )
        }),
        Err(e) => {
            tracing::warn!(error = %e, "idle check: the sessions cannot be listed");
            true
        }
    }
}

/// Resolves once the server has been idle for `idle` (see the module docs).
pub async fn idle_for(activity: Arc<Activity>, client: Arc<dyn Client>, idle: Duration) {
    let tick = (idle / 4).clamp(Duration::from_millis(20), Duration::from_secs(5));
    // Said once per stretch in which open requests alone keep an otherwise idle server.
    let mut kept_said = false;
    loop {
        tokio::time::sleep(tick).await;
        let in_flight = activity.in_flight();
        if in_flight > 0 {
            if !kept_said && activity.idle_for() >= idle {
                tracing::info!(
                    in_flight,
                    "idle time passed; staying for the requests in flight (open event streams)"
                );
                kept_said = true;
            }
            continue;
        }
        kept_said = false;
        if busy(client.as_ref()).await {
            activity.touch();
            continue;
        }
        if activity.in_flight() == 0 && activity.idle_for() >= idle {
            return;
        }
    }
}

/// How a server of [`serve_unix_until_idle`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It was idle for the configured time.
    Idle,
    /// `shutdown` resolved.
    Shutdown,
}

/// Serves `client` on a unix socket until `shutdown` resolves or the server has been idle for
/// `idle` (no request in flight, no event stream open, no session working or waiting for an
/// approval).
#[cfg(unix)]
pub async fn serve_unix_until_idle(
    listener: tokio::net::UnixListener,
    client: Arc<dyn Client>,
    mut config: ServeConfig,
    idle: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Ended, ServeError> {
    config.bound = Bound::Unix;
    let activity = Arc::new(Activity::default());
    let app = crate::router(client.clone(), config).layer(axum::middleware::from_fn_with_state(
        activity.clone(),
        track,
    ));
    let ended = Arc::new(Mutex::new(Ended::Shutdown));
    let stop = {
        let ended = ended.clone();
        async move {
            tokio::select! {
                () = shutdown => {}
                () = idle_for(activity, client, idle) => *ended.lock() = Ended::Idle,
            }
        }
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await?;
    let how = *ended.lock();
    Ok(how)
}
