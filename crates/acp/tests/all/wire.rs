//! `dsh acp` on the wire with raw ACP frames: a cancel mid-turn answers `cancelled` and keeps
//! the delivered text; a second process loads the stored session and replays it; a conversation
//! rewind continues the ACP session in the fork.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, stalled_text};

const BOUND: Duration = Duration::from_secs(60);

struct Acp {
    child: Child,
    stdin: ChildStdin,
    frames: mpsc::Receiver<Value>,
}

impl Acp {
    fn start(env: &Env) -> Self {
        let mut child = env
            .dsh()
            .arg("acp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            frames,
        }
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Frames up to and including the response to `id`.
    fn until_response(&self, id: u64) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let f = self
                .frames
                .recv_timeout(BOUND)
                .expect("no frame from dsh acp");
            let done = f.get("method").is_none() && f["id"] == id;
            out.push(f);
            if done {
                return out;
            }
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Vec<Value> {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        self.until_response(id)
    }

    fn initialize(&mut self) {
        let r = self.request(
            0,
            "initialize",
            json!({"protocolVersion":1,"clientCapabilities":{}}),
        );
        let result = &r.last().unwrap()["result"];
        assert_eq!(result["protocolVersion"], 1, "{result}");
        assert_eq!(result["agentCapabilities"]["loadSession"], true);
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn update_kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| {
            f["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn chunk_text(frames: &[Value], kind: &str) -> String {
    frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == kind)
        .map(|f| f["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect()
}

#[test]
fn a_cancel_answers_cancelled_and_a_new_process_loads_the_session() {
    let env = Env::new();
    env.server().push(stalled_text("partial answer"));
    let mut acp = Acp::start(&env);
    acp.initialize();
    let cwd = env.cwd().display().to_string();
    let r = acp.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let session = r.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    acp.send(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"go"}]}}));
    // The delivered text streams before the cancel.
    let first = acp.frames.recv_timeout(BOUND).unwrap();
    assert_eq!(
        first["params"]["update"]["sessionUpdate"], "agent_message_chunk",
        "{first}"
    );
    acp.send(json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":session}}));
    let rest = acp.until_response(2);
    assert_eq!(
        rest.last().unwrap()["result"]["stopReason"],
        "cancelled",
        "{rest:#?}"
    );
    let mut all = vec![first];
    all.extend(rest);
    assert_eq!(chunk_text(&all, "agent_message_chunk"), "partial answer");
    // An unknown session is an error, not a crash.
    let r = acp.request(
        3,
        "session/prompt",
        json!({"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}),
    );
    assert_eq!(r.last().unwrap()["error"]["code"], -32602, "{r:#?}");
    drop(acp);

    // A new process replays the stored conversation on session/load, then answers.
    let mut acp = Acp::start(&env);
    acp.initialize();
    let r = acp.request(
        1,
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    assert!(r.last().unwrap()["result"].is_object(), "{r:#?}");
    let kinds = update_kinds(&r);
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("user_message_chunk"),
        "{kinds:?}"
    );
    assert_eq!(chunk_text(&r, "user_message_chunk"), "go");
    assert_eq!(chunk_text(&r, "agent_message_chunk"), "partial answer");
    let r = acp.request(
        2,
        "session/load",
        json!({"sessionId": "no-such", "cwd": cwd, "mcpServers": []}),
    );
    assert_eq!(r.last().unwrap()["error"]["code"], -32002, "{r:#?}");
}

#[test]
fn a_session_with_client_mcp_servers_shows_a_plan_and_asks_permission() {
    let env = Env::new();
    let patch = env.patch(
        "ask.yaml",
        "plugins:\n  - id: approval\n    name: approval\n    config: { policy: untrusted }\n",
    );
    let todos = json!({"todos": [
        {"content": "Look around", "status": "completed"},
        {"content": "Echo through MCP", "status": "in_progress"},
        {"content": "Report", "status": "pending"}
    ]})
    .to_string();
    env.server().push(
        dsh_testkit::Completion::new()
            .tool_call_with_id("plan_1", "todo_write", &todos)
            .tool_call_with_id("echo_1", "mcp__t__echo", r#"{"text":"hi from acp"}"#)
            .reply(),
    );
    env.server()
        .push(dsh_testkit::Completion::new().text("done").reply());
    let mut child = env
        .dsh()
        .args(["acp", "--patch"])
        .arg(&patch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, frames) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let v: Value = serde_json::from_str(&line).unwrap();
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let mut acp = Acp {
        child,
        stdin,
        frames,
    };
    acp.initialize();
    let cwd = env.cwd().display().to_string();
    let server = crate::mcp::test_server().display().to_string();
    let r = acp.request(
        1,
        "session/new",
        json!({"cwd": cwd, "mcpServers": [{"name": "t", "command": server, "args": [], "env": []}]}),
    );
    let session = r.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r:#?}"))
        .to_owned();
    acp.send(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"go"}]}}));
    // Answer every permission request (allow once) until the prompt's answer.
    let mut seen = Vec::new();
    let mut asked = Vec::new();
    loop {
        let f = acp
            .frames
            .recv_timeout(BOUND)
            .expect("no frame from dsh acp");
        if f["method"] == "session/request_permission" {
            asked.push(f["params"]["toolCall"]["toolCallId"].clone());
            let id = f["id"].clone();
            acp.send(json!({"jsonrpc":"2.0","id":id,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}));
            continue;
        }
        let done = f.get("method").is_none() && f["id"] == 2;
        seen.push(f);
        if done {
            break;
        }
    }
    assert_eq!(
        seen.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{seen:#?}"
    );
    // The client's server's tools were in the first request.
    let first = env.server().request(0).unwrap().body_json().unwrap();
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp__t__echo"), "{names:?}");
    // The todo_write call is a plan, not a tool card.
    let updates: Vec<&Value> = seen
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .collect();
    let plan = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "plan")
        .expect("a plan update");
    assert_eq!(
        plan["entries"],
        json!([
            {"content": "Look around", "priority": "medium", "status": "completed"},
            {"content": "Echo through MCP", "priority": "medium", "status": "in_progress"},
            {"content": "Report", "priority": "medium", "status": "pending"}
        ])
    );
    assert!(
        updates.iter().all(|u| u["toolCallId"] != "plan_1"),
        "{updates:#?}"
    );
    // The MCP call ran after the client allowed it.
    assert!(asked.contains(&json!("echo_1")), "{asked:?}");
    let done = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "echo_1")
        .unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        done["rawOutput"].as_str().unwrap().contains("hi from acp"),
        "{done}"
    );
    // An unsupported transport is refused with the reason.
    let r = acp.request(
        3,
        "session/new",
        json!({"cwd": cwd, "mcpServers": [{"type": "sse", "name": "s", "url": "http://127.0.0.1:1/", "headers": []}]}),
    );
    let err = &r.last().unwrap()["error"];
    assert_eq!(err["code"], -32602, "{r:#?}");
    assert!(err["message"].as_str().unwrap().contains("SSE"), "{err}");
}

