//! `dsh-catalog`: the session catalog on SQLite (bundled, with FTS5), in
//! `$DSH_HOME/catalog.sqlite` (WAL, busy timeout). A derived index, never the truth: the logs
//! are, and the catalog is reconciled with them and rebuilt from them when missing or damaged.
//!
//! - [`SqliteCatalog`]: open (a damaged file is replaced), index committed events from a
//!   session's seq watermark ([`SqliteCatalog::index_events`]) or a stored log
//!   ([`SqliteCatalog::index_log`]), [`reconcile`](SqliteCatalog::reconcile) with the logs on
//!   disk, [`rebuild`](SqliteCatalog::rebuild) with progress, list, search (snippets with
//!   highlights), stats by day, model or project, delete. It implements
//!   [`dsh_catalog_api::Catalog`].
//! - [`CatalogPlugin`] (`catalog`): reports the sessions of this process to the live table
//!   ([`live`]) on a background thread and provides the `catalog` service, which reconciles
//!   the catalog with the logs ([`walk`]: a full sweep at most once a minute, else an
//!   incremental pass) before answering.
//! - [`fts_query`]: how a user's text becomes a safe FTS5 query.

pub mod error;
mod index;
pub mod live;
mod pack;
pub mod plugin;
mod query;
pub mod schema;
mod store;
mod text;
pub mod walk;

pub use error::Error;
pub use index::{Indexed, Pricer, Stamp, project_root};
pub use live::{LiveTable, Report, live_path};
pub use pack::UnpackError;
pub use plugin::{CatalogConfig, CatalogPlugin};
pub use query::{DEFAULT_SEARCH_LIMIT, RANK_BUDGET};
pub use store::{
    DEFAULT_BUDGET, Location, Progress, Reconciled, SqliteCatalog, default_log_root, default_path,
};
pub use text::fts_query;
