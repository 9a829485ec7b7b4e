//! The index: the last snapshot's listing (every file, link, skipped file and directory, sorted
//! by path), each file with its stat ((size, mtime, ctime, inode, mode) → blob id), and the
//! root tree id of that listing. A file whose stat is unchanged is not read again, and a
//! listing equal to the index's is answered by its root without building a tree: an unchanged
//! workspace costs one walk, in this process or a new one.
//!
//! A stat entry is trusted only when the file's mtime is older than the snapshot that recorded
//! it by a margin (the "racy git" rule: a write in the same clock tick as the snapshot could
//! leave the stat unchanged), otherwise the file is hashed again.
//!
//! On disk (`statcache`): `dshstat2\n`, a root flag byte and id, then the entries (a kind
//! byte, the path's length (u32 LE) and bytes, then `f`: size, mtime, ctime, inode (u64/i64
//! LE), mode (u32 LE), recorded (i64 LE), blob id; `l`: the target's length and bytes; `s`: the
//! size; `d`: nothing). The first format (`dshstat1\n`: files only, no root) is still read.

use std::path::Path;

use crate::id::ObjectId;
use crate::tree::{Manifest, Node};

const MAGIC_V1: &[u8] = b"dshstat1\n";
const MAGIC: &[u8] = b"dshstat2\n";

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

/// A regular file as last seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub stat: Stat,
    /// Start of the snapshot that hashed or verified the file.
    pub recorded_ns: i64,
    pub id: ObjectId,
}

impl FileEntry {
    pub(crate) fn trusted_for(&self, stat: &Stat) -> bool {
        self.stat == *stat && stat.mtime_ns + RACY_NS < self.recorded_ns
    }
}

/// One non-directory path of the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum IndexNode {
    File(FileEntry),
    Symlink(Vec<u8>),
    Skipped(u64),
}

impl IndexNode {
    /// What a snapshot holds for it.
    pub(crate) fn node(&self) -> Node {
        match self {
            IndexNode::File(f) => Node::File {
                id: f.id,
                size: f.stat.size,
                executable: f.stat.mode & 0o111 != 0,
            },
            IndexNode::Symlink(t) => Node::Symlink { target: t.clone() },
            IndexNode::Skipped(size) => Node::Skipped { size: *size },
        }
    }