#[test]
fn with_client_terminal_bash_runs_in_the_clients_terminal() {
    let env = Env::new();
    env.server().push(
        dsh_testkit::Completion::new()
            .tool_call_with_id(
                "sh_1",
                "bash",
                r#"{"command":"echo not-run-by-dsh > marker.txt","description":"Echo"}"#,
            )
            .reply(),
    );
    env.server()
        .push(dsh_testkit::Completion::new().text("done").reply());
    let mut child = env
        .dsh()
        .args(["acp", "--client-terminal"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, frames) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let v: Value = serde_json::from_str(&line).unwrap();
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let mut acp = Acp {
        child,
        stdin,
        frames,
    };
    let r = acp.request(
        0,
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{"terminal":true}}),
    );
    assert_eq!(r.last().unwrap()["result"]["protocolVersion"], 1);
    let cwd = env.cwd().display().to_string();
    let r = acp.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let session = r.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    acp.send(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"go"}]}}));
    // Play the client's terminal: every terminal/* request is answered here.
    let mut methods = Vec::new();
    let mut created = Value::Null;
    let mut seen = Vec::new();
    loop {
        let f = acp
            .frames
            .recv_timeout(BOUND)
            .expect("no frame from dsh acp");
        let method = f["method"].as_str().unwrap_or_default().to_owned();
        if method.starts_with("terminal/") {
            let id = f["id"].clone();
            let result = match method.as_str() {
                "terminal/create" => {
                    created = f["params"].clone();
                    json!({"terminalId": "term-1"})
                }
                "terminal/wait_for_exit" => json!({"exitCode": 0}),
                "terminal/output" => json!({"output": "from the client's terminal\n",
                    "truncated": false, "exitStatus": {"exitCode": 0}}),
                _ => json!({}),
            };
            methods.push(method);
            acp.send(json!({"jsonrpc":"2.0","id":id,"result":result}));
            continue;
        }
        let done = f.get("method").is_none() && f["id"] == 2;
        seen.push(f);
        if done {
            break;
        }
    }
    assert_eq!(
        seen.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{seen:#?}"
    );
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    assert_eq!(created["sessionId"], session.as_str());
    assert_eq!(created["command"], "bash");
    assert_eq!(
        created["args"],
        json!(["-c", "echo not-run-by-dsh > marker.txt"])
    );
    assert_eq!(created["cwd"], cwd.as_str());
    // dsh did not run it; the model saw the client's output.
    assert!(!env.cwd().join("marker.txt").exists());
    let second = crate::support::request_messages(env.server(), 1);
    let tool = second.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("from the client's terminal"),
        "{tool}"
    );
}

