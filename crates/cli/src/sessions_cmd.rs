//! `dsh sessions list | show | export`: read-only views of `$DSH_HOME/sessions`.

use std::sync::Arc;

use anyhow::anyhow;
use dsh_session::{SessionLog, SessionPersistence};
use dsh_session_jsonl::store::JsonlStore;
use serde_json::Value;

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
        .filter(|e| e.kind() == "user/message")
        .find(|e| e.data()["source"]["kind"] == "user")
        .and_then(|e| e.data()["content"][0]["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn title(log: &SessionLog) -> String {
    let t = log
        .events()
        .iter()
        .rev()
        .find(|e| e.kind() == "session/title")
        .and_then(|e| e.data()["title"].as_str().map(str::to_owned))
        .unwrap_or_else(|| first_prompt(log));
    let line = t.lines().next().unwrap_or("").trim().to_owned();
    if line.chars().count() > 60 {
        line.chars().take(59).collect::<String>() + "…"
    } else {
        line
    }
}

fn last_status(log: &SessionLog) -> String {
    match log.events().iter().rev().find(|e| e.kind() == "turn/end") {
        Some(e) => e.data()["reason"]["kind"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
        None if log.tracker().open_turn().is_some() => "open".into(),
        None => "-".into(),
    }
}

/// `YYYY-MM-DD HH:MM` in UTC without a date library.
fn time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// `dsh sessions list`.
pub(crate) async fn list() -> Result<u8, Failure> {
    let mut sessions = store().list().map_err(|e| Failure::run(anyhow!("{e}")))?;
    sessions.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    let mut out = String::new();
    for s in sessions {
        let (turns, status, title) = match read(&s.id) {
            Ok(log) => (
                log.tracker().last_turn().to_string(),
                last_status(&log),
                title(&log),
            ),
            Err(e) => ("?".into(), "unreadable".into(), format!("{:#}", e.error)),
        };
        out.push_str(&format!(
            "{}  {}  {}  turns={}  {}  {}\n",
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

fn block_text(block: &Value) -> String {
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().unwrap_or("").to_owned(),
        Some("reasoning") => format!("(thinking) {}", block["text"].as_str().unwrap_or("")),
        Some("tool-call") => format!(
            "→ {}({})",
            block["name"].as_str().unwrap_or("?"),
            block["arguments"].as_str().unwrap_or("")
        ),
        Some(other) => format!("[{other}]"),
        None => String::new(),
    }
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
        let d = e.data();
        let line = match e.kind() {
            "turn/start" => format!("\n── turn {} ──", d["turn"]),
            "turn/end" => format!(
                "── turn {} ended: {} ──",
                d["turn"],
                d["reason"]["kind"].as_str().unwrap_or("?")
            ),
            "user/message" if d["source"]["kind"] == "user" => {
                format!("user: {}", content(&d["content"]))
            }
            "user/message" => format!(
                "context ({}): {}",
                d["source"]["kind"].as_str().unwrap_or("?"),
                content(&d["content"])
            ),
            "assistant/message" => {
                let mark = if d["interrupted"] == true {
                    " (interrupted)"
                } else {
                    ""
                };
                format!("assistant{mark}: {}", content(&d["message"]["content"]))
            }
            "tool/result" => {
                let err = if d["message"]["isError"] == true {
                    " error"
                } else {
                    ""
                };
                format!("tool{err}: {}", content(&d["message"]["content"]))
            }
            _ => continue,
        };
        out.push_str(&line);
        out.push('\n');
    }
    write_stdout(&out)
}

fn content(blocks: &Value) -> String {
    blocks
        .as_array()
        .map(|a| a.iter().map(block_text).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
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
