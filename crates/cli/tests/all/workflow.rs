//! The `workflow` tool end to end: the real binary (the tool mounted by a patch row, as the
//! preset does not), a script that fans out five sub-agents, races them and joins their answers;
//! every child an ordinary stored session under the parent, the run's records in the parent.

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
    let patch = env.patch(
        "workflow.yaml",
        "plugins:\n  - id: tool-workflow\n    name: tool-workflow\n",
    );
    let out = env.exec(&["--patch", patch.to_str().unwrap(), "Run the parts"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "All five parts done.\n"
    );

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
}
