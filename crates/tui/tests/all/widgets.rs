//! Snapshots of the TestBackend buffer for every widget and state of the TUI.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_llm::TokenUsage;
use dsh_protocol::{Event, EventMsg};
use dsh_tui::app::{PickItem, Picker};
use dsh_tui::cells::{Cell, NoticeKind};
use dsh_tui::status::{StatusInfo, Usage, cost_table, status_line};
use dsh_tui::theme::Theme;
use dsh_tui::transcript::Transcript;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use serde_json::json;

use crate::support::*;

fn cell(c: &Cell, width: u16) -> Terminal<TestBackend> {
    lines_terminal(c.render(Theme::COLOR, width), width)
}

fn card(name: &str, args: serde_json::Value, result: Option<ToolOutcome>) -> Cell {
    Cell::Tool(tool_card(name, args, result))
}

fn ok(text: &str, meta: serde_json::Value) -> Option<ToolOutcome> {
    Some(ToolOutcome {
        text: text.into(),
        is_error: false,
        error_code: None,
        meta: Some(meta),
    })
}

fn usage(miss: u64, hit: u64, out: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: miss,
        output_tokens: out,
        total_tokens: None,
        cache_read_tokens: Some(hit),
        cache_write_tokens: None,
        reasoning_tokens: None,
    }
}

fn text_delta(t: &str) -> Event {
    ev(EventMsg::TextDelta { text: t.into() })
}

#[test]
fn streaming_text_commits_blocks_and_shows_the_open_tail_live() {
    let mut app = app(Theme::COLOR);
    app.running = true;
    let mut inserted = Vec::new();
    for d in [
        "# Res",
        "ult\n\nThe first para",
        "graph is done.\n\nThe second is stre",
    ] {
        inserted.extend(app.transcript.on_event(&text_delta(d), 60));
    }
    insta::assert_snapshot!("streaming_inserted", lines_terminal(inserted, 60).backend());
    insta::assert_snapshot!("streaming_viewport", draw(&app, 60, 8).backend());
}

#[test]
fn reasoning_collapsed_and_expanded() {
    let text =
        "First I read the file.\nThen I look for the bug.\nIt is in parse().\nFix it.\nTest it.";
    insta::assert_snapshot!(
        "reasoning_collapsed",
        cell(
            &Cell::Reasoning {
                text: text.into(),
                expanded: false
            },
            50
        )
        .backend()
    );
    insta::assert_snapshot!(
        "reasoning_expanded",
        cell(
            &Cell::Reasoning {
                text: text.into(),
                expanded: true
            },
            50
        )
        .backend()
    );
    let mut t = Transcript::new(Theme::COLOR);
    t.on_event(&ev(EventMsg::ReasoningDelta { text: text.into() }), 50);
    // The attempt commits with its reasoning only.
    let lines = t.on_event(
        &ev(EventMsg::AssistantMessage {
            turn: 1,
            text: String::new(),
            reasoning: Some(text.into()),
            interrupted: false,
            model: None,
        }),
        50,
    );
    assert_eq!(lines.len(), 5, "header, 3 lines, the more marker");
    assert_eq!(t.last_reasoning.as_deref(), Some(text));
}

#[test]
fn bash_card_shows_command_exit_duration_and_the_last_lines() {
    let out: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let c = card(
        "bash",
        json!({"command": "cargo test", "description": "Test"}),
        ok(
            &out,
            json!({"exitCode": 0, "durationMs": 1234, "stdoutBytes": 130, "stderrBytes": 0}),
        ),
    );
    insta::assert_snapshot!("bash_card", cell(&c, 60).backend());
    let failed = card(
        "bash",
        json!({"command": "false"}),
        ok(
            "(no output)\n[exit code: 1]",
            json!({"exitCode": 1, "durationMs": 12}),
        ),
    );
    insta::assert_snapshot!("bash_card_failed", cell(&failed, 60).backend());
    let running = card("bash", json!({"command": "sleep 5"}), None);
    insta::assert_snapshot!("bash_card_running", cell(&running, 60).backend());
}

