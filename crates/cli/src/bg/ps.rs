//! `dsh ps`: the sessions dsh processes hold open, what each is doing now.
//!
//! Two sources: the catalog's live table (`$DSH_HOME/catalog-live.sqlite`, which every dsh
//! process with the `catalog` plugin reports its sessions to: working, idle, ended, or gone
//! when its process died, with the pid and host), and the background server's
//! `GET /v1/sessions` (open sessions are the ones not `ended`), which also says what a session
//! is doing from its event stream: the last events of its log (a window of [`WINDOW`] seqs)
//! folded up to the snapshot that follows them (pending approvals and questions, the attempt
//! being streamed). A session both list is shown once, with the server's detail.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::anyhow;
use dsh_catalog_api::{LiveSession, LiveState};
use dsh_protocol::{
    Client, EventMsg, SessionQuery, SessionState, SessionSummary, ToolDisplay, Usage,
};
use dsh_serve::RemoteClient;
use futures::StreamExt;
use serde::Serialize;

use crate::Failure;

/// How many committed events before the end of a log are read to find the running tool call
/// (its `toolCallBegan` is among the last events of a working session).
const WINDOW: u64 = 256;

/// How long reading one session's recent events may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What a session is doing now.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum Doing {
    /// A tool call waits for a person's approval.
    Approval {
        /// The call, as its tool shows it.
        tool: String,
    },
    /// The agent asked a question.
    Question,
    /// A tool call runs.
    Tool {
        /// The call, as its tool shows it.
        tool: String,
    },
    /// The model reasons (or has not streamed anything yet).
    Thinking,
    /// The model streams its answer.
    Answering,
    /// No turn runs.
    Idle,
    /// A turn runs in another process (what it does there is not known here).
    Turn {
        /// The turn.
        turn: u64,
    },
    /// Its process closed it.
    Ended,
    /// Its process is gone without closing it (killed, crashed).
    Gone,
}

impl std::fmt::Display for Doing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Doing::Approval { tool } => write!(f, "approve? {tool}"),
            Doing::Question => f.write_str("question for you"),
            Doing::Tool { tool } => f.write_str(tool),
            Doing::Thinking => f.write_str("thinking"),
            Doing::Answering => f.write_str("answering"),
            Doing::Idle => f.write_str("idle"),
            Doing::Turn { turn } => write!(f, "turn {turn}"),
            Doing::Ended => f.write_str("ended"),
            Doing::Gone => f.write_str("process gone"),
        }
    }
}

/// One line of `dsh ps`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PsRow {
    pub(crate) id: String,
    pub(crate) state: SessionState,
    pub(crate) doing: Doing,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    pub(crate) cwd: String,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    /// Seconds since it was created.
    pub(crate) age_secs: u64,
    pub(crate) turns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent_id: Option<String>,
    /// The process holding it (the live table's word).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
    /// That process's host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) host: Option<String>,
}

/// `dsh ps --json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PsOutput {
    /// Whether a background server answers.
    running: bool,
    /// Its socket.
    socket: String,
    /// Its sessions (see [`PsRow`]).
    sessions: Vec<PsRow>,
}

