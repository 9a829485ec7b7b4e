//! The manual `compact` command (`Compaction::compact_now`) between turns, and what a refused
//! summary leaves behind.

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_compaction::summary::{INSTRUCTION_SOURCE, PREAMBLE};
use dsh_compaction::{
    BasicConfig, Compaction, CompactionBasicPlugin, CompactionError, NOTHING_TO_COMPACT,
};
use dsh_kernel::CancellationToken;
use dsh_llm::{Message, Role};
use dsh_test_harness::{Script, ScriptedAdapter, TestHarness, kinds, last_data, text};
use serde_json::Value;

struct Loop {
    h: TestHarness,
    llm: Arc<ScriptedAdapter>,
    agent: Arc<dyn Agent>,
    compaction: Arc<dyn Compaction>,
}

async fn start() -> Loop {
    let h = TestHarness::builder()
        .plugin::<CompactionBasicPlugin>(BasicConfig::default())
        .build()
        .await;
    let agent = h.agent().await;
    Loop {
        llm: h.llm.clone(),
        compaction: h.get::<dyn Compaction>(),
        agent,
        h,
    }
}

impl Loop {
    async fn turn(&self, prompt: &str, answer: &str) {
        self.h.reply(&self.agent, prompt, answer).await;
    }

    fn kinds(&self) -> Vec<String> {
        kinds(&self.agent)
    }

    fn data(&self, kind: &str) -> Value {
        last_data(&self.agent, kind)
    }
}

const SUMMARY: &str = "1. Primary Request and Intent\n- long prompts";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_now_replaces_history_between_turns_and_the_next_turn_sends_the_checkpoint() {
    let l = start().await;
    assert!(
        l.compaction
            .compact_now(l.agent.clone(), CancellationToken::new(), None)
            .await
            .unwrap()
            .is_none(),
        "{NOTHING_TO_COMPACT}"
    );
    assert!(l.kinds().is_empty(), "nothing compactable writes nothing");
    // A span too small to be worth a summary is not compacted either (no model call).
    l.turn("tiny", "reply").await;
    l.turn("tiny", "reply").await;
    let calls = l.llm.request_count();
    assert!(
        l.compaction
            .compact_now(l.agent.clone(), CancellationToken::new(), None)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(l.llm.request_count(), calls);
    assert!(!l.kinds().iter().any(|k| k.starts_with("compaction/")));
    for i in 0..3 {
        l.turn(
            &format!("prompt {i} {}", "p".repeat(3000)),
            &format!("answer {i} {}", "a".repeat(3000)),
        )
        .await;
    }
    // Nodes: the (empty) system head, then five prompts and answers.
    let before = l
        .agent
        .session()
        .with_log(|log| log.surface().nodes().len());
    assert_eq!(before, 11);
    l.llm.push(Script::Chunks(text(SUMMARY)));
    let out = l
        .compaction
        .compact_now(
            l.agent.clone(),
            CancellationToken::new(),
            Some("cmd-1".into()),
        )
        .await
        .unwrap()
        .unwrap();
    // Everything but the system head and the newest unit (the last answer) was replaced.
    assert_eq!(out.shadowed_nodes, before - 2);
    assert!(
        out.describe()
            .starts_with(&format!("Compacted {} history items (~", before - 2))
    );
    // (The scripted adapter reports 10 input tokens, so `tokens_before` is its figure; after
    // the replacement the meter estimates the whole, now small, history.)
    assert!(out.tokens_after < out.shadowed_token_count / 2, "{out:?}");
    // The summary request: the history as the next request would carry it, then the instruction.
    let requests = l.llm.requests();
    let summary_req = requests.last().unwrap();
    let (instruction, history) = summary_req.messages.split_last().unwrap();
    assert_eq!(instruction.source.kind, INSTRUCTION_SOURCE);
    let previous = &requests[requests.len() - 2];
    assert_eq!(history[..previous.messages.len()], previous.messages[..]);
    assert_eq!(summary_req.call.purpose.as_deref(), Some("compaction"));
    assert_eq!(summary_req.call.max_tokens, 8192);
    // The bracket, between turns, naming the command.
    let kinds = l.kinds();
    let start = kinds.iter().position(|k| k == "compaction/start").unwrap();
    assert_eq!(
        kinds[start..],
        [
            "compaction/start",
            "compaction/summary",
            "user/message",
            "dsh/compaction-tokens",
            "compaction/end"
        ]
    );
    let s = l.data("compaction/start");
    assert_eq!(
        (s["turn"].clone(), s["sourceCommandId"].clone()),
        (Value::Null, "cmd-1".into())
    );
    let checkpoint = l.data("user/message");
    assert_eq!(checkpoint["source"]["kind"], "compact-checkpoint");
    assert_eq!(checkpoint["source"]["sourceCommandId"], "cmd-1");
    assert_eq!(checkpoint["content"][0]["text"], PREAMBLE);
    assert_eq!(checkpoint["content"][1]["text"], SUMMARY);
    // The next turn: system, checkpoint, the retained answer, the new prompt.
    l.turn("next", "ok").await;
    let last = l.llm.requests().pop().unwrap();
    let history: Vec<&Message> = last
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| &**m)
        .collect();
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(roles[..2], [Role::User, Role::Assistant]);
    assert!(history[0].text().starts_with(PREAMBLE));
    assert!(history[1].text().starts_with("answer 2"));
    assert_eq!(last.messages.last().unwrap().text(), "next");
    assert!(
        !last
            .messages
            .iter()
            .any(|m| m.text().starts_with("prompt 0"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_larger_than_the_span_is_refused_and_changes_nothing() {
    let l = start().await;
    l.turn(&"short ".repeat(700), "reply").await;
    l.turn("again", "reply").await;
    let before = l.agent.session().derive_messages();
    l.llm
        .push(Script::Chunks(text(&"long summary ".repeat(2000))));
    let err = l
        .compaction
        .compact_now(l.agent.clone(), CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::Summary(_)), "{err}");
    assert_eq!(err.code(), "summary");
    assert!(err.to_string().contains("not smaller"), "{err}");
    let end = l.data("compaction/end");
    assert!(
        end["error"].as_str().unwrap().contains("not smaller"),
        "{end}"
    );
    assert!(!l.kinds().iter().any(|k| k == "compaction/summary"));
    assert_eq!(l.agent.session().derive_messages(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_manual_compaction_closes_its_bracket() {
    let l = start().await;
    for i in 0..2 {
        l.turn(
            &"q".repeat(3000),
            &format!("answer {i} {}", "a".repeat(3000)),
        )
        .await;
    }
    let before = l.agent.session().derive_messages();
    l.llm.push(Script::ChunksThenHang(Vec::new()));
    let cancel = CancellationToken::new();
    let n = l.llm.request_count();
    let task = tokio::spawn({
        let (c, a, t) = (l.compaction.clone(), l.agent.clone(), cancel.clone());
        async move { c.compact_now(a, t, None).await }
    });
    // Cancel once the summary request reached the adapter (woken by its arrival, not polled).
    l.llm.wait_requests(n + 1).await;
    cancel.cancel();
    let err = task.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "cancelled");
    assert_eq!(
        l.data("compaction/end")["error"],
        "compaction cancelled; the history is unchanged"
    );
    assert_eq!(l.agent.session().derive_messages(), before);
}