#[test]
fn bash_card_is_bounded_for_ten_megabytes_and_escapes_control_bytes() {
    let mut big = "x".repeat(10 * 1024 * 1024);
    big.push_str("\n\x1b[2Jnot an escape\u{7}\nlast line\n");
    let c = card(
        "bash",
        json!({"command": "cat big"}),
        ok(
            &big,
            json!({"exitCode": 0, "durationMs": 5, "stdoutBytes": big.len()}),
        ),
    );
    let lines = c.render(Theme::COLOR, 60);
    assert!(lines.len() <= 10, "{}", lines.len());
    let t = lines_terminal(lines, 60);
    let text = format!("{}", t.backend());
    assert!(text.contains("�[2Jnot an escape�"), "{text}");
    assert!(text.contains("10.0 MB"), "{text}");
    insta::assert_snapshot!("bash_card_big", t.backend());
}

#[test]
fn edit_and_write_cards_show_coloured_diffs() {
    let c = card(
        "edit",
        json!({"file_path": "src/lib.rs", "old_string": "fn a() {\n    1\n}\n", "new_string": "fn a() {\n    2\n}\n"}),
        ok(
            "The file src/lib.rs has been updated successfully.",
            json!({"replacements": 1}),
        ),
    );
    let t = cell(&c, 60);
    insta::assert_snapshot!("edit_card", t.backend());
    let buf = t.backend().buffer();
    let row = |needle: &str| {
        (0..buf.area.height)
            .find(|&y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_owned())
                    .collect::<String>()
                    .contains(needle)
            })
            .unwrap()
    };
    let plus = row("+    2");
    let minus = row("-    1");
    assert!((0..60).any(|x| buf[(x, plus)].fg == Color::Green));
    assert!((0..60).any(|x| buf[(x, minus)].fg == Color::Red));
    let w = card(
        "write",
        json!({"file_path": "new.txt", "content": "hello\nworld\n"}),
        ok("Created", json!({"created": true, "bytes": 12})),
    );
    insta::assert_snapshot!("write_card", cell(&w, 60).backend());
}

#[test]
fn read_grep_glob_are_one_line_and_errors_show_their_code() {
    let cards = [
        card(
            "read",
            json!({"file_path": "src/main.rs"}),
            ok("1\n2\n3\n", json!({})),
        ),
        card(
            "grep",
            json!({"pattern": "TODO"}),
            ok("a:1", json!({"matches": 7, "files": 3})),
        ),
        card(
            "glob",
            json!({"pattern": "**/*.rs"}),
            ok("a.rs", json!({"count": 12})),
        ),
        card(
            "edit",
            json!({"file_path": "x.rs", "old_string": "a", "new_string": "b"}),
            Some(ToolOutcome {
                text: "The file must be read first".into(),
                is_error: true,
                error_code: Some("FS_NOT_OBSERVED".into()),
                meta: None,
            }),
        ),
    ];
    let mut lines = Vec::new();
    for c in &cards {
        lines.extend(c.render(Theme::COLOR, 60));
    }
    insta::assert_snapshot!("summaries_and_error", lines_terminal(lines, 60).backend());
}

#[test]
fn notices_error_retry_interrupted() {
    let mut lines = Vec::new();
    for (text, kind) in [
        (
            "↻ stream dropped (STREAM_ERROR: reset), retrying 1/5 in 1.0s",
            NoticeKind::Warn,
        ),
        (
            "⏹ interrupted (the delivered text is kept)",
            NoticeKind::Warn,
        ),
        (
            "✗ the turn failed: INSUFFICIENT_BALANCE: top up",
            NoticeKind::Error,
        ),
    ] {
        lines.extend(
            Cell::Notice {
                text: text.into(),
                kind,
            }
            .render(Theme::COLOR, 70),
        );
    }
    insta::assert_snapshot!("notices", lines_terminal(lines, 70).backend());
}

