//! C libzstd (the `zstd` crate): level-3 encoding and the fast decoding of whole frames.

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
