//! Hostile output: binary bytes, huge streams, one enormous line. Memory stays bounded: the
//! captured tail never exceeds the cap, whatever the command writes.

use std::os::unix::fs::PermissionsExt;

use dsh_shell::ShellRequest;
use dsh_shell::limits::STREAM_CAPTURE_BYTES;

use crate::common::{run, shell};

fn spill_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn binary_output_is_kept_as_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &shell(dir.path()),
        ShellRequest::new(r"printf '\x00\xff\xfe\x80ok\n'", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.tail, b"\x00\xff\xfe\x80ok\n");
    assert_eq!(out.stdout.text(), "\0\u{FFFD}\u{FFFD}\u{FFFD}ok\n");
    assert!(!out.stdout.truncated);
}

#[tokio::test]
async fn large_binary_output_spills_whole_stream() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let out = run(
        &shell(&spill),
        ShellRequest::new("head -c 300000 /dev/urandom", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.total_bytes, 300_000);
    assert!(out.stdout.truncated);
    assert_eq!(out.stdout.tail.len(), STREAM_CAPTURE_BYTES);
    let path = out.stdout.spill_path.clone().expect("spill file");
    assert!(path.starts_with(&spill));
    let whole = std::fs::read(&path).unwrap();
    assert_eq!(whole.len(), 300_000);
    assert_eq!(out.stdout.tail, &whole[300_000 - STREAM_CAPTURE_BYTES..]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(&spill).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    // stderr was empty: no spill file for it.
    assert_eq!(spill_files(&spill), vec![path]);
}

#[tokio::test]
async fn hundred_megabytes_stay_bounded_and_drop_the_oversized_spill() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let out = run(
        &shell(&spill),
        ShellRequest::new("head -c 100000000 /dev/zero; echo end >&2", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.total_bytes, 100_000_000);
    assert!(out.stdout.truncated);
    assert_eq!(out.stdout.tail.len(), STREAM_CAPTURE_BYTES);
    assert!(out.stdout.tail.capacity() <= STREAM_CAPTURE_BYTES * 2);
    assert!(out.stdout.tail.iter().all(|b| *b == 0));
    // Over the 64 MiB spill cap: the incomplete spill is discarded, not left behind.
    assert_eq!(out.stdout.spill_path, None);
    assert!(spill_files(&spill).is_empty(), "{:?}", spill_files(&spill));
    assert_eq!(out.stderr.text(), "end\n");
    assert!(out.termination.success());
}

#[tokio::test]
async fn one_ten_megabyte_line() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let out = run(
        &shell(&spill),
        ShellRequest::new(
            "head -c 10000000 /dev/zero | tr '\\0' a; echo -n Z",
            dir.path(),
        ),
    )
    .await;
    assert_eq!(out.stdout.total_bytes, 10_000_001);
    assert_eq!(out.stdout.tail.len(), STREAM_CAPTURE_BYTES);
    assert_eq!(out.stdout.tail.last(), Some(&b'Z'));
    let path = out.stdout.spill_path.clone().expect("spill");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 10_000_001);
}

#[tokio::test]
async fn both_streams_flooded_at_once() {
    // Interleaved floods on both pipes must not deadlock (each pipe has its own reader).
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let out = run(
        &shell(&spill),
        ShellRequest::new(
            "head -c 2000000 /dev/zero & head -c 2000000 /dev/zero >&2; wait",
            dir.path(),
        ),
    )
    .await;
    assert_eq!(out.stdout.total_bytes, 2_000_000);
    assert_eq!(out.stderr.total_bytes, 2_000_000);
    assert!(out.stdout.spill_path.is_some() && out.stderr.spill_path.is_some());
    assert_ne!(out.stdout.spill_path, out.stderr.spill_path);
}
