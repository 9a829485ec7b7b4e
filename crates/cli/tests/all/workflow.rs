//! The `workflow` tool end to end: the real binary (the tool mounted by the headless preset), a
//! script that fans out five sub-agents, races them and joins their answers; every child an
//! ordinary stored session under the parent, the run's records in the parent, and the run as
//! front ends see it (`workflowProgress` events, replayed by `dsh serve`).

use dsh_testkit::Completion;
use serde_json::{Value, json};

use crate::subagent::{sessions, task_of, tool_messages};
use crate::support::*;

const SCRIPT: &str = "const runs = args.parts.map((p) => agent({ prompt: `part ${p}`, label: `part ${p}` }));
const first = await Promise.race(runs);
const all = await Promise.all(runs);
return { first: runs.some((r) => r.seq === first.seq), ok: all.every((r) => r.ok), texts: all.map((r) => r.text) };";

#[test]
fn a_workflow_fans_out_five_children_races_and_joins_them_through_dsh_exec() {
    let env = Env::new();
    let args = json!({
        "script": SCRIPT,
        "meta": {"name": "five parts", "description": "one child a part"},
        "args": {"parts": [1, 2, 3, 4, 5]},
    })
    .to_string();
    env.server().set_responder(move |req| {
        if !tool_messages(req).is_empty() {
            return Completion::new().text("All five parts done.").reply();
        }
        let task = task_of(req);
        if task == "Run the parts" {
            return Completion::new()
                .tool_call_with_id("call_wf", "workflow", &args)
                .reply();
        }
        Completion::new().text(&format!("{task} done")).reply()
    });
    let out = env.exec(&["Run the parts"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "All five parts done.\n"
    );

    // The preset declares `workflow`, and the parent's two requests declare the same tools,
    // byte for byte (the cached prefix holds across the call).
    let parent_tools: Vec<String> = env
        .server()
        .requests()
        .iter()
        .filter(|r| task_of(r) == "Run the parts")
        .map(|r| serde_json::to_string(&r.body_json().unwrap()["tools"]).unwrap())
        .collect();
    assert_eq!(parent_tools.len(), 2, "the call and the answer after it");
    assert_eq!(parent_tools[0], parent_tools[1]);
    assert!(parent_tools[0].contains("\"name\":\"workflow\""));

    // The parent got the script's value as the call's result.
    let all = sessions(&env);
    assert_eq!(all.len(), 6, "the parent and five children");
    let (parent, events) = all
        .iter()
        .find(|(h, _)| h.get("parentSession").is_none())
        .unwrap();
    let result = events.iter().find(|e| e["type"] == "tool/result").unwrap();
    let text = result["data"]["message"]["content"][0]["text"]
        .as_str()
        .unwrap();
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        value,
        json!({"first": true, "ok": true, "texts": [
            "part 1 done", "part 2 done", "part 3 done", "part 4 done", "part 5 done"
        ]})
    );
    // Its records: a run, five children started and completed, the run completed.
    let of = |t: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == t).collect() };
    assert_eq!(of("tool-workflow/run-start").len(), 1);
    let starts = of("tool-workflow/agent-start");
    assert_eq!(starts.len(), 5);
    let ends = of("tool-workflow/agent-end");
    assert!(
        ends.len() == 5 && ends.iter().all(|e| e["data"]["outcome"] == "completed"),
        "{ends:?}"
    );
    assert_eq!(
        of("tool-workflow/run-end")[0]["data"]["stopReason"],
        "completed"
    );
    // Every child is a stored session under the parent, named by its agent-start.
    for (h, _) in all.iter().filter(|(h, _)| h.get("parentSession").is_some()) {
        assert_eq!(h["parentSession"], parent["id"]);
        assert!(
            starts.iter().any(|s| s["data"]["childId"] == h["id"]),
            "{h}"
        );
    }

    // The run as a front end sees it: `workflowProgress` events of the call, each with the
    // whole run; the last one completed, its five agents completed with their usage.
    let served = crate::serve::serve(&env, &[]);
    let parent_id = parent["id"].as_str().unwrap();
    let (status, stream) = crate::serve::raw(
        &served.addr,
        "GET",
        &format!("/v1/sessions/{parent_id}/events"),
        None,
        Some("event: snapshot"),
    );
    assert_eq!(status, 200, "{stream}");
    let progress: Vec<Value> = stream
        .split("event: workflowProgress\n")
        .skip(1)
        .map(|chunk| {
            let data = chunk.lines().next().unwrap().trim_start_matches("data: ");
            serde_json::from_str(data).unwrap()
        })
        .collect();
    // run-start, five agent-starts, five agent-ends, five usages, run-end.
    assert_eq!(progress.len(), 17, "{progress:#?}");
    let msg = |v: &Value| v.get("msg").cloned().unwrap_or_else(|| v.clone());
    let first = msg(&progress[0]);
    assert_eq!(first["callId"], "call_wf");
    assert_eq!(first["name"], "five parts");
    assert_eq!(first["status"], "running");
    assert_eq!(first["agents"], json!([]));
    let last = msg(progress.last().unwrap());
    assert_eq!(last["status"], "completed", "{last:#}");
    let agents = last["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 5, "{last:#}");
    for (i, a) in agents.iter().enumerate() {
        assert_eq!(a["seq"], i as u64 + 1, "{a}");
        assert_eq!(a["state"], "completed", "{a}");
        assert!(a["usage"]["outputTokens"].as_u64().unwrap() > 0, "{a}");
        let child = a["sessionId"].as_str().unwrap();
        assert!(
            all.iter()
                .any(|(h, _)| h["id"] == child && h["parentSession"] == parent["id"]),
            "{a}"
        );
    }
    let labels: Vec<&str> = agents
        .iter()
        .map(|a| a["label"].as_str().unwrap())
        .collect();
    let mut sorted = labels.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["part 1", "part 2", "part 3", "part 4", "part 5"]);
    // While it ran, agents were seen running before they ended.
    assert!(
        progress.iter().map(msg).any(|p| p["agents"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a["state"] == "running"))),
        "{progress:#?}"
    );
}
