//! The session store chosen on the command line (issue 39): `--store URL` / `DSH_STORE` picks the
//! PostgreSQL store (`session-postgres`) instead of the JSONL store under `$DSH_HOME`, and
//! `dsh sessions export ID [--store URL] [--to FILE|DIR|URL]` / `dsh sessions import FILE...
//! [--store URL]` move sessions between stores. `dsh sessions list | search | show | delete` and
//! `dsh stats` read the chosen store through [`catalog`] and [`open`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use dsh_catalog_api::Catalog;
use dsh_kernel::Layer;
use dsh_session::SessionPersistence;
use dsh_session_jsonl::{Compression, JsonlStore};
use dsh_session_postgres::{PgCatalog, PgOptions, PgStore};

use crate::{Failure, home};

/// A store named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreUrl {
    /// The JSONL store under `$DSH_HOME/sessions` (`jsonl` or an empty value).
    Jsonl,
    /// A PostgreSQL store (`postgres://…` or `postgresql://…`).
    Postgres(String),
}

impl StoreUrl {
    /// Parses `--store` / `DSH_STORE`.
    pub(crate) fn parse(s: &str) -> Result<Self, Failure> {
        let t = s.trim();
        if t.is_empty() || t == "jsonl" {
            return Ok(StoreUrl::Jsonl);
        }
        if t.starts_with("postgres://") || t.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(t.to_owned()));
        }
        Err(Failure::usage(anyhow!(
            "unsupported session store `{t}`: use a postgres:// or postgresql:// URL (a unix socket \
             directory goes in ?host=/dir), or `jsonl` for the JSONL store under $DSH_HOME"
        )))
    }
}

/// The composition layer that mounts the chosen store in place of the preset's `session-jsonl`
/// row, with the catalog over the same database in place of the SQLite `catalog` row (`None`
/// for the JSONL store: the preset's rows stay). The same rows can be written in
/// `$DSH_HOME/dsh.yaml` instead.
pub(crate) fn layer(store: Option<&str>) -> Result<Option<Layer>, Failure> {
    let Some(s) = store else { return Ok(None) };
    let StoreUrl::Postgres(url) = StoreUrl::parse(s)? else {
        return Ok(None);
    };
    // A JSON string is a YAML scalar: the URL needs no escaping of its own.
    let url = serde_json::to_string(&url).map_err(|e| Failure::usage(anyhow!("{e}")))?;
    let yaml = format!(
        "plugins:\n  - id: session-jsonl\n    name: session-jsonl\n    disabled: true\n  - id: catalog\n    name: catalog\n    disabled: true\n  - id: session-postgres\n    name: session-postgres\n    group: sessions\n    config:\n      url: {url}\n      catalog: true\n"
    );
    Layer::parse("--store", &yaml)
        .map(Some)
        .map_err(Failure::usage)
}

/// Opens a store for a command that reads or writes sessions directly.
pub(crate) fn open(store: Option<&str>) -> Result<Arc<dyn SessionPersistence>, Failure> {
    match store.map(StoreUrl::parse).transpose()? {
        None | Some(StoreUrl::Jsonl) => Ok(Arc::new(JsonlStore::new(home::sessions_root()))),
        Some(StoreUrl::Postgres(url)) => Ok(Arc::new(open_pg(&url)?)),
    }
}

fn open_pg(url: &str) -> Result<PgStore, Failure> {
    PgStore::connect(url, PgOptions::default()).map_err(|e| Failure::run(anyhow!("{e}")))
}

/// The PostgreSQL store named by `store` (`None`: the JSONL store under `$DSH_HOME`).
pub(crate) fn postgres(store: Option<&str>) -> Result<Option<Arc<PgStore>>, Failure> {
    match store.map(StoreUrl::parse).transpose()? {
        None | Some(StoreUrl::Jsonl) => Ok(None),
        Some(StoreUrl::Postgres(url)) => Ok(Some(Arc::new(open_pg(&url)?))),
    }
}

/// The catalog of the chosen store: the SQLite catalog of `$DSH_HOME` reconciled with its logs,
/// or the PostgreSQL store's own (its tables; priced like the SQLite one).
pub(crate) fn catalog(store: Option<&str>) -> Result<Box<dyn Catalog>, Failure> {
    match postgres(store)? {
        None => Ok(Box::new(crate::catalog::open()?)),
        Some(pg) => Ok(Box::new(pg_catalog(pg))),
    }
}

/// The catalog over a PostgreSQL store.
pub(crate) fn pg_catalog(pg: Arc<PgStore>) -> PgCatalog {
    PgCatalog::new(pg).with_pricer(crate::catalog::pricer())
}

/// Options of `dsh sessions export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Session id.
    pub(crate) id: String,
    /// The store to read from (default: the JSONL store under $DSH_HOME).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
    /// Where to: a file, a directory (`ID.jsonl` in it), or a store URL (`postgres://…`, or
    /// `jsonl` for the JSONL store) to copy the session into. Default: standard output.
    #[arg(long, value_name = "FILE|DIR|URL")]
    pub(crate) to: Option<String>,
}

/// Options of `dsh sessions import`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// Plain JSONL session logs (as `dsh sessions export` writes them).
    #[arg(value_name = "FILE", required = true)]
    pub(crate) files: Vec<PathBuf>,
    /// The store to import into (default: the JSONL store under $DSH_HOME).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
}

