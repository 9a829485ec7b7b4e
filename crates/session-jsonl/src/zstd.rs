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
mod c {
    use std::io::Cursor;

    use ::zstd::zstd_safe::{self, CCtx, CParameter, DCtx, ErrorCode};

    /// The original harness's compression level.
    pub(super) const LEVEL: i32 = 3;

    /// The largest block content (zstd's `ZSTD_BLOCKSIZE_MAX`): a frame of `n` blocks decodes
    /// to at most `n` times this.
    const BLOCK_MAX: usize = 128 * 1024;

    /// libzstd refused to encode.
    #[derive(Debug, thiserror::Error)]
    pub(super) enum EncodeError {
        /// No compression context could be allocated.
        #[error("libzstd could not allocate a compression context")]
        Context,
        /// libzstd returned an error code.
        #[error("libzstd: {0}")]
        Zstd(&'static str),
    }

    impl From<ErrorCode> for EncodeError {
        fn from(code: ErrorCode) -> Self {
            Self::Zstd(zstd_safe::get_error_name(code))
        }
    }

    /// A compression context with the frame parameters, created at its first frame.
    #[derive(Default)]
    pub(super) struct Encoder {
        cctx: Option<CCtx<'static>>,
    }

    impl Encoder {
        /// Appends one frame holding `plain` to `out`: level 3, content checksum, no content
        /// size (hence not single-segment), no dictionary id: descriptor `0x04`. On error `out`
        /// is left as it was (and the context is dropped).
        pub(super) fn encode_frame(
            &mut self,
            plain: &[u8],
            out: &mut Vec<u8>,
        ) -> Result<(), EncodeError> {
            let start = out.len();
            let encoded = self.encode_into(plain, out);
            if encoded.is_err() {
                out.truncate(start);
                self.cctx = None;
            }
            encoded
        }

        fn encode_into(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
            let cctx = match &mut self.cctx {
                Some(cctx) => cctx,
                None => self.cctx.insert(new_context()?),
            };
            encode_with(cctx, plain, out)
        }
    }

    fn new_context() -> Result<CCtx<'static>, EncodeError> {
        let mut cctx = CCtx::try_create().ok_or(EncodeError::Context)?;
        cctx.set_parameter(CParameter::CompressionLevel(LEVEL))?;
        cctx.set_parameter(CParameter::ChecksumFlag(true))?;
        cctx.set_parameter(CParameter::ContentSizeFlag(false))?;
        cctx.set_parameter(CParameter::DictIdFlag(false))?;
        Ok(cctx)
    }

    /// One frame with `cctx` (`compress2` starts a new frame: parameters stay, data does not).
    fn encode_with(
        cctx: &mut CCtx<'static>,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let start = out.len();
        out.reserve(zstd_safe::compress_bound(plain.len()));
        // One-shot, in place after what `out` holds (the bound is reserved).
        let mut cursor = Cursor::new(out);
        cursor.set_position(start as u64);
        cctx.compress2(&mut cursor, plain)?;
        Ok(())
    }

    /// [`super::encode_frame_with`] with libzstd's streaming encoder, same parameters as
    /// [`encode_frame`]. On error `out` is left as it was.
    pub(super) fn encode_frame_with<F>(write: F, out: &mut Vec<u8>) -> std::io::Result<()>
    where
        F: FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    {
        let start = out.len();
        let encoded = (|| {
            let mut enc = ::zstd::stream::write::Encoder::new(&mut *out, LEVEL)?;
            enc.include_checksum(true)?;
            enc.include_contentsize(false)?;
            enc.include_dictid(false)?;
            {
                let mut w = std::io::BufWriter::with_capacity(super::PIPE_CHUNK, &mut enc);
                write(&mut w)?;
                std::io::Write::flush(&mut w)?;
            }
            enc.finish()?;
            Ok(())
        })();
        if encoded.is_err() {
            out.truncate(start);
        }
        encoded
    }

    /// The lines of whole frames, decoded one frame at a time (see
    /// [`super::whole_frames_reader`]).
    pub(super) struct FrameReader<'a> {
        rest: &'a [u8],
        dctx: DCtx<'static>,
        buf: Vec<u8>,
        at: usize,
    }

    impl<'a> FrameReader<'a> {
        pub(super) fn new(bytes: &'a [u8]) -> Option<Self> {
            Some(FrameReader {
                rest: bytes,
                dctx: DCtx::try_create()?,
                buf: Vec::new(),
                at: 0,
            })
        }
    }

    impl std::io::BufRead for FrameReader<'_> {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.at == self.buf.len() && !self.rest.is_empty() {
                let bad = |what: &str| std::io::Error::other(format!("zstd frame {what}"));
                let (len, blocks) =
                    super::frame_extent(self.rest).ok_or_else(|| bad("is not whole"))?;
                let (frame, rest) = self.rest.split_at(len);
                self.buf.clear();
                self.at = 0;
                self.buf.reserve(
                    blocks
                        .checked_mul(BLOCK_MAX)
                        .ok_or_else(|| bad("is too large"))?,
                );
                let mut cursor = Cursor::new(&mut self.buf);
                self.dctx
                    .decompress(&mut cursor, frame)
                    .map_err(|code| bad(zstd_safe::get_error_name(code)))?;
                if self.buf.last() != Some(&b'\n') {
                    return Err(bad("does not end a line"));
                }
                self.rest = rest;
            }
            Ok(&self.buf[self.at..])
        }

        fn consume(&mut self, n: usize) {
            self.at = (self.at + n).min(self.buf.len());
        }
    }

    impl std::io::Read for FrameReader<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let avail = std::io::BufRead::fill_buf(self)?;
            let n = avail.len().min(out.len());
            out[..n].copy_from_slice(&avail[..n]);
            std::io::BufRead::consume(self, n);
            Ok(n)
        }
    }

    /// Decodes the whole frames `bytes` into one buffer with one reused context, each frame
    /// written in place (one-shot: it needs the output room up front, which the block count
    /// bounds). `None` on any problem: a checksum mismatch (libzstd verifies it), a decoding
    /// error, an empty frame or one not ending in `\n`.
    pub(super) fn decode_run(bytes: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(bytes.len() * 6);
        let mut dctx = DCtx::try_create()?;
        let mut src = bytes;
        while !src.is_empty() {
            let (len, blocks) = super::frame_extent(src)?;
            let (frame, rest) = src.split_at(len);
            let start = out.len();
            out.reserve(blocks.checked_mul(BLOCK_MAX)?);
            let mut cursor = Cursor::new(&mut out);
            cursor.set_position(start as u64);
            dctx.decompress(&mut cursor, frame).ok()?;
            if out.len() == start || out.last() != Some(&b'\n') {
                return None;
            }
            src = rest;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
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

    type LineWriter<'a> =
        Box<dyn FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'a>;

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
}