#[test]
fn slash_commands_and_the_effort_option_go_through_the_session() {
    let env = Env::new();
    env.server()
        .push(dsh_testkit::Completion::new().text("ok").reply());
    let mut acp = Acp::start(&env);
    acp.initialize();
    let cwd = env.cwd().display().to_string();
    let r = acp.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let result = &r.last().unwrap()["result"];
    let session = result["sessionId"].as_str().unwrap().to_owned();
    // The registry's commands are announced before the answer.
    let announced: Vec<&str> = r
        .iter()
        .find(|f| f["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("{r:#?}"))["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in ["model", "effort", "cost", "compact"] {
        assert!(announced.contains(&name), "{announced:?}");
    }
    // The effort is a config option; setting it is the session's effort from then on.
    let effort = &result["configOptions"][0];
    assert_eq!(effort["id"], "effort", "{result}");
    assert_eq!(effort["category"], "thought_level");
    let r = acp.request(
        2,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "effort", "value": "max"}),
    );
    assert_eq!(
        r.last().unwrap()["result"]["configOptions"][0]["currentValue"],
        "max",
        "{r:#?}"
    );
    // A command runs in the session without a model request; its output is the answer.
    let r = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "/cost"}]}),
    );
    assert_eq!(
        r.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{r:#?}"
    );
    assert!(
        chunk_text(&r, "agent_message_chunk").contains("tokens:"),
        "{r:#?}"
    );
    assert!(env.server().request(0).is_none());
    let r = acp.request(
        4,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(
        r.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{r:#?}"
    );
    assert_eq!(chunk_text(&r, "agent_message_chunk"), "ok");
    // The context in use of the model's window.
    let usage = r
        .iter()
        .find(|f| f["params"]["update"]["sessionUpdate"] == "usage_update")
        .unwrap_or_else(|| panic!("no usage_update: {r:#?}"));
    let usage = &usage["params"]["update"];
    assert!(usage["used"].as_u64().unwrap() > 0, "{usage}");
    assert!(
        usage["size"].as_u64().unwrap() > usage["used"].as_u64().unwrap(),
        "{usage}"
    );
    let sent = env.server().request(0).unwrap().body_json().unwrap();
    assert_eq!(sent["reasoning_effort"], "max", "{sent}");
    // An unknown option is refused.
    let r = acp.request(
        5,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "x"}),
    );
    assert_eq!(r.last().unwrap()["error"]["code"], -32602, "{r:#?}");
}