fn not_found(id: &str, e: dsh_session::SessionError) -> Failure {
    match e {
        dsh_session::SessionError::NotFound(_) => Failure::usage(anyhow!(
            "no stored session `{id}` (see `dsh sessions list`)"
        )),
        other => Failure::run(anyhow!("{other}")),
    }
}

/// `dsh sessions export ID [--store URL] [--to FILE|DIR|URL]`.
pub(crate) async fn export(args: ExportArgs) -> Result<u8, Failure> {
    let store = args.store.clone();
    let id = args.id.clone();
    let bytes = tokio::task::spawn_blocking(move || {
        open(store.as_deref())?
            .export_raw(&id)
            .map_err(|e| not_found(&id, e))
    })
    .await
    .map_err(|e| Failure::run(anyhow!("{e}")))??;
    let Some(to) = args.to else {
        return write_stdout(&bytes);
    };
    if to.contains("://") || to == "jsonl" {
        let target = StoreUrl::parse(&to)?;
        let id = tokio::task::spawn_blocking(move || import_bytes(&target, &bytes))
            .await
            .map_err(|e| Failure::run(anyhow!("{e}")))??;
        eprintln_info(&format!("copied session {id} to {to}"));
        return Ok(0);
    }
    let path = PathBuf::from(&to);
    let file = if path.is_dir() {
        path.join(format!("{}.jsonl", args.id))
    } else {
        path
    };
    write_new(&file, &bytes)?;
    Ok(0)
}

fn write_stdout(bytes: &[u8]) -> Result<u8, Failure> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::run(anyhow!("cannot write to stdout: {e}"))),
    }
}

/// Writes a file that must not exist yet.
fn write_new(file: &Path, bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
        .map_err(|e| Failure::run(anyhow!("cannot create {}: {e}", file.display())))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| Failure::run(anyhow!("cannot write {}: {e}", file.display())))
}

fn eprintln_info(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Stores one plain JSONL log in a store; returns its id.
fn import_bytes(target: &StoreUrl, bytes: &[u8]) -> Result<String, Failure> {
    match target {
        StoreUrl::Postgres(url) => open_pg(url)?
            .import_jsonl(bytes)
            .map_err(|e| Failure::run(anyhow!("{e}"))),
        StoreUrl::Jsonl => {
            // Through the seam: read and admit, then write as the JSONL store does (plain).
            let decoded = dsh_session::codec::decode_jsonl(bytes, 4, "import", "import")
                .map_err(|e| Failure::run(anyhow!("{e}")))?;
            let header = decoded.header.clone();
            let log = decoded.replay().map_err(|e| Failure::run(anyhow!("{e}")))?;
            let store = JsonlStore::new(home::sessions_root()).with_compression(Compression::None);
            let id = header.id.clone();
            let write = || -> Result<(), dsh_session::SessionError> {
                store.create(&header)?;
                store.append(&id, log.events())?;
                store.flush(&id)?;
                store.close(&id)
            };
            write().map_err(|e| Failure::run(anyhow!("cannot import session {id}: {e}")))?;
            Ok(id)
        }
    }
}

/// `dsh sessions import FILE... [--store URL]`.
pub(crate) async fn import(args: ImportArgs) -> Result<u8, Failure> {
    let target = match args.store.as_deref() {
        Some(s) => StoreUrl::parse(s)?,
        None => StoreUrl::Jsonl,
    };
    let mut failed = false;
    for file in args.files {
        let bytes = std::fs::read(&file)
            .map_err(|e| Failure::usage(anyhow!("cannot read {}: {e}", file.display())))?;
        let t = target.clone();
        match tokio::task::spawn_blocking(move || import_bytes(&t, &bytes))
            .await
            .map_err(|e| Failure::run(anyhow!("{e}")))?
        {
            Ok(id) => eprintln_info(&format!("imported session {id} from {}", file.display())),
            Err(f) => {
                eprintln_info(&format!("{}: {}", file.display(), f.error));
                failed = true;
            }
        }
    }
    Ok(u8::from(failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_parse() {
        assert_eq!(StoreUrl::parse("jsonl").ok(), Some(StoreUrl::Jsonl));
        assert_eq!(
            StoreUrl::parse("postgres://u@/db?host=/tmp/x").ok(),
            Some(StoreUrl::Postgres("postgres://u@/db?host=/tmp/x".into()))
        );
        let err = StoreUrl::parse("mysql://x")
            .err()
            .map(|f| f.error.to_string());
        assert!(err.is_some_and(|e| e.contains("unsupported session store `mysql://x`")));
    }

    #[test]
    fn the_layer_replaces_the_jsonl_row() {
        let preset = Layer::parse("preset:headless", crate::compose::HEADLESS_PRESET).unwrap();
        let store = layer(Some("postgresql://u@/db?host=/tmp/a b"))
            .unwrap()
            .unwrap();
        let composed =
            dsh_kernel::Composition::compose(&[preset, store], &crate::compose::registry())
                .unwrap();
        let ids: Vec<&str> = composed.rows.iter().map(|r| r.row.id.as_str()).collect();
        assert!(ids.contains(&"session-postgres"), "{ids:?}");
        assert!(!ids.contains(&"session-jsonl"), "{ids:?}");
        assert!(!ids.contains(&"catalog"), "{ids:?}");
        assert!(layer(Some("jsonl")).unwrap().is_none());
        assert!(layer(None).unwrap().is_none());
    }
}
