//! `dsh sessions list | search | show | export | repair`: views of `$DSH_HOME/sessions`, or
//! with `--store URL` / `DSH_STORE` of a PostgreSQL store (list, search, show); list and search
//! come from the store's catalog (`crate::catalog`, or the PostgreSQL store's own).

use std::sync::Arc;

use anyhow::anyhow;
use dsh_llm::{ContentBlock, Message};
use dsh_session::data::UserMessage;
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, SessionLog, SessionPersistence};
use dsh_session_jsonl::error::StoreError;
use dsh_session_jsonl::repair::RepairCause;
use dsh_session_jsonl::store::JsonlStore;
use std::io::IsTerminal;

use dsh_catalog_api::SessionRow;

use crate::config_cmd::write_stdout;
use crate::{Failure, home};

fn store() -> Arc<dyn SessionPersistence> {
    Arc::new(JsonlStore::new(home::sessions_root()))
}

fn read(id: &str, from: Option<&str>) -> Result<SessionLog, Failure> {
    let decoded = crate::store_cmd::open(from)?
        .open_read(id)
        .map_err(|e| match e {
            dsh_session::SessionError::NotFound(_) => Failure::usage(anyhow!(
                "no stored session `{id}` (see `dsh sessions list`)"
            )),
            other => Failure::run(anyhow!("{other}")),
        })?;
    decoded.replay().map_err(|e| Failure::run(anyhow!("{e}")))
}

/// `YYYY-MM-DD HH:MM` in UTC; `-` for a time outside jiff's range.
fn time(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M").to_string(),
        Err(_) => "-".into(),
    }
}

/// `dsh sessions list`: from the catalog (reconciled with the logs first), as a tree.
pub(crate) async fn list(args: ListArgs) -> Result<u8, Failure> {
    let filter = args.filter.to_filter(false)?;
    let limit = filter.limit;
    let catalog = crate::store_cmd::catalog(args.filter.store.as_deref())?;
    let rows = catalog
        .list(&dsh_catalog_api::Filter {
            limit: None,
            ..filter
        })
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    let mut ordered = tree_order(rows);
    if let Some(n) = limit {
        ordered.truncate(n as usize);
    }
    if args.filter.json {
        let rows: Vec<&SessionRow> = ordered.iter().map(|(_, r)| r).collect();
        return write_stdout(&(serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n"));
    }
    let mut out = String::new();
    if args.header || std::io::stdout().is_terminal() {
        out.push_str("ID  CREATED  CWD  TURNS  STATUS  TITLE\n");
    }
    for (depth, s) in ordered {
        let (turns, title) = if s.status == "unreadable" {
            (
                "?".to_owned(),
                "(the log cannot be read: see `dsh sessions repair`)".to_owned(),
            )
        } else {
            (s.turns.to_string(), display_title(&s))
        };
        out.push_str(&format!(
            "{}{}  {}  {}  turns={}  {}  {}\n",
            "  ".repeat(depth),
            s.id,
            time(s.created_ms),
            if s.cwd.is_empty() { "-" } else { &s.cwd },
            turns,
            s.status,
            title
        ));
    }
    write_stdout(&out)
}

/// The title shown for a session: its latest title, else its first prompt, on one line.
fn display_title(s: &SessionRow) -> String {
    let t = s.title.as_deref().unwrap_or(&s.first_prompt);
    let line = t.lines().next().unwrap_or("").trim().to_owned();
    if line.chars().count() > 60 {
        line.chars().take(59).collect::<String>() + "…"
    } else {
        line
    }
}

/// `dsh sessions search QUERY`: ranked hits with a highlighted snippet, session, turn, age.
pub(crate) async fn search(args: SearchArgs) -> Result<u8, Failure> {
    let filter = args.filter.to_filter(true)?;
    let catalog = crate::store_cmd::catalog(args.filter.store.as_deref())?;
    let hits = catalog
        .search(&dsh_catalog_api::SearchQuery {
            text: args.query.clone(),
            filter,
        })
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    if args.filter.json {
        return write_stdout(&(serde_json::to_string_pretty(&hits).unwrap_or_default() + "\n"));
    }
    if hits.is_empty() {
        let scope = if args.filter.all || args.filter.cwd.is_some() {
            ""
        } else {
            " in this project (--all searches every session)"
        };
        eprintln!("dsh: nothing matches `{}`{scope}", args.query);
        return Ok(0);
    }
    let tty = std::io::stdout().is_terminal();
    let now = dsh_session::now_ms();
    let mut out = String::new();
    for h in &hits {
        out.push_str(&format!(
            "{}  turn {}  {}  {}  {}\n",
            h.session_id,
            h.turn,
            age(now - h.updated_ms),
            h.kind.as_str(),
            highlight(&h.snippet, &h.highlights, tty)
        ));
    }
    write_stdout(&out)
}

/// The snippet with its matches in bold yellow on a terminal, as it is otherwise.
fn highlight(snippet: &str, ranges: &[(usize, usize)], tty: bool) -> String {
    if !tty {
        return snippet.to_owned();
    }
    let mut out = String::with_capacity(snippet.len() + ranges.len() * 10);
    let mut at = 0;
    for &(a, b) in ranges {
        if a < at
            || b > snippet.len()
            || !snippet.is_char_boundary(a)
            || !snippet.is_char_boundary(b)
        {
            continue;
        }
        out.push_str(&snippet[at..a]);
        out.push_str("\x1b[1;33m");
        out.push_str(&snippet[a..b]);
        out.push_str("\x1b[0m");
        at = b;
    }
    out.push_str(&snippet[at..]);
    out
}

/// A short age: `42s`, `5m`, `3h`, `12d`, `8w`.
pub(crate) fn age(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3_600),
        s if s < 86_400 * 14 => format!("{}d", s / 86_400),
        s => format!("{}w", s / (86_400 * 7)),
    }
}

