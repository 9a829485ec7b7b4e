//! The unified diff a rewind previews: text changes, files re-created and deleted, binary
//! files named, mode and link changes, and a long diff cut with a count.

use std::collections::BTreeMap;

use dsh_checkpoint::preview::diff_preview;
use dsh_checkpoint::rewind::{TurnCheckpoints, plan};
use dsh_checkpoint::{ChangeKind, Store};

use crate::Fixture;

fn one_turn(store: &Store, f: &Fixture, script: &str) -> BTreeMap<u64, TurnCheckpoints> {
    let before = store.snapshot().expect("before").id;
    f.sh(script);
    let after = store.snapshot().expect("after").id;
    BTreeMap::from([(
        1,
        TurnCheckpoints {
            turn: 1,
            before: Some(before),
            after: Some(after),
        },
    )])
}

#[test]
fn the_preview_is_a_unified_diff_from_now_to_the_restore() {
    let f = Fixture::new(true);
    f.sh(
        "printf 'a\\nb\\nc\\n' > text.txt && echo gone > removed.txt && printf '\\000\\001' > data.bin \
         && echo '#!/bin/sh' > run.sh && ln -s text.txt link",
    );
    let store = f.store();
    let turns = one_turn(
        &store,
        &f,
        "printf 'a\\nB\\nc\\nd\\n' > text.txt && rm removed.txt && echo new > added.txt \
         && printf '\\000\\002' > data.bin && chmod +x run.sh && ln -sfn run.sh link",
    );
    let current = store.snapshot().expect("now");
    let p = plan(&store, &turns, 1, &current.manifest, None)
        .expect("plan")
        .expect("a checkpoint");
    let d = diff_preview(&store, &p, &current.manifest, 400).expect("preview");
    let kinds: Vec<(&str, ChangeKind, bool, u64, u64)> = d
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.kind, f.binary, f.added, f.removed))
        .collect();
    assert_eq!(
        kinds,
        [
            ("added.txt", ChangeKind::Removed, false, 0, 1),
            ("data.bin", ChangeKind::Changed, true, 0, 0),
            ("link", ChangeKind::Changed, false, 1, 1),
            ("removed.txt", ChangeKind::Added, false, 1, 0),
            ("run.sh", ChangeKind::Changed, false, 0, 0),
            ("text.txt", ChangeKind::Changed, false, 1, 2),
        ]
    );
    let want = "\
diff --git a/added.txt b/added.txt
deleted file mode 100644
--- a/added.txt
+++ /dev/null
@@ -1 +0,0 @@
-new
diff --git a/data.bin b/data.bin
Binary files a/data.bin and b/data.bin differ
diff --git a/link b/link
--- a/link
+++ b/link
@@ -1 +1 @@
-run.sh
+text.txt
diff --git a/removed.txt b/removed.txt
new file mode 100644
--- /dev/null
+++ b/removed.txt
@@ -0,0 +1 @@
+gone
diff --git a/run.sh b/run.sh
old mode 100755
new mode 100644
diff --git a/text.txt b/text.txt
--- a/text.txt
+++ b/text.txt
@@ -1,4 +1,3 @@
 a
-B
+b
 c
-d
";
    assert_eq!(d.text, want);
    assert_eq!(d.omitted_lines, 0);

    // Cut at 8 lines: the rest is counted.
    let cut = diff_preview(&store, &p, &current.manifest, 8).expect("preview");
    assert_eq!(cut.text.lines().count(), 9, "{}", cut.text);
    let total = want.lines().count() as u64;
    assert_eq!(cut.omitted_lines, total - 8);
    assert_eq!(cut.omitted_files, 4);
    assert!(
        cut.text.ends_with(&format!(
            "[… {} more line(s) of diff in 4 file(s) not shown]\n",
            total - 8
        )),
        "{}",
        cut.text
    );
}
