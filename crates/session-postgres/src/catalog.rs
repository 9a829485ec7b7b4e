//! [`PgCatalog`]: the catalog seam (`dsh_catalog_api::Catalog`) over the PostgreSQL store: the
//! sessions' rows, usage and full-text search computed by SQL from the stored events (no index
//! of its own to keep in step: the events are the truth). Search uses PostgreSQL's full-text
//! search over the words dsh stores with each searchable event (`doc`, GIN-indexed; see
//! `crate::search`): user prompts, assistant text, titles, tool calls (name and argument values)
//! and the head of tool results, as the SQLite catalog indexes them.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_catalog_api::{
    Catalog, CatalogError, Filter, GroupBy, Hit, HitKind, SearchQuery, SessionRow, StatRow,
};
use dsh_llm::{ModelPricing, TokenUsage};

use crate::conn::map_rows;
use crate::error::PgStoreError;
use crate::search::{self, snippet};
use crate::store::PgStore;

pub use crate::search::ts_query;

/// Prices a route's model: `(provider, model) -> prices` (`None`: unknown, costs 0). The same
/// shape as the SQLite catalog's pricer.
pub type Pricer = Arc<dyn Fn(&str, &str) -> Option<ModelPricing> + Send + Sync>;

/// The catalog over a [`PgStore`].
#[derive(Clone)]
pub struct PgCatalog {
    store: Arc<PgStore>,
    pricer: Option<Pricer>,
}

impl std::fmt::Debug for PgCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCatalog")
            .field("store", &self.store)
            .field("priced", &self.pricer.is_some())
            .finish()
    }
}

impl PgCatalog {
    /// The catalog of `store`'s database (costs 0 until [`PgCatalog::with_pricer`]).
    pub fn new(store: Arc<PgStore>) -> Self {
        PgCatalog {
            store,
            pricer: None,
        }
    }

    /// Costs rows and stats with `pricer` (per request, at the rates in force at its time).
    pub fn with_pricer(mut self, pricer: Pricer) -> Self {
        self.pricer = Some(pricer);
        self
    }
}

fn storage(e: PgStoreError) -> CatalogError {
    CatalogError::Storage(Box::new(e))
}

/// A directory filter as SQL parameters: the directory (no trailing `/`) and the prefix of the
/// directories under it.
fn dir_params(cwd: Option<&str>) -> (Option<String>, Option<String>) {
    match cwd.map(dsh_catalog_api::dir_and_prefix) {
        Some((dir, under)) => (Some(dir), Some(under)),
        None => (None, None),
    }
}

