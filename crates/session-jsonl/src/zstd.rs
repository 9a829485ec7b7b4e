//! zstd-compressed logs (`session.vN.jsonl.zstd`, the original harness's default encoding;
//! format §1.7–§1.8, `original-0.2.1.md` §1.3): concatenated, checksummed frames, one per durable
//! write batch (several for a batch over 64 KiB: see [`FrameEncoder`]), each decompressing to
//! complete lines; the first frame is exactly the header
//! line. Every frame has the original's form: descriptor `0x04` (no content size, not
//! single-segment, content checksum, no dictionary).
//!
//! Two backends:
//! - with the `c-zstd` feature (the default), C libzstd (the `zstd` crate) encodes every frame
//!   at level 3, the original's level, and decodes the run of whole frames of a log (found from
//!   the frame headers alone; on two threads for large logs). Decoding is several times faster
//!   than `ruzstd`'s on the many small frames of a log (`ruzstd` rebuilds its predefined FSE
//!   tables for every block), which is what keeps a zstd resume within the plain one's budget.
//! - pure Rust (`ruzstd`) always: it decodes a torn final frame (partial decoding keeps its
//!   complete lines), re-reads any log the fast path refuses so that errors name the frame and
//!   the problem exactly as without the feature, and reads the header frame for listings.
//!   Without `c-zstd` it is the whole implementation: its encoder writes the same frame form at
//!   its only implemented level, "fastest" (about zstd level 1).

use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
use ruzstd::encoding::{CompressionLevel, compress};

use crate::error::ZstdError;

/// The frames holding `plain` (complete lines; one frame unless it is over
/// [`FrameEncoder::KEEP_BELOW`] bytes), with a content checksum and no content size.
/// With `c-zstd`, libzstd at level 3 (should it fail — it only can on allocation — the frame is
/// written by `ruzstd` instead, in the same form).
pub fn encode_frame(plain: &[u8], out: &mut Vec<u8>) {
    FrameEncoder::default().encode(plain, out);
}

/// [`encode_frame`] with one compression context kept for the frames of a writer: creating
/// and initialising a libzstd context costs more than compressing a step's few lines. The
/// frames are byte for byte those of [`encode_frame`] (a context keeps its parameters, never
/// data, from one frame to the next).
///
/// A batch over [`FrameEncoder::KEEP_BELOW`] bytes is written as several frames, each of whole
/// lines and at most that long (a longer line gets a frame of its own, with a context of its
/// own). libzstd sizes a context, and the output room of a one-shot frame, by the input: one
/// frame for a megabyte batch (a resumed or imported transcript's first flush) cost a 1.3 MB
/// context and a 1 MB output buffer at the process's peak; 64 KiB frames reuse the kept
/// context. Readers see the same lines: a log is a sequence of frames of complete lines, and a
/// batch's frames are written by one `write`, as its one frame was.
#[derive(Default)]
pub struct FrameEncoder {
    #[cfg(feature = "c-zstd")]
    kept: c::Encoder,
}

impl std::fmt::Debug for FrameEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameEncoder").finish_non_exhaustive()
    }
}

impl FrameEncoder {
    /// The largest frame's plain text, unless one line is longer.
    pub const KEEP_BELOW: usize = 64 * 1024;

    /// Appends the frames holding `plain` (complete lines) to `out` (see the type).
    pub fn encode(&mut self, plain: &[u8], out: &mut Vec<u8>) {
        let mut rest = plain;
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(piece_len(rest, Self::KEEP_BELOW));
            self.encode_one(piece, out);
            rest = tail;
        }
    }

    /// One frame holding `plain`.
    fn encode_one(&mut self, plain: &[u8], out: &mut Vec<u8>) {
        #[cfg(feature = "c-zstd")]
        {
            let encoded = if plain.len() <= Self::KEEP_BELOW {
                self.kept.encode_frame(plain, out)
            } else {
                c::Encoder::default().encode_frame(plain, out)
            };
            match encoded {
                Ok(()) => return,
                Err(error) => {
                    tracing::warn!(%error, "libzstd could not encode a frame; ruzstd encodes it");
                }
            }
        }
        compress(plain, &mut *out, CompressionLevel::Fastest);
    }
}

/// The length of the first frame's text of `plain`: all of it when it fits in `max` bytes,
/// else the whole lines that fit, else its first line.
fn piece_len(plain: &[u8], max: usize) -> usize {
    if plain.len() <= max {
        return plain.len();
    }
    match plain[..max].iter().rposition(|&b| b == b'\n') {
        Some(end) => end + 1,
        None => plain
            .iter()
            .position(|&b| b == b'\n')
            .map_or(plain.len(), |end| end + 1),
    }
}

/// Bytes per piece between a streamed frame's writer and its compressor.
const PIPE_CHUNK: usize = 64 * 1024;