#[test]
fn status_line_with_cost_and_narrow_widths() {
    let mut u = Usage::default();
    u.add(1, &priced(&usage(2_000, 8_000, 500), Some(&PRICES)));
    u.add(2, &priced(&usage(1_000, 12_000, 300), Some(&PRICES)));
    let info = StatusInfo {
        model: "deepseek-flash",
        effort: Some("high"),
        context_window: Some(1_000_000),
        usage: &u,
        priced: true,
        running: false,
        hint: None,
    };
    for w in [100u16, 60, 40] {
        let line = status_line(&info, Theme::COLOR, w);
        assert!(line.width() <= usize::from(w));
        insta::assert_snapshot!(
            format!("status_{w}"),
            lines_terminal(vec![line], w).backend()
        );
    }
    insta::assert_snapshot!(
        "cost_table",
        lines_terminal(cost_table(&u, true, Theme::COLOR), 70).backend()
    );
}

/// A request's usage is on the status line as soon as its stream reports it
/// (`usageStreamed`), and the committed `usageUpdated` replaces it (not added twice).
#[test]
fn status_line_shows_streamed_usage_live_and_folds_the_committed_one_once() {
    let mut u = Usage::default();
    u.add(1, &priced(&usage(2_000, 8_000, 500), Some(&PRICES)));
    let request = priced(&usage(1_000, 12_000, 300), Some(&PRICES));
    u.stream(&request, 13_300);
    let info = |u: &Usage| {
        let info = StatusInfo {
            model: "deepseek-flash",
            effort: Some("high"),
            context_window: Some(1_000_000),
            usage: u,
            priced: true,
            running: true,
            hint: None,
        };
        lines_terminal(vec![status_line(&info, Theme::COLOR, 100)], 100)
            .backend()
            .to_string()
    };
    let live = info(&u);
    insta::assert_snapshot!("status_streamed_100", live);
    u.add(2, &request);
    assert_eq!(
        info(&u),
        live,
        "the committed request replaces the streamed one"
    );
    assert_eq!(u.session.attempts, 2);
}

#[test]
fn pending_steer_is_shown_and_editable() {
    let mut app = app(Theme::COLOR);
    app.running = true;
    for c in "look at the tests".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 60);
    }
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), 60);
    assert_eq!(actions, [dsh_tui::app::Action::Steered]);
    insta::assert_snapshot!("pending_steer", draw(&app, 60, 10).backend());
    // Up on the empty composer takes it back for editing.
    app.key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE), 60);
    assert!(app.pending.lock().is_empty());
    assert_eq!(app.composer.raw(), "look at the tests");
}

#[test]
fn picker_filters_fuzzily() {
    let mut app = app(Theme::COLOR);
    app.picker = Some(Picker {
        items: vec![
            PickItem {
                id: "session-0193-aaaa".into(),
                title: "Fix the login redirect".into(),
                detail: "“the login page loops” · /home/u/web · 2h ago · 3 turns · completed"
                    .into(),
            },
            PickItem {
                id: "session-0192-bbbb".into(),
                title: "add pagination to the list endpoint".into(),
                detail: "/home/u/api · 1d ago · 1 turn · aborted".into(),
            },
        ],
        ..Default::default()
    });
    insta::assert_snapshot!("picker_all", draw(&app, 60, 10).backend());
    for c in "pagin".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 60);
    }
    insta::assert_snapshot!("picker_filtered", draw(&app, 60, 10).backend());
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), 60);
    assert_eq!(
        actions,
        [dsh_tui::app::Action::Resume("session-0192-bbbb".into())]
    );
}

#[test]
fn slash_completion_and_narrow_viewport() {
    let mut app = app(Theme::COLOR);
    app.key(KeyEvent::new(KeyCode::Char('/'), KeyModifiers::NONE), 40);
    for c in "cos".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 40);
    }
    insta::assert_snapshot!("completion_40", draw(&app, 40, 8).backend());
    app.key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE), 40);
    assert_eq!(app.composer.raw(), "/cost ");
}

#[test]
fn slash_compact_asks_the_runtime_to_compact() {
    let mut app = app(Theme::COLOR);
    for c in "/compact".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 60);
    }
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), 60);
    assert_eq!(actions, [dsh_tui::app::Action::Compact]);
}

