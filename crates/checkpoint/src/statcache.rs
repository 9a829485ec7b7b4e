//! The stat cache: (path, size, mtime, ctime, inode, mode) → blob id, so an unchanged file is
//! not read again. An entry is trusted only when the file's mtime is older than the snapshot
//! that recorded it by a margin (the "racy git" rule: a write in the same clock tick as the
//! snapshot could leave the stat unchanged), otherwise the file is hashed again.

use std::collections::HashMap;
use std::path::Path;

use crate::id::ObjectId;

const MAGIC: &[u8] = b"dshstat1\n";

/// Times closer than this to the recording snapshot's start are not trusted (the kernel's file
/// times come from a coarse clock, a few milliseconds behind).
pub(crate) const RACY_NS: i64 = 50_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub mode: u32,
}

impl Stat {
    pub(crate) fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Stat {
            size: m.size(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000) + m.ctime_nsec(),
            ino: m.ino(),
            mode: m.mode(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub stat: Stat,
    /// Start of the snapshot that hashed or verified the file.
    pub recorded_ns: i64,
    pub id: ObjectId,
}

impl Entry {
    pub(crate) fn trusted_for(&self, stat: &Stat) -> bool {
        self.stat == *stat && stat.mtime_ns + RACY_NS < self.recorded_ns
    }
}

#[derive(Debug, Default)]
pub(crate) struct StatCache {
    pub entries: HashMap<Vec<u8>, Entry>,
}

impl StatCache {
    pub(crate) fn load(path: &Path) -> StatCache {
        let Ok(bytes) = std::fs::read(path) else {
            return StatCache::default();
        };
        decode(&bytes).unwrap_or_default()
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.entries.len() * 120);
        out.extend_from_slice(MAGIC);
        for (path, e) in &self.entries {
            let len = u32::try_from(path.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(path);
            out.extend_from_slice(&e.stat.size.to_le_bytes());
            out.extend_from_slice(&e.stat.mtime_ns.to_le_bytes());
            out.extend_from_slice(&e.stat.ctime_ns.to_le_bytes());
            out.extend_from_slice(&e.stat.ino.to_le_bytes());
            out.extend_from_slice(&e.stat.mode.to_le_bytes());
            out.extend_from_slice(&e.recorded_ns.to_le_bytes());
            out.extend_from_slice(&e.id.0);
        }
        out
    }
}

fn decode(bytes: &[u8]) -> Option<StatCache> {
    let mut b = bytes.strip_prefix(MAGIC)?;
    let mut entries = HashMap::new();
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (h, t) = b.split_at(n);
        *b = t;
        Some(h)
    }
    fn u64_(b: &mut &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(take(b, 8)?.try_into().ok()?))
    }
    fn i64_(b: &mut &[u8]) -> Option<i64> {
        Some(i64::from_le_bytes(take(b, 8)?.try_into().ok()?))
    }
    while !b.is_empty() {
        let len = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
        let path = take(&mut b, len)?.to_vec();
        let size = u64_(&mut b)?;
        let mtime_ns = i64_(&mut b)?;
        let ctime_ns = i64_(&mut b)?;
        let ino = u64_(&mut b)?;
        let mode = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?);
        let recorded_ns = i64_(&mut b)?;
        let id = ObjectId(take(&mut b, 32)?.try_into().ok()?);
        entries.insert(
            path,
            Entry {
                stat: Stat {
                    size,
                    mtime_ns,
                    ctime_ns,
                    ino,
                    mode,
                },
                recorded_ns,
                id,
            },
        );
    }
    Some(StatCache { entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes() {
        let mut c = StatCache::default();
        let stat = Stat {
            size: 3,
            mtime_ns: 10,
            ctime_ns: 11,
            ino: 12,
            mode: 0o100644,
        };
        c.entries.insert(
            b"a/b".to_vec(),
            Entry {
                stat,
                recorded_ns: 99,
                id: ObjectId::of(b"abc"),
            },
        );
        let back = decode(&c.encode()).expect("decodes");
        let e = back.entries.get(b"a/b".as_slice()).expect("entry");
        assert_eq!(e.stat, stat);
        assert_eq!(e.id, ObjectId::of(b"abc"));
        assert!(
            !e.trusted_for(&stat),
            "recorded too close to the file's times"
        );
        let old = Entry {
            recorded_ns: 10 + RACY_NS + 12,
            ..*e
        };
        assert!(old.trusted_for(&stat));
        assert!(!old.trusted_for(&Stat { size: 4, ..stat }));
    }
}
