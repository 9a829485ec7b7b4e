//! One captured output stream.

use std::path::PathBuf;

/// One output stream of a run: the tail kept in memory, the total size, and where the full
/// stream was spilled when it did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedStream {
    /// The last bytes of the stream (at most the executor's per-stream cap). Raw bytes: the
    /// command may write anything, including invalid UTF-8.
    pub tail: Vec<u8>,
    /// Bytes the command wrote to the stream in total.
    pub total_bytes: u64,
    /// The stream was longer than the in-memory cap, so `tail` is not the whole stream.
    pub truncated: bool,
    /// The private file holding the whole stream, when the stream was truncated and the spill
    /// succeeded (it is `None` when the stream exceeded the spill cap or the file could not be
    /// written).
    pub spill_path: Option<PathBuf>,
    /// Why there is no spill file although the stream was truncated (`None` when it was
    /// spilled, or not truncated).
    pub spill_skipped: Option<SpillSkipped>,
}

/// Why a truncated stream has no spill file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillSkipped {
    /// The stream alone was longer than the per-stream spill cap (its incomplete spill was
    /// discarded).
    StreamCap {
        /// The per-stream cap, in bytes.
        cap: u64,
    },
    /// Writing it would have taken the session's spill files past their total cap.
    SessionCap {
        /// The session's cap, in bytes.
        cap: u64,
    },
    /// No spill directory, or the file could not be written.
    Unavailable,
}

impl CapturedStream {
    /// The tail as text: invalid UTF-8 becomes U+FFFD, and when the stream was truncated the
    /// partial character the cut may have left at the start is dropped.
    pub fn text(&self) -> String {
        let mut bytes = self.tail.as_slice();
        if self.truncated {
            // Skip at most three UTF-8 continuation bytes left over from a character the
            // tail cut through.
            let skip = bytes
                .iter()
                .take(3)
                .take_while(|b| (**b & 0xC0) == 0x80)
                .count();
            bytes = &bytes[skip..];
        }
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// True when the command wrote nothing to the stream.
    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_drops_cut_character_only_when_truncated() {
        // "é" is C3 A9; a tail cut through it starts with A9.
        let cut = CapturedStream {
            tail: vec![0xA9, b'o', b'k'],
            total_bytes: 10,
            truncated: true,
            ..Default::default()
        };
        assert_eq!(cut.text(), "ok");
        let whole = CapturedStream {
            tail: vec![0xA9, b'o', b'k'],
            total_bytes: 3,
            truncated: false,
            ..Default::default()
        };
        assert_eq!(whole.text(), "\u{FFFD}ok");
    }

    #[test]
    fn binary_is_lossy_text() {
        let s = CapturedStream {
            tail: vec![0, 0xFF, b'a'],
            total_bytes: 3,
            ..Default::default()
        };
        assert_eq!(s.text(), "\0\u{FFFD}a");
    }
}
