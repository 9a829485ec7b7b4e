//! Indexing: committed events folded into a session's row, its full-text documents and its
//! usage, in one transaction per batch, from the session's seq watermark on.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::Arc;

use dsh_catalog_api::{HitKind, call_text};
use dsh_llm::{ContentBlock, ModelPricing, TokenUsage};
use dsh_session::data::UserMessage;
use dsh_session::feature::SessionTitle;
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, Event, SessionHeader};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Error;
use crate::pack::pack;
use crate::schema::SEQ_BITS;
use crate::text;

/// Prices a route's model: `(provider, model) -> prices` (`None`: unknown, costs 0).
pub type Pricer = Arc<dyn Fn(&str, &str) -> Option<ModelPricing> + Send + Sync>;

/// Bytes of a prompt or a reply that are indexed.
const TEXT_MAX: usize = 8 * 1024;
/// Bytes of a tool call (name and argument values) that are indexed.
const CALL_MAX: usize = 2 * 1024;
/// Bytes of the head of a tool result that are indexed (about the first eight lines of an
/// output or a file read: the part that names what it is; the catalog's size budget is spent
/// on prompts and replies first).
const RESULT_MAX: usize = 512;
/// Characters of the first and last prompts kept on the row.
const PROMPT_CHARS: usize = 200;

/// Where a log file stood when it was read: a changed stamp means the log must be read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// File length in bytes.
    pub len: i64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

impl Stamp {
    /// The stamp of a file now (`None`: missing or unreadable).
    pub fn of(path: &std::path::Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        let mtime_ns = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_nanos()).ok())?;
        Some(Stamp {
            len: i64::try_from(m.len()).ok()?,
            mtime_ns,
        })
    }
}

/// What an indexing pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Indexed {
    /// Events folded in.
    pub events: u64,
    /// Full-text documents added.
    pub docs: u64,
    /// A seq was missing after the watermark: the rest of the batch waits for the log.
    pub gap: bool,
}

/// A session's row while events are folded in.
#[derive(Debug, Default)]
struct Row {
    sid: i64,
    project: String,
    title: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    updated_ms: i64,
    turns: i64,
    cur_turn: i64,
    open_turn: bool,
    status: String,
    requests: i64,
    tokens_in: i64,
    tokens_out: i64,
    tokens_cached: i64,
    cost_pico: i64,
    first_prompt: String,
    last_prompt: String,
    last_seq: Option<i64>,
}

#[derive(Debug, Default)]
struct Usage {
    turns: i64,
    requests: i64,
    tokens_in: i64,
    tokens_out: i64,
    tokens_cached: i64,
    cost_pico: i64,
}

/// The project root of a directory: the nearest ancestor holding `.git`, else the directory.
pub fn project_root(cwd: &str) -> String {
    if cwd.is_empty() {
        return String::new();
    }
    let start = std::path::Path::new(cwd);
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join(".git").exists() {
            return d.to_string_lossy().into_owned();
        }
        dir = d.parent();
    }
    match cwd.trim_end_matches('/') {
        "" => "/".to_owned(),
        trimmed => trimmed.to_owned(),
    }
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn first_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The UTC day of an epoch-ms time, `YYYY-MM-DD`.
pub(crate) fn day(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| "-".into())
}

