//! Snapshots: what they hold, the stat cache, storage growth, skipped files, gc.

use dsh_checkpoint::{CheckpointKind, CheckpointRecord, Node, Store};

use crate::Fixture;

#[test]
fn a_snapshot_holds_files_links_modes_and_skips_ignored_and_big_files() {
    let f = Fixture::new(true);
    f.sh(
        "mkdir -p src bin target && printf 'fn main() {}\\n' > src/main.rs \
         && printf '#!/bin/sh\\necho hi\\n' > bin/run && chmod +x bin/run \
         && ln -s src/main.rs link && printf 'target/\\n*.log\\n' > .gitignore \
         && echo built > target/out && echo noise > debug.log \
         && echo private > secret.txt && echo secret.txt >> .git/info/exclude \
         && head -c 2000000 /dev/zero > big.bin && printf '\\000\\001\\002' > blob.dat",
    );
    let store = f.store();
    let s = store.snapshot().expect("snapshot");
    let e = &s.manifest.entries;
    let keys: Vec<String> = e
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert_eq!(
        keys,
        [
            ".gitignore",
            "big.bin",
            "bin/run",
            "blob.dat",
            "link",
            "src/main.rs"
        ]
    );
    assert!(matches!(
        e.get(b"bin/run".as_slice()),
        Some(Node::File {
            executable: true,
            ..
        })
    ));
    assert!(matches!(
        e.get(b"src/main.rs".as_slice()),
        Some(Node::File {
            executable: false,
            ..
        })
    ));
    assert_eq!(
        e.get(b"link".as_slice()),
        Some(&Node::Symlink {
            target: b"src/main.rs".to_vec()
        })
    );
    assert_eq!(
        e.get(b"big.bin".as_slice()),
        Some(&Node::Skipped { size: 2_000_000 })
    );
    assert_eq!(s.skipped(), ["big.bin"]);
    // Nothing under .git was read, and the store is outside the workspace.
    assert!(keys.iter().all(|k| !k.starts_with(".git/")));
    assert!(!store.dir().starts_with(&f.ws));
}

#[test]
fn an_unchanged_tree_is_answered_by_the_stat_cache_and_storage_grows_with_changes() {
    let f = Fixture::new(false);
    f.sh(
        "mkdir -p a b && for i in $(seq 1 200); do yes file $i | head -c 1000 > a/f$i; \
         yes other $i | head -c 1000 > b/g$i; done",
    );
    // Files written in this clock tick are re-read once (the racy-stat rule): age them.
    age_all(&f.ws);
    let store = f.store();
    let first = store.snapshot().expect("first");
    assert_eq!(first.hashed, 400);
    let second = store.snapshot().expect("second");
    assert_eq!(second.id, first.id, "same tree, same id");
    assert_eq!(second.hashed, 0, "nothing re-read");
    assert_eq!(second.new_bytes, 0, "nothing stored");
    // A new process: the cache is read from disk.
    let again = f.store().snapshot().expect("third");
    assert_eq!(again.hashed, 0);
    let before = store.size();
    assert!(before > 400_000, "{before}");
    f.sh("echo changed > a/f7 && echo new > b/new");
    let third = store.snapshot().expect("changed");
    assert_ne!(third.id, first.id);
    assert_eq!(third.hashed, 2);
    // Two small blobs and the trees on their paths (root, a, b: ~10 KB each for 200
    // entries), not the 400 KB of the tree.
    let grown = store.size() - before;
    assert!(
        grown < 32 * 1024,
        "storage grew {grown} bytes for two small files"
    );
}

pub(crate) fn age_all(dir: &std::path::Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in ignore::WalkBuilder::new(dir)
        .hidden(false)
        .build()
        .flatten()
    {
        if e.file_type().is_some_and(|t| t.is_file())
            && let Ok(file) = std::fs::File::options().write(true).open(e.path())
        {
            file.set_modified(old).expect("set mtime");
        }
    }
}

#[test]
fn an_edit_that_keeps_size_and_mtime_is_still_seen_when_racy() {
    let f = Fixture::new(false);
    f.sh("echo aaaa > x");
    let store = f.store();
    let a = store.snapshot().expect("a");
    // Same size, written right after the snapshot: the entry is racy and re-hashed.
    f.sh("echo bbbb > x");
    let b = store.snapshot().expect("b");
    assert_ne!(a.id, b.id);
}

