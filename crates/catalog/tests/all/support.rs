//! Real session logs on disk: generated dsh-style logs and the original harness's recorded
//! fixtures, laid out as `$DSH_HOME/sessions` is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_session::SessionPersistence;
use dsh_session_jsonl::JsonlStore;
use dsh_session_jsonl::naming::{encode_segment, project_dir};
use serde_json::{Value, json};

/// One turn of a generated session.
pub struct Turn<'a> {
    pub prompt: &'a str,
    pub reply: &'a str,
    /// `(tool, arguments JSON, result text)`.
    pub tool: Option<(&'a str, Value, &'a str)>,
}

pub fn turn<'a>(prompt: &'a str, reply: &'a str) -> Turn<'a> {
    Turn {
        prompt,
        reply,
        tool: None,
    }
}

/// A `$DSH_HOME` with its sessions root.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn sessions(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    pub fn catalog_path(&self) -> PathBuf {
        self.dir.path().join("catalog.sqlite")
    }

    pub fn store(&self) -> Arc<dyn SessionPersistence> {
        Arc::new(JsonlStore::new(self.sessions()))
    }

    fn log_path(&self, id: &str, cwd: &str, name: &str) -> PathBuf {
        let dir = self
            .sessions()
            .join(project_dir(Some(cwd)))
            .join(encode_segment(id));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// Writes a plain v4 log of `turns` (created at `created` ms, one ms per event).
    pub fn write(&self, id: &str, cwd: &str, created: i64, turns: &[Turn<'_>]) -> PathBuf {
        let path = self.log_path(id, cwd, "session.v4.jsonl");
        let mut text = header(id, cwd, created, None);
        text.push('\n');
        for line in events(created, 0, 1, turns) {
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Appends more turns to a log written by [`Home::write`].
    pub fn append(&self, path: &Path, turns: &[Turn<'_>]) {
        let text = std::fs::read_to_string(path).unwrap();
        let rows: Vec<Value> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let seq = rows.len() as u64;
        let first_turn = rows.iter().filter(|r| r["type"] == "turn/start").count() as u64 + 1;
        let time = rows.last().map_or(0, |r| r["time"].as_i64().unwrap()) + 1;
        let mut more = String::new();
        for line in events(time, seq, first_turn, turns) {
            more.push_str(&line);
            more.push('\n');
        }
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(more.as_bytes()).unwrap();
    }

    /// Copies a recorded fixture of the original harness (`v4/bash-tool`) into the root under
    /// `id`, with the fixtures README's recipe (placeholders filled, seq and time added).
    pub fn original(&self, rel: &str, id: &str, cwd: &str) -> PathBuf {
        let fixture = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/upstream-sessions"
        ))
        .join(rel);
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&fixture).unwrap();
        let text = text
            .replace(
                "\"{{tools}}\"",
                r#"[{"name":"bash","description":"d","parameters":{"type":"object"}}]"#,
            )
            .replace("{{cwd}}", cwd)
            .replace("{{session:1}}", id);
        let mut out = String::new();
        let mut created = 0;
        for (i, line) in text.lines().enumerate() {
            let mut v: Value = serde_json::from_str(&fill(line)).unwrap();
            if i == 0 {
                created = v["createdAt"].as_i64().unwrap();
            } else {
                v["seq"] = json!(i - 1);
                v["time"] = json!(created + i as i64);
            }
            out.push_str(&v.to_string());
            out.push('\n');
        }
        let path = self.log_path(id, cwd, &name);
        std::fs::write(&path, out).unwrap();
        path
    }
}

fn fill(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("{{") {
        let j = rest[i..].find("}}").unwrap();
        out.push_str(&rest[..i]);
        out.push_str(&rest[i + 2..i + j].replace([':', '-'], "_"));
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

pub fn header(id: &str, cwd: &str, created: i64, parent: Option<&str>) -> String {
    let mut h = json!({"type":"session","version":4,"id":id,"createdAt":created,"cwd":cwd,
        "isSeeded":false,"delegationDepth":0});
    if let Some(p) = parent {
        h["parentSession"] = json!(p);
    }
    h.to_string()
}

/// The event rows of `turns`, from `seq` and turn `first_turn` on.
pub fn events(time: i64, seq: u64, first_turn: u64, turns: &[Turn<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seq = seq;
    let mut push = |v: Value, out: &mut Vec<String>| {
        let mut v = v;
        v["seq"] = json!(seq);
        v["time"] = json!(time + seq as i64);
        seq += 1;
        out.push(v.to_string());
    };
    for (n, t) in turns.iter().enumerate() {
        let turn = first_turn + n as u64;
        push(json!({"type":"turn/start","data":{"turn":turn}}), &mut out);
        push(
            json!({"type":"step/start","data":{"turn":turn,"step":1}}),
            &mut out,
        );
        push(
            json!({"type":"user/message","data":{"content":[{"type":"text","text":t.prompt}],
            "source":{"kind":"user"},"role":"user","id":format!("u{turn}")},"surfaceOp":"append"}),
            &mut out,
        );
        let model = json!({"kind":"model","provider":"deepseek-official","model":"deepseek-chat"});
        let usage = json!({"inputTokens":100,"outputTokens":20,"cacheReadTokens":300});
        if let Some((tool, args, result)) = &t.tool {
            let call = format!("c{turn}");
            push(
                json!({"type":"assistant/message","data":{"turn":turn,"step":1,"message":{
                "role":"assistant","content":[{"type":"tool-call","id":call,"name":tool,
                "arguments":args.to_string()}],"source":model,"id":format!("a{turn}")},
                "usage":usage,"stream":[]},"surfaceOp":"append"}),
                &mut out,
            );
            push(
                json!({"type":"tool/call","data":{"turn":turn,"step":1,"callId":call,
                "name":tool,"arguments":args.to_string()}}),
                &mut out,
            );
            push(
                json!({"type":"tool/result","data":{"turn":turn,"step":1,"message":{"role":"tool",
                "source":{"kind":"tool","callId":call},"toolCallId":call,
                "content":[{"type":"text","text":result}],"isError":false,"id":format!("r{turn}")}},
                "surfaceOp":"append"}),
                &mut out,
            );
            push(
                json!({"type":"step/end","data":{"turn":turn,"step":1}}),
                &mut out,
            );
            push(
                json!({"type":"step/start","data":{"turn":turn,"step":2}}),
                &mut out,
            );
        }
        let step = if t.tool.is_some() { 2 } else { 1 };
        push(
            json!({"type":"assistant/message","data":{"turn":turn,"step":step,"message":{
            "role":"assistant","content":[{"type":"text","text":t.reply}],"source":model,
            "id":format!("b{turn}")},"usage":usage,"stream":[]},"surfaceOp":"append"}),
            &mut out,
        );
        push(
            json!({"type":"step/end","data":{"turn":turn,"step":step}}),
            &mut out,
        );
        push(
            json!({"type":"turn/end","data":{"turn":turn,"reason":{"kind":"completed"}}}),
            &mut out,
        );
    }
    out
}
