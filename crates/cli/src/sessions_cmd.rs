//! `dsh sessions list | show | export`: read-only views of `$DSH_HOME/sessions`.

use std::sync::Arc;

use anyhow::anyhow;
use dsh_llm::{ContentBlock, Message};
use dsh_session::data::UserMessage;
use dsh_session::feature::SessionTitle;
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, SessionLog, SessionPersistence};
use dsh_session_jsonl::error::StoreError;
use dsh_session_jsonl::repair::RepairCause;
use dsh_session_jsonl::store::JsonlStore;
use std::io::IsTerminal;

use crate::config_cmd::write_stdout;
use crate::{Failure, home};

fn store() -> Arc<dyn SessionPersistence> {
    Arc::new(JsonlStore::new(home::sessions_root()))
}

fn read(id: &str) -> Result<SessionLog, Failure> {
    let decoded = store().open_read(id).map_err(|e| match e {
        dsh_session::SessionError::NotFound(_) => Failure::usage(anyhow!(
            "no stored session `{id}` (see `dsh sessions list`)"
        )),
        other => Failure::run(anyhow!("{other}")),
    })?;
    decoded.replay().map_err(|e| Failure::run(anyhow!("{e}")))
}

fn first_prompt(log: &SessionLog) -> String {
    log.events()
        .iter()
        .filter_map(|e| match e.core() {
            Some(CoreEvent::UserMessage(UserMessage(m))) => Some(m),
            _ => None,
        })
        .find(|m| SourceKind::of(m) == SourceKind::User)
        .map(|m| m.text())
        .unwrap_or_default()
}

fn title(log: &SessionLog) -> String {
    let t = log
        .events()
        .iter()
        .rev()
        .find_map(|e| e.plugin::<SessionTitle>().and_then(Result::ok))
        .map(|t| t.title)
        .unwrap_or_else(|| first_prompt(log));
    let line = t.lines().next().unwrap_or("").trim().to_owned();
    if line.chars().count() > 60 {
        line.chars().take(59).collect::<String>() + "…"
    } else {
        line
    }
}

fn last_status(log: &SessionLog) -> String {
    let end = log
        .last_turn_end()
        .and_then(|seq| match log.event(seq)?.core() {
            Some(CoreEvent::TurnEnd(end)) => Some(end.reason.kind().to_owned()),
            _ => None,
        });
    match end {
        Some(kind) => kind,
        None if log.tracker().open_turn().is_some() => "open".into(),
        None => "-".into(),
    }
}

/// `YYYY-MM-DD HH:MM` in UTC; `-` for a time outside jiff's range.
fn time(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M").to_string(),
        Err(_) => "-".into(),
    }
}

/// `dsh sessions list`.
pub(crate) async fn list() -> Result<u8, Failure> {
    let sessions = store().list().map_err(|e| Failure::run(anyhow!("{e}")))?;
    let mut out = String::new();
    for (depth, s) in tree_order(sessions) {
        let (turns, status, title) = match read(&s.id) {
            Ok(log) => (
                log.tracker().last_turn().to_string(),
                last_status(&log),
                title(&log),
            ),
            Err(e) => ("?".into(), "unreadable".into(), format!("{:#}", e.error)),
        };
        out.push_str(&format!(
            "{}{}  {}  {}  turns={}  {}  {}\n",
            "  ".repeat(depth),
            s.id,
            time(s.created_at),
            s.cwd.as_deref().unwrap_or("-"),
            turns,
            status,
            title
        ));
    }
    write_stdout(&out)
}

/// Sessions as a tree: top-level sessions newest first, each followed by its children (oldest
/// first, recursively) with their depth. A child whose parent is not stored counts as top level.
fn tree_order(
    sessions: Vec<dsh_session::SessionSummary>,
) -> Vec<(usize, dsh_session::SessionSummary)> {
    use std::collections::{BTreeMap, HashSet};
    let ids: HashSet<String> = sessions.iter().map(|s| s.id.clone()).collect();
    let mut roots = Vec::new();
    let mut children: BTreeMap<String, Vec<dsh_session::SessionSummary>> = BTreeMap::new();
    for s in sessions {
        match s.parent_session.clone() {
            Some(p) if p != s.id && ids.contains(&p) => children.entry(p).or_default().push(s),
            _ => roots.push(s),
        }
    }
    roots.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    for list in children.values_mut() {
        list.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    }
    let mut out = Vec::new();
    let mut stack: Vec<(usize, dsh_session::SessionSummary)> =
        roots.into_iter().rev().map(|s| (0, s)).collect();
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
pub(crate) async fn show(id: &str) -> Result<u8, Failure> {
    let log = read(id)?;
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