#[test]
fn gc_drops_checkpoints_of_deleted_sessions_and_their_objects() {
    let f = Fixture::new(false);
    let store = f.store();
    f.sh("echo keep > k");
    let kept = store.snapshot().expect("kept");
    f.sh("echo gone > g && head -c 5000 /dev/urandom > r");
    let gone = store.snapshot().expect("gone");
    for (id, session) in [(kept.id, "alive"), (gone.id, "deleted")] {
        store
            .record(&CheckpointRecord {
                id,
                kind: CheckpointKind::Before,
                session: session.into(),
                turn: Some(1),
                created_ms: 0,
                files: 1,
                new_bytes: 0,
            })
            .expect("record");
    }
    let before = store.size();
    let report = store.gc(|s| s == "alive").expect("gc");
    assert_eq!(report.records_dropped, 1);
    assert!(report.objects_deleted >= 3, "{report:?}");
    assert!(report.bytes_freed >= 5000, "{report:?}");
    assert!(store.size() < before);
    assert_eq!(store.records().expect("records").len(), 1);
    assert!(store.manifest(kept.id).is_ok());
    assert!(store.manifest(gone.id).is_err());
    // The stat cache was reset: a new snapshot re-stores what gc took.
    let again = store.snapshot().expect("again");
    assert_eq!(again.id, gone.id);
    assert!(store.manifest(gone.id).is_ok());
    let r = Store::open(&f.root, &f.ws, 1 << 20).expect("reopen");
    assert_eq!(r.read_blob(&blob(&again, "r")).expect("blob").len(), 5000);
}

fn blob(s: &dsh_checkpoint::Snapshot, path: &str) -> dsh_checkpoint::ObjectId {
    match s.manifest.entries.get(path.as_bytes()) {
        Some(Node::File { id, .. }) => *id,
        other => panic!("{path}: {other:?}"),
    }
}

/// The snapshot's walk applies the ignore rules as the `ignore` crate's walker does (which the
/// store used before its own parallel walk): `.ignore` over `.gitignore` over git's excludes,
/// whitelists, anchored and directory patterns, nested ignore files and repositories, the
/// ignore files of the workspace's parent directories; a directory of more files than one
/// thread takes at a time.
#[test]
fn the_walk_ignores_what_the_ignore_crate_ignores() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outer = tmp.path().join("outer");
    let ws = outer.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(outer.join(".gitignore"), "*.outer\n").expect("outer");
    let f = Fixture {
        _tmp: tmp,
        ws: ws.canonicalize().expect("canonical"),
        root: outer.join("home/checkpoints"),
    };
    f.git(&["init", "-q"]);
    f.sh(
        "printf '*.log\\n!keep.log\\nbuild/\\n/rootonly.txt\\n' > .gitignore \
         && printf '*.tmp\\n' > .ignore && echo secret.txt >> .git/info/exclude \
         && mkdir -p build sub/build sub/inner big \
         && printf '!*.tmp\\nlocal.txt\\n' > sub/.gitignore && printf '!special.tmp\\n' > sub/.ignore \
         && for p in a.log keep.log build/x sub/build/y rootonly.txt sub/rootonly.txt x.tmp \
              sub/special.tmp sub/other.tmp secret.txt sub/secret.txt a.outer sub/local.txt \
              sub/ok.txt sub/inner/x.inner sub/inner/y.txt; do echo $p > $p; done \
         && (cd sub/inner && git init -q && echo '*.inner' > .gitignore) \
         && for i in $(seq 1 600); do echo $i > big/f$i; done && ln -s sub/ok.txt link",
    );
    let s = f.store().snapshot().expect("snapshot");
    let got: Vec<String> = s
        .manifest
        .entries
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let got_dirs: Vec<String> = s
        .manifest
        .dirs
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let (mut want, mut want_dirs) = (Vec::new(), Vec::new());
    for e in ignore::WalkBuilder::new(&f.ws)
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .flatten()
    {
        let rel = e
            .path()
            .strip_prefix(&f.ws)
            .expect("inside")
            .to_string_lossy()
            .into_owned();
        if rel.is_empty() {
            continue;
        }
        match e.file_type() {
            Some(t) if t.is_dir() => want_dirs.push(rel),
            Some(_) => want.push(rel),
            None => {}
        }
    }
    want.sort();
    want_dirs.sort();
    assert_eq!(got, want);
    assert_eq!(got_dirs, want_dirs);
    // What the rules above mean, spelled out for a few.
    for kept in [
        "keep.log",
        "sub/rootonly.txt",
        "sub/special.tmp",
        "sub/ok.txt",
        "sub/inner/y.txt",
        "link",
    ] {
        assert!(got.iter().any(|g| g == kept), "{kept} missing: {got:?}");
    }
    for dropped in [
        "a.log",
        "build/x",
        "sub/build/y",
        "rootonly.txt",
        "x.tmp",
        "sub/other.tmp",
        "secret.txt",
        "sub/secret.txt",
        "a.outer",
        "sub/local.txt",
        "sub/inner/x.inner",
    ] {
        assert!(!got.iter().any(|g| g == dropped), "{dropped} kept");
    }
    assert_eq!(got.iter().filter(|g| g.starts_with("big/")).count(), 600);
}
