//! Rewind of files: turns made by shell commands, the user's edits, undo and redo, and the
//! user's git state.

use std::collections::BTreeMap;

use dsh_checkpoint::rewind::{self, RewindError, TurnCheckpoints, plan, plan_undo};
use dsh_checkpoint::{ChangeKind, ObjectId, Store};

use crate::{Fixture, assert_same, is_exec};

/// Runs `script` as one turn: a `before` snapshot, the change, an `after` snapshot.
fn turn(
    store: &Store,
    f: &Fixture,
    turns: &mut BTreeMap<u64, TurnCheckpoints>,
    n: u64,
    script: &str,
) -> (ObjectId, ObjectId) {
    let before = store.snapshot().expect("before").id;
    f.sh(script);
    let after = store.snapshot().expect("after").id;
    turns.insert(
        n,
        TurnCheckpoints {
            turn: n,
            before: Some(before),
            after: Some(after),
        },
    );
    (before, after)
}

fn rewind_to(
    store: &Store,
    turns: &BTreeMap<u64, TurnCheckpoints>,
    to: u64,
    force: bool,
) -> Result<rewind::Outcome, RewindError> {
    let current = store.snapshot().expect("current");
    let restored = rewind::last_restored(store, "s1").expect("records");
    let p = plan(store, turns, to, &current.manifest, restored)
        .expect("plan")
        .expect("a checkpoint");
    rewind::run(store, "s1", Some(to), None, &p, current.id, force)
}

fn git_state(f: &Fixture) -> (String, String, String, String) {
    (
        f.git(&["status", "--porcelain=v1", "--ignored"]),
        f.git(&["ls-files", "--stage"]),
        f.git(&["stash", "list"]),
        f.git(&["for-each-ref"]),
    )
}

#[test]
fn shell_changes_are_rewound_and_the_users_git_state_is_untouched() {
    let f = Fixture::new(true);
    f.sh(
        "mkdir -p src && echo 'one' > src/a.txt && echo 'two' > src/b.txt \
         && printf '#!/bin/sh\\n' > run.sh && ln -s src/a.txt link \
         && printf '\\211PNG\\r\\n\\032\\n\\000\\377' > logo.png && echo '*.log' > .gitignore \
         && git add -A && git commit -qm init \
         && echo stashed >> src/b.txt && git stash -q && echo staged > staged.txt \
         && git add staged.txt && echo ignored-before > build.log",
    );
    let git_before = git_state(&f);
    let store = f.store();
    let mut turns = BTreeMap::new();
    let (t1, _) = turn(
        &store,
        &f,
        &mut turns,
        1,
        "echo changed >> src/a.txt && rm src/b.txt && mv run.sh tool.sh && chmod +x tool.sh \
         && mkdir -p new/deep && printf '\\000\\001binary' > new/deep/data.bin \
         && ln -sfn src/missing link && printf '\\377\\330' > logo.png \
         && echo ignored-during >> build.log",
    );
    let before1 = store.manifest(t1).expect("manifest");
    let out = rewind_to(&store, &turns, 1, false).expect("rewind");
    assert!(out.applied.failed.is_empty(), "{:?}", out.applied.failed);
    assert_same(&store, &before1);
    assert_eq!(f.read("src/b.txt").as_deref(), Some(b"two\n".as_slice()));
    assert!(f.read("tool.sh").is_none());
    assert!(!is_exec(&f.path("run.sh")));
    assert!(!f.path("new").exists(), "directories the turn created go");
    assert_eq!(
        std::fs::read_link(f.path("link")).expect("link"),
        std::path::Path::new("src/a.txt")
    );
    // The ignored file is not dsh's to restore.
    assert_eq!(
        f.read("build.log").as_deref(),
        Some(b"ignored-before\nignored-during\n".as_slice())
    );
    let (status, index, stash, refs) = git_state(&f);
    assert_eq!(status, git_before.0);
    assert_eq!(index, git_before.1);
    assert_eq!(stash, git_before.2);
    assert_eq!(refs, git_before.3);
    assert!(
        !f.git(&["stash", "list"]).is_empty(),
        "the user's stash is kept"
    );
}

#[test]
fn a_directory_that_is_not_a_repository_rewinds_over_several_turns() {
    let f = Fixture::new(false);
    f.sh("echo v0 > notes.md && echo keep > other.md");
    let store = f.store();
    let mut turns = BTreeMap::new();
    let (t1, _) = turn(&store, &f, &mut turns, 1, "echo v1 > notes.md");
    // Turn 2 changes nothing on disk; turn 3 adds a file.
    let (t3, _) = turn(
        &store,
        &f,
        &mut turns,
        3,
        "echo v3 > notes.md && echo x > added",
    );
    let m3 = store.manifest(t3).expect("m3");
    rewind_to(&store, &turns, 2, false).expect("to 2");
    assert_same(&store, &m3);
    assert_eq!(f.read("notes.md").as_deref(), Some(b"v1\n".as_slice()));
    let m1 = store.manifest(t1).expect("m1");
    rewind_to(&store, &turns, 1, false).expect("to 1");
    assert_same(&store, &m1);
    assert_eq!(f.read("other.md").as_deref(), Some(b"keep\n".as_slice()));
}