#[test]
fn no_color_uses_no_colours_at_all() {
    let mut app = app(Theme::PLAIN);
    app.running = true;
    app.transcript
        .on_event(&text_delta("Some `code` and **bold**"), 50);
    let t = draw(&app, 50, 8);
    insta::assert_snapshot!("no_color_viewport", t.backend());
    let c = card(
        "edit",
        json!({"file_path": "a", "old_string": "x\n", "new_string": "y\n"}),
        ok("ok", json!({})),
    );
    let t2 = lines_terminal(c.render(Theme::PLAIN, 50), 50);
    for t in [&t, &t2] {
        let buf = t.backend().buffer();
        for c in buf.content() {
            assert!(
                matches!(c.fg, Color::Reset),
                "a colour under NO_COLOR: {c:?}"
            );
            assert!(
                matches!(c.bg, Color::Reset),
                "a colour under NO_COLOR: {c:?}"
            );
        }
    }
}

#[test]
fn a_subagent_result_carries_the_childs_usage_into_the_totals() {
    let child = TokenUsage {
        input_tokens: 20,
        output_tokens: 7,
        total_tokens: None,
        cache_read_tokens: Some(100),
        cache_write_tokens: None,
        reasoning_tokens: None,
    };
    let mut t = Transcript::new(Theme::COLOR);
    t.on_event(
        &ev(EventMsg::SubagentFinished {
            session_id: "session-child".into(),
            status: dsh_protocol::RunStatus::Completed,
            usage: priced(&child, Some(&PRICES)),
        }),
        80,
    );
    let usage = &t.usage;
    assert_eq!(usage.session.output, 7);
    assert_eq!(usage.session.cache_hit_input, 100);
    // Counted once, priced, and not as the context size.
    assert_eq!(usage.session.attempts, 1);
    assert!(usage.session.cost > dsh_tui::status::Cost::default());
    assert_eq!(usage.context_used, None);
}

#[test]
fn plugin_slash_commands_complete_and_are_sent_as_prompts() {
    let mut app = app(Theme::PLAIN);
    app.extra_commands = vec![
        ("/fix-issue".into(), "<n> Fix a numbered issue".into()),
        ("/release-notes".into(), "skill: Write release notes".into()),
    ];
    for c in "/fi".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 60);
    }
    assert_eq!(
        app.completions(),
        [("/fix-issue", "<n> Fix a numbered issue")]
    );
    app.key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE), 60);
    for c in "42".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 60);
    }
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), 60);
    assert_eq!(
        actions,
        [dsh_tui::app::Action::Send("/fix-issue 42".into())]
    );
    for c in "/nope".chars() {
        app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), 60);
    }
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), 60);
    assert!(actions.is_empty(), "unknown commands are still refused");
}

#[test]
fn approval_prompt_takes_one_key_and_a_reason_for_deny() {
    use dsh_tui::app::Action;
    use dsh_tui::approval::ApprovalAnswer;
    let mut app = app(Theme::COLOR);
    app.running = true;
    app.approvals.push_back(question(
        "q1",
        "bash",
        json!({"command": "cargo test --workspace", "description": "run"}),
    ));
    app.approvals.push_back(question(
        "q2",
        "write",
        json!({"file_path": "/p/src/lib.rs", "content": "x"}),
    ));
    app.approvals
        .push_back(question("q3", "bash", json!({"command": "rm -rf build"})));
    insta::assert_snapshot!("approval_prompt", draw(&app, 80, 10).backend());
    // Narrow: nothing wider than the screen.
    insta::assert_snapshot!("approval_prompt_40", draw(&app, 40, 10).backend());
    // Other keys do nothing (the composer does not get them while a question is open).
    assert!(app.key(key(KeyCode::Char('x')), 80).is_empty());
    assert_eq!(app.composer.raw(), "");
    assert_eq!(
        app.key(key(KeyCode::Char('y')), 80),
        [Action::Answer {
            id: "q1".into(),
            answer: ApprovalAnswer::AllowOnce
        }]
    );
    assert_eq!(
        app.key(key(KeyCode::Char('a')), 80),
        [Action::Answer {
            id: "q2".into(),
            answer: ApprovalAnswer::AllowAlways
        }]
    );
    assert!(app.key(key(KeyCode::Char('n')), 80).is_empty());
    for c in "not the build dir".chars() {
        assert!(app.key(key(KeyCode::Char(c)), 80).is_empty());
    }
    insta::assert_snapshot!("approval_reason", draw(&app, 80, 10).backend());
    // Esc goes back to the choice, n again starts a fresh reason.
    app.key(key(KeyCode::Esc), 80);
    app.key(key(KeyCode::Char('n')), 80);
    app.paste("keep\nit");
    assert_eq!(
        app.key(key(KeyCode::Enter), 80),
        [Action::Answer {
            id: "q3".into(),
            answer: ApprovalAnswer::Deny {
                reason: Some("keep it".into())
            }
        }]
    );
    assert!(app.approvals.is_empty());
}