/// One frame of the lines `write` produces, compressed while they are written: the plain text
/// is never held whole (a megabyte event is one line). With `c-zstd`, libzstd's streaming
/// encoder (level 3); without, `ruzstd` fed through a pipe (see [`encode_frame_piped`]). On a
/// writer error nothing is added to `out`.
pub fn encode_frame_with<F>(write: F, out: &mut Vec<u8>) -> std::io::Result<()>
where
    F: FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send,
{
    #[cfg(feature = "c-zstd")]
    return c::encode_frame_with(write, out);
    #[cfg(not(feature = "c-zstd"))]
    return encode_frame_piped(write, out);
}

/// [`encode_frame_with`] on `ruzstd`, whose compressor pulls from a reader: the writer runs on a
/// scoped thread and feeds it through a bounded pipe of [`PIPE_CHUNK`]-byte pieces.
#[cfg(any(test, not(feature = "c-zstd")))]
fn encode_frame_piped<F>(write: F, out: &mut Vec<u8>) -> std::io::Result<()>
where
    F: FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send,
{
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    let mut frame = Vec::new();
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            let mut w = std::io::BufWriter::with_capacity(PIPE_CHUNK, PipeWriter { tx });
            write(&mut w)?;
            std::io::Write::flush(&mut w)
        });
        let reader = PipeReader {
            rx,
            piece: Vec::new(),
            at: 0,
        };
        compress(reader, &mut frame, CompressionLevel::Fastest);
        producer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the log line writer panicked")))
    })?;
    out.extend_from_slice(&frame);
    Ok(())
}

/// The writing end of [`encode_frame_piped`]'s pipe.
#[cfg(any(test, not(feature = "c-zstd")))]
struct PipeWriter {
    tx: std::sync::mpsc::SyncSender<Vec<u8>>,
}

#[cfg(any(test, not(feature = "c-zstd")))]
impl std::io::Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(PIPE_CHUNK);
        self.tx
            .send(buf[..n].to_vec())
            .map_err(|_| std::io::Error::other("the frame compressor stopped reading"))?;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The reading end: EOF when the writer is done (or failed and dropped its end).
#[cfg(any(test, not(feature = "c-zstd")))]
struct PipeReader {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    piece: Vec<u8>,
    at: usize,
}

#[cfg(any(test, not(feature = "c-zstd")))]
impl std::io::Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.piece.len() {
            match self.rx.recv() {
                Ok(piece) => {
                    self.piece = piece;
                    self.at = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.piece.len() - self.at);
        buf[..n].copy_from_slice(&self.piece[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The decompressed frames of a log.
#[derive(Debug, Default)]
pub struct Frames {
    /// Every complete line, in order (the complete lines of a torn final frame included).
    pub plain: Vec<u8>,
    /// A torn final frame: its byte offset in the file and the complete lines recovered from it
    /// (a writer truncates the file there and writes them again as one frame).
    pub torn: Option<(usize, Vec<u8>)>,
}

/// Decompresses every frame. Returns the plain bytes and whether the final frame was torn (its
/// complete lines are kept). A bad frame that is not the file's tail — a checksum mismatch, a
/// decoding failure with bytes after it, a frame not ending in `\n` — is corruption.
pub fn decompress_frames(bytes: &[u8]) -> Result<(Vec<u8>, bool), ZstdError> {
    let f = decode_frames(bytes)?;
    Ok((f.plain, f.torn.is_some()))
}

/// One frame decoded from the front of a byte slice.
enum Next<'a> {
    /// A complete frame: its content, whether its checksum matched, and the bytes after it.
    Complete {
        data: Vec<u8>,
        checksum_ok: bool,
        rest: &'a [u8],
    },
    /// The bytes end inside the frame: what was decoded of it.
    Torn(Vec<u8>),
    /// The frame stopped before its end with bytes after it.
    Incomplete,
    /// The frame does not decode.
    Bad(String),
}

fn next_frame(bytes: &[u8]) -> Next<'_> {
    let mut src = bytes;
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
            let checksum_ok = match (dec.get_checksum_from_data(), dec.get_calculated_checksum()) {
                (Some(stored), Some(computed)) => stored == computed,
                _ => true,
            };
            Next::Complete {
                data,
                checksum_ok,
                rest: src,
            }
        }
        Ok(false) | Err(_) if src.is_empty() => Next::Torn(dec.collect().unwrap_or_default()),
        Ok(false) => Next::Incomplete,
        Err(detail) => Next::Bad(detail),
    }
}