#[test]
fn an_edit_by_the_user_between_turns_is_detected_and_refused_without_force() {
    let f = Fixture::new(true);
    f.sh("echo base > shared.txt && echo base > mine.txt");
    let store = f.store();
    let mut turns = BTreeMap::new();
    turn(&store, &f, &mut turns, 1, "echo agent >> shared.txt");
    // The user edits a file the turn changed, and one it did not.
    f.sh("echo user >> shared.txt && echo user >> mine.txt");
    let current = store.snapshot().expect("current");
    let p = plan(&store, &turns, 1, &current.manifest, None)
        .expect("plan")
        .expect("some");
    assert_eq!(p.conflicts, [b"shared.txt".to_vec()]);
    assert_eq!(p.actions.len(), 1, "only what dsh changed is restored");
    match rewind::run(&store, "s1", Some(1), None, &p, current.id, false) {
        Err(RewindError::Conflicts(paths)) => assert_eq!(paths, ["shared.txt"]),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        f.read("shared.txt").as_deref(),
        Some(b"base\nagent\nuser\n".as_slice()),
        "nothing written when refused"
    );
    let out = rewind::run(&store, "s1", Some(1), None, &p, current.id, true).expect("forced");
    assert_eq!(f.read("shared.txt").as_deref(), Some(b"base\n".as_slice()));
    assert_eq!(
        f.read("mine.txt").as_deref(),
        Some(b"base\nuser\n".as_slice()),
        "the user's own edit elsewhere is kept"
    );
    // What was overwritten is in the backup.
    let backup = store.manifest(out.record.backup).expect("backup");
    let Some(dsh_checkpoint::Node::File { id, .. }) = backup.entries.get(b"shared.txt".as_slice())
    else {
        panic!("no backup of shared.txt");
    };
    assert_eq!(
        store.read_blob(id).expect("blob"),
        b"base\nagent\nuser\n".to_vec()
    );
}

#[test]
fn a_rewind_can_be_undone_and_the_undo_undone() {
    let f = Fixture::new(true);
    f.sh("echo a > a && ln -s a l");
    let store = f.store();
    let mut turns = BTreeMap::new();
    let (t1, t1_end) = turn(
        &store,
        &f,
        &mut turns,
        1,
        "echo b > a && rm l && echo n > n && chmod +x n",
    );
    rewind_to(&store, &turns, 1, false).expect("rewind");
    assert_same(&store, &store.manifest(t1).expect("m"));
    // Undo: back to the turn's end.
    let last = rewind::last_rewind(&store, Some("s1"))
        .expect("records")
        .expect("one");
    let current = store.snapshot().expect("cur");
    let p = plan_undo(&store, &last, &current.manifest).expect("plan");
    assert!(p.conflicts.is_empty());
    let kinds: Vec<ChangeKind> = p.actions.iter().map(|a| a.kind).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    rewind::run(
        &store,
        "s1",
        None,
        Some(last.id.clone()),
        &p,
        current.id,
        false,
    )
    .expect("undo");
    assert_same(&store, &store.manifest(t1_end).expect("m"));
    assert!(is_exec(&f.path("n")));
    // Redo: undo the undo.
    let undo = rewind::last_rewind(&store, Some("s1"))
        .expect("records")
        .expect("two");
    assert_eq!(undo.undo_of.as_deref(), Some(last.id.as_str()));
    let current = store.snapshot().expect("cur");
    let p = plan_undo(&store, &undo, &current.manifest).expect("plan");
    rewind::run(&store, "s1", None, Some(undo.id), &p, current.id, false).expect("redo");
    assert_same(&store, &store.manifest(t1).expect("m"));
}

#[test]
fn a_link_in_the_path_never_leads_a_restore_outside_the_workspace() {
    let f = Fixture::new(false);
    let outside = tempfile::tempdir().expect("outside");
    f.sh("mkdir d && echo in > d/file");
    let store = f.store();
    let mut turns = BTreeMap::new();
    turn(&store, &f, &mut turns, 1, "rm -r d");
    // Someone replaces the directory with a link to a place outside the workspace.
    std::os::unix::fs::symlink(outside.path(), f.path("d")).expect("link");
    let out = rewind_to(&store, &turns, 1, true).expect("rewind");
    assert_eq!(out.applied.failed.len(), 1, "{:?}", out.applied);
    assert!(
        !outside.path().join("file").exists(),
        "nothing written through the link"
    );
}

#[test]
fn files_over_the_size_limit_are_left_alone() {
    let f = Fixture::new(false);
    let store = Store::open(&f.root, &f.ws, 100).expect("store");
    f.sh("echo small > s");
    let mut turns = BTreeMap::new();
    turn(
        &store,
        &f,
        &mut turns,
        1,
        "head -c 500 /dev/zero > big && echo changed > s",
    );
    let current = store.snapshot().expect("cur");
    let p = plan(&store, &turns, 1, &current.manifest, None)
        .expect("plan")
        .expect("some");
    assert_eq!(p.left_alone, [b"big".to_vec()]);
    rewind::run(&store, "s1", Some(1), None, &p, current.id, false).expect("rewind");
    assert!(f.path("big").exists(), "no backup of it: not deleted");
    assert_eq!(f.read("s").as_deref(), Some(b"small\n".as_slice()));
}
