//! Continuable children, capabilities, usage in the parent's totals, and what `dsh exec` does
//! with background work when the task is answered: the real `dsh` binary against the testkit.

use dsh_testkit::{Completion, RecordedRequest, Reply, Usage};
use serde_json::{Value, json};

use crate::subagent::{processes_with, sessions};
use crate::support::*;

/// The last message of a request that is not a runtime-context snapshot: (role, text).
fn last_message(req: &RecordedRequest) -> (String, String) {
    let body = req.body_json().unwrap();
    let m = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| !is_runtime_context(m))
        .cloned()
        .unwrap_or_default();
    (
        m["role"].as_str().unwrap_or_default().to_owned(),
        m["content"].as_str().unwrap_or_default().to_owned(),
    )
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.body_json().unwrap()["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn system_prompt(req: &RecordedRequest) -> String {
    req.body_json().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn call(name: &str, args: Value) -> Reply {
    Completion::new().tool_call(name, &args.to_string()).reply()
}

fn text(t: &str) -> Reply {
    Completion::new().text(t).reply()
}

const CONTINUABLE: &str = "plugins:\n  - id: tool-subagent\n    name: tool-subagent\n    config: { backgroundMode: continuable }\n";

#[test]
fn a_continuable_child_reports_settles_and_is_resumed_by_send_message() {
    let env = Env::new();
    let patch = env.patch("continuable.yaml", CONTINUABLE);
    env.server().set_responder(|req| {
        let (role, last) = last_message(req);
        match (role.as_str(), last.as_str()) {
            // The parent.
            ("user", "Start child") => call(
                "subagent",
                json!({"description": "Long task", "prompt": "task X"}),
            ),
            ("tool", t) if t.starts_with("started subagent ") => text("WAITING"),
            ("user", t) if t.starts_with("Background subagent ") && t.contains(" reported:\n") => {
                text("NOTED REPORT")
            }
            ("user", t) if t.contains("Its closing message:\nCHILD DONE 1") => {
                let id = t
                    .trim_start_matches("Background subagent ")
                    .split(' ')
                    .next()
                    .unwrap();
                call("send_message", json!({"agent_id": id, "message": "task Y"}))
            }
            ("tool", t) if t.starts_with("message queued as the next turn for subagent ") => {
                text("SENT")
            }
            ("user", t) if t.contains("Its closing message:\nCHILD DONE 2") => text("ALL DONE"),
            // The child.
            ("user", "task X") => call("report", json!({"output": "progress 1"})),
            ("tool", t)
                if t.starts_with("report accepted by the agent that started you as message ") =>
            {
                text("CHILD DONE 1")
            }
            ("user", "task Y") => text("CHILD DONE 2"),
            (r, t) => text(&format!("unexpected {r}: {t}")),
        }
    });
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "--usage", "Start child"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ALL DONE\n", "{}", stderr(&out));

    let all = sessions(&env);
    assert_eq!(all.len(), 2);
    let (parent_h, parent) = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap();
    let (kid_h, kid) = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap();
    let kid_id = kid_h["id"].as_str().unwrap();
    assert_eq!(kid_h["parentSession"], parent_h["id"]);
    // One durable child, two activations (the second resumed from its log).
    let descriptor = kid
        .iter()
        .find(|e| e["type"] == "subagent/descriptor")
        .unwrap();
    assert_eq!(descriptor["data"]["mode"], "continuable");
    let turns = kid.iter().filter(|e| e["type"] == "turn/end").count();
    assert_eq!(turns, 2, "{kid:?}");
    assert!(
        kid.iter().any(|e| e["type"] == "session/end-seed"),
        "the second turn ran on a resumed log"
    );
    let catalog = parent
        .iter()
        .find(|e| e["type"] == "subagent/catalog")
        .unwrap();
    assert_eq!(catalog["data"]["mode"], "continuable");
    assert_eq!(catalog["data"]["childId"], kid_id);
    // The notices as the original writes them.
    let sources: Vec<String> = parent
        .iter()
        .filter(|e| e["type"] == "user/message")
        .filter_map(|e| e["data"]["source"]["kind"].as_str().map(str::to_owned))
        .collect();
    assert!(
        sources.contains(&"subagent-report".to_owned()),
        "{sources:?}"
    );
    assert_eq!(
        sources.iter().filter(|s| *s == "subagent-settled").count(),
        2,
        "{sources:?}"
    );
    let settled = parent
        .iter()
        .find(|e| e["data"]["source"]["kind"] == "subagent-settled")
        .unwrap();
    assert_eq!(settled["data"]["source"]["senderSessionId"], kid_id);
    let first_notice = settled["data"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        first_notice,
        format!(
            "Background subagent {kid_id} finished and will do no further work unless you send it more.\nIts closing message:\nCHILD DONE 1"
        )
    );
    // The child's second turn came from the parent as a relay, after its first turn's history.
    let second = env
        .server()
        .requests()
        .into_iter()
        .find(|r| last_message(r).1 == "task Y")
        .unwrap();
    let body = second.body_text();
    assert!(
        body.contains("task X") && body.contains("CHILD DONE 1"),
        "{body}"
    );
    // `report` is the child's tool only.
    let first_child = env
        .server()
        .requests()
        .into_iter()
        .find(|r| last_message(r).1 == "task X")
        .unwrap();
    assert!(tool_names(&first_child).contains(&"report".to_owned()));
    let first_parent = env
        .server()
        .requests()
        .into_iter()
        .find(|r| last_message(r).1 == "Start child")
        .unwrap();
    assert!(!tool_names(&first_parent).contains(&"report".to_owned()));
    // Both activations' usage is in the parent's log and totals.
    let records: Vec<&Value> = parent
        .iter()
        .filter(|e| e["type"] == "dsh/subagent-usage")
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["ignorable"], true);
    assert_eq!(records[0]["data"]["requests"], 2);
    assert_eq!(records[1]["data"]["requests"], 1);
    let err = stderr(&out);
    assert!(err.contains("requests (3 in subagents"), "{err}");
    // `dsh sessions show` shows the runs and the totals.
    let shown = env
        .dsh()
        .args(["sessions", "show", parent_h["id"].as_str().unwrap()])
        .output()
        .unwrap();
    let shown = stdout(&shown);
    assert!(
        shown.contains(&format!(
            "subagent {kid_id} (spawn) ended: completed, 2 requests"
        )),
        "{shown}"
    );
    assert!(shown.contains("(subagents: 3 requests,"), "{shown}");
}

