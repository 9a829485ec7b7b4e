//! Tests of the zstd frame codec: encodings, torn and damaged frames, both implementations.

use super::*;

fn frames(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        encode_frame(p.as_bytes(), &mut out);
    }
    out
}

#[test]
fn a_large_batch_is_frames_of_whole_lines_of_at_most_64_kib() {
    let line = |i: usize| {
        format!(
            "{{\"seq\":{i},\"text\":\"{}\"}}\n",
            "x".repeat(900 + i % 50)
        )
    };
    let long = format!("{{\"text\":\"{}\"}}\n", "y".repeat(100_000));
    let mut batch: String = (0..150).map(line).collect();
    batch.push_str(&long);
    batch.extend((150..300).map(line));
    let mut out = Vec::new();
    FrameEncoder::default().encode(batch.as_bytes(), &mut out);
    let ends = whole_frame_ends(&out);
    assert!(ends.len() >= 5, "{} frames", ends.len());
    let mut plain = Vec::new();
    let mut start = 0;
    for end in ends {
        let text = first_frame(&out[start..end]).unwrap().unwrap();
        assert!(text.ends_with(b"\n"));
        assert!(
            text.len() <= FrameEncoder::KEEP_BELOW || text == long.as_bytes(),
            "a frame of {} bytes",
            text.len()
        );
        plain.extend_from_slice(&text);
        start = end;
    }
    assert_eq!(start, out.len());
    assert_eq!(plain, batch.as_bytes());
    assert_eq!(
        decompress_frames(&out).unwrap(),
        (batch.into_bytes(), false)
    );
}

#[test]
fn a_kept_context_writes_the_frames_a_fresh_one_writes() {
    let big = "{\"text\":\"".to_owned() + &"abc".repeat(40_000) + "\"}\n";
    let batches = [
        "{\"a\":1}\n".to_owned(),
        "{\"b\":\"two\"}\n{\"c\":3}\n".to_owned(),
        big,
        "{\"a\":1}\n".to_owned(),
    ];
    let mut encoder = FrameEncoder::default();
    for batch in &batches {
        let mut kept = b"prefix".to_vec();
        encoder.encode(batch.as_bytes(), &mut kept);
        let mut fresh = b"prefix".to_vec();
        encode_frame(batch.as_bytes(), &mut fresh);
        assert_eq!(kept, fresh);
        assert_eq!(first_frame(&kept[6..]).unwrap().unwrap(), batch.as_bytes());
    }
}

#[test]
fn frames_have_the_originals_form() {
    let bytes = frames(&["{\"a\":1}\n"]);
    assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    // No content size, not single-segment, checksum, no dictionary: as the original writes.
    assert_eq!(bytes[4], 0x04);
    assert_eq!(first_frame(&bytes).unwrap().unwrap(), b"{\"a\":1}\n");
}

#[test]
fn a_torn_frame_reports_its_offset_and_recovered_lines() {
    let first = frames(&["{\"a\":1}\n"]);
    let bytes = frames(&["{\"a\":1}\n", "{\"b\":2}\n"]);
    let f = decode_frames(&bytes[..bytes.len() - 2]).unwrap();
    let (at, _) = f.torn.unwrap();
    assert_eq!(at, first.len());
}

#[test]
fn concatenated_frames_decompress_to_the_plain_form() {
    let bytes = frames(&["{\"a\":1}\n", "{\"b\":2}\n{\"c\":3}\n"]);
    let (plain, torn) = decompress_frames(&bytes).unwrap();
    assert_eq!(plain, b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
    assert!(!torn);
}

/// Lines that compress poorly, so the log is large enough for the two-thread path.
fn big_log() -> (Vec<String>, Vec<u8>) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let parts: Vec<String> = (0..600)
        .map(|f| {
            (0..20)
                .map(|l| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!(
                        "{{\"f\":{f},\"l\":{l},\"r\":\"{x:016x}{:032x}\"}}\n",
                        x.wrapping_mul(31)
                    )
                })
                .collect()
        })
        .collect();
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    let bytes = frames(&refs);
    (parts, bytes)
}