fn assistant_text(m: &dsh_llm::Message) -> String {
    let mut out = String::new();
    for b in &m.content {
        if let ContentBlock::Text { text } = b {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

/// Folds a batch of committed events of one session into the catalog, inside `tx`.
///
/// Events at or below the session's watermark are skipped (a batch indexed twice, by this
/// process's plugin and another's reconciliation, counts once); a missing seq stops the batch
/// (`gap`), and the stamp is cleared so that the next reconciliation reads the log.
pub(crate) fn index_batch<E: Borrow<Event>>(
    tx: &Transaction<'_>,
    header: &SessionHeader,
    events: &[E],
    stamp: Option<(&str, Stamp)>,
    pricer: Option<&Pricer>,
) -> Result<Indexed, Error> {
    let mut row = load_or_create(tx, header)?;
    let mut usage: HashMap<(String, String, String), Usage> = HashMap::new();
    let mut out = Indexed::default();
    let mut next = row.last_seq.map_or(0, |s| s + 1);
    let mut insert_text = tx.prepare_cached(
        "INSERT OR REPLACE INTO docs_text(id, turn, kind, z) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut insert_doc = tx.prepare_cached("INSERT INTO docs(rowid, body) VALUES (?1, ?2)")?;
    let mut prices: HashMap<(String, String), Option<ModelPricing>> = HashMap::new();
    for e in events {
        let e: &Event = e.borrow();
        let seq = i(e.seq());
        if seq < next {
            continue;
        }
        if seq > next {
            out.gap = true;
            break;
        }
        next = seq + 1;
        row.last_seq = Some(seq);
        row.updated_ms = row.updated_ms.max(e.time());
        out.events += 1;
        let mut doc: Option<(HitKind, String)> = None;
        match e.core() {
            Some(CoreEvent::TurnStart(t)) => {
                row.cur_turn = i(t.turn);
                row.turns = row.turns.max(row.cur_turn);
                row.open_turn = true;
            }
            Some(CoreEvent::TurnEnd(t)) => {
                row.open_turn = false;
                row.status = t.reason.kind().to_owned();
                let key = (
                    day(e.time()),
                    row.provider.clone().unwrap_or_default(),
                    row.model.clone().unwrap_or_default(),
                );
                usage.entry(key).or_default().turns += 1;
            }
            Some(CoreEvent::UserMessage(UserMessage(m)))
                if SourceKind::of(m) == SourceKind::User =>
            {
                let t = m.text();
                if row.first_prompt.is_empty() {
                    row.first_prompt = first_chars(&t, PROMPT_CHARS);
                }
                row.last_prompt = first_chars(&t, PROMPT_CHARS);
                doc = Some((HitKind::Prompt, t));
            }
            Some(CoreEvent::AssistantMessage(a)) => {
                let src = &a.message.source.extra;
                if let Some(p) = src.get("provider").and_then(|v| v.as_str()) {
                    row.provider = Some(p.to_owned());
                }
                if let Some(m) = src.get("model").and_then(|v| v.as_str()) {
                    row.model = Some(m.to_owned());
                }
                if let Some(u) = &a.usage {
                    let provider = row.provider.clone().unwrap_or_default();
                    let model = row.model.clone().unwrap_or_default();
                    let pricing = prices
                        .entry((provider.clone(), model.clone()))
                        .or_insert_with(|| pricer.and_then(|p| p(&provider, &model)));
                    let cost = cost(pricing.as_ref(), u, e.time());
                    let (tin, tout, tcached) = tokens(u);
                    row.requests += 1;
                    row.tokens_in += tin;
                    row.tokens_out += tout;
                    row.tokens_cached += tcached;
                    row.cost_pico = row.cost_pico.saturating_add(cost);
                    let entry = usage.entry((day(e.time()), provider, model)).or_default();
                    entry.requests += 1;
                    entry.tokens_in += tin;
                    entry.tokens_out += tout;
                    entry.tokens_cached += tcached;
                    entry.cost_pico = entry.cost_pico.saturating_add(cost);
                }
                doc = Some((HitKind::Assistant, assistant_text(&a.message)));
            }
            Some(CoreEvent::ToolCallEvent(c)) => {
                doc = Some((HitKind::ToolCall, call_text(&c.name, c.arguments.as_str())));
            }
            Some(CoreEvent::ToolResult(r)) => {
                let head = r
                    .message
                    .content
                    .iter()
                    .find_map(ContentBlock::as_text)
                    .unwrap_or_default();
                doc = Some((HitKind::ToolResult, head.to_owned()));
            }
            _ => {
                if let Some(Ok(t)) = e.plugin::<SessionTitle>() {
                    // A title cut from the first prompt (the fallback) would only repeat it.
                    let repeats = row.first_prompt.contains(t.title.trim_end_matches('…'));
                    row.title = Some(t.title.clone());
                    if !repeats {
                        doc = Some((HitKind::Title, t.title));
                    }
                }
            }
        }
        if let Some((kind, t)) = doc {
            let max = match kind {
                HitKind::ToolCall => CALL_MAX,
                HitKind::ToolResult => RESULT_MAX,
                _ => TEXT_MAX,
            };
            if let Some(body) = text::body(&t, max) {
                let id = (row.sid << SEQ_BITS) | seq;
                insert_text.execute(params![id, row.cur_turn, kind_code(kind), pack(&body)])?;
                insert_doc.execute(params![id, body])?;
                out.docs += 1;
            }
        }
    }
    drop(insert_doc);
    drop(insert_text);
    let mut up = tx.prepare_cached(
        "INSERT INTO usage(sid, day, provider, model, turns, requests, tokens_in, tokens_out, \
         tokens_cached, cost_pico, project) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT(sid, day, provider, model) DO UPDATE SET turns = turns + excluded.turns, \
         requests = requests + excluded.requests, tokens_in = tokens_in + excluded.tokens_in, \
         tokens_out = tokens_out + excluded.tokens_out, \
         tokens_cached = tokens_cached + excluded.tokens_cached, \
         cost_pico = cost_pico + excluded.cost_pico",
    )?;
    for ((d, p, m), u) in usage {
        up.execute(params![
            row.sid,
            d,
            p,
            m,
            u.turns,
            u.requests,
            u.tokens_in,
            u.tokens_out,
            u.tokens_cached,
            u.cost_pico,
            row.project
        ])?;
    }
    drop(up);
    let (path, len, mtime) = match stamp {
        Some((p, s)) if !out.gap => (Some(p), Some(s.len), Some(s.mtime_ns)),
        _ => (None, None, None),
    };
    tx.prepare_cached(
        "UPDATE sessions SET title = ?2, provider = ?3, model = ?4, updated_ms = ?5, turns = ?6, \
         cur_turn = ?7, open_turn = ?8, status = ?9, requests = ?10, tokens_in = ?11, \
         tokens_out = ?12, tokens_cached = ?13, cost_pico = ?14, first_prompt = ?15, \
         last_prompt = ?16, last_seq = ?17, path = coalesce(?18, path), file_len = ?19, \
         file_mtime = ?20 WHERE sid = ?1",
    )?
    .execute(params![
        row.sid,
        row.title,
        row.provider,
        row.model,
        row.updated_ms,
        row.turns,
        row.cur_turn,
        row.open_turn,
        row.status,
        row.requests,
        row.tokens_in,
        row.tokens_out,
        row.tokens_cached,
        row.cost_pico,
        row.first_prompt,
        row.last_prompt,
        row.last_seq,
        path,
        len,
        mtime
    ])?;
    Ok(out)
}

/// How `docs_text.kind` stores a hit kind.
pub(crate) fn kind_code(kind: HitKind) -> i64 {
    match kind {
        HitKind::Prompt => 0,
        HitKind::Assistant => 1,
        HitKind::ToolCall => 2,
        HitKind::ToolResult => 3,
        HitKind::Title => 4,
    }
}

/// The hit kind of a stored `docs_text.kind` (an unknown code reads as a reply).
pub(crate) fn kind_of(code: i64) -> HitKind {
    match code {
        0 => HitKind::Prompt,
        2 => HitKind::ToolCall,
        3 => HitKind::ToolResult,
        4 => HitKind::Title,
        _ => HitKind::Assistant,
    }
}

/// `(input with cached, output, cached)`.
fn tokens(u: &TokenUsage) -> (i64, i64, i64) {
    let cached = u.cache_read_tokens.unwrap_or(0);
    (
        i(u.input_tokens + cached + u.cache_write_tokens.unwrap_or(0)),
        i(u.output_tokens),
        i(cached),
    )
}

fn cost(pricing: Option<&ModelPricing>, u: &TokenUsage, at_ms: i64) -> i64 {
    let Some(p) = pricing else { return 0 };
    let at =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
    i64::try_from(p.cost_at(u, at).picos()).unwrap_or(i64::MAX)
}

fn load_or_create(tx: &Transaction<'_>, header: &SessionHeader) -> Result<Row, Error> {
    let row = tx
        .prepare_cached(
            "SELECT sid, title, provider, model, updated_ms, turns, cur_turn, open_turn, status, \
             requests, tokens_in, tokens_out, tokens_cached, cost_pico, first_prompt, \
             last_prompt, last_seq, project FROM sessions WHERE id = ?1",
        )?
        .query_row([&header.id], |r| {
            Ok(Row {
                sid: r.get(0)?,
                title: r.get(1)?,
                provider: r.get(2)?,
                model: r.get(3)?,
                updated_ms: r.get(4)?,
                turns: r.get(5)?,
                cur_turn: r.get(6)?,
                open_turn: r.get(7)?,
                status: r.get(8)?,
                requests: r.get(9)?,
                tokens_in: r.get(10)?,
                tokens_out: r.get(11)?,
                tokens_cached: r.get(12)?,
                cost_pico: r.get(13)?,
                first_prompt: r.get(14)?,
                last_prompt: r.get(15)?,
                last_seq: r.get(16)?,
                project: r.get(17)?,
            })
        })
        .optional()?;
    if let Some(row) = row {
        return Ok(row);
    }
    let cwd = header.cwd.clone().unwrap_or_default();
    let project = project_root(&cwd);
    tx.prepare_cached(
        "INSERT INTO sessions(id, parent, cwd, project, created_ms, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    )?
    .execute(params![
        header.id,
        header.parent_session,
        cwd,
        project,
        header.created_at
    ])?;
    Ok(Row {
        sid: tx.last_insert_rowid(),
        project,
        updated_ms: header.created_at,
        status: "-".into(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc() {
        assert_eq!(day(0), "1970-01-01");
        assert_eq!(day(1_796_149_559_999), "2026-12-01");
    }

    #[test]
    fn a_directory_without_git_is_its_own_project() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let sub = sub.to_string_lossy().into_owned();
        assert_eq!(project_root(&sub), sub);
        std::fs::create_dir(dir.path().join("a/.git")).unwrap();
        assert_eq!(
            project_root(&sub),
            dir.path().join("a").to_string_lossy().into_owned()
        );
        assert_eq!(project_root(""), "");
    }
}
