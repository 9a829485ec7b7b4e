//! Full-text search: phrases, prefixes, hostile queries, CJK and emoji, snippets, the
//! original harness's sessions.

use dsh_catalog::SqliteCatalog;
use dsh_catalog_api::{Filter, HitKind, SearchQuery};
use serde_json::json;

use crate::support::*;

const T0: i64 = 1_796_149_559_000;

fn q(text: &str) -> SearchQuery {
    SearchQuery {
        text: text.into(),
        ..Default::default()
    }
}

fn corpus() -> (Home, SqliteCatalog) {
    let home = Home::new();
    home.write(
        "rust",
        "/w/a",
        T0,
        &[
            Turn {
                prompt: "fix the failing resize test in the terminal widget",
                reply: "The resize handler ignored the new width.",
                tool: Some((
                    "bash",
                    json!({"command": "cargo test -p dsh-tui resize_keeps_cursor"}),
                    "test resize_keeps_cursor ... FAILED\npanicked at src/widget.rs:42",
                )),
            },
            turn("thanks", "You're welcome."),
        ],
    );
    home.write(
        "docs",
        "/w/b",
        T0 + 1,
        &[turn(
            "请修复终端窗口的测试",
            "已经修复了 🚀 launch complete",
        )],
    );
    home.write(
        "other",
        "/w/b",
        T0 + 2,
        &[turn(
            "write a poem about the sea",
            "Waves fold the test of time.",
        )],
    );
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    (home, cat)
}

fn ids(hits: &[dsh_catalog_api::Hit]) -> Vec<&str> {
    let mut v: Vec<&str> = hits.iter().map(|h| h.session_id.as_str()).collect();
    v.dedup();
    v
}

#[test]
fn words_find_prompts_replies_tool_calls_and_results_with_their_turn() {
    let (_home, cat) = corpus();
    let hits = cat.search(&q("resize_keeps_cursor")).unwrap();
    let kinds: Vec<HitKind> = hits.iter().map(|h| h.kind).collect();
    assert!(
        kinds.contains(&HitKind::ToolCall) && kinds.contains(&HitKind::ToolResult),
        "{hits:?}"
    );
    assert!(hits.iter().all(|h| h.session_id == "rust" && h.turn == 1));
    let hit = &cat.search(&q("widget.rs")).unwrap()[0];
    assert_eq!(hit.kind, HitKind::ToolResult);
    assert_eq!(hit.seq, 5);
    let prompt = &cat.search(&q("terminal widget")).unwrap()[0];
    assert_eq!((prompt.kind, prompt.seq), (HitKind::Prompt, 2));
    // The highlighted ranges are the matched words.
    let marked: Vec<&str> = prompt
        .highlights
        .iter()
        .map(|&(a, b)| &prompt.snippet[a..b])
        .collect();
    assert_eq!(marked, ["terminal", "widget"], "{}", prompt.snippet);
    assert!(!prompt.snippet.contains('\u{2}') && !prompt.snippet.contains('\n'));
}

#[test]
fn phrases_prefixes_and_ranking() {
    let (_home, cat) = corpus();
    // Both words are in two sessions; only one has them side by side.
    assert_eq!(
        ids(&cat.search(&q("\"resize handler\"")).unwrap()),
        ["rust"]
    );
    assert!(cat.search(&q("\"handler resize\"")).unwrap().is_empty());
    assert_eq!(ids(&cat.search(&q("poe*")).unwrap()), ["other"]);
    assert!(
        cat.search(&q("poe")).unwrap().is_empty(),
        "no prefix without *"
    );
    // Terms are ANDed, within one indexed text (a prompt, a reply, a call, a result).
    assert_eq!(ids(&cat.search(&q("sea poem")).unwrap()), ["other"]);
    assert!(cat.search(&q("poem waves")).unwrap().is_empty());
    // Best first.
    let hits = cat.search(&q("test")).unwrap();
    assert_eq!(ids(&hits).len(), 2);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    // Case and diacritics do not matter.
    assert_eq!(ids(&cat.search(&q("RÉSIZE")).unwrap())[0], "rust");
}

#[test]
fn hostile_queries_are_text_never_errors() {
    let (_home, cat) = corpus();
    for text in [
        "\"",
        "*",
        "NEAR(",
        "NEAR(resize test, 2)",
        "resize AND",
        "OR",
        "body:resize",
        "^resize",
        "(((",
        "a\"b\"c\"",
        "'; DROP TABLE sessions; --",
        "\u{0}\u{2}\u{3}",
        "",
        "   ",
    ] {
        if let Err(e) = cat.search(&q(text)) {
            panic!("{text:?}: {e}");
        }
    }
    assert_eq!(
        ids(&cat.search(&q("NEAR(resize")).unwrap()),
        Vec::<&str>::new()
    );
    assert_eq!(ids(&cat.search(&q("resize\"")).unwrap()), ["rust"]);
    let long = "resize ".repeat(1_500) + &"x".repeat(10_000);
    assert!(long.len() > 10_000);
    cat.search(&q(&long)).unwrap();
    assert_eq!(
        cat.list(&Filter::default()).unwrap().len(),
        3,
        "nothing was dropped"
    );
}