#[test]
fn esc_on_an_approval_prompt_cancels_the_question_and_the_turn() {
    use dsh_tui::app::Action;
    use dsh_tui::approval::ApprovalAnswer;
    let mut app = app(Theme::COLOR);
    app.running = true;
    app.approvals
        .push_back(question("q1", "bash", json!({"command": "make"})));
    assert_eq!(
        app.key(key(KeyCode::Esc), 80),
        [
            Action::Answer {
                id: "q1".into(),
                answer: ApprovalAnswer::Cancelled
            },
            Action::Cancel
        ]
    );
    // A deny without a reason.
    app.approvals
        .push_back(question("q2", "bash", json!({"command": "make"})));
    app.key(key(KeyCode::Char('n')), 80);
    assert_eq!(
        app.key(key(KeyCode::Enter), 80),
        [Action::Answer {
            id: "q2".into(),
            answer: ApprovalAnswer::Deny { reason: None }
        }]
    );
}

#[test]
fn approval_decisions_from_the_log_are_shown() {
    use dsh_protocol::ApprovalOutcome;
    let mut d = dsh_tui::approval::Decisions::default();
    let mut lines = Vec::new();
    for (id, outcome, reason) in [
        ("1", ApprovalOutcome::AllowedOnce, None),
        ("2", ApprovalOutcome::AllowedAlways, None),
        ("3", ApprovalOutcome::Denied, Some("not that file")),
        ("4", ApprovalOutcome::Cancelled, None),
        ("5", ApprovalOutcome::Unavailable, None),
    ] {
        d.asked(id, "bash");
        let cell = d.decided(id, outcome, reason);
        lines.extend(cell.render(Theme::COLOR, 80));
    }
    insta::assert_snapshot!("approval_decisions", lines_terminal(lines, 80).backend());
}

#[test]
fn fenced_code_is_highlighted_by_language_streamed_or_whole() {
    let text = "Here:\n\n```rust\n// add one\nfn add(x: u32) -> u32 {\n    x + 1 // \"inc\"\n}\nlet s = \"hi\";\n```\n\n```python\ndef f():\n    return 'x'  # c\n```\n\n```nosuchlang\nplain words\n```\n";
    let whole = dsh_tui::markdown::render_all(text, Theme::COLOR, 60);
    insta::assert_snapshot!("code_highlighted", spans_with_colours(&whole));
    // Streamed in small pieces: the same lines and colours.
    let mut stream = dsh_tui::markdown::MarkdownStream::new();
    let mut r = dsh_tui::markdown::PieceRenderer::new(Theme::COLOR, 60);
    let mut streamed = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    for chunk in chars.chunks(3) {
        let s: String = chunk.iter().collect();
        for p in stream.push(&s) {
            streamed.extend(r.piece(&p));
        }
    }
    for p in stream.finish() {
        streamed.extend(r.piece(&p));
    }
    assert_eq!(spans_with_colours(&streamed), spans_with_colours(&whole));
    // NO_COLOR: no colours, comments still dim.
    let plain = dsh_tui::markdown::render_all(text, Theme::PLAIN, 60);
    let shown = spans_with_colours(&plain);
    assert!(
        !shown.contains("Green") && !shown.contains("Magenta"),
        "{shown}"
    );
    assert!(shown.contains("\" add one\" - dim"), "{shown}");
}