/// Options of `dsh sessions list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) filter: FilterArgs,
    /// Print the header row even when stdout is not a terminal.
    #[arg(long)]
    pub(crate) header: bool,
}

/// Options of `dsh sessions search`.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// Words (all must occur in one prompt, reply, tool call or result); `"a phrase"`;
    /// `pre*` for a prefix. Anything else is literal text.
    #[arg(value_name = "QUERY")]
    pub(crate) query: String,
    #[command(flatten)]
    pub(crate) filter: FilterArgs,
}

/// The filters shared by `sessions list` and `sessions search`.
#[derive(Debug, clap::Args)]
pub(crate) struct FilterArgs {
    /// Only sessions of this directory: itself, under it, or of its project (search default:
    /// the current directory).
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    pub(crate) cwd: Option<std::path::PathBuf>,
    /// Every session, whatever its directory (the default of `list`).
    #[arg(long)]
    pub(crate) all: bool,
    /// Only sessions active within this long: `30m`, `12h`, `7d`, `2w`.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub(crate) since: Option<i64>,
    /// Only sessions whose last model (or route) is this one.
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,
    /// At most N rows.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
    /// JSON output.
    #[arg(long)]
    pub(crate) json: bool,
    /// The store: a `postgres://` URL, or `jsonl` (the default: $DSH_HOME/sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
}

/// Options of `dsh sessions show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// Session id.
    pub(crate) id: String,
    /// The store: a `postgres://` URL, or `jsonl` (the default: $DSH_HOME/sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
}

impl FilterArgs {
    /// The catalog filter; `here`: without `--cwd`/`--all`, the current directory.
    fn to_filter(&self, here: bool) -> Result<dsh_catalog_api::Filter, Failure> {
        let cwd = match (&self.cwd, self.all, here) {
            (Some(dir), _, _) => Some(absolute(dir)?),
            (None, false, true) => Some(
                std::env::current_dir()
                    .map_err(|e| Failure::run(anyhow!("no current directory: {e}")))?,
            ),
            _ => None,
        };
        Ok(dsh_catalog_api::Filter {
            cwd: cwd.map(|d| d.to_string_lossy().into_owned()),
            since_ms: self.since.map(|ms| dsh_session::now_ms() - ms),
            model: self.model.clone(),
            limit: self.limit,
        })
    }
}

fn absolute(dir: &std::path::Path) -> Result<std::path::PathBuf, Failure> {
    std::path::absolute(dir)
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .map_err(|e| Failure::usage(anyhow!("bad directory {}: {e}", dir.display())))
}

/// `30m`, `12h`, `7d`, `2w` (or a bare number of days) in milliseconds.
pub(crate) fn parse_age(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "d"),
    };
    let n: i64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not an age like 30m, 12h, 7d or 2w"))?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(format!("`{s}`: the unit is one of s, m, h, d, w")),
    };
    n.checked_mul(unit_ms)
        .ok_or_else(|| format!("`{s}` is too long ago"))
}