/// Decompresses only the first frame (the header line's frame), for listings. `None` when the
/// bytes end inside it.
pub fn first_frame(bytes: &[u8]) -> Result<Option<Vec<u8>>, ZstdError> {
    match next_frame(bytes) {
        Next::Complete { data, .. } => Ok(Some(data)),
        Next::Torn(_) | Next::Incomplete => Ok(None),
        Next::Bad(detail) => Err(ZstdError::Decode { frame: 0, detail }),
    }
}

/// Decompresses the complete frames at the start of `bytes` until `max_plain` bytes are out (or
/// the bytes end, or a frame is torn: what came before it is kept). For listings.
pub fn decode_prefix(bytes: &[u8], max_plain: usize) -> Result<Vec<u8>, ZstdError> {
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut frame = 0usize;
    while !rest.is_empty() && out.len() < max_plain {
        match next_frame(rest) {
            Next::Complete { data, rest: r, .. } => {
                out.extend_from_slice(&data);
                rest = r;
            }
            Next::Torn(_) | Next::Incomplete => break,
            Next::Bad(detail) => return Err(ZstdError::Decode { frame, detail }),
        }
        frame += 1;
    }
    Ok(out)
}

/// Logs at least this large (compressed) are decoded on two threads.
const PARALLEL_BYTES: usize = 256 * 1024;

/// The length of the zstd frame at the start of `bytes`, read from its headers alone (no
/// decoding): `None` unless a whole, well-formed frame is there. Lets [`decode_frames`] find the
/// run of whole frames (and split a large one between threads); anything unusual takes the
/// sequential path, which names the problem.
fn frame_len(bytes: &[u8]) -> Option<usize> {
    frame_extent(bytes).map(|(len, _)| len)
}

/// [`frame_len`] and the frame's number of blocks.
fn frame_extent(bytes: &[u8]) -> Option<(usize, usize)> {
    if bytes.get(..4)? != [0x28, 0xb5, 0x2f, 0xfd] {
        return None;
    }
    let descriptor = *bytes.get(4)?;
    let single_segment = descriptor & 0x20 != 0;
    let checksum = descriptor & 0x04 != 0;
    let dict_bytes = [0, 1, 2, 4][usize::from(descriptor & 0x03)];
    let fcs_bytes = match descriptor >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut at = 5 + usize::from(!single_segment) + dict_bytes + fcs_bytes;
    let mut blocks = 0usize;
    loop {
        let h = bytes.get(at..at + 3)?;
        let header = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        let last = header & 1 != 0;
        let size = (header >> 3) as usize;
        at += 3 + match (header >> 1) & 3 {
            0 | 2 => size,
            1 => 1,
            _ => return None,
        };
        blocks += 1;
        if last {
            break;
        }
    }
    if checksum {
        at += 4;
    }
    (at <= bytes.len()).then_some((at, blocks))
}

/// The end offsets of the whole frames at the start of `bytes` (see [`frame_len`]), up to the
/// first frame that is not whole.
fn whole_frame_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while let Some(len) = bytes.get(at..).and_then(frame_len) {
        at += len;
        ends.push(at);
    }
    ends
}

/// Encodes a plain log as dsh's flushes frame it: the header line alone, then one frame per
/// step (cut after each `step/end` line). Fixtures for benchmarks and profiling.
pub fn encode_per_step(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut batch = String::new();
    let mut lines = text.split_inclusive('\n');
    if let Some(header) = lines.next() {
        encode_frame(header.as_bytes(), &mut out);
    }
    for line in lines {
        batch.push_str(line);
        if line.starts_with("{\"type\":\"step/end\"") {
            encode_frame(batch.as_bytes(), &mut out);
            batch.clear();
        }
    }
    if !batch.is_empty() {
        encode_frame(batch.as_bytes(), &mut out);
    }
    out
}

/// Decodes complete frames `bytes` (whose boundaries [`frame_len`] found): `None` on any
/// problem (the caller falls back to the sequential path for its error). Every frame must
/// verify its checksum and hold complete lines.
#[cfg(feature = "c-zstd")]
fn decode_run(bytes: &[u8]) -> Option<Vec<u8>> {
    c::decode_run(bytes)
}

/// Decodes complete frames `bytes` (whose boundaries [`frame_len`] found): `None` on any
/// problem (the caller falls back to the sequential path for its error). Every frame must
/// verify its checksum and hold complete lines.
#[cfg(not(feature = "c-zstd"))]
fn decode_run(bytes: &[u8]) -> Option<Vec<u8>> {
    decode_run_pure(bytes)
}

