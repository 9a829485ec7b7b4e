//! Session titles (issue 21): the fallback title from the first prompt on every run, and the
//! model's title (a small side request with thinking off) when `session-title` has `llm: true`.

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

fn titles(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "session/title")
        .collect()
}

#[test]
fn exec_logs_a_fallback_title_and_sends_no_title_request() {
    let env = Env::new();
    env.server().push(Completion::new().text("Done.").reply());
    let out = env.exec(&["fix the failing test in crates/session please, quickly"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        env.server().request_count(),
        1,
        "no title request for exec by default"
    );
    let events = env.stored_events();
    let t = titles(&events);
    assert_eq!(t.len(), 1, "{events:#?}");
    assert_eq!(t[0]["data"]["title"], "fix the failing test in");
    assert_eq!(t[0]["data"]["source"]["kind"], "fallback");
    // It cites the prompt's user/message.
    let seq = t[0]["data"]["messageSeqs"][0].as_u64().unwrap();
    let cited = events.iter().find(|e| e["seq"] == seq).unwrap();
    assert_eq!(cited["type"], "user/message");
    // Shown by `sessions list`.
    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    assert!(
        stdout(&list).contains("fix the failing test in"),
        "{}",
        stdout(&list)
    );
    // A second turn adds no title.
    env.server().push(Completion::new().text("Again.").reply());
    let id = env.session_id();
    let out = env.exec(&["--resume", &id, "and the other one"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(titles(&env.stored_events()).len(), 1);
}

#[test]
fn with_llm_titles_the_model_names_the_session_in_a_side_request() {
    let env = Env::new();
    let patch = env.patch(
        "titles.yaml",
        "plugins:\n  - id: session-title\n    name: session-title\n    config:\n      llm: true\n",
    );
    // The title request has no tools and a title-making system prompt; the main one has tools.
    env.server().set_responder(|req| {
        let body = req.body_json().unwrap();
        if body.get("tools").is_none() {
            Completion::new()
                .text("**Repair the resize test**\nextra")
                .reply()
        } else {
            Completion::new().text("Fixed.").reply()
        }
    });
    let patch = patch.display().to_string();
    let out = env.exec(&["--patch", &patch, "the resize test loses a key, fix it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Fixed.\n");
    assert_eq!(env.server().request_count(), 2);
    let title_req = (0..2)
        .map(|i| env.server().request(i).unwrap().body_json().unwrap())
        .find(|b| b.get("tools").is_none())
        .unwrap();
    // Thinking off, one user message framing the prompt as JSON after the system prompt.
    assert_eq!(title_req["thinking"]["type"], "disabled", "{title_req}");
    let messages = title_req["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .contains(r#""text":"the resize test loses a key, fix it""#),
        "{title_req}"
    );
    let events = env.stored_events();
    let requests: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "session/title-llm-request")
        .collect();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0]["data"]["titleProvider"],
        "session-title-first-prompt-llm"
    );
    let t = titles(&events);
    assert_eq!(t.len(), 2, "fallback, then the model's: {events:#?}");
    assert_eq!(t[0]["data"]["source"]["kind"], "fallback");
    assert_eq!(t[1]["data"]["title"], "Repair the resize test");
    assert_eq!(t[1]["data"]["source"]["kind"], "provider");
    assert_eq!(
        t[1]["data"]["source"]["provider"],
        "session-title-first-prompt-llm"
    );
    assert_eq!(
        t[1]["data"]["source"]["model"]["provider"],
        "deepseek-official"
    );
    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    assert!(
        stdout(&list).contains("Repair the resize test"),
        "{}",
        stdout(&list)
    );
}
