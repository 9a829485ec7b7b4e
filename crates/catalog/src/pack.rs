//! Indexed texts as stored: compressed, one blob per document in `docs_text`. The full-text
//! index keeps no copy of them (an external-content FTS5 table over the view `docs_body`, which
//! unpacks each blob with the SQL function `catalog_unpack`): snippets, highlights and deletes
//! read them back through the view.
//!
//! A blob is one tag byte then the text: [`RAW`] (stored as is: short texts, where a zstd frame
//! would not save anything) or [`ZSTD`] (one zstd frame holding its content size).

use std::cell::RefCell;

use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;

/// The text follows as UTF-8.
const RAW: u8 = 0;
/// A zstd frame follows.
const ZSTD: u8 = 1;
/// Texts shorter than this are stored raw.
const MIN_PACKED: usize = 64;
/// The zstd level (small texts: higher levels cost little and save a few percent).
const LEVEL: i32 = 9;
/// The largest text unpacked (indexed texts are cut far below this).
const MAX_UNPACKED: usize = 1 << 20;

/// Why a stored blob could not be unpacked (a damaged catalog).
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The blob is empty or has an unknown tag.
    #[error("an indexed text has an unknown encoding (tag {0:?})")]
    Tag(Option<u8>),
    /// The zstd frame is damaged.
    #[error("an indexed text cannot be decompressed: {0}")]
    Zstd(#[source] std::io::Error),
    /// The text is not UTF-8.
    #[error("an indexed text is not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
}

thread_local! {
    /// One compression context per thread, kept: making one per text (`zstd::bulk::compress`)
    /// cost more than compressing the text.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

fn compress(text: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        c.as_mut()?.compress(text).ok()
    })
}

/// The blob stored for `text`.
pub(crate) fn pack(text: &str) -> Vec<u8> {
    if text.len() >= MIN_PACKED
        && let Some(z) = compress(text.as_bytes())
        && z.len() + 1 < text.len()
    {
        let mut out = Vec::with_capacity(z.len() + 1);
        out.push(ZSTD);
        out.extend_from_slice(&z);
        return out;
    }
    let mut out = Vec::with_capacity(text.len() + 1);
    out.push(RAW);
    out.extend_from_slice(text.as_bytes());
    out
}

/// The text of a blob made by [`pack`].
pub(crate) fn unpack(blob: &[u8]) -> Result<String, UnpackError> {
    match blob.split_first() {
        Some((&RAW, rest)) => Ok(String::from_utf8(rest.to_vec())?),
        Some((&ZSTD, rest)) => {
            let bytes = zstd::bulk::decompress(rest, MAX_UNPACKED).map_err(UnpackError::Zstd)?;
            Ok(String::from_utf8(bytes)?)
        }
        Some((&tag, _)) => Err(UnpackError::Tag(Some(tag))),
        None => Err(UnpackError::Tag(None)),
    }
}

/// Registers `catalog_unpack(blob) -> text` on a connection (every connection reading
/// `docs_body` needs it; the catalog's own connections have it).
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        "catalog_unpack",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let blob = ctx.get_raw(0).as_blob()?;
            unpack(blob).map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_round_trip_short_raw_and_long_compressed() {
        let short = "cargo test";
        assert_eq!(pack(short)[0], RAW);
        assert_eq!(unpack(&pack(short)).unwrap(), short);
        let long = "the resize handler ignored the new width; ".repeat(20);
        let packed = pack(&long);
        assert_eq!(packed[0], ZSTD);
        assert!(packed.len() < long.len() / 4, "{}", packed.len());
        assert_eq!(unpack(&packed).unwrap(), long);
        assert!(matches!(unpack(&[]), Err(UnpackError::Tag(None))));
        assert!(matches!(unpack(&[7, 1]), Err(UnpackError::Tag(Some(7)))));
        assert!(matches!(unpack(&[ZSTD, 1, 2]), Err(UnpackError::Zstd(_))));
    }
}
