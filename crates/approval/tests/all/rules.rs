//! Allow-always rules judged per simple command, and the rules file.

use std::path::Path;

use dsh_approval::rules::{RulesError, rules_for};
use dsh_approval::{Rule, RuleMatcher, RuleStore};
use serde_json::json;

fn prefix(words: &[&str]) -> Rule {
    Rule::CommandPrefix {
        prefix: words.iter().map(|w| w.to_string()).collect(),
    }
}

fn allows(m: &RuleMatcher, line: &str) -> bool {
    m.allows("bash", &json!({"command": line}), Path::new("/w"))
}

#[test]
fn hostile_command_lines_are_judged_per_simple_command() {
    let m = RuleMatcher::new(&[
        prefix(&["ls"]),
        prefix(&["cat"]),
        prefix(&["git", "status"]),
    ]);
    let allowed = [
        "ls",
        "ls -la src",
        "ls | cat",
        "cat a && ls",
        "env X=1 ls",
        "X=1 ls",
        "(ls; cat x)",
        "{ ls; }",
        "ls\ncat a",
        "git status --short",
        "ls 'a b' 2>/dev/null",
    ];
    for line in allowed {
        assert!(allows(&m, line), "{line:?} should be allowed");
    }
    let refused = [
        "ls; rm -rf x",
        "cat a | sh",
        "ls && rm -rf x",
        "ls || rm -rf x",
        "ls & rm -rf x",
        "ls\nrm -rf x",
        "ls $(rm -rf x)",
        "ls `rm -rf x`",
        "X=$(rm -rf x) ls",
        "ls > $(rm x)",
        "cat <(rm x)",
        "env X=1 rm -rf x",
        "env ls; rm x",
        "(rm -rf x)",
        "{ rm -rf x; }",
        "lsblk",
        "git push",
        "$SHELL -c ls",
        "for f in a; do ls; done",
        "f() { ls; }; f",
        "ls 'unterminated",
        "",
    ];
    for line in refused {
        assert!(!allows(&m, line), "{line:?} should not be allowed");
    }
}

#[test]
fn allow_always_derives_one_rule_per_command_and_path_globs() {
    let rules = rules_for(
        "bash",
        &json!({"command": "cargo test -p x && ls -la"}),
        Path::new("/w"),
    );
    assert_eq!(rules, vec![prefix(&["cargo", "test"]), prefix(&["ls"])]);
    assert!(rules_for("bash", &json!({"command": "echo $(id)"}), Path::new("/w")).is_empty());
    let rules = rules_for("write", &json!({"file_path": "src/a.rs"}), Path::new("/w"));
    assert_eq!(
        rules,
        vec![Rule::PathGlob {
            tool: "write".into(),
            glob: "/w/src/**".into()
        }]
    );
    let m = RuleMatcher::new(&rules);
    assert!(m.allows(
        "write",
        &json!({"file_path": "src/deep/b.rs"}),
        Path::new("/w")
    ));
    assert!(!m.allows(
        "write",
        &json!({"file_path": "src/../etc/x"}),
        Path::new("/w")
    ));
    assert!(!m.allows("edit", &json!({"file_path": "src/a.rs"}), Path::new("/w")));
}

/// Found by dsh-fuzz-targets' `approval_rules` smoke run: a file directly in `/` stored the glob
/// `//**`, which matches nothing, so "allow always" did not allow the very call it answered.
#[test]
fn allow_always_on_a_file_in_the_root_directory_allows_that_file() {
    let call = json!({"file_path": "/notes.txt"});
    let rules = rules_for("write", &call, Path::new("/w"));
    assert_eq!(
        rules,
        vec![Rule::PathGlob {
            tool: "write".into(),
            glob: "/**".into()
        }]
    );
    assert!(RuleMatcher::new(&rules).allows("write", &call, Path::new("/w")));
}

/// Found by dsh-fuzz-targets' `approval_rules` run (cargo-fuzz, 240 s): a directory whose name
/// holds a backslash stored a glob whose `\` the matcher read as an escape, so "allow always"
/// did not allow the very call it answered.
#[test]
fn allow_always_on_a_file_under_a_directory_with_a_backslash_allows_that_file() {
    let call = json!({"file_path": "dir\\x/a.txt"});
    let rules = rules_for("write", &call, Path::new("/w"));
    assert!(
        RuleMatcher::new(&rules).allows("write", &call, Path::new("/w")),
        "{rules:?}"
    );
    // And only under that directory.
    let other = json!({"file_path": "dirx/a.txt"});
    assert!(!RuleMatcher::new(&rules).allows("write", &other, Path::new("/w")));
}

#[test]
fn allow_always_on_web_fetch_stores_the_host_and_allows_that_host_only() {
    let w = Path::new("/w");
    let fetch = |url: &str| json!({ "url": url });
    let rules = rules_for("web_fetch", &fetch("https://Docs.RS/serde/latest/?q=1"), w);
    assert_eq!(
        rules,
        vec![Rule::Host {
            tool: "web_fetch".into(),
            host: "docs.rs".into()
        }]
    );
    assert_eq!(rules[0].to_string(), "web_fetch: host docs.rs");
    let m = RuleMatcher::new(&rules);
    assert!(m.allows("web_fetch", &fetch("http://docs.rs:8080/other"), w));
    assert!(!m.allows("web_fetch", &fetch("https://docs.rs.evil.example/"), w));
    assert!(!m.allows("web_fetch", &fetch("https://evil.example/?docs.rs"), w));
    assert!(!m.allows("web_fetch", &fetch("not a url"), w));
    // A URL without a host stores nothing (the answer allows that call once).
    assert!(rules_for("web_fetch", &fetch("nope"), w).is_empty());
    // A stored host rule survives the file and round-trips.
    let home = tempfile::tempdir().unwrap();
    let store = RuleStore::in_home(home.path());
    let project = tempfile::tempdir().unwrap();
    store.add(project.path(), rules[0].clone()).unwrap();
    assert_eq!(store.rules(project.path()).unwrap(), rules);
}

#[test]
fn the_rules_file_is_per_project_and_a_corrupt_one_is_never_overwritten() {
    let home = tempfile::tempdir().unwrap();
    let store = RuleStore::in_home(home.path());
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    store.add(a.path(), prefix(&["ls"])).unwrap();
    store.add(a.path(), prefix(&["ls"])).unwrap();
    store.add(b.path(), prefix(&["make"])).unwrap();
    assert_eq!(store.rules(a.path()).unwrap(), vec![prefix(&["ls"])]);
    assert_eq!(store.rules(b.path()).unwrap(), vec![prefix(&["make"])]);
    assert_eq!(store.revoke(a.path(), 1).unwrap(), prefix(&["ls"]));
    assert!(store.rules(a.path()).unwrap().is_empty());
    assert!(matches!(
        store.revoke(a.path(), 1),
        Err(RulesError::NoSuchRule(1))
    ));
    std::fs::write(store.path(), "{not json").unwrap();
    let err = store.add(a.path(), prefix(&["ls"])).unwrap_err();
    assert!(
        err.to_string().contains("not a valid permissions file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(store.path()).unwrap(), "{not json");
}
