//! The rows of the session picker (`/resume`, `dsh --resume` without an id): title (or the
//! first prompt), the first prompt when a title differs from it, working directory, age,
//! turns and the last turn's status.

use dsh_session::data::UserMessage;
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, SessionLog, SessionSummary, Sessions};

use crate::app::PickItem;

/// Logs read for the details (the newest sessions); older rows show what the listing has.
pub const DETAILED: usize = 50;

/// The picker's rows, newest first: top-level sessions only (children are reached through
/// their parent). Reads up to [`DETAILED`] logs (no lock taken, nothing written).
pub fn rows(sessions: &dyn Sessions, now_ms: i64) -> Vec<PickItem> {
    let mut list: Vec<SessionSummary> = sessions
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.parent_session.is_none())
        .collect();
    list.reverse();
    list.into_iter()
        .enumerate()
        .map(|(i, s)| {
            let log = (i < DETAILED).then(|| sessions.read(&s.id).ok()).flatten();
            item(&s, log.as_ref(), now_ms)
        })
        .collect()
}

/// One row from a listing entry and, when read, its log.
pub fn item(s: &SessionSummary, log: Option<&SessionLog>, now_ms: i64) -> PickItem {
    let first = log.map(first_prompt).unwrap_or_default();
    let first = one_line(&first, 80);
    let title = match s.title.as_deref().map(|t| one_line(t, 80)) {
        Some(t) if !t.is_empty() => t,
        _ if !first.is_empty() => first.clone(),
        _ => "(no prompt yet)".to_owned(),
    };
    let mut parts = Vec::new();
    if !first.is_empty() && first != title {
        parts.push(format!("“{first}”"));
    }
    parts.push(s.cwd.clone().unwrap_or_else(|| "-".into()));
    parts.push(age(now_ms - s.created_at));
    if let Some(log) = log {
        let turns = log.tracker().last_turn();
        parts.push(format!("{turns} turn{}", if turns == 1 { "" } else { "s" }));
        parts.push(status(log));
    }
    PickItem {
        id: s.id.clone(),
        title,
        detail: parts.join(" · "),
    }
}

fn one_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    crate::wrap::truncate(&crate::cells::sanitize(line), max)
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

/// The last turn's end (`completed`, `aborted`, `error` …), `open` while a turn is open.
fn status(log: &SessionLog) -> String {
    let end = log
        .last_turn_end()
        .and_then(|seq| match log.event(seq)?.core() {
            Some(CoreEvent::TurnEnd(end)) => Some(end.reason.kind().to_owned()),
            _ => None,
        });
    match end {
        Some(kind) => kind,
        None if log.tracker().open_turn().is_some() => "open".into(),
        None => "new".into(),
    }
}

/// `5m ago`, `3h ago`, `2d ago`.
pub fn age(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    if s < 60 {
        format!("{s}s ago")
    } else if s < 3600 {
        format!("{}m ago", s / 60)
    } else if s < 86_400 {
        format!("{}h ago", s / 3600)
    } else {
        format!("{}d ago", s / 86_400)
    }
}