#[test]
fn at_mentions_offer_project_files_fuzzily_and_complete_the_path() {
    use dsh_tui::mentions::{FileIndex, token_at};
    assert_eq!(token_at("look at @src/ma", 15), Some(("src/ma".into(), 7)));
    assert_eq!(token_at("@", 1), Some((String::new(), 1)));
    assert_eq!(token_at("mail me@home", 12), None);
    assert_eq!(token_at("look at @src", 4), None);
    let mut app = app(Theme::COLOR);
    app.files = Some(FileIndex::from_paths(vec![
        "Cargo.toml".into(),
        "crates/tui/src/app.rs".into(),
        "crates/tui/src/main.rs".into(),
        "docs/maintenance.md".into(),
        "src/main.rs".into(),
    ]));
    for c in "look at @main".chars() {
        app.key(key(KeyCode::Char(c)), 60);
    }
    insta::assert_snapshot!("mention_popup", draw(&app, 60, 10).backend());
    // Down picks a later match; Tab completes it (a space after, ready to go on).
    app.key(key(KeyCode::Down), 60);
    app.key(key(KeyCode::Down), 60);
    app.key(key(KeyCode::Down), 60);
    app.key(key(KeyCode::Tab), 60);
    assert_eq!(app.composer.raw(), "look at @crates/tui/src/main.rs ");
    assert!(app.mention_matches().is_none());
    // Enter completes too, and only the next Enter sends.
    for c in "and @cargo".chars() {
        app.key(key(KeyCode::Char(c)), 60);
    }
    assert!(app.key(key(KeyCode::Enter), 60).is_empty());
    assert_eq!(
        app.composer.raw(),
        "look at @crates/tui/src/main.rs and @Cargo.toml "
    );
    assert_eq!(
        app.key(key(KeyCode::Enter), 60),
        [dsh_tui::app::Action::Send(
            "look at @crates/tui/src/main.rs and @Cargo.toml ".into()
        )]
    );
    // No match: said so, and Enter sends what is typed.
    for c in "@zzz".chars() {
        app.key(key(KeyCode::Char(c)), 60);
    }
    insta::assert_snapshot!("mention_none", draw(&app, 60, 6).backend());
}

#[test]
fn the_file_index_honours_gitignore() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(root.join("src/lib.rs"), "").unwrap();
    std::fs::write(root.join("target/out.rs"), "").unwrap();
    std::fs::write(root.join("debug.log"), "").unwrap();
    std::fs::write(root.join("README.md"), "").unwrap();
    let index = dsh_tui::mentions::FileIndex::spawn(root);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let files = loop {
        if let Some(f) = index.files() {
            break f.to_vec();
        }
        assert!(std::time::Instant::now() < deadline);
        std::thread::yield_now();
    };
    assert_eq!(files, ["README.md", "src/lib.rs"]);
}

#[test]
fn cost_shows_at_every_usage_update_and_failed_attempts_are_priced() {
    let mut t = Transcript::new(Theme::COLOR);
    assert_eq!(t.usage_now().session.cost, dsh_tui::status::Cost::default());
    let update = |u: TokenUsage| {
        let u = priced(&u, Some(&PRICES));
        ev(EventMsg::UsageUpdated {
            turn: 1,
            usage: u,
            total: u,
            context_tokens: u.input_tokens + u.cache_read_tokens + u.output_tokens,
        })
    };
    // The committed answer's usage counts at once.
    t.on_event(&update(usage(1000, 800, 50)), 80);
    let live = t.usage_now().session;
    assert_eq!(
        (live.cache_miss_input, live.cache_hit_input, live.output),
        (1000, 800, 50)
    );
    assert!(live.cost > dsh_tui::status::Cost::default());
    // The commit's message adds nothing more: counted once.
    t.on_event(
        &ev(EventMsg::AssistantMessage {
            turn: 1,
            text: "hi".into(),
            reasoning: None,
            interrupted: false,
            model: Some("deepseek-flash".into()),
        }),
        80,
    );
    assert_eq!(t.usage_now().session, live);
    // A failed attempt (no message) that reported usage is billed: priced into the totals.
    t.on_event(&update(usage(500, 0, 10)), 80);
    let after = t.usage_now().session;
    assert_eq!((after.cache_miss_input, after.output), (1500, 60));
    assert!(after.cost > live.cost);
    assert_eq!(t.usage.turns[&1], after);
}

