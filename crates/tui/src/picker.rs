//! The rows of the session picker (`/resume`, `dsh --resume` without an id): title (or the
//! first prompt), the first prompt when a title differs from it, working directory, age,
//! turns and the last turn's status, from the host's session summaries. As the query is
//! typed, the host's catalog is searched too (the full text of every session, through the
//! list call's `q`): its hits follow the rows the query matches by title.

use dsh_protocol::{SessionSummary, TurnEndReason};

use crate::app::PickItem;

/// Sessions whose log is read for the details (the newest); older rows show what the listing
/// has.
pub const DETAILED: usize = 50;

/// Whether a listed summary already has the details (a host with a catalog lists turns and the
/// last turn's end): no log needs reading.
pub fn listed_in_full(s: &SessionSummary) -> bool {
    s.last_turn_end.is_some() || (s.turns > 0 && s.first_prompt.is_some())
}

/// The full-text query sent for what is typed: every word, the last one as a prefix (`pars`
/// finds `parser`) unless it closes a phrase. `None` when nothing is typed.
pub fn full_text_query(typed: &str) -> Option<String> {
    let t = typed.trim();
    if t.is_empty() {
        return None;
    }
    Some(if t.ends_with(|c: char| c.is_alphanumeric()) {
        format!("{t}*")
    } else {
        t.to_owned()
    })
}

/// One row from a session's summary (`detailed`: its log was read, so its first prompt, turns
/// and last turn are known).
pub fn item(s: &SessionSummary, detailed: bool, now_ms: i64) -> PickItem {
    let first = one_line(s.first_prompt.as_deref().unwrap_or(""), 80);
    let title = match s.title.as_deref().map(|t| one_line(t, 80)) {
        Some(t) if !t.is_empty() => t,
        _ if !first.is_empty() => first.clone(),
        _ => "(no prompt yet)".to_owned(),
    };
    let mut parts = Vec::new();
    if !first.is_empty() && first != title {
        parts.push(format!("“{first}”"));
    }
    parts.push(if s.cwd.is_empty() {
        "-".to_owned()
    } else {
        s.cwd.clone()
    });
    parts.push(age(now_ms - s.created_ms));
    if detailed {
        let turns = s.turns;
        parts.push(format!("{turns} turn{}", if turns == 1 { "" } else { "s" }));
        parts.push(status(s));
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

/// The last turn's end (`completed`, `aborted`, `error` …), `open` while a turn is open.
fn status(s: &SessionSummary) -> String {
    match &s.last_turn_end {
        Some(end) => end_word(end).to_owned(),
        None if s.turns > 0 => "open".into(),
        None => "new".into(),
    }
}

/// The log's word for a turn's end.
pub fn end_word(end: &TurnEndReason) -> &str {
    match end {
        TurnEndReason::Completed => "completed",
        TurnEndReason::Error { .. } => "error",
        TurnEndReason::Aborted => "aborted",
        TurnEndReason::MaxTokens => "max-tokens",
        TurnEndReason::Blocked => "blocked",
        TurnEndReason::Interrupted => "interrupted",
        TurnEndReason::Forked => "forked",
        TurnEndReason::Other { kind } => kind,
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

/// Now, in ms since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::full_text_query;

    #[test]
    fn the_last_typed_word_is_a_prefix() {
        assert_eq!(full_text_query("  "), None);
        assert_eq!(full_text_query("pars").as_deref(), Some("pars*"));
        assert_eq!(full_text_query("fix pars ").as_deref(), Some("fix pars*"));
        assert_eq!(
            full_text_query("\"a phrase\"").as_deref(),
            Some("\"a phrase\"")
        );
        assert_eq!(full_text_query("终端").as_deref(), Some("终端*"));
    }

    #[test]
    fn typing_searches_and_the_hosts_hits_follow_the_local_matches() {
        use crate::app::{PickItem, Picker};
        let row = |id: &str, title: &str| PickItem {
            id: id.into(),
            title: title.into(),
            detail: "/w · 1h ago".into(),
        };
        let mut p = Picker {
            items: vec![row("a", "fix the parser"), row("b", "write docs")],
            ..Default::default()
        };
        p.query = "parser".into();
        assert_eq!(p.filtered().len(), 1);
        // The host found the word in b's text (and a's title): b follows, a is not repeated.
        p.found = Some(("parser".into(), vec![row("b", "write docs"), row("a", "x")]));
        let ids: Vec<&str> = p.filtered().iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        // Hits for an older query are not shown.
        p.query = "parse".into();
        assert_eq!(p.filtered().len(), 1);
    }
}