#[test]
fn persona_tool_filter_and_output_schema_are_enforced_end_to_end() {
    let env = Env::new();
    let patch = env.patch(
        "reviewer.yaml",
        "plugins:\n  - id: reviewer\n    name: tool-subagent\n    config:\n      toolName: reviewer\n      fork: false\n      control: false\n      enableRunInBackground: false\n      persona: \"You are REVIEWER-PERSONA.\"\n      toolFilter: { allow: [bash] }\n      outputSchema:\n        type: object\n        properties:\n          verdict: { type: string, enum: [ok, bad] }\n        required: [verdict]\n",
    );
    env.server().set_responder(|req| {
        let (role, last) = last_message(req);
        match (role.as_str(), last.as_str()) {
            ("user", "Review twice") => call(
                "reviewer",
                json!({"description": "Review A", "prompt": "review A"}),
            ),
            ("tool", t) if t.starts_with("{\"verdict\"") => call(
                "reviewer",
                json!({"description": "Review B", "prompt": "review B"}),
            ),
            ("tool", _) if tool_names(req).contains(&"reviewer".to_owned()) => text("PARENT DONE"),
            // Child A: a value outside the enum first, then a valid one.
            ("user", "review A") => call("structured_output", json!({"verdict": "maybe"})),
            ("tool", t) if t.contains("verdict") && !t.contains("recorded") => {
                call("structured_output", json!({"verdict": "ok"}))
            }
            ("tool", "Structured output recorded.") => text("reviewed"),
            // Child B: never records a value.
            ("user", "review B") => text("I forgot the tool"),
            (r, t) => text(&format!("unexpected {r}: {t}")),
        }
    });
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Review twice"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "PARENT DONE\n");
    let requests = env.server().requests();
    let child = requests
        .iter()
        .find(|r| last_message(r).1 == "review A")
        .unwrap();
    // Persona: the child's prompt has it instead of the parent's.
    let first = requests
        .iter()
        .find(|r| last_message(r).1 == "Review twice")
        .unwrap();
    let parent_prompt = system_prompt(first);
    let child_prompt = system_prompt(child);
    assert!(
        child_prompt.contains("You are REVIEWER-PERSONA."),
        "{child_prompt}"
    );
    assert!(!parent_prompt.contains("REVIEWER-PERSONA"));
    // Tool filter: only bash, plus the child-only structured_output.
    let mut names = tool_names(child);
    names.sort();
    assert_eq!(names, ["bash", "structured_output"]);
    // The invalid value was refused with the validator's text; the valid one is the answer.
    let refusal = requests
        .iter()
        .find(|r| {
            last_message(r).0 == "tool"
                && last_message(r).1.contains("verdict")
                && !last_message(r).1.contains("recorded")
        })
        .map(|r| last_message(r).1)
        .unwrap();
    assert!(
        refusal.contains("INVALID_ARGS") || refusal.contains("must be"),
        "{refusal}"
    );
    let parent = sessions(&env)
        .into_iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap()
        .1;
    let results: Vec<&Value> = parent
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[0]["data"]["message"]["content"][0]["text"],
        "{\"verdict\":\"ok\"}"
    );
    assert_eq!(results[0]["data"]["meta"]["structured"]["verdict"], "ok");
    let b = results[1]["data"]["message"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        b.starts_with("Error: subagent run failed\nDiagnostic: the subagent ended without recording its answer with structured_output\nPartial output before the run ended:\nI forgot the tool"),
        "{b}"
    );
    assert_eq!(results[1]["data"]["message"]["isError"], true);
}

