//! The agent's questions (`ask_user_question`, a plugin dsh-acp does not know) reach an ACP
//! client as permission requests whose options are the answers; its choices are the answers
//! the tool returns to the model.

use dsh_test_harness::{Script, TestHarness, calls, text};
use dsh_tool_ask_user::{AskUserConfig, AskUserToolPlugin};
use serde_json::{Value, json};

use crate::inproc::Acp;

const ASK: &str = r#"{"questions":[{"id":"db","header":"Database","question":"Which database should the service use?","options":[{"label":"Postgres (Recommended)"},{"label":"SQLite"}]},{"id":"name","question":"What should the service be called?"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_are_permission_requests_and_the_choices_are_the_answers() {
    let h = TestHarness::builder()
        .plugin::<AskUserToolPlugin>(AskUserConfig::default())
        .script(Script::Chunks(calls(&[("q1", "ask_user_question", ASK)])))
        .script(Script::Chunks(text("SQLite it is")))
        .build()
        .await;
    let cwd = h.dir().to_path_buf();
    let mut acp = Acp::start(&h);
    let session = acp.open(&cwd).await;
    acp.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "set it up"}]}}),
    );
    let mut asked: Vec<Value> = Vec::new();
    let answer = loop {
        let f = acp.frame().await;
        if f["method"] == "session/request_permission" {
            let params = f["params"].clone();
            // The database: the second option; the name (no options): skipped.
            let option = params["options"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["name"] == "SQLite")
                .or_else(|| {
                    params["options"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|o| o["name"] == "Skip")
                })
                .unwrap()["optionId"]
                .clone();
            asked.push(params);
            acp.send(json!({"jsonrpc": "2.0", "id": f["id"], "result":
                {"outcome": {"outcome": "selected", "optionId": option}}}));
            continue;
        }
        if f.get("method").is_none() && f["id"] == 2 {
            break f;
        }
    };
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert_eq!(
        asked[0]["toolCall"]["title"],
        "Database: Which database should the service use?"
    );
    let names: Vec<&str> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Postgres (Recommended)", "SQLite", "Skip"]);
    assert_eq!(
        asked[1]["toolCall"]["title"],
        "What should the service be called?"
    );
    // The tool gave the model the choices.
    let result = h.llm.requests()[1]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == dsh_llm::Role::Tool)
        .map(|m| m.text())
        .expect("a tool result");
    let v: Value = serde_json::from_str(&result).unwrap_or_else(|e| panic!("{e}: {result}"));
    assert_eq!(v["answers"][0]["id"], "db", "{v}");
    assert_eq!(v["answers"][0]["selected"], json!(["SQLite"]), "{v}");
    assert_eq!(v["answers"][1]["id"], "name", "{v}");
    acp.close().await;
    h.dispose().await;
}