/// Per-session facts, computed from the events (`$1`: one id or NULL for all, `$2` directory
/// or NULL, `$3` updated since (ms) or NULL, `$4` model or route or NULL, `$5` limit or NULL,
/// `$6` the prefix of the directories under `$2`). Each needed event's line is parsed once
/// (`ev`, materialized as the few values needed: only turn boundaries, replies and prompts,
/// not the large request records); the time of a session's last event is read from that event
/// alone.
const ROWS: &str = "
WITH ev AS MATERIALIZED (
    SELECT x.session_id, x.seq, x.kind,
           (x.j #>> '{data,turn}')::bigint AS turn,
           x.j #>> '{data,reason,kind}' AS reason,
           x.j #> '{data,usage}' IS NOT NULL AS has_usage,
           coalesce((x.j #>> '{data,usage,inputTokens}')::bigint, 0)
             + coalesce((x.j #>> '{data,usage,cacheReadTokens}')::bigint, 0)
             + coalesce((x.j #>> '{data,usage,cacheWriteTokens}')::bigint, 0) AS tin,
           coalesce((x.j #>> '{data,usage,outputTokens}')::bigint, 0) AS tout,
           coalesce((x.j #>> '{data,usage,cacheReadTokens}')::bigint, 0) AS tcached,
           x.j #>> '{data,message,source,provider}' AS provider,
           x.j #>> '{data,message,source,model}' AS model,
           CASE WHEN x.kind = 'user/message' AND x.j #>> '{data,source,kind}' = 'user'
                THEN x.prompt END AS prompt
      FROM (SELECT e.session_id, e.seq, e.kind, dsh_json(e.line) AS j,
                   CASE WHEN e.kind = 'user/message' THEN left(e.body, 200) END AS prompt
              FROM dsh_events e
             WHERE e.kind IN ('turn/start', 'turn/end', 'assistant/message', 'user/message')
               AND ($1::text IS NULL OR e.session_id = $1)
            OFFSET 0) x
), agg AS (
    SELECT ev.session_id,
           max(ev.turn) FILTER (WHERE ev.kind = 'turn/start') AS turns,
           max(ev.seq) FILTER (WHERE ev.kind = 'turn/start') AS last_start,
           max(ev.seq) FILTER (WHERE ev.kind = 'turn/end') AS last_end,
           (array_agg(ev.reason ORDER BY ev.seq DESC)
                FILTER (WHERE ev.kind = 'turn/end'))[1] AS end_reason,
           count(*) FILTER (WHERE ev.kind = 'assistant/message' AND ev.has_usage) AS requests,
           coalesce(sum(ev.tin) FILTER (WHERE ev.kind = 'assistant/message'), 0)::bigint
               AS tokens_in,
           coalesce(sum(ev.tout) FILTER (WHERE ev.kind = 'assistant/message'), 0)::bigint
               AS tokens_out,
           coalesce(sum(ev.tcached) FILTER (WHERE ev.kind = 'assistant/message'), 0)::bigint
               AS tokens_cached,
           (array_agg(ev.provider ORDER BY ev.seq DESC)
                FILTER (WHERE ev.kind = 'assistant/message'))[1] AS provider,
           (array_agg(ev.model ORDER BY ev.seq DESC)
                FILTER (WHERE ev.kind = 'assistant/message'))[1] AS model,
           (array_agg(ev.prompt ORDER BY ev.seq) FILTER (WHERE ev.prompt IS NOT NULL))[1]
               AS first_prompt,
           (array_agg(ev.prompt ORDER BY ev.seq DESC) FILTER (WHERE ev.prompt IS NOT NULL))[1]
               AS last_prompt
      FROM ev
     GROUP BY ev.session_id
), last AS (
    SELECT s.id, l.seq AS last_seq, l.at AS updated_ms
      FROM dsh_sessions s
      LEFT JOIN LATERAL (
           SELECT x.seq, (dsh_json(x.line) ->> 'time')::bigint AS at
             FROM dsh_events x WHERE x.session_id = s.id
            ORDER BY x.seq DESC LIMIT 1) l ON true
     WHERE s.materialized AND ($1::text IS NULL OR s.id = $1)
)
SELECT s.id, s.parent_session, s.title, coalesce(s.cwd, ''), s.created_at,
       coalesce(l.updated_ms, s.created_at), coalesce(a.turns, 0), coalesce(a.requests, 0),
       coalesce(a.tokens_in, 0), coalesce(a.tokens_out, 0), coalesce(a.tokens_cached, 0),
       CASE WHEN a.last_start IS NULL THEN '-'
            WHEN a.last_end IS NULL OR a.last_end < a.last_start THEN 'open'
            ELSE a.end_reason END,
       coalesce(a.first_prompt, ''), coalesce(a.last_prompt, ''),
       a.provider, a.model, l.last_seq
  FROM dsh_sessions s
  JOIN last l ON l.id = s.id
  LEFT JOIN agg a ON a.session_id = s.id
 WHERE s.materialized
   AND ($1::text IS NULL OR s.id = $1)
   AND ($2::text IS NULL OR s.cwd = $2 OR starts_with(s.cwd, $6::text))
   AND ($3::bigint IS NULL OR coalesce(l.updated_ms, s.created_at) >= $3)
   AND ($4::text IS NULL OR a.model = $4 OR a.provider = $4)
 ORDER BY coalesce(l.updated_ms, s.created_at) DESC, s.id DESC
 LIMIT $5
";

/// The usage records of the SQLite catalog's `usage` table, computed from the events: one per
/// model reply with a usage (its route, model and tokens) and one per turn end (a turn, counted
/// for the route and model of the session's last reply before it). `$2` directory, `$5` the
/// prefix under it, `$3` since (ms: its UTC day and later), `$4` model or route. Each reply and
/// turn end is parsed once (`ev`, materialized).
const USAGE: &str = "
WITH ev AS MATERIALIZED (
    SELECT x.session_id, x.cwd, x.kind, x.seq,
           (x.j ->> 'time')::bigint AS at,
           x.j #> '{data,usage}' IS NOT NULL AS has_usage,
           x.j #>> '{data,message,source,provider}' AS p0,
           x.j #>> '{data,message,source,model}' AS m0,
           coalesce((x.j #>> '{data,usage,inputTokens}')::bigint, 0) AS input,
           coalesce((x.j #>> '{data,usage,cacheReadTokens}')::bigint, 0) AS cache_read,
           coalesce((x.j #>> '{data,usage,cacheWriteTokens}')::bigint, 0) AS cache_write,
           coalesce((x.j #>> '{data,usage,outputTokens}')::bigint, 0) AS output
      FROM (SELECT e.session_id, coalesce(s.cwd, '') AS cwd, e.kind, e.seq, dsh_json(e.line) AS j
              FROM dsh_events e JOIN dsh_sessions s ON s.id = e.session_id
             WHERE s.materialized AND e.kind IN ('assistant/message', 'turn/end')
               AND ($2::text IS NULL OR s.cwd = $2 OR starts_with(s.cwd, $5::text))
            OFFSET 0) x
), w AS (
    SELECT ev.*,
           count(*) FILTER (WHERE ev.kind = 'assistant/message')
               OVER (PARTITION BY ev.session_id ORDER BY ev.seq) AS grp
      FROM ev
), u AS (
    SELECT w.session_id, w.cwd, w.kind, w.has_usage, w.at,
           coalesce(first_value(w.p0) OVER (PARTITION BY w.session_id, w.grp ORDER BY w.seq), '')
               AS provider,
           coalesce(first_value(w.m0) OVER (PARTITION BY w.session_id, w.grp ORDER BY w.seq), '')
               AS model,
           (w.kind = 'turn/end')::int AS turns,
           (w.kind = 'assistant/message')::int AS requests,
           w.input, w.cache_read, w.cache_write, w.output
      FROM w
), d AS (
    SELECT u.*, to_char(to_timestamp(u.at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
           ((u.at / 60000) % 1440)::int AS minute
      FROM u
     WHERE (u.kind = 'turn/end' OR u.has_usage)
       AND ($4::text IS NULL OR u.model = $4 OR u.provider = $4)
)
";

/// Usage grouped by a key (`$1`: `day`, `model`, `project` or `total`; the filters of
/// [`USAGE`]): per key the sessions, turns, requests and tokens, and per key, route, model and
/// minute of the day the tokens again (what a pricer with a daily window needs).
const STATS: &str = "
SELECT k.key, k.provider, k.model, k.minute, min(k.at)::bigint,
       count(DISTINCT k.session_id), sum(k.turns)::bigint, sum(k.requests)::bigint,
       sum(k.input)::bigint, sum(k.cache_read)::bigint, sum(k.cache_write)::bigint,
       sum(k.output)::bigint, GROUPING(k.provider)
  FROM (SELECT d.*, CASE $1::text WHEN 'day' THEN d.day
                                  WHEN 'model' THEN CASE WHEN d.model = '' THEN '-'
                                                         ELSE d.provider || '/' || d.model END
                                  WHEN 'project' THEN CASE WHEN d.cwd = '' THEN '-' ELSE d.cwd END
                                  ELSE 'total' END AS key
          FROM d
         WHERE $3::bigint IS NULL
            OR d.day >= to_char(to_timestamp($3 / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')) k
 GROUP BY GROUPING SETS ((k.key), (k.key, k.provider, k.model, k.minute))
";

/// The tokens of each session's replies per route, model and minute of the day (`$1` the ids):
/// what a pricer needs to cost the listed sessions.
const SESSION_USAGE: &str = "
SELECT e.session_id,
       coalesce(e.j #>> '{data,message,source,provider}', ''),
       coalesce(e.j #>> '{data,message,source,model}', ''),
       min((e.j ->> 'time')::bigint)::bigint,
       sum(coalesce((e.j #>> '{data,usage,inputTokens}')::bigint, 0))::bigint,
       sum(coalesce((e.j #>> '{data,usage,cacheReadTokens}')::bigint, 0))::bigint,
       sum(coalesce((e.j #>> '{data,usage,cacheWriteTokens}')::bigint, 0))::bigint,
       sum(coalesce((e.j #>> '{data,usage,outputTokens}')::bigint, 0))::bigint
  FROM (SELECT x.session_id, dsh_json(x.line) AS j FROM dsh_events x
         WHERE x.session_id = ANY($1::text[]) AND x.kind = 'assistant/message'
        OFFSET 0) e
 WHERE e.j #> '{data,usage}' IS NOT NULL
 GROUP BY 1, 2, 3, ((e.j ->> 'time')::bigint / 60000) % 1440
";

/// Full-text hits: `(session, seq, kind, body, rank, title, cwd, updated, turn)`. `$1` the
/// `tsquery` literal, `$2` directory, `$6` the prefix under it, `$3` updated since, `$4` model
/// or route, `$5` limit. A title that only repeats the first prompt is not a hit (the SQLite
/// catalog does not index it).
const SEARCH: &str = "
SELECT h.session_id, h.seq, h.kind, h.body, h.rank, h.title, h.cwd,
       (SELECT (dsh_json(x.line) ->> 'time')::bigint FROM dsh_events x
         WHERE x.session_id = h.session_id ORDER BY x.seq DESC LIMIT 1),
       coalesce((SELECT (dsh_json(t.line) #>> '{data,turn}')::bigint FROM dsh_events t
                  WHERE t.session_id = h.session_id AND t.kind = 'turn/start' AND t.seq < h.seq
                  ORDER BY t.seq DESC LIMIT 1), 0)
  FROM (
    SELECT e.session_id, e.seq, e.kind, e.body, ts_rank(e.doc, q.q)::float8 AS rank,
           s.title, coalesce(s.cwd, '') AS cwd
      FROM (SELECT $1::text::tsquery AS q) q, dsh_events e
      JOIN dsh_sessions s ON s.id = e.session_id
     WHERE e.doc @@ q.q AND s.materialized
       AND ($2::text IS NULL OR s.cwd = $2 OR starts_with(s.cwd, $6::text))
       AND ($3::bigint IS NULL
            OR (SELECT (dsh_json(x.line) ->> 'time')::bigint FROM dsh_events x
                 WHERE x.session_id = e.session_id ORDER BY x.seq DESC LIMIT 1) >= $3)
       AND ($4::text IS NULL
            OR (SELECT $4 IN (dsh_json(x.line) #>> '{data,message,source,model}',
                              dsh_json(x.line) #>> '{data,message,source,provider}')
                  FROM dsh_events x
                 WHERE x.session_id = e.session_id AND x.kind = 'assistant/message'
                 ORDER BY x.seq DESC LIMIT 1))
       AND NOT (e.kind = 'session/title' AND coalesce(
            (SELECT strpos(left(p.body, 200), rtrim(e.body, '…')) > 0 FROM dsh_events p
              WHERE p.session_id = e.session_id AND p.kind = 'user/message'
                AND dsh_json(p.line) #>> '{data,source,kind}' = 'user'
              ORDER BY p.seq LIMIT 1), false))
     ORDER BY rank DESC, e.session_id, e.seq
     LIMIT $5) h
 ORDER BY h.rank DESC, h.session_id, h.seq
";

/// Searchable events stored without their words (before `doc` existed), a batch at a time.
const UNINDEXED: &str = "
SELECT session_id, seq, kind, line FROM dsh_events
 WHERE doc IS NULL AND kind IN ('user/message', 'assistant/message', 'session/title',
                                'tool/call', 'tool/result')
 ORDER BY session_id, seq LIMIT 2000
";

/// Stores the searchable text and words of events (`$1` ids, `$2` seqs, `$3` bodies, `$4`
/// words).
const SET_DOCS: &str = "
UPDATE dsh_events e SET body = t.b, doc = t.d::tsvector
  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) AS t(id, seq, b, d)
 WHERE e.session_id = t.id AND e.seq = t.seq
";

fn kind_of(kind: &str) -> HitKind {
    match kind {
        "session/title" => HitKind::Title,
        "user/message" => HitKind::Prompt,
        "tool/call" => HitKind::ToolCall,
        "tool/result" => HitKind::ToolResult,
        _ => HitKind::Assistant,
    }
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Token sums of one route and model at one minute of the day.
struct Tokens {
    provider: String,
    model: String,
    at_ms: i64,
    usage: TokenUsage,
}

impl Tokens {
    fn of(provider: String, model: String, at_ms: i64, sums: [i64; 4]) -> Tokens {
        let [input, cache_read, cache_write, output] = sums.map(u64_of);
        Tokens {
            provider,
            model,
            at_ms,
            usage: TokenUsage {
                input_tokens: input,
                output_tokens: output,
                cache_read_tokens: Some(cache_read),
                cache_write_tokens: Some(cache_write),
                ..TokenUsage::default()
            },
        }
    }
}

/// Costs token sums (in US dollars) with a pricer, each at the rates in force at its time.
struct Coster<'a> {
    pricer: &'a Pricer,
    prices: HashMap<(String, String), Option<ModelPricing>>,
}

impl Coster<'_> {
    fn usd(&mut self, t: &Tokens) -> f64 {
        let pricer = self.pricer;
        let Some(p) = self
            .prices
            .entry((t.provider.clone(), t.model.clone()))
            .or_insert_with(|| pricer(&t.provider, &t.model))
        else {
            return 0.0;
        };
        let at = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(u64::try_from(t.at_ms).unwrap_or(0));
        p.cost_at(&t.usage, at).picos() as f64 / 1e12
    }
}

impl PgCatalog {
    fn coster(&self) -> Option<Coster<'_>> {
        self.pricer.as_ref().map(|pricer| Coster {
            pricer,
            prices: HashMap::new(),
        })
    }

    fn rows(&self, id: Option<&str>, filter: &Filter) -> Result<Vec<SessionRow>, CatalogError> {
        let id = id.map(str::to_owned);
        let (dir, under) = dir_params(filter.cwd.as_deref());
        let since = filter.since_ms;
        let model = filter.model.clone();
        let limit = filter.limit.map(i64::from);
        let rows = self
            .store
            .query("list the sessions", move |c| {
                let (id, dir, under, model) =
                    (id.clone(), dir.clone(), under.clone(), model.clone());
                async move {
                    c.client
                        .query(ROWS, &[&id, &dir, &since, &model, &limit, &under])
                        .await
                }
            })
            .map_err(storage)?;
        let mut out = map_rows(&rows, "list the sessions", |c| {
            let cwd: String = c.get(3)?;
            let last_seq: Option<i64> = c.get(16)?;
            Ok(SessionRow {
                id: c.get(0)?,
                parent: c.get(1)?,
                title: c.get(2)?,
                project: cwd.clone(),
                cwd,
                created_ms: c.get(4)?,
                updated_ms: c.get(5)?,
                turns: u64_of(c.get(6)?),
                requests: u64_of(c.get(7)?),
                tokens_in: u64_of(c.get(8)?),
                tokens_out: u64_of(c.get(9)?),
                tokens_cached: u64_of(c.get(10)?),
                cost_usd: 0.0,
                status: c.get::<Option<String>>(11)?.unwrap_or_else(|| "-".into()),
                first_prompt: c.get(12)?,
                last_prompt: c.get(13)?,
                provider: c.get(14)?,
                model: c.get(15)?,
                last_seq: last_seq.map(u64_of),
            })
        })
        .map_err(storage)?;
        if let Some(mut coster) = self.coster()
            && out.iter().any(|r| r.requests > 0)
        {
            let ids: Vec<String> = out
                .iter()
                .filter(|r| r.requests > 0)
                .map(|r| r.id.clone())
                .collect();
            let rows = self
                .store
                .query("cost the sessions", move |c| {
                    let ids = ids.clone();
                    async move { c.client.query(SESSION_USAGE, &[&ids]).await }
                })
                .map_err(storage)?;
            let parts = map_rows(&rows, "cost the sessions", |c| {
                let id: String = c.get(0)?;
                let t = Tokens::of(
                    c.get(1)?,
                    c.get(2)?,
                    c.get(3)?,
                    [c.get(4)?, c.get(5)?, c.get(6)?, c.get(7)?],
                );
                Ok((id, t))
            })
            .map_err(storage)?;
            let mut cost: HashMap<String, f64> = HashMap::new();
            for (id, t) in &parts {
                *cost.entry(id.clone()).or_default() += coster.usd(t);
            }
            for r in &mut out {
                r.cost_usd = cost.get(&r.id).copied().unwrap_or(0.0);
            }
        }
        Ok(out)
    }

    /// Gives searchable events stored before the store kept their words (`doc`) their text and
    /// words, so that a search covers them. Nothing to do (one indexed look-up) once done.
    fn index_old_events(&self) -> Result<(), CatalogError> {
        loop {
            let rows = self
                .store
                .query("find unindexed events", |c| async move {
                    c.client.query(UNINDEXED, &[]).await
                })
                .map_err(storage)?;
            if rows.is_empty() {
                return Ok(());
            }
            let found = map_rows(&rows, "find unindexed events", |c| {
                let kind: String = c.get(2)?;
                let line: String = c.get(3)?;
                let data = serde_json::from_str::<serde_json::Value>(&line)
                    .map(|mut v| v["data"].take())
                    .unwrap_or_default();
                let ix = search::index(&kind, &data);
                Ok((
                    c.get::<String>(0)?,
                    c.get::<i64>(1)?,
                    ix.body,
                    ix.doc.unwrap_or_default(),
                ))
            })
            .map_err(storage)?;
            let n = found.len();
            let ids: Vec<String> = found.iter().map(|f| f.0.clone()).collect();
            let seqs: Vec<i64> = found.iter().map(|f| f.1).collect();
            let bodies: Vec<Option<String>> = found.iter().map(|f| f.2.clone()).collect();
            let docs: Vec<String> = found.into_iter().map(|f| f.3).collect();
            self.store
                .query("index old events", move |c| {
                    let (ids, seqs, bodies, docs) =
                        (ids.clone(), seqs.clone(), bodies.clone(), docs.clone());
                    async move {
                        c.client
                            .execute(SET_DOCS, &[&ids, &seqs, &bodies, &docs])
                            .await
                    }
                })
                .map_err(storage)?;
            tracing::info!(events = n, "indexed stored events for search");
        }
    }
}

/// One group of [`STATS`] being summed.
#[derive(Default)]
struct Group {
    row: StatRow,
    cost: f64,
}

impl Catalog for PgCatalog {
    fn list(&self, filter: &Filter) -> Result<Vec<SessionRow>, CatalogError> {
        self.rows(None, filter)
    }

    fn get(&self, id: &str) -> Result<Option<SessionRow>, CatalogError> {
        Ok(self.rows(Some(id), &Filter::default())?.into_iter().next())
    }

    fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>, CatalogError> {
        let Some(ts) = ts_query(&query.text) else {
            return Ok(Vec::new());
        };
        self.index_old_events()?;
        let (dir, under) = dir_params(query.filter.cwd.as_deref());
        let since = query.filter.since_ms;
        let model = query.filter.model.clone();
        let limit = i64::from(query.filter.limit.unwrap_or(20));
        let rows = self
            .store
            .query("search", move |c| {
                let (ts, dir, under, model) =
                    (ts.clone(), dir.clone(), under.clone(), model.clone());
                async move {
                    c.client
                        .query(SEARCH, &[&ts, &dir, &since, &model, &limit, &under])
                        .await
                }
            })
            .map_err(storage)?;
        map_rows(&rows, "search", |c| {
            let kind: String = c.get(2)?;
            let body: Option<String> = c.get(3)?;
            let (snippet, highlights) = snippet(body.as_deref().unwrap_or(""), &query.text);
            let updated: Option<i64> = c.get(7)?;
            Ok(Hit {
                session_id: c.get(0)?,
                seq: u64_of(c.get(1)?),
                kind: kind_of(&kind),
                score: c.get(4)?,
                title: c.get(5)?,
                cwd: c.get(6)?,
                updated_ms: updated.unwrap_or(0),
                turn: u64_of(c.get(8)?),
                snippet,
                highlights,
            })
        })
        .map_err(storage)
    }

    fn stats(&self, by: GroupBy, filter: &Filter) -> Result<Vec<StatRow>, CatalogError> {
        let key = match by {
            GroupBy::Day => "day",
            GroupBy::Model => "model",
            GroupBy::Project => "project",
            GroupBy::Total => "total",
        };
        let (dir, under) = dir_params(filter.cwd.as_deref());
        let since = filter.since_ms;
        let model = filter.model.clone();
        let sql = format!("{USAGE}{STATS}");
        let rows = self
            .store
            .query("usage stats", move |c| {
                let (dir, under, model, sql) =
                    (dir.clone(), under.clone(), model.clone(), sql.clone());
                async move {
                    c.client
                        .query(sql.as_str(), &[&key, &dir, &since, &model, &under])
                        .await
                }
            })
            .map_err(storage)?;
        let mut groups: HashMap<String, Group> = HashMap::new();
        let mut coster = self.coster();
        for r in &rows {
            let c = crate::conn::Cols::new(r, "usage stats");
            let key: String = c.get(0).map_err(storage)?;
            let whole: i32 = c.get(12).map_err(storage)?;
            let g = groups.entry(key.clone()).or_default();
            if whole == 1 {
                let cache_read = u64_of(c.get(9).map_err(storage)?);
                let cache_write = u64_of(c.get(10).map_err(storage)?);
                let input = u64_of(c.get(8).map_err(storage)?);
                g.row = StatRow {
                    key,
                    sessions: u64_of(c.get(5).map_err(storage)?),
                    turns: u64_of(c.get(6).map_err(storage)?),
                    requests: u64_of(c.get(7).map_err(storage)?),
                    tokens_in: input + cache_read + cache_write,
                    tokens_out: u64_of(c.get(11).map_err(storage)?),
                    tokens_cached: cache_read,
                    cost_usd: 0.0,
                };
            } else if let Some(coster) = coster.as_mut() {
                let t = Tokens::of(
                    c.get(1).map_err(storage)?,
                    c.get(2).map_err(storage)?,
                    c.get(4).map_err(storage)?,
                    [
                        c.get(8).map_err(storage)?,
                        c.get(9).map_err(storage)?,
                        c.get(10).map_err(storage)?,
                        c.get(11).map_err(storage)?,
                    ],
                );
                g.cost += coster.usd(&t);
            }
        }
        let mut out: Vec<StatRow> = groups
            .into_values()
            .map(|g| StatRow {
                cost_usd: g.cost,
                ..g.row
            })
            .collect();
        // The SQLite catalog's order: days newest first; routes and projects by tokens.
        match by {
            GroupBy::Day => out.sort_by(|a, b| b.key.cmp(&a.key)),
            GroupBy::Model | GroupBy::Project => out.sort_by(|a, b| {
                (b.tokens_in + b.tokens_out)
                    .cmp(&(a.tokens_in + a.tokens_out))
                    .then_with(|| a.key.cmp(&b.key))
            }),
            GroupBy::Total => {}
        }
        if let Some(n) = filter.limit {
            out.truncate(n as usize);
        }
        Ok(out)
    }

    fn delete(&self, id: &str) -> Result<(), CatalogError> {
        // The catalog is the store's own tables: forgetting a session is deleting it.
        match self.store.delete_session(id) {
            Ok(()) | Err(PgStoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(storage(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_filter_themselves_and_below() {
        assert_eq!(
            dir_params(Some("/a/b/")),
            (Some("/a/b".into()), Some("/a/b/".into()))
        );
        assert_eq!(dir_params(Some("/")), (Some("/".into()), Some("/".into())));
        assert_eq!(dir_params(None), (None, None));
    }
}
