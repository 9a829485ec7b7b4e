//! [`PgCatalog`]: the catalog seam (`dsh_catalog_api::Catalog`) over the PostgreSQL store: the
//! sessions' rows, usage and full-text search computed by SQL from the stored events (no index
//! of its own to keep in step: the events are the truth). Search uses PostgreSQL's full-text
//! search (`to_tsvector('simple', body)`, GIN-indexed) over user prompts, assistant text and
//! titles.

use std::sync::Arc;

use dsh_catalog_api::{
    Catalog, CatalogError, Filter, GroupBy, Hit, HitKind, SearchQuery, SessionRow, StatRow,
};

use crate::conn::map_rows;
use crate::error::PgStoreError;
use crate::store::PgStore;

/// The catalog over a [`PgStore`].
#[derive(Debug, Clone)]
pub struct PgCatalog {
    store: Arc<PgStore>,
}

impl PgCatalog {
    /// The catalog of `store`'s database.
    pub fn new(store: Arc<PgStore>) -> Self {
        PgCatalog { store }
    }
}

fn storage(e: PgStoreError) -> CatalogError {
    CatalogError::Storage(Box::new(e))
}

/// Per-session facts, computed from the events (`$1`: one id or NULL for all, `$2` cwd prefix
/// or NULL, `$3` updated since (ms) or NULL, `$4` model or route or NULL, `$5` limit or NULL).
const ROWS: &str = "
WITH agg AS (
    SELECT e.session_id,
           count(*) FILTER (WHERE e.kind = 'turn/start') AS turns,
           max(e.seq) FILTER (WHERE e.kind = 'turn/start') AS last_start,
           max(e.seq) FILTER (WHERE e.kind = 'turn/end') AS last_end,
           count(*) FILTER (WHERE e.kind = 'assistant/message'
                             AND e.line::jsonb #> '{data,usage}' IS NOT NULL) AS requests,
           coalesce(sum(coalesce((e.line::jsonb #>> '{data,usage,inputTokens}')::bigint, 0)
                      + coalesce((e.line::jsonb #>> '{data,usage,cacheReadTokens}')::bigint, 0)
                      + coalesce((e.line::jsonb #>> '{data,usage,cacheWriteTokens}')::bigint, 0))
                    FILTER (WHERE e.kind = 'assistant/message'), 0)::bigint AS tokens_in,
           coalesce(sum((e.line::jsonb #>> '{data,usage,outputTokens}')::bigint)
                    FILTER (WHERE e.kind = 'assistant/message'), 0)::bigint AS tokens_out,
           coalesce(sum((e.line::jsonb #>> '{data,usage,cacheReadTokens}')::bigint)
                    FILTER (WHERE e.kind = 'assistant/message'), 0)::bigint AS tokens_cached,
           max((e.line::jsonb ->> 'time')::bigint) AS updated_ms,
           max(e.seq) AS last_seq
      FROM dsh_events e
     WHERE ($1::text IS NULL OR e.session_id = $1)
     GROUP BY e.session_id
)
SELECT s.id, s.parent_session, s.title, coalesce(s.cwd, ''), s.created_at,
       coalesce(a.updated_ms, s.created_at), coalesce(a.turns, 0), coalesce(a.requests, 0),
       coalesce(a.tokens_in, 0), coalesce(a.tokens_out, 0), coalesce(a.tokens_cached, 0),
       CASE WHEN a.last_start IS NULL THEN '-'
            WHEN a.last_end IS NULL OR a.last_end < a.last_start THEN 'open'
            ELSE (SELECT e.line::jsonb #>> '{data,reason,kind}' FROM dsh_events e
                   WHERE e.session_id = s.id AND e.seq = a.last_end) END,
       coalesce((SELECT e.body FROM dsh_events e
                  WHERE e.session_id = s.id AND e.kind = 'user/message'
                    AND e.line::jsonb #>> '{data,source,kind}' = 'user'
                  ORDER BY e.seq LIMIT 1), ''),
       coalesce((SELECT e.body FROM dsh_events e
                  WHERE e.session_id = s.id AND e.kind = 'user/message'
                    AND e.line::jsonb #>> '{data,source,kind}' = 'user'
                  ORDER BY e.seq DESC LIMIT 1), ''),
       m.provider, m.model, a.last_seq
  FROM dsh_sessions s
  LEFT JOIN agg a ON a.session_id = s.id
  LEFT JOIN LATERAL (
       SELECT e.line::jsonb #>> '{data,message,source,provider}' AS provider,
              e.line::jsonb #>> '{data,message,source,model}' AS model
         FROM dsh_events e
        WHERE e.session_id = s.id AND e.kind = 'assistant/message'
        ORDER BY e.seq DESC LIMIT 1) m ON true
 WHERE s.materialized
   AND ($1::text IS NULL OR s.id = $1)
   AND ($2::text IS NULL OR s.cwd = $2 OR s.cwd LIKE $2 || '/%')
   AND ($3::bigint IS NULL OR coalesce(a.updated_ms, s.created_at) >= $3)
   AND ($4::text IS NULL OR m.model = $4 OR m.provider = $4)
 ORDER BY coalesce(a.updated_ms, s.created_at) DESC, s.id
 LIMIT $5
";

/// Usage of assistant replies grouped by a key (`$1`: `day`, `model`, `project` or `total`),
/// with the same filters as [`ROWS`] (`$2` cwd, `$3` since, `$4` model, `$5` limit).
const STATS: &str = "
WITH u AS (
    SELECT e.session_id, s.cwd,
           to_char(to_timestamp((e.line::jsonb ->> 'time')::bigint / 1000.0) AT TIME ZONE 'UTC',
                   'YYYY-MM-DD') AS day,
           coalesce(e.line::jsonb #>> '{data,message,source,provider}', '') AS provider,
           coalesce(e.line::jsonb #>> '{data,message,source,model}', '') AS model,
           coalesce((e.line::jsonb #>> '{data,usage,inputTokens}')::bigint, 0)
             + coalesce((e.line::jsonb #>> '{data,usage,cacheReadTokens}')::bigint, 0)
             + coalesce((e.line::jsonb #>> '{data,usage,cacheWriteTokens}')::bigint, 0) AS tin,
           coalesce((e.line::jsonb #>> '{data,usage,outputTokens}')::bigint, 0) AS tout,
           coalesce((e.line::jsonb #>> '{data,usage,cacheReadTokens}')::bigint, 0) AS tcached,
           (e.line::jsonb ->> 'time')::bigint AS at
      FROM dsh_events e JOIN dsh_sessions s ON s.id = e.session_id
     WHERE e.kind = 'assistant/message' AND e.line::jsonb #> '{data,usage}' IS NOT NULL
       AND ($2::text IS NULL OR s.cwd = $2 OR s.cwd LIKE $2 || '/%')
       AND ($3::bigint IS NULL OR (e.line::jsonb ->> 'time')::bigint >= $3)
), k AS (
    SELECT u.*, CASE $1::text WHEN 'day' THEN day
                              WHEN 'model' THEN provider || '/' || model
                              WHEN 'project' THEN coalesce(cwd, '')
                              ELSE 'total' END AS key
      FROM u
     WHERE ($4::text IS NULL OR u.model = $4 OR u.provider = $4)
)
SELECT k.key, count(DISTINCT k.session_id),
       coalesce((SELECT count(*) FROM dsh_events t
                  WHERE t.kind = 'turn/start'
                    AND t.session_id IN (SELECT k2.session_id FROM k k2 WHERE k2.key = k.key)), 0),
       count(*), sum(k.tin)::bigint, sum(k.tout)::bigint, sum(k.tcached)::bigint
  FROM k
 GROUP BY k.key
 ORDER BY CASE WHEN $1::text = 'day' THEN NULL ELSE k.key END, k.key DESC
 LIMIT $5
";

/// Full-text hits: `(session, seq, kind, body, rank, title, cwd, updated, turn)`.
const SEARCH: &str = "
SELECT e.session_id, e.seq, e.kind, e.body,
       ts_rank(to_tsvector('simple', e.body), q)::float8 AS rank,
       s.title, coalesce(s.cwd, ''),
       (SELECT max((x.line::jsonb ->> 'time')::bigint) FROM dsh_events x
         WHERE x.session_id = e.session_id),
       (SELECT count(*) FROM dsh_events t
         WHERE t.session_id = e.session_id AND t.kind = 'turn/start' AND t.seq < e.seq)
  FROM dsh_events e
  JOIN dsh_sessions s ON s.id = e.session_id,
       to_tsquery('simple', $1) q
 WHERE e.body IS NOT NULL AND to_tsvector('simple', e.body) @@ q
   AND ($2::text IS NULL OR s.cwd = $2 OR s.cwd LIKE $2 || '/%')
 ORDER BY rank DESC, e.session_id, e.seq
 LIMIT $3
";

/// The catalog's query syntax as a `tsquery`: words are ANDed, `"a phrase"` is a phrase
/// (`<->`), `word*` a prefix (`:*`); every other character is literal (quoted), never a syntax
/// error. `None` when nothing searchable is left.
pub fn ts_query(text: &str) -> Option<String> {
    fn lexeme(w: &str) -> String {
        format!("'{}'", w.replace('\'', "''").replace('\\', "\\\\"))
    }
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('"') {
            let (phrase, tail) = after.split_once('"').unwrap_or((after, ""));
            let words: Vec<String> = words(phrase).into_iter().map(|w| lexeme(&w)).collect();
            if !words.is_empty() {
                parts.push(format!("({})", words.join(" <-> ")));
            }
            rest = tail;
            continue;
        }
        let end = rest.find([' ', '\t', '\n', '"']).unwrap_or(rest.len());
        let token = &rest[..end];
        rest = &rest[end..];
        let (token, prefix) = match token.strip_suffix('*') {
            Some(t) => (t, true),
            None => (token, false),
        };
        let ws = words(token);
        let n = ws.len();
        for (i, w) in ws.into_iter().enumerate() {
            let mut l = lexeme(&w);
            if prefix && i + 1 == n {
                l.push_str(":*");
            }
            parts.push(l);
        }
    }
    (!parts.is_empty()).then(|| parts.join(" & "))
}

/// The words of a text as the `simple` parser sees them: runs of letters and digits, lower case.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A short one-line excerpt of `body` around the first query word, and the byte ranges of the
/// query words in it.
fn snippet(body: &str, query: &str) -> (String, Vec<(usize, usize)>) {
    let flat: String = body
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let lower = flat.to_lowercase();
    let terms = words(query);
    // Lower-casing can change byte lengths; then the excerpt starts at the beginning.
    let same = lower.len() == flat.len();
    let first = if same {
        terms.iter().filter_map(|t| lower.find(t.as_str())).min()
    } else {
        None
    };
    let mut start = first.map(|p| p.saturating_sub(40)).unwrap_or(0);
    while !flat.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + 160).min(flat.len());
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    let text = flat[start..end].to_owned();
    let mut marks = Vec::new();
    if same {
        let low = &lower[start..end];
        for t in &terms {
            let mut from = 0;
            while let Some(p) = low[from..].find(t.as_str()) {
                let b = from + p;
                marks.push((b, b + t.len()));
                from = b + t.len();
            }
        }
        marks.sort_unstable();
    }
    (text, marks)
}

fn kind_of(kind: &str) -> HitKind {
    match kind {
        "session/title" => HitKind::Title,
        "user/message" => HitKind::Prompt,
        _ => HitKind::Assistant,
    }
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl PgCatalog {
    fn rows(&self, id: Option<&str>, filter: &Filter) -> Result<Vec<SessionRow>, CatalogError> {
        let id = id.map(str::to_owned);
        let cwd = filter.cwd.clone();
        let since = filter.since_ms;
        let model = filter.model.clone();
        let limit = filter.limit.map(i64::from);
        let rows = self
            .store
            .query("list the sessions", move |c| {
                let (id, cwd, model) = (id.clone(), cwd.clone(), model.clone());
                async move {
                    c.client
                        .query(ROWS, &[&id, &cwd, &since, &model, &limit])
                        .await
                }
            })
            .map_err(storage)?;
        map_rows(&rows, "list the sessions", |c| {
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
        .map_err(storage)
    }
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
        let cwd = query.filter.cwd.clone();
        let limit = i64::from(query.filter.limit.unwrap_or(20));
        let rows = self
            .store
            .query("search", move |c| {
                let (ts, cwd) = (ts.clone(), cwd.clone());
                async move { c.client.query(SEARCH, &[&ts, &cwd, &limit]).await }
            })
            .map_err(storage)?;
        map_rows(&rows, "search", |c| {
            let kind: String = c.get(2)?;
            let body: String = c.get(3)?;
            let (snippet, highlights) = snippet(&body, &query.text);
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
        let cwd = filter.cwd.clone();
        let since = filter.since_ms;
        let model = filter.model.clone();
        let limit = filter.limit.map(i64::from);
        let rows = self
            .store
            .query("usage stats", move |c| {
                let (cwd, model) = (cwd.clone(), model.clone());
                async move {
                    c.client
                        .query(STATS, &[&key, &cwd, &since, &model, &limit])
                        .await
                }
            })
            .map_err(storage)?;
        map_rows(&rows, "usage stats", |c| {
            Ok(StatRow {
                key: c.get(0)?,
                sessions: u64_of(c.get(1)?),
                turns: u64_of(c.get(2)?),
                requests: u64_of(c.get(3)?),
                tokens_in: u64_of(c.get(4)?),
                tokens_out: u64_of(c.get(5)?),
                tokens_cached: u64_of(c.get(6)?),
                cost_usd: 0.0,
            })
        })
        .map_err(storage)
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
    fn queries_translate_to_tsquery() {
        assert_eq!(
            ts_query("Hello world").as_deref(),
            Some("'hello' & 'world'")
        );
        assert_eq!(
            ts_query("\"a phrase\" pre*").as_deref(),
            Some("('a' <-> 'phrase') & 'pre':*")
        );
        assert_eq!(ts_query("it's & | !").as_deref(), Some("'it' & 's'"));
        assert_eq!(ts_query("  ").as_deref(), None);
        assert_eq!(
            ts_query("\"unclosed phrase").as_deref(),
            Some("('unclosed' <-> 'phrase')")
        );
    }

    #[test]
    fn snippets_mark_the_words() {
        let (s, h) = snippet("Some text\nwith Needle inside", "needle");
        assert_eq!(s, "Some text with Needle inside");
        assert_eq!(h, vec![(15, 21)]);
    }
}