#[test]
fn cjk_and_emoji_are_found_inside_running_text() {
    let (_home, cat) = corpus();
    // A word in the middle of an unspaced sentence.
    assert_eq!(ids(&cat.search(&q("终端")).unwrap()), ["docs"]);
    assert_eq!(ids(&cat.search(&q("修复")).unwrap()), ["docs"]);
    assert!(
        cat.search(&q("端终")).unwrap().is_empty(),
        "characters in order"
    );
    let hit = &cat.search(&q("🚀")).unwrap()[0];
    assert_eq!(hit.session_id, "docs");
    assert_eq!(hit.kind, HitKind::Assistant);
    let marked: Vec<&str> = hit
        .highlights
        .iter()
        .map(|&(a, b)| &hit.snippet[a..b])
        .collect();
    assert_eq!(marked, ["🚀"], "{}", hit.snippet);
    assert!(!hit.snippet.contains('\u{200B}'));
    let hit = &cat.search(&q("窗口")).unwrap()[0];
    assert!(hit.snippet.contains("终端窗口的测试"), "{}", hit.snippet);
}

#[test]
fn filters_narrow_a_search() {
    let (_home, cat) = corpus();
    let f = |cwd: &str| SearchQuery {
        text: "test".into(),
        filter: Filter {
            cwd: Some(cwd.into()),
            ..Default::default()
        },
    };
    assert_eq!(ids(&cat.search(&f("/w/b")).unwrap()), ["other"]);
    let one = SearchQuery {
        text: "test".into(),
        filter: Filter {
            limit: Some(1),
            ..Default::default()
        },
    };
    assert_eq!(cat.search(&one).unwrap().len(), 1);
}

#[test]
fn sessions_of_the_original_harness_are_found() {
    let home = Home::new();
    home.original("v4/bash-tool/session.v4.jsonl", "orig-v4", "/w/o");
    home.original("v3/bash-tool/session.v3.jsonl", "orig-v3", "/w/o");
    let cat = SqliteCatalog::open(home.catalog_path()).unwrap();
    let r = cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    assert_eq!((r.logs, r.unreadable), (2, 0));
    for (text, id) in [
        ("TERMINAL_OK", "orig-v4"),
        ("dsh-sdk-proof-7391", "orig-v3"),
    ] {
        let hits = cat.search(&q(text)).unwrap();
        assert_eq!(ids(&hits), [id], "{text}");
        // The command (v3 tool results are converted to the v4 form on reading).
        assert!(hits.iter().any(|h| h.kind == HitKind::ToolCall), "{text}");
        assert!(hits.iter().any(|h| h.kind == HitKind::ToolResult), "{text}");
    }
    let v3 = cat.get("orig-v3").unwrap().unwrap();
    assert_eq!(v3.title.as_deref(), Some("Run this exact command with"));
    let v4 = cat.get("orig-v4").unwrap().unwrap();
    assert_eq!((v4.turns, v4.status.as_str()), (1, "completed"));
    assert_eq!(v4.model.as_deref(), Some("deepseek-v4-flash"));
    assert!(
        v4.first_prompt.starts_with("Use the bash tool"),
        "{}",
        v4.first_prompt
    );
    assert_eq!(v4.title.as_deref(), Some("Use the bash tool to"));
}

#[test]
fn a_query_past_its_budget_is_stopped() {
    let home = Home::new();
    let text = "alpha beta gamma delta ".repeat(300);
    for i in 0..40 {
        home.write(
            &format!("s{i}"),
            "/w",
            T0 + i,
            &[turn(&text, &text), turn(&text, &text)],
        );
    }
    let cat = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_budget(std::time::Duration::ZERO);
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    let err = cat.search(&q("alpha* beta* gamma*")).unwrap_err();
    assert!(matches!(err, dsh_catalog::Error::Timeout { .. }), "{err}");
}

#[test]
fn a_search_past_its_ranking_budget_ranks_the_newest_matches() {
    let home = Home::new();
    for i in 0..30 {
        let prompt = format!("common words number{i}");
        home.write(&format!("s{i:02}"), "/w", T0 + i, &[turn(&prompt, "reply")]);
    }
    let cat = SqliteCatalog::open(home.catalog_path())
        .unwrap()
        .with_rank_budget(std::time::Duration::ZERO);
    cat.reconcile(home.store().as_ref(), &mut |_| {}).unwrap();
    let mut query = q("common");
    query.filter.limit = Some(5);
    let hits = cat.search(&query).unwrap();
    assert_eq!(hits.len(), 5);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(hits.iter().all(|h| h.snippet.contains("common")));
    // A phrase or a filter goes the same way.
    assert_eq!(cat.search(&q("\"common words\" number7")).unwrap().len(), 1);
}
