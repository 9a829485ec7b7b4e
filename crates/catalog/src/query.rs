//! Queries: list, get, full-text search and stats, each under the catalog's time budget.

use std::time::{Duration, Instant};

use dsh_catalog_api::{
    Catalog, CatalogError, Filter, GroupBy, Hit, SearchQuery, SessionRow, StatRow,
};
use rusqlite::types::Value;
use rusqlite::{Connection, Row, params_from_iter};

use crate::error::Error;
use crate::index::{day, kind_of, project_root};
use crate::schema::SEQ_BITS;
use crate::store::SqliteCatalog;
use crate::text;

/// How long ranking every match of a search may take before the newest matches are ranked
/// instead (see [`SqliteCatalog::search`]).
pub const RANK_BUDGET: Duration = Duration::from_millis(40);

/// Hits returned when the filter sets no limit.
pub const DEFAULT_SEARCH_LIMIT: u32 = 20;

const PICOS_PER_USD: f64 = 1e12;

const ROW_COLUMNS: &str = "s.id, s.parent, s.title, s.cwd, s.project, s.provider, s.model, \
     s.created_ms, s.updated_ms, s.turns, s.requests, s.tokens_in, s.tokens_out, \
     s.tokens_cached, s.cost_pico, s.open_turn, s.status, s.first_prompt, s.last_prompt, \
     s.last_seq";

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn session_row(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    let open: bool = r.get(15)?;
    let status: String = r.get(16)?;
    Ok(SessionRow {
        id: r.get(0)?,
        parent: r.get(1)?,
        title: r.get(2)?,
        cwd: r.get(3)?,
        project: r.get(4)?,
        provider: r.get(5)?,
        model: r.get(6)?,
        created_ms: r.get(7)?,
        updated_ms: r.get(8)?,
        turns: u(r.get(9)?),
        requests: u(r.get(10)?),
        tokens_in: u(r.get(11)?),
        tokens_out: u(r.get(12)?),
        tokens_cached: u(r.get(13)?),
        cost_usd: r.get::<_, i64>(14)? as f64 / PICOS_PER_USD,
        status: if open && status != "unreadable" {
            "open".into()
        } else {
            status
        },
        first_prompt: r.get(17)?,
        last_prompt: r.get(18)?,
        last_seq: r.get::<_, Option<i64>>(19)?.map(u),
    })
}

/// The filter as SQL conditions (each starting with ` AND`) and their parameters. `usage`:
/// the model and time conditions apply to usage rows `u` instead of the session `s`.
fn conditions(filter: &Filter, usage: bool, params: &mut Vec<Value>) -> String {
    let mut sql = String::new();
    if let Some(dir) = filter.cwd.as_deref() {
        let (dir, under) = dsh_catalog_api::dir_and_prefix(dir);
        sql.push_str(" AND (s.cwd = ? OR substr(s.cwd, 1, length(?)) = ? OR s.project = ?)");
        let root = project_root(&dir);
        params.push(Value::Text(dir));
        params.push(Value::Text(under.clone()));
        params.push(Value::Text(under));
        params.push(Value::Text(root));
    }
    if let Some(since) = filter.since_ms {
        if usage {
            sql.push_str(" AND u.day >= ?");
            params.push(Value::Text(day(since)));
        } else {
            sql.push_str(" AND s.updated_ms >= ?");
            params.push(Value::Integer(since));
        }
    }
    if let Some(model) = filter.model.as_deref() {
        let t = if usage { "u" } else { "s" };
        sql.push_str(&format!(" AND ({t}.model = ? OR {t}.provider = ?)"));
        params.push(Value::Text(model.to_owned()));
        params.push(Value::Text(model.to_owned()));
    }
    sql
}

fn limit(filter: &Filter, default: Option<u32>) -> String {
    match filter.limit.or(default) {
        Some(n) => format!(" LIMIT {n}"),
        None => String::new(),
    }
}

impl SqliteCatalog {
    /// Runs `f` with the connection under the query budget: SQLite is interrupted when the
    /// budget is spent ([`Error::Timeout`]).
    fn budgeted<T>(&self, f: impl FnOnce(&Connection) -> Result<T, Error>) -> Result<T, Error> {
        self.within(self.budget, f)
    }