impl Acp {
    /// `session/prompt` with `text`; approvals asked meanwhile are allowed once. The frames
    /// up to its answer.
    fn prompt(&mut self, id: u64, session: &str, text: &str) -> Vec<Value> {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":text}]}}));
        let mut seen = Vec::new();
        loop {
            let f = self
                .frames
                .recv_timeout(BOUND)
                .expect("no frame from dsh acp");
            if f["method"] == "session/request_permission" {
                let rid = f["id"].clone();
                self.send(json!({"jsonrpc":"2.0","id":rid,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}));
                continue;
            }
            let done = f.get("method").is_none() && f["id"] == id;
            seen.push(f);
            if done {
                assert_eq!(
                    seen.last().unwrap()["result"]["stopReason"],
                    "end_turn",
                    "{seen:#?}"
                );
                return seen;
            }
        }
    }
}

#[test]
fn a_conversation_rewind_continues_the_acp_session_in_the_fork() {
    let env = Env::new();
    let server = env.server();
    for (command, done) in [
        ("echo one > one.txt", "First done."),
        ("echo two > two.txt", "Second done."),
    ] {
        let call = json!({"command": command, "description": "Write"}).to_string();
        server.push(
            dsh_testkit::Completion::new()
                .tool_call("bash", &call)
                .reply(),
        );
        server.push(dsh_testkit::Completion::new().text(done).reply());
    }
    server.push(dsh_testkit::Completion::new().text("Third done.").reply());
    let mut acp = Acp::start(&env);
    acp.initialize();
    let cwd = env.cwd().display().to_string();
    let r = acp.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let session = r.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    acp.prompt(2, &session, "write one");
    acp.prompt(3, &session, "write two");
    assert!(env.cwd().join("two.txt").exists());

    // The rewind forks the conversation: the ACP session (same id) goes on in the fork.
    let r = acp.prompt(4, &session, "/rewind 2 both yes");
    let said = chunk_text(&r, "agent_message_chunk");
    let fork = said
        .split("This session continues in `")
        .nth(1)
        .and_then(|t| t.split('`').next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    assert!(fork.starts_with("session-") && fork != session, "{said}");
    assert!(!env.cwd().join("two.txt").exists());
    let before = server.requests().len();
    let r = acp.prompt(5, &session, "write three");
    assert_eq!(chunk_text(&r, "agent_message_chunk"), "Third done.");
    let sent = server.request(before).unwrap().body_text();
    assert!(
        sent.contains("write one") && sent.contains("write three"),
        "{sent}"
    );
    assert!(
        !sent.contains("write two"),
        "the prompt went to the old branch: {sent}"
    );
    // Every update still names the ACP session the client knows.
    assert!(
        r.iter()
            .filter(|f| f["method"] == "session/update")
            .all(|f| f["params"]["sessionId"] == session.as_str()),
        "{r:#?}"
    );
    drop(acp);

    // The old session loaded again says where it continues; the fork holds the new turn.
    let mut acp = Acp::start(&env);
    acp.initialize();
    let r = acp.request(
        1,
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let said = chunk_text(&r, "agent_message_chunk");
    assert!(
        said.contains(&format!(
            "↪ continued in session {fork} (rewound to before turn 2)"
        )),
        "{said}"
    );
    let r = acp.request(
        2,
        "session/load",
        json!({"sessionId": fork, "cwd": cwd, "mcpServers": []}),
    );
    assert_eq!(chunk_text(&r, "user_message_chunk"), "write onewrite three");
}
