//! Project context end to end: instruction files in a temporary repository, change notices that
//! append (the prefix-cache rule), skills by tool and by `/name`, custom commands.

use std::path::Path;

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn text_of(m: &Value) -> &str {
    m["content"].as_str().unwrap_or_default()
}

/// The instruction reminders of request `i`, in order.
fn reminders(env: &Env, i: usize) -> Vec<String> {
    request_messages(env.server(), i)
        .iter()
        .filter(|m| m["role"] == "user" && text_of(m).contains("nstructions from: "))
        .map(|m| text_of(m).to_owned())
        .collect()
}

/// `Instructions from: <path>` lines of a reminder, in order.
fn sources(reminder: &str) -> Vec<String> {
    reminder
        .lines()
        .filter_map(|l| l.strip_prefix("Instructions from: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn instructions_load_in_order_deduplicated_after_the_prompt() {
    let env = Env::new();
    let repo = env.cwd();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write(&env.home.path().join("AGENTS.md"), "USER RULE\n");
    write(&repo.join("AGENTS.md"), "ROOT RULE\n");
    write(&repo.join("CLAUDE.md"), "  ROOT RULE  \n"); // same trimmed content: collapsed
    write(&repo.join("CLAUDE.local.md"), "ROOT LOCAL RULE\n");
    write(&repo.join("pkg/AGENTS.md"), "PKG RULE\n");
    write(&repo.join("pkg/deep/CLAUDE.md"), "DEEP RULE\n");
    write(&repo.join("other/AGENTS.md"), "NOT ON THE PATH\n");
    env.server().push(Completion::new().text("ok").reply());
    let out = env
        .dsh()
        .args(["exec", "--cwd"])
        .arg(repo.join("pkg/deep"))
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = request_messages(env.server(), 0);
    assert!(
        !text_of(&messages[0]).contains("ROOT RULE"),
        "not in the system prompt"
    );
    let prompt = messages.iter().position(|m| text_of(m) == "hello").unwrap();
    let at = messages
        .iter()
        .position(|m| text_of(m).starts_with("<system-reminder>\nInstructions for this workspace"))
        .expect("a baseline reminder");
    assert!(at > prompt, "the reminder follows the prompt");
    let user_home = env
        .home
        .path()
        .canonicalize()
        .unwrap_or(env.home.path().to_path_buf());
    let got = sources(text_of(&messages[at]));
    let want: Vec<String> = [
        env.home.path().join("AGENTS.md"),
        repo.join("AGENTS.md"),
        repo.join("CLAUDE.local.md"),
        repo.join("pkg/AGENTS.md"),
        repo.join("pkg/deep/CLAUDE.md"),
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect();
    assert_eq!(got, want, "home {}", user_home.display());
    let reminder = text_of(&messages[at]);
    assert_eq!(reminder.matches("ROOT RULE").count(), 1, "{reminder}");
    assert!(!reminder.contains("NOT ON THE PATH"));
    assert!(reminder.ends_with("DEEP RULE\n</system-reminder>"));
    // The log carries it as a durable user message with its source.
    let events = env.stored_events();
    let logged = events
        .iter()
        .find(|e| {
            e["type"] == "user/message" && e["data"]["source"]["kind"] == "agent-instructions"
        })
        .expect("logged");
    let changes = logged["data"]["source"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 5);
    assert_eq!(changes[0]["scope"], "user");
    assert_eq!(logged["data"]["source"]["baseline"], true);
}

#[test]
fn editing_agents_md_between_turns_appends_a_notice_and_never_rewrites() {
    let env = Env::new();
    let repo = env.cwd();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write(&repo.join("AGENTS.md"), "Use tabs.\n");
    write(&repo.join("CLAUDE.md"), "Old claude rule.\n");
    env.server().push(Completion::new().text("one").reply());
    env.server().push(Completion::new().text("two").reply());
    env.server().push(Completion::new().text("three").reply());
    assert_eq!(env.exec(&["first"]).status.code(), Some(0));
    write(&repo.join("AGENTS.md"), "Use spaces.\n");
    std::fs::remove_file(repo.join("CLAUDE.md")).unwrap();
    let out = env.exec(&["--continue", "second"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Unchanged files are not announced again.
    let out = env.exec(&["--continue", "third"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
    let second = reminders(&env, 1);
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(
        second[0].contains("Use tabs."),
        "the baseline stays as it was"
    );
    let agents = repo.join("AGENTS.md").display().to_string();
    let claude = repo.join("CLAUDE.md").display().to_string();
    assert_eq!(
        second[1],
        format!(
            "<system-reminder>\nUpdated instructions from: {agents}\nUse spaces.\n\n\
             Instructions removed: {claude} (its earlier instructions no longer apply)\n</system-reminder>"
        )
    );
    let messages = request_messages(env.server(), 1);
    let notice = messages
        .iter()
        .position(|m| text_of(m) == second[1])
        .unwrap();
    let prompt = messages
        .iter()
        .position(|m| text_of(m) == "second")
        .unwrap();
    assert!(notice > prompt);
    assert_eq!(reminders(&env, 2).len(), 2);
}

#[test]
fn reading_a_nested_instruction_file_adds_it_on_the_next_request() {
    let env = Env::new();
    let repo = env.cwd();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write(&repo.join("lib/AGENTS.md"), "Library rule.\n");
    env.server().push(
        Completion::new()
            .tool_call("read", r#"{"file_path":"lib/AGENTS.md"}"#)
            .reply(),
    );
    env.server().push(
        Completion::new()
            .tool_call("edit", r#"{"file_path":"lib/AGENTS.md","old_string":"Library rule.","new_string":"Library rule 2."}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("done").reply());
    let out = env.exec(&["look"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        reminders(&env, 0),
        Vec::<String>::new(),
        "nothing on the path at first"
    );
    let path = repo.join("lib/AGENTS.md").display().to_string();
    let second = reminders(&env, 1);
    assert_eq!(
        second,
        [format!(
            "<system-reminder>\nAdditional instructions from: {path}\nLibrary rule.\n</system-reminder>"
        )]
    );
    let third = reminders(&env, 2);
    assert_eq!(
        third[1],
        format!(
            "<system-reminder>\nUpdated instructions from: {path}\nLibrary rule 2.\n</system-reminder>"
        )
    );
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
}

const SKILL: &str = "---\nname: release-notes\ndescription: Write release notes <from> the git log.\n---\nRun `git log` and group the changes.\n";

#[test]
fn a_skill_is_catalogued_loaded_by_the_tool_and_by_slash_name() {
    let env = Env::new();
    let repo = env.cwd();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write(&repo.join(".dsh/skills/release-notes/SKILL.md"), SKILL);
    write(
        &repo.join(".dsh/skills/release-notes/template.md"),
        "# Notes\n",
    );
    write(
        &repo.join(".claude/skills/manual/SKILL.md"),
        "---\nname: manual\ndescription: Only when the user asks.\ndisable-model-invocation: true\n---\nManual body.\n",
    );
    write(
        &repo.join(".claude/skills/broken/SKILL.md"),
        "---\nname: Broken_Name\ndescription: x\n---\n",
    );
    write(
        &repo.join(".agents/skills/nodesc.md"),
        "---\nname: nodesc\n---\nbody\n",
    );
    env.server().push(
        Completion::new()
            .tool_call("skill", r#"{"name":"release-notes"}"#)
            .tool_call("skill", r#"{"name":"manual"}"#)
            .tool_call("skill", r#"{"name":"nope"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("done").reply());
    env.server()
        .push(Completion::new().text("manual done").reply());
    let out = env.exec(&["write notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = request_messages(env.server(), 0);
    let catalog = first
        .iter()
        .find(|m| text_of(m).contains("<available_skills>"))
        .expect("catalog");
    assert!(
        text_of(catalog).contains(
            "\n- `release-notes`: Write release notes &lt;from&gt; the git log.\n</available_skills>"
        ),
        "{}",
        text_of(catalog)
    );
    assert!(
        !text_of(catalog).contains("manual"),
        "model-disabled skills are not listed"
    );
    let tools = env.server().request(0).unwrap().body_json().unwrap()["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "skill")
    );
    let second = request_messages(env.server(), 1);
    let results: Vec<&str> = second
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(text_of)
        .collect();
    assert!(
        results[0].starts_with("<skill_content name=\"release-notes\">"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains(
            &repo
                .join(".dsh/skills/release-notes/template.md")
                .display()
                .to_string()
        )
    );
    assert!(results[0].contains(
        "<skill_instructions>\nRun `git log` and group the changes.\n</skill_instructions>"
    ));
    assert_eq!(
        results[1],
        "Error: skill \"manual\" is not available for model invocation"
    );
    assert_eq!(
        results[2],
        "Error: skill \"nope\" is unknown or no longer available"
    );
    assert_eq!(
        second
            .iter()
            .filter(|m| text_of(m).contains("<available_skills>"))
            .count(),
        1
    );
    // The user invokes the model-disabled skill by name.
    let out = env.exec(&["--continue", "please /manual now"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let third = request_messages(env.server(), 2);
    let prompt = third
        .iter()
        .position(|m| text_of(m) == "please /manual now")
        .unwrap();
    assert!(text_of(&third[prompt + 1]).starts_with("<skill_content name=\"manual\">"));
    assert!(text_of(&third[prompt + 1]).contains("Manual body."));
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
}

#[test]
fn a_custom_command_expands_its_arguments() {
    let env = Env::new();
    let repo = env.cwd();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write(
        &repo.join(".claude/commands/fix-issue.md"),
        "---\ndescription: Fix a numbered issue\nargument-hint: <number> <area>\n---\nFix issue #$1 in the $2 code. Context: $ARGUMENTS\n",
    );
    write(
        &repo.join(".dsh/commands/review.md"),
        "Review the last commit.\n",
    );
    env.server().push(Completion::new().text("fixed").reply());
    env.server()
        .push(Completion::new().text("reviewed").reply());
    let out = env.exec(&["/fix-issue 42 parser"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = request_messages(env.server(), 0);
    assert!(
        messages
            .iter()
            .any(|m| text_of(m) == "Fix issue #42 in the parser code. Context: 42 parser"),
        "{messages:?}"
    );
    let out = env.exec(&["--continue", "/review carefully"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = request_messages(env.server(), 1);
    assert!(
        messages
            .iter()
            .any(|m| text_of(m) == "Review the last commit.\n\nARGUMENTS: carefully")
    );
    // A command in a sub-folder is named with colons, as Claude Code names it.
    write(
        &repo.join(".claude/commands/git/commit.md"),
        "---\ndescription: Commit the staged work\n---\nCommit with the message: $ARGUMENTS\n",
    );
    env.server()
        .push(Completion::new().text("committed").reply());
    let out = env.exec(&["--continue", "/git:commit fix the parser"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = request_messages(env.server(), 2);
    assert!(
        messages
            .iter()
            .any(|m| text_of(m) == "Commit with the message: fix the parser"),
        "{messages:?}"
    );
    let listed = env.dsh().args(["context"]).output().unwrap();
    assert!(
        stdout(&listed).contains("/git:commit"),
        "{}",
        stdout(&listed)
    );
}

#[test]
fn dsh_context_lists_what_would_load_with_sources_and_errors() {
    let env = Env::new();
    let repo = env.cwd();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    write(&repo.join("AGENTS.md"), "Root rule.\n");
    write(&repo.join("CLAUDE.md"), "Root rule.\n");
    write(&repo.join(".dsh/skills/release-notes/SKILL.md"), SKILL);
    write(
        &repo.join(".claude/skills/broken/SKILL.md"),
        "---\nname: Broken_Name\ndescription: x\n---\n",
    );
    write(
        &repo.join(".claude/settings.json"),
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./no-rm.sh","timeout":5}]}]}}"#,
    );
    write(
        &repo.join(".codex/hooks.json"),
        r#"{"hooks":{"Stop":[{"matcher":"(","hooks":[]}]}}"#,
    );
    write(
        &repo.join(".claude/commands/fix.md"),
        "---\ndescription: Fix it\nargument-hint: <n>\n---\nFix $1\n",
    );
    let out = env.dsh().arg("context").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let has = |s: &str| assert!(text.contains(s), "missing {s:?} in:\n{text}");
    has(&format!("Project root: {}", repo.display()));
    has(&format!(
        "  1. {} (project, 10 bytes)",
        repo.join("AGENTS.md").display()
    ));
    has(&format!(
        "  skipped {}: same content as an earlier file in this directory",
        repo.join("CLAUDE.md").display()
    ));
    has("  release-notes [model, /name] ");
    has(&format!(
        "  error {}: invalid name \"Broken_Name\"",
        repo.join(".claude/skills/broken/SKILL.md").display()
    ));
    has("    PreToolUse [Bash] ./no-rm.sh (timeout 5s)");
    has(&format!(
        "  error {}: invalid matcher regex `(`",
        repo.join(".codex/hooks.json").display()
    ));
    has("  /fix <n> — Fix it (");
}
