//! [`PgPlugin`]: mounts the PostgreSQL store on the kernel. Provides the `session-persistence`
//! service, buffers every `session/event` and commits the buffer at `session/flush` (one
//! statement, one round trip per batch). An `approval/asked` is committed at once (other hosts
//! show the question). Also provides [`PgHandle`] (the store and the forwarding settings) to
//! the composition root of a server.

use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::schemars::{self, JsonSchema};
use dsh_kernel::{BoxError, Ctx, Plugin};
use dsh_session::{SessionEvent, SessionFlush, SessionPersistence};
use serde::Deserialize;

use dsh_catalog_api::Catalog;

use crate::store::{Durability, PgOptions, PgStore};
use crate::{PgCatalog, PgHandle};

/// Config of the `session-postgres` plugin.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PgConfig {
    /// The store: a `postgres://` / `postgresql://` URL (a unix socket directory goes in
    /// `?host=/dir`) or a `key=value` connection string.
    pub url: String,
    /// How long a writer's lease on a session lasts without renewal, in seconds (default 30);
    /// renewed every third of it while the session is open, and by every commit.
    #[serde(default)]
    pub lease_seconds: Option<f64>,
    /// How long an operation keeps reconnecting to a server that went away, in seconds
    /// (default 30).
    #[serde(default)]
    pub reconnect_seconds: Option<f64>,
    /// Also provide the `catalog` service (listing, usage, full-text search) over this store's
    /// tables. Default false: the SQLite `catalog` row would provide it too; disable that row
    /// when turning this on (`--store` does both).
    #[serde(default)]
    pub catalog: bool,
    /// Servers (`dsh serve`) forwarding ops and following sessions of other hosts: how often
    /// they look at the store without a notification, in seconds (default 2).
    #[serde(default)]
    pub poll_seconds: Option<f64>,
    /// Whether servers LISTEN for notifications (default true); turn off behind a proxy that
    /// does not pass them (PgBouncer in transaction mode): polling alone then.
    #[serde(default)]
    pub notifications: Option<bool>,
}

/// The PostgreSQL persistence plugin (`session-postgres`).
#[derive(Debug)]
pub struct PgPlugin;

fn secs(v: Option<f64>, default: Duration, what: &str) -> Result<Duration, BoxError> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(format!(
            "session-postgres: {what} must be a positive number of seconds, not {s}"
        )
        .into()),
    }
}

impl Plugin for PgPlugin {
    const NAME: &'static str = "session-postgres";
    type Config = PgConfig;

    async fn apply(ctx: Ctx, config: PgConfig) -> Result<(), BoxError> {
        let options = PgOptions {
            lease: secs(
                config.lease_seconds,
                crate::store::DEFAULT_LEASE,
                "leaseSeconds",
            )?,
            reconnect_window: secs(
                config.reconnect_seconds,
                Duration::from_secs(30),
                "reconnectSeconds",
            )?,
            owner: None,
        };
        let forward = crate::ForwardOptions {
            poll: secs(
                config.poll_seconds,
                crate::ForwardOptions::default().poll,
                "pollSeconds",
            )?,
            notifications: config.notifications.unwrap_or(true),
            ..Default::default()
        };
        let url = config.url.clone();
        let store =
            Arc::new(tokio::task::spawn_blocking(move || PgStore::connect(&url, options)).await??);
        ctx.provide::<dyn SessionPersistence>(Arc::clone(&store) as Arc<dyn SessionPersistence>)?;
        if config.catalog {
            // Priced with the composed routes' prices, as the SQLite catalog's plugin does.
            let routes = ctx.clone();
            let pricer: crate::catalog::Pricer = Arc::new(move |provider: &str, model: &str| {
                routes.get::<dyn dsh_llm::Llm>()?.pricing(provider, model)
            });
            ctx.provide::<dyn Catalog>(Arc::new(
                PgCatalog::new(Arc::clone(&store)).with_pricer(pricer),
            ) as Arc<dyn Catalog>)?;
        }
        ctx.provide::<PgHandle>(Arc::new(PgHandle {
            store: Arc::clone(&store),
            forward,
        }))?;
        let s = Arc::clone(&store);
        ctx.on::<SessionEvent>(move |ev| {
            s.append_events(&ev.session_id, std::slice::from_ref(&ev.event))?;
            // An approval request waits for a person, who may be watching from another host:
            // committed now, not at the next barrier (after the answer).
            if ev.event.kind() == "approval/asked" {
                s.commit_soon(&ev.session_id);
            }
            Ok(())
        })?;
        let s = Arc::clone(&store);
        ctx.on_parallel::<SessionFlush, _, _>(move |ev| {
            let s = Arc::clone(&s);
            async move {
                let durability = if ev.durable {
                    Durability::Durable
                } else {
                    Durability::WriteThrough
                };
                s.commit_as(&ev.session_id, durability).await?;
                Ok(())
            }
        })?;
        ctx.on_dispose(move || store.close_all())?;
        Ok(())
    }
}