/// Sessions as a tree: top-level sessions newest first, each followed by its children (oldest
/// first, recursively) with their depth. A child whose parent is not stored counts as top level.
fn tree_order(sessions: Vec<SessionRow>) -> Vec<(usize, SessionRow)> {
    use std::collections::{BTreeMap, HashSet};
    let ids: HashSet<String> = sessions.iter().map(|s| s.id.clone()).collect();
    let mut roots = Vec::new();
    let mut children: BTreeMap<String, Vec<SessionRow>> = BTreeMap::new();
    for s in sessions {
        match s.parent.clone() {
            Some(p) if p != s.id && ids.contains(&p) => children.entry(p).or_default().push(s),
            _ => roots.push(s),
        }
    }
    roots.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(b.id.cmp(&a.id)));
    for list in children.values_mut() {
        list.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then(a.id.cmp(&b.id)));
    }
    let mut out = Vec::new();
    let mut stack: Vec<(usize, SessionRow)> = roots.into_iter().rev().map(|s| (0, s)).collect();
    let mut seen = HashSet::new();
    while let Some((depth, s)) = stack.pop() {
        if !seen.insert(s.id.clone()) {
            continue;
        }
        if let Some(kids) = children.remove(&s.id) {
            stack.extend(kids.into_iter().rev().map(|k| (depth + 1, k)));
        }
        out.push((depth, s));
    }
    out
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Reasoning { text, .. } => format!("(thinking) {text}"),
        ContentBlock::ToolCall(c) => format!("→ {}({})", c.name, c.arguments),
        other => format!("[{}]", other.type_tag()),
    }
}

fn content(message: &Message) -> String {
    message
        .content
        .iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The task list, plan-mode changes and working-directory changes, as transcript lines.
fn tool_set_line(e: &dsh_session::Event) -> Option<String> {
    if let Some(Ok(todo)) = e.plugin::<dsh_session::feature::TodoWrite>() {
        let list = dsh_tool_todo::checklist(&todo.todos).replace('\n', "\n  ");
        return Some(format!("todo:\n  {list}"));
    }
    if let Some(Ok(mode)) = e.plugin::<dsh_session::feature::PlanModeChange>() {
        return Some(if mode.active {
            "plan mode: on".into()
        } else {
            "plan mode: off".into()
        });
    }
    if let Some(Ok(wd)) = e.plugin::<dsh_session::feature::WorkingDirectoryChange>() {
        return Some(format!("working directory: {}", wd.cwd));
    }
    None
}

/// `dsh sessions show ID`: a readable transcript of the model history and turn outcomes.
pub(crate) async fn show(args: ShowArgs) -> Result<u8, Failure> {
    let log = read(&args.id, args.store.as_deref())?;
    let h = log.header();
    let mut out = format!(
        "session {}\ncreated {}\ncwd {}\n",
        h.id,
        time(h.created_at),
        h.cwd.as_deref().unwrap_or("-")
    );
    for e in log.events() {
        let line = match e.core() {
            Some(CoreEvent::TurnStart(t)) => format!("\n── turn {} ──", t.turn),
            Some(CoreEvent::TurnEnd(t)) => {
                format!("── turn {} ended: {} ──", t.turn, t.reason.kind())
            }
            Some(CoreEvent::UserMessage(UserMessage(m))) => match SourceKind::of(m) {
                SourceKind::User => format!("user: {}", content(m)),
                _ => format!("context ({}): {}", m.source.kind, content(m)),
            },
            Some(CoreEvent::AssistantMessage(a)) => {
                let mark = if a.interrupted == Some(true) {
                    " (interrupted)"
                } else {
                    ""
                };
                format!("assistant{mark}: {}", content(&a.message))
            }
            Some(CoreEvent::ToolResult(r)) => {
                let err = if r.message.is_error == Some(true) {
                    " error"
                } else {
                    ""
                };
                format!("tool{err}: {}", content(&r.message))
            }
            _ => match tool_set_line(e)
                .or_else(|| dsh_compaction::events::describe(e))
                .or_else(|| crate::audit::line(e))
                .or_else(|| dsh_hooks::events::describe(e))
                .or_else(|| subagent_line(e))
                .or_else(|| dsh_checkpoint::events::forked(e))
            {
                Some(line) => line,
                None => continue,
            },
        };
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&usage_footer(log.events()));
    let written = write_stdout(&out);
    // The process ends next: the OS takes the loaded log back at once, where freeing it event
    // by event cost ~13% of the command on a 10k-event log.
    std::mem::forget(log);
    written
}

/// The line of a `dsh/subagent-usage` record (a child's run ended).
fn subagent_line(e: &dsh_session::Event) -> Option<String> {
    let u = e.plugin::<dsh_subagent::SubagentUsage>()?.ok()?;
    Some(format!(
        "subagent {} ({}) ended: {}, {} requests, {} input ({} cached), {} output",
        u.child_id,
        u.provider,
        u.stop_reason.as_str(),
        u.requests,
        u.usage.input_tokens + u.usage.cache_read_tokens.unwrap_or(0),
        u.usage.cache_read_tokens.unwrap_or(0),
        u.usage.output_tokens
    ))
}

/// `usage: <in> input (<hit> cached), <out> output, <n> requests (subagents: …)`: the
/// session's own requests and its sub-agents' (at any depth, failed runs too).
fn usage_footer(events: &[std::sync::Arc<dsh_session::Event>]) -> String {
    let mut own = dsh_llm::UsageTally::default();
    let mut sub = dsh_llm::UsageTally::default();
    let (mut own_requests, mut sub_requests) = (0u64, 0u64);
    for share in dsh_subagent::session_usage(events) {
        if share.subagent {
            sub.add(&share.usage, None);
            sub_requests += share.requests;
        } else {
            own.add(&share.usage, None);
            own_requests += share.requests;
        }
    }
    let mut total = own;
    total.merge(&sub);
    format!(
        "\nusage: {} input ({} cached), {} output, {} requests (subagents: {} requests, {} input, {} output)\n",
        total.input(),
        total.cache_hit_input,
        total.output,
        own_requests + sub_requests,
        sub_requests,
        sub.input(),
        sub.output
    )
}

/// `dsh sessions repair ID [--yes]`: shows what a repair keeps and moves, asks (on a terminal),
/// then moves the damaged part of the log aside. Nothing is deleted.
pub(crate) async fn repair(id: &str, yes: bool) -> Result<u8, Failure> {
    let store = JsonlStore::new(home::sessions_root());
    let plan = store.plan_repair(id).map_err(|e| store_failure(id, e))?;
    let Some(cause) = &plan.cause else {
        write_stdout(&format!(
            "session {id} is healthy ({} events); nothing to repair\n",
            plan.kept_events
        ))?;
        return Ok(0);
    };
    let side = plan
        .side_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut summary = format!(
        "session {id}: {}\n  log: {}\n  keep: {} events ({} bytes)\n  move aside: {} bytes -> {side}\n",
        describe_cause(cause),
        plan.log.display(),
        plan.kept_events,
        plan.kept_bytes,
        plan.moved_bytes,
    );
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(anyhow!(
                "{summary}refusing to repair without confirmation: pass --yes"
            )));
        }
        summary.push_str("Repair? [y/N] ");
        eprint!("{summary}");
        let mut answer = String::new();
        std::io::stdin()
            .read_line(&mut answer)
            .map_err(|e| Failure::run(anyhow!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("dsh: nothing changed");
            return Ok(1);
        }
    } else {
        eprint!("{summary}");
    }
    let done = store.repair(id).map_err(|e| store_failure(id, e))?;
    let side = done
        .side_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    write_stdout(&format!(
        "repaired session {id}: kept {} events, moved {} bytes to {side}\n",
        done.kept_events, done.moved_bytes
    ))?;
    Ok(0)
}

