//! Reading zstd-compressed logs (`session.vN.jsonl.zstd`, the original harness's default
//! encoding; format §1.7–§1.8): concatenated, checksummed frames, each decompressing to complete
//! lines. Pure-Rust decoder (`ruzstd`); dsh has no zstd encoder, so these logs are read-only.

use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

use crate::error::ZstdError;

/// Decompresses every frame. Returns the plain bytes and whether the final frame was torn (its
/// complete lines are kept). A bad frame that is not the file's tail — a checksum mismatch, a
/// decoding failure with bytes after it, a frame not ending in `\n` — is corruption.
pub fn decompress_frames(bytes: &[u8]) -> Result<(Vec<u8>, bool), ZstdError> {
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut index = 0usize;
    while !rest.is_empty() {
        let mut src = rest;
        let mut dec = FrameDecoder::new();
        let decoded = dec
            .reset(&mut src)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                dec.decode_blocks(&mut src, BlockDecodingStrategy::All)
                    .map_err(|e| e.to_string())
            });
        match decoded {
            Ok(true) => {
                let data = dec.collect().unwrap_or_default();
                if let (Some(stored), Some(computed)) =
                    (dec.get_checksum_from_data(), dec.get_calculated_checksum())
                    && stored != computed
                {
                    return Err(ZstdError::Checksum { frame: index });
                }
                if data.last().is_some_and(|b| *b != b'\n') {
                    return Err(ZstdError::PartialLine { frame: index });
                }
                out.extend_from_slice(&data);
                rest = src;
            }
            Ok(false) | Err(_) if src.is_empty() => {
                // The frame runs to the end of the file: a torn final frame. Keep its complete
                // lines (whatever was decoded up to the last '\n').
                let partial = dec.collect().unwrap_or_default();
                let keep = partial
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                out.extend_from_slice(&partial[..keep]);
                return Ok((out, true));
            }
            Ok(false) => return Err(ZstdError::Incomplete { frame: index }),
            Err(detail) => {
                return Err(ZstdError::Decode {
                    frame: index,
                    detail,
                });
            }
        }
        index += 1;
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};

    fn frames(parts: &[&str]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|p| compress_to_vec(p.as_bytes(), CompressionLevel::Fastest))
            .collect()
    }

    #[test]
    fn concatenated_frames_decompress_to_the_plain_form() {
        let bytes = frames(&["{\"a\":1}\n", "{\"b\":2}\n{\"c\":3}\n"]);
        let (plain, torn) = decompress_frames(&bytes).unwrap();
        assert_eq!(plain, b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
        assert!(!torn);
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
}