fn short(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

fn tool_line(d: &ToolDisplay) -> String {
    match &d.subject {
        Some(s) => format!("{}: {}", d.title, short(s, 60)),
        None => d.title.clone(),
    }
}

/// What `summary`'s session is doing, from its recent events.
pub(crate) async fn doing(client: &RemoteClient, summary: &SessionSummary) -> Doing {
    if summary.state == SessionState::Idle || summary.state == SessionState::Ended {
        return Doing::Idle;
    }
    let after = summary.last_seq.map(|s| s.saturating_sub(WINDOW));
    let read = async {
        let mut events = client.subscribe(&summary.id, after).await.ok()?;
        let mut running: Vec<(String, ToolDisplay)> = Vec::new();
        while let Some(ev) = events.next().await {
            match ev.msg {
                EventMsg::ToolCallBegan {
                    call_id, display, ..
                } => running.push((call_id, display)),
                EventMsg::ToolCallEnded { call_id, .. } => running.retain(|(c, _)| *c != call_id),
                EventMsg::TurnEnded { .. } => running.clear(),
                EventMsg::Snapshot(s) => {
                    let state = s.session.state;
                    if state == SessionState::Idle || state == SessionState::Ended {
                        return Some(Doing::Idle);
                    }
                    if let Some(a) = s.pending_approvals.first() {
                        return Some(Doing::Approval {
                            tool: tool_line(&a.display),
                        });
                    }
                    if !s.pending_questions.is_empty() {
                        return Some(Doing::Question);
                    }
                    if let Some((_, d)) = running.last() {
                        return Some(Doing::Tool { tool: tool_line(d) });
                    }
                    let answering = s.live.as_ref().is_some_and(|l| !l.text.is_empty());
                    return Some(if answering {
                        Doing::Answering
                    } else {
                        Doing::Thinking
                    });
                }
                _ => {}
            }
        }
        None
    };
    match tokio::time::timeout(READ_TIMEOUT, read).await {
        Ok(Some(d)) => d,
        // The stream ended or was slow: the state alone.
        _ if summary.state == SessionState::WaitingForApproval => {
            Doing::Approval { tool: "?".into() }
        }
        _ => Doing::Thinking,
    }
}

fn rank(state: SessionState) -> u8 {
    match state {
        SessionState::WaitingForApproval => 0,
        SessionState::Working => 1,
        SessionState::Idle => 2,
        SessionState::Ended => 3,
    }
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The open sessions of the server (`all`: idle ones too), waiting ones first, then working,
/// then idle; newest first inside each.
pub(crate) async fn rows(client: &RemoteClient, all: bool) -> Result<Vec<PsRow>, Failure> {
    let list = client
        .sessions(SessionQuery::default())
        .await
        .map_err(|e| Failure::run(anyhow!("the background server: {e}")))?;
    let open: Vec<SessionSummary> = list
        .into_iter()
        .filter(|s| match s.state {
            SessionState::Ended => false,
            SessionState::Idle => all,
            SessionState::Working | SessionState::WaitingForApproval => true,
        })
        .collect();
    let doings = futures::future::join_all(open.iter().map(|s| doing(client, s))).await;
    let now = now_ms();
    let mut rows: Vec<PsRow> = open
        .into_iter()
        .zip(doings)
        .map(|(s, doing)| PsRow {
            age_secs: u64::try_from(now.saturating_sub(s.created_ms) / 1000).unwrap_or(0),
            id: s.id,
            state: s.state,
            doing,
            title: s.title,
            cwd: s.cwd,
            created_ms: s.created_ms,
            updated_ms: s.updated_ms,
            turns: s.turns,
            usage: s.usage,
            parent_id: s.parent_id,
            pid: None,
            host: None,
        })
        .collect();
    rows.sort_by(|a, b| {
        rank(a.state)
            .cmp(&rank(b.state))
            .then(b.created_ms.cmp(&a.created_ms))
            .then(a.id.cmp(&b.id))
    });
    Ok(rows)
}

fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    }
}

fn cost(usage: Option<&Usage>) -> String {
    match usage.and_then(|u| u.cost_usd) {
        Some(c) => format!("${c:.4}"),
        None => "-".into(),
    }
}

fn state_label(s: SessionState) -> &'static str {
    match s {
        SessionState::WaitingForApproval => "waiting",
        SessionState::Working => "working",
        SessionState::Idle => "idle",
        SessionState::Ended => "ended",
    }
}