fn describe_cause(cause: &RepairCause) -> String {
    match cause {
        RepairCause::TornTail => "the last line is torn (an incomplete final write)".into(),
        RepairCause::Refused(e) => format!("the log is refused: {e}"),
    }
}

fn store_failure(id: &str, e: StoreError) -> Failure {
    match e {
        StoreError::NotFound(_) => Failure::usage(anyhow!(
            "no stored session `{id}` (see `dsh sessions list`)"
        )),
        other => Failure::run(anyhow!("{other}")),
    }
}

/// `dsh sessions export ID`: the raw stored log.
pub(crate) async fn export(id: &str) -> Result<u8, Failure> {
    let bytes = store().export_raw(id).map_err(|e| match e {
        dsh_session::SessionError::NotFound(_) => Failure::usage(anyhow!(
            "no stored session `{id}` (see `dsh sessions list`)"
        )),
        other => Failure::run(anyhow!("{other}")),
    })?;
    let mut stdout = std::io::stdout().lock();
    use std::io::Write;
    match stdout.write_all(&bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::run(anyhow!("cannot write to stdout: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::time;

    #[test]
    fn times_are_utc_minutes() {
        assert_eq!(time(0), "1970-01-01 00:00");
        assert_eq!(time(1_796_149_559_999), "2026-12-01 18:25");
        assert_eq!(time(-1), "1969-12-31 23:59");
        assert_eq!(time(i64::MAX), "-");
    }
}
