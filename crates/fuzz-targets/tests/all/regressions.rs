//! Inputs the fuzzers found that once failed a target: each must now pass.

use dsh_fuzz_targets::target;

fn replay(name: &str, input: &[u8]) {
    let t = target(name).expect("target");
    t(input);
}

#[test]
fn empty_inputs_pass_every_target() {
    for (name, _) in dsh_fuzz_targets::TARGETS {
        replay(name, b"");
    }
}

/// approval_rules, smoke run: "allow always" on a `write` of a file in `/` stored the glob
/// `//**`, which matches nothing, so the stored rule did not allow the call it was stored for
/// (fixed in dsh-approval's `rules_for`: the root's glob is `/**`).
#[test]
fn a_file_in_the_root_directory_is_allowed_by_its_stored_rule() {
    let mut input = b"[]\0\x01".to_vec();
    input.extend_from_slice(b"/notes.txt");
    replay("approval_rules", &input);
}

/// approval_rules, cargo-fuzz (240 s): "allow always" on a `write` under a directory whose name
/// holds a backslash stored a glob whose `\\` the matcher read as an escape, so the stored rule
/// did not allow the call it was stored for (fixed in dsh-approval's `rules_for`: a backslash is
/// escaped as `\\\\`). The crash input, as found.
#[test]
fn a_directory_with_a_backslash_is_allowed_by_its_stored_rule() {
    replay("approval_rules", b"\x5b\x7b\x22\x6b\x69\x6e\x64\x22\x3a\x20\x22\x63\x6f\x6d\x6d\x61\x6e\x64\x2d\x6c\x22\x3a\x20\x22\x77\x72\x69\x74\x65\x22\x2c\x20\x22\x67\x6c\x6f\x62\x22\x3a\x20\x22\x2f\x77\x6f\x72\x6b\x2f\x70\x72\x6f\x6a\x65\x63\x74\x2f\x73\x72\x63\x2f\x2a\x2a\x22\x69\x6e\x64\x22\x3a\x20\x22\x70\x61\x74\x68\x2d\x67\x6c\x6f\x62\x22\x2c\x20\x22\x74\x6f\x6f\x6c\x22\x3a\x30\x22\x77\x72\x69\x74\x65\x22\x2c\x20\x22\x6c\x6c\x6f\x62\x22\x3a\x20\x22\x2f\x77\x6f\x72\x6b\x2f\x70\x72\x6f\x6a\x65\x63\x74\x2f\x73\x72\x63\x2f\x2a\x2a\x22\x7d\x2c\x20\x7d\x5d\x00\x01\x73\x72\x63\x2f\x2e\xff\x10\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x5b\x22\x5c\x6f\x63\x00\x00\x00\x00\x00\x00\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x2e\x2f\x6c\x69\x62\x2f\x61\x2e\x72\x73");
}

/// serve_request: the seeds reach the handlers they are written for (a target whose inputs all
/// bounce off the first guard would fuzz nothing), and the guards answer as documented.
#[test]
fn serve_request_seeds_reach_their_handlers() {
    let status = |name: &str| {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/serve_request")
            .join(name);
        dsh_fuzz_targets::serve_request_status(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|| panic!("{name}: not a request"))
    };
    assert_eq!(status("health"), 200);
    assert_eq!(status("list"), 200);
    assert_eq!(status("submit"), 202);
    assert_eq!(status("events"), 200);
    assert_eq!(status("readonly_op"), 403, "a read-only token sends no op");
    assert_eq!(status("origin"), 403, "a foreign Origin is refused");
    assert!(
        (400..500).contains(&status("badhost")),
        "a foreign Host is refused"
    );
    assert_eq!(status("traversal"), 404);
}

/// approval_rules, cargo-fuzz (600 s): a `bash` call of 57 unclosed `(` hung the rules'
/// matcher in brush-parser (exponential in the nesting); fixed in dsh-shell-parse (lines nested
/// deeper than `MAX_NESTING` are unjudgeable at once). The input, as found.
#[test]
fn a_deeply_nested_command_line_does_not_hang_the_rules() {
    let mut input = b"[{\"kNi{\"=\"\0m".to_vec();
    input.extend_from_slice(&[b'('; 57]);
    input.extend_from_slice(b"n[");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        replay("approval_rules", &input);
        let _ = tx.send(());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the input still hangs the rules");
}