/// The table `dsh ps` prints.
pub(crate) fn table(rows: &[PsRow]) -> String {
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let now = match (&r.doing, &r.title) {
                (Doing::Idle, Some(t)) => short(t, 50),
                (d, _) => short(&d.to_string(), 70),
            };
            let state = match r.doing {
                Doing::Gone => "gone",
                _ => state_label(r.state),
            };
            [
                r.id.clone(),
                state.to_owned(),
                r.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
                age(r.age_secs),
                cost(r.usage.as_ref()),
                now,
                r.cwd.clone(),
            ]
        })
        .collect();
    let header = ["ID", "STATE", "PID", "AGE", "COST", "NOW", "CWD"].map(str::to_owned);
    let mut width = header.clone().map(|h| h.chars().count());
    for c in &cells {
        for (i, v) in c.iter().enumerate() {
            width[i] = width[i].max(v.chars().count());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(&header).chain(cells.iter()) {
        let mut l = String::new();
        for (i, v) in line.iter().enumerate() {
            if i + 1 == line.len() {
                l.push_str(v);
            } else {
                let pad = width[i] - v.chars().count();
                l.push_str(v);
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    }
    out
}

/// The catalog's live table of this home (none when no process reported yet, or unreadable).
fn live_sessions() -> Vec<LiveSession> {
    let catalog = crate::home::dsh_home().join("catalog.sqlite");
    let path = dsh_catalog::live_path(&catalog);
    match dsh_catalog::LiveTable::open_existing(&path).and_then(|t| t.map(|t| t.list()).transpose())
    {
        Ok(rows) => rows.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(path = %path.display(), "the catalog's live table cannot be read: {e}");
            Vec::new()
        }
    }
}

/// The server's rows and the live table's, one row per session (the server's, with the pid
/// and host of the live table), filtered as `dsh ps` shows them: working and waiting
/// sessions, with `all` idle, ended and gone ones too. Waiting first, then working, idle,
/// ended; newest first inside each.
pub(crate) fn merge(
    server: Vec<PsRow>,
    live: Vec<LiveSession>,
    all: bool,
    now_ms: i64,
) -> Vec<PsRow> {
    let mut by_id: HashMap<String, LiveSession> =
        live.into_iter().map(|l| (l.id.clone(), l)).collect();
    let mut rows: Vec<PsRow> = server
        .into_iter()
        .map(|mut r| {
            if let Some(l) = by_id.remove(&r.id) {
                r.pid = Some(l.pid);
                r.host = Some(l.host);
            }
            r
        })
        .collect();
    for l in by_id.into_values() {
        let (state, doing) = match l.state {
            LiveState::Working => (SessionState::Working, Doing::Turn { turn: l.turn }),
            LiveState::Idle => (SessionState::Idle, Doing::Idle),
            LiveState::Ended => (SessionState::Ended, Doing::Ended),
            LiveState::Gone => (SessionState::Ended, Doing::Gone),
        };
        if !all && state != SessionState::Working {
            continue;
        }
        rows.push(PsRow {
            id: l.id,
            state,
            doing,
            title: None,
            cwd: l.cwd,
            created_ms: l.started_ms,
            updated_ms: l.updated_ms,
            age_secs: u64::try_from(now_ms.saturating_sub(l.started_ms) / 1000).unwrap_or(0),
            turns: l.turn,
            usage: None,
            parent_id: None,
            pid: Some(l.pid),
            host: Some(l.host),
        });
    }
    rows.sort_by(|a, b| {
        rank(a.state)
            .cmp(&rank(b.state))
            .then(b.created_ms.cmp(&a.created_ms))
            .then(a.id.cmp(&b.id))
    });
    rows
}

/// Runs `dsh ps`.
pub(crate) async fn run(json: bool, all: bool) -> Result<u8, Failure> {
    let paths = super::server::paths();
    let client = super::server::running()?;
    let server = match &client {
        Some(c) => rows(c, all).await?,
        None => Vec::new(),
    };
    let rows = merge(server, live_sessions(), all, now_ms());
    if json {
        let out = PsOutput {
            running: client.is_some(),
            socket: paths.socket.display().to_string(),
            sessions: rows,
        };
        let text = serde_json::to_string_pretty(&out).map_err(|e| Failure::run(anyhow!(e)))?;
        crate::config_cmd::write_stdout(&format!("{text}\n"))?;
        return Ok(0);
    }
    if client.is_none() && rows.is_empty() {
        eprintln!(
            "no session is working and no background server is running (`dsh exec --bg \"task\"` starts one)"
        );
        return Ok(0);
    }
    if rows.is_empty() {
        if all {
            eprintln!("the background server has no open session");
        } else {
            eprintln!("no session is working (`dsh ps --all` lists the idle ones too)");
        }
        return Ok(0);
    }
    crate::config_cmd::write_stdout(&table(&rows))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, state: SessionState, created_ms: i64, doing: Doing) -> PsRow {
        PsRow {
            id: id.into(),
            state,
            doing,
            title: None,
            cwd: "/w".into(),
            created_ms,
            updated_ms: created_ms,
            age_secs: 65,
            turns: 1,
            usage: None,
            parent_id: None,
            pid: None,
            host: None,
        }
    }

    #[test]
    fn the_table_has_a_header_and_aligned_columns() {
        let rows = [
            row(
                "a1",
                SessionState::WaitingForApproval,
                1,
                Doing::Approval {
                    tool: "Bash: ls".into(),
                },
            ),
            row("b22", SessionState::Working, 2, Doing::Thinking),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[0].starts_with("ID   STATE    PID  AGE  COST  NOW"),
            "{t}"
        );
        assert!(
            lines[1].starts_with("a1   waiting  -    1m   -     approve? Bash: ls"),
            "{t}"
        );
        assert!(
            lines[2].contains("b22  working  -    1m   -     thinking"),
            "{t}"
        );
        assert_eq!(
            lines[1].find("/w"),
            lines[2].find("/w"),
            "the cwd column is aligned: {t}"
        );
    }

    fn live(id: &str, state: LiveState, started_ms: i64) -> LiveSession {
        LiveSession {
            id: id.into(),
            pid: 42,
            host: "h".into(),
            cwd: "/p".into(),
            started_ms,
            updated_ms: started_ms,
            turn: 3,
            state,
        }
    }

    #[test]
    fn live_rows_join_the_servers_and_are_filtered_like_them() {
        let server = vec![row("srv", SessionState::Working, 5, Doing::Thinking)];
        let reported = vec![
            live("srv", LiveState::Working, 5),
            live("tui", LiveState::Working, 3_000),
            live("idle", LiveState::Idle, 2),
            live("done", LiveState::Ended, 1),
            live("dead", LiveState::Gone, 1),
        ];
        let rows = merge(server.clone(), reported.clone(), false, 63_000);
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["tui", "srv"]);
        // The server's row keeps its detail and gains the pid.
        assert_eq!(
            (rows[1].doing.clone(), rows[1].pid),
            (Doing::Thinking, Some(42))
        );
        assert_eq!(rows[0].doing, Doing::Turn { turn: 3 });
        assert_eq!((rows[0].age_secs, rows[0].host.as_deref()), (60, Some("h")));
        let all = merge(server, reported, true, 63_000);
        let ids: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["tui", "srv", "idle", "dead", "done"]);
        let t = table(&all);
        let dead = t.lines().find(|l| l.starts_with("dead")).unwrap();
        assert!(
            dead.contains("gone") && dead.contains("42") && dead.contains("process gone"),
            "{t}"
        );
    }

    #[test]
    fn ages_and_costs_read_short() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(125), "2m");
        assert_eq!(age(7_300), "2h");
        assert_eq!(age(200_000), "2d");
        assert_eq!(cost(None), "-");
        let u = Usage {
            cost_usd: Some(0.01234),
            ..Default::default()
        };
        assert_eq!(cost(Some(&u)), "$0.0123");
    }
}