#[test]
fn a_question_of_the_agent_takes_one_key_per_option_or_a_line_of_text() {
    use dsh_protocol::{Question, QuestionAnswer, QuestionOption, QuestionRequest};
    use dsh_tui::app::Action;
    use dsh_tui::question::QuestionPrompt;
    let option = |label: &str, description: Option<&str>| QuestionOption {
        label: label.into(),
        description: description.map(Into::into),
    };
    let request = QuestionRequest {
        request_id: "r1".into(),
        questions: vec![
            Question {
                id: "db".into(),
                header: Some("Storage".into()),
                question: "Which database?".into(),
                options: vec![
                    option("SQLite", Some("one file, no server")),
                    option("Postgres", None),
                ],
                multi_select: false,
            },
            Question {
                id: "extras".into(),
                header: None,
                question: "Which extras?".into(),
                options: vec![
                    option("tests", None),
                    option("docs", None),
                    option("ci", None),
                ],
                multi_select: true,
            },
            Question {
                id: "name".into(),
                header: None,
                question: "The crate's name?".into(),
                options: Vec::new(),
                multi_select: false,
            },
        ],
    };
    let mut app = app(Theme::COLOR);
    app.running = true;
    app.questions.push_back(QuestionPrompt::new(request));
    insta::assert_snapshot!("question_prompt", draw(&app, 70, 10).backend());
    // A key with no option, and the composer's keys, do nothing.
    assert!(app.key(key(KeyCode::Char('7')), 70).is_empty());
    assert!(app.key(key(KeyCode::Char('x')), 70).is_empty());
    assert_eq!(app.composer.raw(), "");
    // One key answers a single choice; a multi-select toggles, Enter answers.
    assert!(app.key(key(KeyCode::Char('2')), 70).is_empty());
    assert!(app.key(key(KeyCode::Char('3')), 70).is_empty());
    assert!(app.key(key(KeyCode::Char('1')), 70).is_empty());
    assert!(app.key(key(KeyCode::Char('3')), 70).is_empty());
    assert!(app.key(key(KeyCode::Char('3')), 70).is_empty());
    insta::assert_snapshot!("question_multi", draw(&app, 70, 10).backend());
    assert!(app.key(key(KeyCode::Enter), 70).is_empty());
    // A question without options takes a line of text.
    for c in "dsh-fast".chars() {
        assert!(app.key(key(KeyCode::Char(c)), 70).is_empty());
    }
    assert_eq!(
        app.key(key(KeyCode::Enter), 70),
        [Action::AnswerQuestion {
            id: "r1".into(),
            answers: vec![
                QuestionAnswer {
                    question_id: "db".into(),
                    selected: vec!["Postgres".into()],
                    text: None,
                },
                QuestionAnswer {
                    question_id: "extras".into(),
                    selected: vec!["tests".into(), "ci".into()],
                    text: None,
                },
                QuestionAnswer {
                    question_id: "name".into(),
                    selected: Vec::new(),
                    text: Some("dsh-fast".into()),
                },
            ],
        }]
    );
    assert!(app.questions.is_empty());
}

/// A subscriber that fell behind misses deltas: the committed message (or a snapshot) brings the
/// rest, and nothing is shown twice.
#[test]
fn deltas_missed_by_a_lagging_subscriber_come_back_from_the_commit() {
    let mut t = Transcript::new(Theme::PLAIN);
    let mut lines = Vec::new();
    for d in ["First paragraph.\n\n", "Second "] {
        lines.extend(t.on_event(&ev(EventMsg::TextDelta { text: d.into() }), 60));
    }
    // "para", "graph.\n\nThird." never arrived; the commit carries the whole text.
    lines.extend(t.on_event(
        &ev(EventMsg::AssistantMessage {
            turn: 1,
            text: "First paragraph.\n\nSecond paragraph.\n\nThird.".into(),
            reasoning: None,
            interrupted: false,
            model: None,
        }),
        60,
    ));
    let text: Vec<String> = lines
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(text, ["First paragraph.", "Second paragraph.", "Third."]);
    assert!(!t.is_live());
}