    /// [`Self::budgeted`] with another budget.
    fn within<T>(
        &self,
        budget: Duration,
        f: impl FnOnce(&Connection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut conn = self.conn.lock();
        let deadline = Instant::now() + budget;
        conn.progress_handler(1_000, Some(move || Instant::now() > deadline))?;
        let out = f(&conn);
        let _ = conn.progress_handler(0, None::<fn() -> bool>);
        match out {
            Err(Error::Sql(rusqlite::Error::SqliteFailure(e, _)))
                if e.code == rusqlite::ErrorCode::OperationInterrupted =>
            {
                Err(Error::Timeout {
                    budget_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
                })
            }
            other => other,
        }
    }

    /// Sessions matching the filter, most recently updated first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<SessionRow>, Error> {
        let mut params = Vec::new();
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM sessions s WHERE 1 = 1{} \
             ORDER BY s.updated_ms DESC, s.id DESC{}",
            conditions(filter, false, &mut params),
            limit(filter, None)
        );
        self.budgeted(|conn| {
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(params), session_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// One session's row.
    pub fn get(&self, id: &str) -> Result<Option<SessionRow>, Error> {
        use rusqlite::OptionalExtension;
        let sql = format!("SELECT {ROW_COLUMNS} FROM sessions s WHERE s.id = ?1");
        self.budgeted(|conn| {
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([id], session_row)
                .optional()?)
        })
    }

    /// Full-text hits, best first. The query's syntax is never an error (see
    /// [`text::fts_query`]); a query with nothing searchable finds nothing.
    ///
    /// Ranking reads every match: a query of words found in most documents (hundreds of
    /// thousands) takes hundreds of milliseconds. When ranking runs past [`RANK_BUDGET`]
    /// ([`SqliteCatalog::with_rank_budget`]), the matches of the most recently catalogued
    /// sessions are taken instead (the index walked from its last rows, stopping at the limit)
    /// and ranked among themselves.
    pub fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>, Error> {
        let Some(expr) = text::fts_query(&query.text) else {
            return Ok(Vec::new());
        };
        let mut params = vec![Value::Text(expr)];
        let conds = conditions(&query.filter, false, &mut params);
        let limit = limit(&query.filter, Some(DEFAULT_SEARCH_LIMIT));
        let sql = |order: &str| {
            format!(
                "SELECT s.id, s.title, s.cwd, s.updated_ms, t.turn, t.kind, docs.rowid, \
                 snippet(docs, 0, char(2), char(3), '…', 16), docs.rank \
                 FROM docs JOIN sessions s ON s.sid = (docs.rowid >> {SEQ_BITS}) \
                 JOIN docs_text t ON t.id = docs.rowid \
                 WHERE docs MATCH ?{conds} ORDER BY {order}{limit}"
            )
        };
        let run = |sql: String, params: Vec<Value>| {
            move |conn: &Connection| -> Result<Vec<Hit>, Error> {
                let mut stmt = conn.prepare_cached(&sql)?;
                let rows = stmt.query_map(params_from_iter(params), |r| {
                    let kind: i64 = r.get(5)?;
                    let rowid: i64 = r.get(6)?;
                    let raw: String = r.get(7)?;
                    let rank: f64 = r.get(8)?;
                    let (snippet, highlights) = text::clean_snippet(&raw);
                    Ok(Hit {
                        session_id: r.get(0)?,
                        title: r.get(1)?,
                        cwd: r.get(2)?,
                        updated_ms: r.get(3)?,
                        turn: u(r.get(4)?),
                        seq: u(rowid & ((1i64 << SEQ_BITS) - 1)),
                        kind: kind_of(kind),
                        snippet,
                        highlights,
                        score: -rank,
                    })
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
        };
        let ranked = self.within(
            self.rank_budget.min(self.budget),
            run(sql("docs.rank"), params.clone()),
        );
        match ranked {
            Err(Error::Timeout { .. }) if self.budget > self.rank_budget => {
                tracing::debug!(query = %query.text, "ranking every match ran long: the newest matches");
                let mut hits = self.budgeted(run(sql("docs.rowid DESC"), params))?;
                hits.sort_by(|a, b| b.score.total_cmp(&a.score));
                Ok(hits)
            }
            other => other,
        }
    }

    /// Usage grouped by day (newest first), model or project (most tokens first).
    pub fn stats(&self, by: GroupBy, filter: &Filter) -> Result<Vec<StatRow>, Error> {
        let (key, order) = match by {
            GroupBy::Day => ("u.day", "k DESC"),
            GroupBy::Model => (
                "CASE WHEN u.model = '' THEN '-' ELSE u.provider || '/' || u.model END",
                "ti + tout DESC, k",
            ),
            GroupBy::Project => (
                "CASE WHEN u.project = '' THEN '-' ELSE u.project END",
                "ti + tout DESC, k",
            ),
            GroupBy::Total => ("'total'", "k"),
        };
        let mut params = Vec::new();
        let conds = conditions(filter, true, &mut params);
        // Usage rows carry their session's project: the sessions table is joined only for a
        // directory filter (its cwd).
        let join = if filter.cwd.is_some() {
            " JOIN sessions s ON s.sid = u.sid"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {key} AS k, COUNT(DISTINCT u.sid), SUM(u.turns), SUM(u.requests), \
             SUM(u.tokens_in) AS ti, SUM(u.tokens_out) AS tout, SUM(u.tokens_cached), \
             SUM(u.cost_pico) FROM usage u{join} WHERE 1 = 1{conds} \
             GROUP BY k ORDER BY {order}{}",
            limit(filter, None)
        );
        self.budgeted(|conn| {
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(params), |r| {
                Ok(StatRow {
                    key: r.get(0)?,
                    sessions: u(r.get(1)?),
                    turns: u(r.get(2)?),
                    requests: u(r.get(3)?),
                    tokens_in: u(r.get(4)?),
                    tokens_out: u(r.get(5)?),
                    tokens_cached: u(r.get(6)?),
                    cost_usd: r.get::<_, i64>(7)? as f64 / PICOS_PER_USD,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }
}

impl Catalog for SqliteCatalog {
    fn list(&self, filter: &Filter) -> Result<Vec<SessionRow>, CatalogError> {
        Ok(SqliteCatalog::list(self, filter)?)
    }

    fn get(&self, id: &str) -> Result<Option<SessionRow>, CatalogError> {
        Ok(SqliteCatalog::get(self, id)?)
    }

    fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>, CatalogError> {
        Ok(SqliteCatalog::search(self, query)?)
    }

    fn stats(&self, by: GroupBy, filter: &Filter) -> Result<Vec<StatRow>, CatalogError> {
        Ok(SqliteCatalog::stats(self, by, filter)?)
    }

    fn delete(&self, id: &str) -> Result<(), CatalogError> {
        Ok(SqliteCatalog::delete(self, id)?)
    }

    fn live(&self) -> Result<Vec<dsh_catalog_api::LiveSession>, CatalogError> {
        Ok(SqliteCatalog::live(self)?)
    }
}
