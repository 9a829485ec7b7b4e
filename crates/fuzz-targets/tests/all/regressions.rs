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