/// [`decode_run`] with one reused `ruzstd` decoder.
#[cfg(any(test, not(feature = "c-zstd")))]
fn decode_run_pure(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() * 4);
    let mut dec = FrameDecoder::new();
    let mut src = bytes;
    while !src.is_empty() {
        dec.reset(&mut src).ok()?;
        if !dec
            .decode_blocks(&mut src, BlockDecodingStrategy::All)
            .ok()?
        {
            return None;
        }
        let start = out.len();
        dec.collect_to_writer(&mut out).ok()?;
        let checksum_ok = match (dec.get_checksum_from_data(), dec.get_calculated_checksum()) {
            (Some(stored), Some(computed)) => stored == computed,
            _ => true,
        };
        if !checksum_ok || out.len() == start || out.last() != Some(&b'\n') {
            return None;
        }
    }
    Some(out)
}

/// Decodes `bytes`, exactly the whole frames ending at `ends` (from [`whole_frame_ends`]), on
/// two threads when they are large: the frames are independent, so each half is decoded on its
/// own. `None` on any problem: use the sequential path.
fn decode_whole(bytes: &[u8], ends: &[usize]) -> Option<Vec<u8>> {
    if ends.last() != Some(&bytes.len()) {
        return None;
    }
    if bytes.len() >= PARALLEL_BYTES
        && std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
    {
        // The first frame boundary at or after the middle.
        let split = ends[ends.partition_point(|end| *end < bytes.len() / 2)];
        if split < bytes.len() {
            let (a, b) = bytes.split_at(split);
            let (first, second) = std::thread::scope(|scope| {
                let second = scope.spawn(|| decode_run(b));
                let first = decode_run(a);
                (first, second.join().ok().flatten())
            });
            let mut out = first?;
            out.extend_from_slice(&second?);
            return Some(out);
        }
    }
    decode_run(bytes)
}

/// The plain lines of `bytes` as a reader that decodes one frame at a time (libzstd), when the
/// log is whole frames only (the common case: no torn tail): a reader of the lines can parse
/// while later frames are still compressed, and the plain log is never held whole. The reader
/// fails (an I/O error) on a frame that does not decode, fails its checksum, is empty or does
/// not end in `\n`; the caller then reads with [`decode_frames`] for the precise error.
#[cfg(feature = "c-zstd")]
pub fn whole_frames_reader(bytes: &[u8]) -> Option<impl std::io::BufRead + '_> {
    let ends = whole_frame_ends(bytes);
    (!bytes.is_empty() && ends.last() == Some(&bytes.len())).then_some(())?;
    c::FrameReader::new(bytes)
}

/// Decompresses every frame, keeping where a torn final frame starts (see [`Frames`]).
///
/// The run of whole frames at the start (usually the whole log) is decoded first on the fast
/// path ([`decode_whole`]); the rest, if any — a torn final frame, or damage — is read frame by
/// frame with `ruzstd`. Should the fast path refuse the run, the whole log is read that way, so
/// errors name the same frame and problem with either backend.
pub fn decode_frames(bytes: &[u8]) -> Result<Frames, ZstdError> {
    let ends = whole_frame_ends(bytes);
    let whole = ends.last().copied().unwrap_or(0);
    match decode_whole(&bytes[..whole], &ends) {
        Some(plain) => decode_sequential(bytes, whole, ends.len(), plain),
        None => decode_sequential(bytes, 0, 0, Vec::new()),
    }
}

/// The sequential path of [`decode_frames`]: decodes the frames of `bytes` from offset `from`
/// (frame index `frame`) with `ruzstd`, after `out` (the frames before `from`).
fn decode_sequential(
    bytes: &[u8],
    from: usize,
    mut frame: usize,
    mut out: Vec<u8>,
) -> Result<Frames, ZstdError> {
    let mut rest = &bytes[from..];
    while !rest.is_empty() {
        let start = bytes.len() - rest.len();
        match next_frame(rest) {
            Next::Complete {
                data,
                checksum_ok,
                rest: r,
            } => {
                if !checksum_ok {
                    return Err(ZstdError::Checksum { frame });
                }
                if data.last().is_some_and(|b| *b != b'\n') {
                    return Err(ZstdError::PartialLine { frame });
                }
                out.extend_from_slice(&data);
                rest = r;
            }
            Next::Torn(partial) => {
                // The frame runs to the end of the file: a torn final frame. Keep its complete
                // lines (whatever was decoded up to the last '\n').
                let keep = partial
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                out.extend_from_slice(&partial[..keep]);
                return Ok(Frames {
                    plain: out,
                    torn: Some((start, partial[..keep].to_vec())),
                });
            }
            Next::Incomplete => return Err(ZstdError::Incomplete { frame }),
            Next::Bad(detail) => return Err(ZstdError::Decode { frame, detail }),
        }
        frame += 1;
    }
    Ok(Frames {
        plain: out,
        torn: None,
    })
}

/// C libzstd (the `zstd` crate): level-3 encoding and the fast decoding of whole frames.
#[cfg(feature = "c-zstd")]
#[path = "zstd_c.rs"]
mod c;

#[cfg(test)]
#[path = "zstd_tests.rs"]
mod tests;