    /// Whether a snapshot holds the same for both (a file's stat and time may differ).
    fn same_node(&self, other: &IndexNode) -> bool {
        match (self, other) {
            (IndexNode::File(a), IndexNode::File(b)) => {
                a.id == b.id
                    && a.stat.size == b.stat.size
                    && (a.stat.mode & 0o111 != 0) == (b.stat.mode & 0o111 != 0)
            }
            _ => self == other,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Index {
    /// The tree of exactly this listing (`None`: not known, e.g. read from the first format).
    pub root: Option<ObjectId>,
    /// Sorted by path.
    pub entries: Vec<(Vec<u8>, IndexNode)>,
    /// Sorted.
    pub dirs: Vec<Vec<u8>>,
}

impl Index {
    pub(crate) fn load(path: &Path) -> Index {
        let Ok(bytes) = std::fs::read(path) else {
            return Index::default();
        };
        let decoded = if bytes.starts_with(MAGIC) {
            decode(&bytes[MAGIC.len()..])
        } else if bytes.starts_with(MAGIC_V1) {
            decode_v1(&bytes[MAGIC_V1.len()..])
        } else {
            None
        };
        decoded.unwrap_or_else(|| {
            tracing::warn!(path = %path.display(), "checkpoint: the stat cache is unreadable; files are hashed again");
            Index::default()
        })
    }

    /// Where `path` is in `entries`.
    pub(crate) fn position(&self, path: &[u8]) -> Option<usize> {
        self.entries
            .binary_search_by(|(p, _)| p.as_slice().cmp(path))
            .ok()
    }

    /// The entry of a regular file.
    #[cfg(test)]
    fn file(&self, path: &[u8]) -> Option<&FileEntry> {
        match &self.entries.get(self.position(path)?)?.1 {
            IndexNode::File(f) => Some(f),
            _ => None,
        }
    }

    /// Whether a snapshot of `entries` and `dirs` (sorted) is the snapshot this index lists.
    pub(crate) fn same_listing(&self, entries: &[(Vec<u8>, IndexNode)], dirs: &[Vec<u8>]) -> bool {
        self.dirs == dirs
            && self.entries.len() == entries.len()
            && self
                .entries
                .iter()
                .zip(entries)
                .all(|((pa, a), (pb, b))| pa == pb && a.same_node(b))
    }

    /// The snapshot this index lists.
    pub(crate) fn manifest(&self) -> Manifest {
        Manifest {
            entries: self
                .entries
                .iter()
                .map(|(p, n)| (p.clone(), n.node()))
                .collect(),
            dirs: self.dirs.iter().cloned().collect(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.entries.len() * 100 + self.dirs.len() * 32);
        out.extend_from_slice(MAGIC);
        match self.root {
            Some(id) => {
                out.push(1);
                out.extend_from_slice(&id.0);
            }
            None => out.push(0),
        }
        for (path, node) in &self.entries {
            let kind = match node {
                IndexNode::File(_) => b'f',
                IndexNode::Symlink(_) => b'l',
                IndexNode::Skipped(_) => b's',
            };
            out.push(kind);
            put_bytes(&mut out, path);
            match node {
                IndexNode::File(e) => {
                    out.extend_from_slice(&e.stat.size.to_le_bytes());
                    out.extend_from_slice(&e.stat.mtime_ns.to_le_bytes());
                    out.extend_from_slice(&e.stat.ctime_ns.to_le_bytes());
                    out.extend_from_slice(&e.stat.ino.to_le_bytes());
                    out.extend_from_slice(&e.stat.mode.to_le_bytes());
                    out.extend_from_slice(&e.recorded_ns.to_le_bytes());
                    out.extend_from_slice(&e.id.0);
                }
                IndexNode::Symlink(target) => put_bytes(&mut out, target),
                IndexNode::Skipped(size) => out.extend_from_slice(&size.to_le_bytes()),
            }
        }
        for d in &self.dirs {
            out.push(b'd');
            put_bytes(&mut out, d);
        }
        out
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Some(h)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        Some(self.take(n)?.to_vec())
    }
    fn file(&mut self) -> Option<FileEntry> {
        let stat = Stat {
            size: self.u64()?,
            mtime_ns: self.i64()?,
            ctime_ns: self.i64()?,
            ino: self.u64()?,
            mode: self.u32()?,
        };
        Some(FileEntry {
            stat,
            recorded_ns: self.i64()?,
            id: ObjectId(self.array()?),
        })
    }
}

fn decode(bytes: &[u8]) -> Option<Index> {
    let mut r = Reader(bytes);
    let root = match r.take(1)?[0] {
        0 => None,
        1 => Some(ObjectId(r.array()?)),
        _ => return None,
    };
    let mut index = Index {
        root,
        ..Index::default()
    };
    while !r.0.is_empty() {
        let kind = r.take(1)?[0];
        let path = r.bytes()?;
        let node = match kind {
            b'f' => IndexNode::File(r.file()?),
            b'l' => IndexNode::Symlink(r.bytes()?),
            b's' => IndexNode::Skipped(r.u64()?),
            b'd' => {
                index.dirs.push(path);
                continue;
            }
            _ => return None,
        };
        index.entries.push((path, node));
    }
    // Written sorted; a file edited by hand or a bug must not break the binary search.
    if !index.entries.is_sorted_by(|a, b| a.0 < b.0) {
        index.entries.sort_by(|a, b| a.0.cmp(&b.0));
        index.entries.dedup_by(|a, b| a.0 == b.0);
        index.root = None;
    }
    if !index.dirs.is_sorted() {
        index.dirs.sort();
        index.root = None;
    }
    Some(index)
}

/// The first format: files only, in hash-map order, no root.
fn decode_v1(bytes: &[u8]) -> Option<Index> {
    let mut r = Reader(bytes);
    let mut entries = Vec::new();
    while !r.0.is_empty() {
        let path = r.bytes()?;
        entries.push((path, IndexNode::File(r.file()?)));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    Some(Index {
        root: None,
        entries,
        dirs: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat() -> Stat {
        Stat {
            size: 3,
            mtime_ns: 10,
            ctime_ns: 11,
            ino: 12,
            mode: 0o100644,
        }
    }

    #[test]
    fn encodes_and_decodes() {
        let file = FileEntry {
            stat: stat(),
            recorded_ns: 99,
            id: ObjectId::of(b"abc"),
        };
        let index = Index {
            root: Some(ObjectId::of(b"root")),
            entries: vec![
                (b"a/b".to_vec(), IndexNode::File(file)),
                (b"a/c".to_vec(), IndexNode::Symlink(b"b".to_vec())),
                (b"big".to_vec(), IndexNode::Skipped(1 << 40)),
            ],
            dirs: vec![b"a".to_vec()],
        };
        let back = decode(&index.encode()[MAGIC.len()..]).expect("decodes");
        assert_eq!(back.root, index.root);
        assert_eq!(back.entries, index.entries);
        assert_eq!(back.dirs, index.dirs);
        let e = back.file(b"a/b").expect("entry");
        assert_eq!(e.id, ObjectId::of(b"abc"));
        assert!(back.file(b"a/c").is_none(), "a link is not a file");
        assert!(
            !e.trusted_for(&stat()),
            "recorded too close to the file's times"
        );
        let old = FileEntry {
            recorded_ns: 10 + RACY_NS + 12,
            ..*e
        };
        assert!(old.trusted_for(&stat()));
        assert!(!old.trusted_for(&Stat { size: 4, ..stat() }));
    }

    #[test]
    fn the_first_format_is_still_read() {
        let mut v1 = Vec::new();
        for (path, id) in [(&b"z"[..], b"1"), (b"a", b"2")] {
            v1.extend_from_slice(&(path.len() as u32).to_le_bytes());
            v1.extend_from_slice(path);
            for n in [3u64, 10, 11, 12] {
                v1.extend_from_slice(&n.to_le_bytes());
            }
            v1.extend_from_slice(&0o100644u32.to_le_bytes());
            v1.extend_from_slice(&99i64.to_le_bytes());
            v1.extend_from_slice(&ObjectId::of(id).0);
        }
        let index = decode_v1(&v1).expect("decodes");
        assert_eq!(index.root, None);
        assert_eq!(index.file(b"a").map(|f| f.id), Some(ObjectId::of(b"2")));
        assert_eq!(index.file(b"z").map(|f| f.stat), Some(stat()));
    }
}