#[test]
fn a_large_log_decodes_on_two_threads_to_the_same_bytes() {
    let (parts, bytes) = big_log();
    assert!(bytes.len() >= PARALLEL_BYTES, "{} bytes", bytes.len());
    // Every frame boundary is found from the headers alone.
    let mut at = 0;
    let mut n = 0;
    while at < bytes.len() {
        at += frame_len(&bytes[at..]).unwrap();
        n += 1;
    }
    assert_eq!((at, n), (bytes.len(), parts.len()));
    let parallel = decode_whole(&bytes, &whole_frame_ends(&bytes)).unwrap();
    assert_eq!(parallel, parts.concat().into_bytes());
    assert_eq!(decode_run_pure(&bytes).unwrap(), parallel);
    let f = decode_frames(&bytes).unwrap();
    assert_eq!(f.plain, parallel);
    assert!(f.torn.is_none());
}

#[test]
fn a_damaged_large_log_is_refused_as_the_sequential_reader_refuses_it() {
    let (_, bytes) = big_log();
    // Flip the stored checksum of frame 150.
    let mut at = 0;
    for _ in 0..=150 {
        at += frame_len(&bytes[at..]).unwrap();
    }
    let mut bad = bytes.clone();
    bad[at - 1] ^= 0xff;
    assert!(decode_whole(&bad, &whole_frame_ends(&bad)).is_none());
    assert!(matches!(
        decode_frames(&bad),
        Err(ZstdError::Checksum { frame: 150 })
    ));
    // A torn tail: the whole log up to the cut, the torn frame's lines kept.
    let cut = &bytes[..bytes.len() - 7];
    assert!(decode_whole(cut, &whole_frame_ends(cut)).is_none());
    let f = decode_frames(cut).unwrap();
    assert!(f.torn.is_some());
    let seq = sequential(cut).unwrap();
    assert_eq!(
        (f.plain.len(), &f.torn),
        (seq.plain.len(), &seq.torn),
        "as the sequential reader"
    );
    assert!(f.plain == seq.plain);
}

#[test]
fn a_torn_final_frame_keeps_the_earlier_frames() {
    let first = frames(&["{\"a\":1}\n"]);
    let bytes = frames(&["{\"a\":1}\n", "{\"b\":2}\n"]);
    for cut in first.len() + 1..bytes.len() {
        let (plain, torn) = decompress_frames(&bytes[..cut]).unwrap();
        assert!(torn, "cut {cut}");
        assert!(plain.starts_with(b"{\"a\":1}\n"), "cut {cut}");
        assert!(plain.ends_with(b"\n"));
    }
}

#[test]
fn a_damaged_inner_frame_is_corruption() {
    let mut bytes = frames(&["{\"a\":\"0123456789abcdef\"}\n", "{\"b\":2}\n"]);
    let first_len = frames(&["{\"a\":\"0123456789abcdef\"}\n"]).len();
    bytes[first_len - 6] ^= 0x55; // inside the first frame's content, before its checksum
    assert!(decompress_frames(&bytes).is_err());
}

#[test]
fn a_streamed_frame_is_the_frame_of_its_text() {
    streamed_frames_with(|w, out| encode_frame_with(w, out));
    streamed_frames_with(|w, out| encode_frame_piped(w, out));
}

type LineWriter<'a> = Box<dyn FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'a>;