#[test]
fn failed_and_background_children_count_in_the_parents_usage() {
    let env = Env::new();
    env.server().set_responder(|req| {
        let (role, last) = last_message(req);
        match (role.as_str(), last.as_str()) {
            ("user", "Delegate") => Completion::new()
                .tool_call_with_id(
                    "fg",
                    "subagent",
                    &json!({"description": "Fail", "prompt": "fail now"}).to_string(),
                )
                .tool_call_with_id(
                    "bg",
                    "subagent",
                    &json!({"description": "Bg", "prompt": "bg work", "run_in_background": true})
                        .to_string(),
                )
                .usage(Usage::new(1000, 10))
                .reply(),
            ("tool", _) => Completion::new()
                .text("WAITING")
                .usage(Usage::new(1000, 10))
                .reply(),
            ("user", t) if t.starts_with("background job ") => Completion::new()
                .text("FINAL")
                .usage(Usage::new(1000, 10))
                .reply(),
            // The failing child: a model answer cut by the output cap (max-tokens).
            ("user", "fail now") => Completion::new()
                .text("partial")
                .finish("length")
                .usage(Usage::new(200, 40))
                .reply(),
            ("user", "bg work") => Completion::new()
                .text("bg done")
                .usage(Usage::new(300, 60))
                .reply(),
            (r, t) => text(&format!("unexpected {r}: {t}")),
        }
    });
    let out = env.exec(&["--json", "--usage", "Delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "dsh/subagent-usage")
        .collect();
    assert_eq!(records.len(), 2, "{events:?}");
    let failed = records
        .iter()
        .find(|r| r["data"]["stopReason"] == "max-tokens")
        .unwrap();
    assert_eq!(failed["data"]["usage"]["outputTokens"], 40);
    let bg = records
        .iter()
        .find(|r| r["data"]["stopReason"] == "completed")
        .unwrap();
    assert_eq!(bg["data"]["usage"]["outputTokens"], 60);
    // The parent's own requests (1000 in, 10 out each; how many depends on when the job's
    // notice arrived) and the children's two: 200 + 300 in, 40 + 60 out.
    let own = env
        .server()
        .requests()
        .iter()
        .filter(|r| crate::subagent::first_task(r) == "Delegate")
        .count() as u64;
    assert!(own >= 2, "{own}");
    let err = stderr(&out);
    let expected = format!(
        "dsh: usage: {} input (0 cached), {} output, {} requests (2 in subagents, 500 input, 100 output); cost $",
        own * 1000 + 500,
        own * 10 + 100,
        own + 2
    );
    assert!(err.contains(&expected), "{expected}\n{err}");
    assert_eq!(events.last().unwrap()["type"], "turn/end");
    assert!(
        stdout(&out).contains("FINAL"),
        "the job's notice woke the parent before dsh exec ended"
    );
}

#[test]
fn exec_stops_background_work_that_outlives_the_wait_and_leaves_no_process() {
    let env = Env::new();
    let fifo = env.work.path().join("bg.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let marker = format!("301.{}", std::process::id());
    let cmd = json!({
        "command": format!("sleep {marker} & echo started > {} ; wait", fifo.display()),
        "description": "Hang"
    });
    env.server().set_responder(move |req| {
        let (role, last) = last_message(req);
        match (role.as_str(), last.as_str()) {
            ("user", "Start") => call(
                "subagent",
                json!({"description": "Hang", "prompt": "hang", "run_in_background": true}),
            ),
            ("tool", t) if t.starts_with("started background subagent job ") => text("ANSWERED"),
            ("user", "hang") => call("bash", cmd.clone()),
            (r, t) => text(&format!("unexpected {r}: {t}")),
        }
    });
    // Proof that the child's process ran: it writes the FIFO (read here, bounded).
    let f = fifo.clone();
    let reader = std::thread::spawn(move || wait_fifo(&f));
    let out = env.exec(&["--wait-background", "10", "Start"]);
    assert_eq!(reader.join().unwrap().trim(), "started");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ANSWERED\n");
    let err = stderr(&out);
    assert!(
        err.contains("dsh: stopped 1 background job(s) (subagent-")
            && err.contains("still running after 10 s"),
        "{err}"
    );
    assert_eq!(
        processes_with(&marker),
        Vec::<i32>::new(),
        "the background child's process survived dsh exec"
    );
    let all = sessions(&env);
    let parent = &all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap()
        .1;
    let settled = parent
        .iter()
        .find(|e| e["type"] == "job/settled")
        .expect("the job was settled at teardown");
    assert_eq!(settled["data"]["cause"], "teardown");
    assert_eq!(settled["data"]["status"], "killed");
    assert_eq!(settled["data"]["producerReported"], false);
    let kid = &all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap()
        .1;
    let end = kid.iter().rfind(|e| e["type"] == "turn/end").unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "aborted", "{end}");
}

#[test]
fn a_continuable_child_is_resumed_from_its_log_by_a_resumed_parent_in_a_new_process() {
    let env = Env::new();
    let patch = env.patch("continuable.yaml", CONTINUABLE);
    env.server().set_responder(|req| {
        let (role, last) = last_message(req);
        match (role.as_str(), last.as_str()) {
            ("user", "Start child") => call(
                "subagent",
                json!({"description": "Durable", "prompt": "task X"}),
            ),
            ("tool", t) if t.starts_with("started subagent ") => text("WAITING"),
            ("user", t) if t.contains("Its closing message:\nCHILD DONE 1") => text("GOT 1"),
            ("user", t) if t.starts_with("Continue ") => call(
                "send_message",
                json!({"agent_id": t.trim_start_matches("Continue "), "message": "task Y"}),
            ),
            ("tool", t) if t.starts_with("message queued as the next turn for subagent ") => {
                text("SENT")
            }
            ("user", t) if t.contains("Its closing message:\nCHILD DONE 2") => text("ALL DONE"),
            ("user", "task X") => text("CHILD DONE 1"),
            ("user", "task Y") => text("CHILD DONE 2"),
            (r, t) => text(&format!("unexpected {r}: {t}")),
        }
    });
    let p = patch.to_str().unwrap();
    let out = env.exec(&["--patch", p, "Start child"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "GOT 1\n");
    let all = sessions(&env);
    let parent = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap()
        .0["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let kid = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_some())
        .unwrap()
        .0["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A new process: the child is known only from the store.
    let out = env.exec(&[
        "--patch",
        p,
        "--resume",
        &parent,
        &format!("Continue {kid}"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ALL DONE\n");
    let all = sessions(&env);
    assert_eq!(all.len(), 2, "no new child session");
    let kid_events = &all.iter().find(|(h, _)| h["id"] == kid.as_str()).unwrap().1;
    assert_eq!(
        kid_events
            .iter()
            .filter(|e| e["type"] == "turn/end")
            .count(),
        2
    );
    let relay = kid_events
        .iter()
        .find(|e| e["data"]["source"]["kind"] == "coordinator")
        .unwrap();
    assert_eq!(relay["data"]["source"]["senderSessionId"], parent.as_str());
    // A stranger cannot continue it: a third session's send_message is refused.
    let out = env.exec(&["--patch", p, &format!("Continue {kid}")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stranger = sessions(&env)
        .into_iter()
        .find(|(h, _)| h.get("parentSession").is_none() && h["id"] != parent.as_str())
        .unwrap();
    let result = stranger
        .1
        .iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(
        result["data"]["message"]["content"][0]["text"],
        format!(
            "Error: agent {kid} is not a live subagent or parent of this agent; the message was not delivered"
        )
    );
}