fn streamed_frames_with(encode: fn(LineWriter<'_>, &mut Vec<u8>) -> std::io::Result<()>) {
    let text: String = (0..40_000).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    let mut streamed = Vec::new();
    encode(
        Box::new(|w| {
            for line in text.split_inclusive('\n') {
                w.write_all(line.as_bytes())?;
            }
            Ok(())
        }),
        &mut streamed,
    )
    .unwrap();
    assert_eq!(streamed[4], 0x04, "the original's frame form");
    let (plain, torn) = decompress_frames(&streamed).unwrap();
    assert!(!torn);
    assert_eq!(plain, text.as_bytes());
    let mut failed = vec![1u8];
    let e = encode(
        Box::new(|w| {
            w.write_all(&[b'x'; 200_000])?;
            Err(std::io::Error::other("boom"))
        }),
        &mut failed,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "boom");
    assert_eq!(failed, vec![1u8]);
}

/// The pure-`ruzstd` reading of `bytes`, frame by frame from the start: what
/// [`decode_frames`] must return with either backend.
fn sequential(bytes: &[u8]) -> Result<Frames, ZstdError> {
    decode_sequential(bytes, 0, 0, Vec::new())
}

fn small_log() -> Vec<u8> {
    frames(&[
        "{\"type\":\"session\"}\n",
        "{\"a\":\"0123456789abcdef0123456789abcdef\"}\n{\"b\":2}\n",
        "{\"c\":\"0123456789abcdef0123456789abcdef\"}\n",
        "{\"d\":4}\n{\"e\":\"0123456789abcdef\"}\n",
    ])
}

#[test]
fn every_cut_reads_as_the_pure_rust_sequential_reader_reads_it() {
    let bytes = small_log();
    for cut in 0..=bytes.len() {
        let got = format!("{:?}", decode_frames(&bytes[..cut]));
        assert_eq!(got, format!("{:?}", sequential(&bytes[..cut])), "cut {cut}");
    }
}

#[test]
fn every_damaged_byte_reads_as_the_pure_rust_sequential_reader_reads_it() {
    let bytes = small_log();
    for at in 0..bytes.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let got = format!("{:?}", decode_frames(&bad));
            assert_eq!(
                got,
                format!("{:?}", sequential(&bad)),
                "byte {at} ^ {flip:#x}"
            );
        }
    }
}

#[test]
fn a_multi_block_frame_keeps_the_form_and_decodes_with_ruzstd() {
    // One line (a batch's lines over 64 KiB are split into frames) over 128 KiB: more
    // than one block.
    let items: Vec<String> = (0..6000)
        .map(|i| format!("{{\"i\":{i},\"s\":\"{:x}\"}}", i * 7919))
        .collect();
    let plain = format!("[{}]\n", items.join(","));
    assert!(plain.len() > 128 * 1024);
    let mut bytes = Vec::new();
    encode_frame(plain.as_bytes(), &mut bytes);
    assert_eq!(bytes[4], 0x04);
    assert_eq!(frame_len(&bytes), Some(bytes.len()));
    assert_eq!(decode_run_pure(&bytes).unwrap(), plain.as_bytes());
    assert_eq!(decode_run(&bytes).unwrap(), plain.as_bytes());
    assert_eq!(
        sequential(&bytes).unwrap().plain,
        plain.as_bytes(),
        "ruzstd reads the frame"
    );
}

/// libzstd writes level-3 frames of the original's form that `ruzstd` reads, and reads the
/// frames `ruzstd` writes.
#[cfg(feature = "c-zstd")]
#[test]
fn libzstd_and_ruzstd_read_each_others_frames() {
    let (parts, _) = big_log();
    let plain = parts.concat();
    let mut pure = Vec::new();
    for p in &parts {
        compress(p.as_bytes(), &mut pure, CompressionLevel::Fastest);
    }
    assert_eq!(c::decode_run(&pure).unwrap(), plain.as_bytes());
    let mut native = Vec::new();
    for p in &parts {
        c::Encoder::default()
            .encode_frame(p.as_bytes(), &mut native)
            .unwrap();
    }
    assert_eq!(decode_run_pure(&native).unwrap(), plain.as_bytes());
    let mut at = 0;
    while at < native.len() {
        assert_eq!(native[at + 4], 0x04);
        at += frame_len(&native[at..]).unwrap();
    }
}

#[cfg(feature = "c-zstd")]
#[test]
fn the_frame_reader_reads_the_lines_of_whole_frames_only() {
    use std::io::Read as _;
    let parts = ["{\"a\":1}\n", "{\"b\":2}\n{\"c\":3}\n", "{\"d\":4}\n"];
    let bytes = frames(&parts);
    let mut plain = String::new();
    whole_frames_reader(&bytes)
        .unwrap()
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, parts.concat());
    // A torn tail: not whole frames, no reader (the sequential path handles it).
    assert!(whole_frames_reader(&bytes[..bytes.len() - 1]).is_none());
    // A damaged frame: the reader fails instead of returning other lines.
    let mut bad = bytes.clone();
    let first = frames(&parts[..1]).len();
    bad[first + 6] ^= 0x55;
    let mut out = Vec::new();
    assert!(
        whole_frames_reader(&bad)
            .unwrap()
            .read_to_end(&mut out)
            .is_err()
    );
}
