//! Trees: one object per directory (sorted entries: files with their blob id and executable
//! bit, symlinks with their target, files over the size limit recorded as skipped, and
//! subdirectories by tree id), so an unchanged directory is one shared object and a snapshot
//! with ten changed files writes ten blobs and the trees on their paths only.
//!
//! Encoding (`dshtree1\n`, then per entry): a kind byte, the name's length (u32 LE) and bytes,
//! then `f`/`x`: size (u64 LE) and the blob id; `l`: the target's length (u32 LE) and bytes;
//! `s`: the size (u64 LE); `d`: the tree id.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{CheckpointError, Result};
use crate::id::ObjectId;

const MAGIC: &[u8] = b"dshtree1\n";

/// One path of a snapshot (paths are workspace-relative bytes, `/`-separated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A regular file.
    File {
        /// Its content's blob.
        id: ObjectId,
        /// Its size.
        size: u64,
        /// Any execute bit set.
        executable: bool,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// The link's target, as stored in the link.
        target: Vec<u8>,
    },
    /// A file over the size limit: recorded, not stored.
    Skipped {
        /// Its size when seen.
        size: u64,
    },
}

impl Node {
    /// Whether two nodes are the same content (skipped files compare by size only).
    pub fn same(&self, other: &Node) -> bool {
        match (self, other) {
            (
                Node::File {
                    id: a,
                    executable: x,
                    ..
                },
                Node::File {
                    id: b,
                    executable: y,
                    ..
                },
            ) => a == b && x == y,
            _ => self == other,
        }
    }
}

/// A snapshot flattened: every non-directory path and every directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Files, symlinks and skipped files by relative path.
    pub entries: BTreeMap<Vec<u8>, Node>,
    /// Directories by relative path (the root is not listed).
    pub dirs: BTreeSet<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TreeEntry {
    Leaf(Node),
    Dir(ObjectId),
}

pub(crate) fn encode(entries: &[(Vec<u8>, TreeEntry)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + entries.len() * 64);
    out.extend_from_slice(MAGIC);
    for (name, e) in entries {
        let kind = match e {
            TreeEntry::Leaf(Node::File {
                executable: false, ..
            }) => b'f',
            TreeEntry::Leaf(Node::File {
                executable: true, ..
            }) => b'x',
            TreeEntry::Leaf(Node::Symlink { .. }) => b'l',
            TreeEntry::Leaf(Node::Skipped { .. }) => b's',
            TreeEntry::Dir(_) => b'd',
        };
        out.push(kind);
        put_bytes(&mut out, name);
        match e {
            TreeEntry::Leaf(Node::File { id, size, .. }) => {
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&id.0);
            }
            TreeEntry::Leaf(Node::Symlink { target }) => put_bytes(&mut out, target),
            TreeEntry::Leaf(Node::Skipped { size }) => out.extend_from_slice(&size.to_le_bytes()),
            TreeEntry::Dir(id) => out.extend_from_slice(&id.0),
        }
    }
    out
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b);
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(CheckpointError::Corrupt(
                "a tree object is truncated".into(),
            ));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<usize> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a) as usize)
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn id(&mut self) -> Result<ObjectId> {
        let mut a = [0u8; 32];
        a.copy_from_slice(self.take(32)?);
        Ok(ObjectId(a))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()?;
        Ok(self.take(n)?.to_vec())
    }
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<(Vec<u8>, TreeEntry)>> {
    let Some(body) = bytes.strip_prefix(MAGIC) else {
        return Err(CheckpointError::Corrupt("not a tree object".into()));
    };
    let mut r = Reader { b: body };
    let mut out = Vec::new();
    while !r.b.is_empty() {
        let kind = r.take(1)?[0];
        let name = r.bytes()?;
        let entry = match kind {
            b'f' | b'x' => {
                let size = r.u64()?;
                let id = r.id()?;
                TreeEntry::Leaf(Node::File {
                    id,
                    size,
                    executable: kind == b'x',
                })
            }
            b'l' => TreeEntry::Leaf(Node::Symlink { target: r.bytes()? }),
            b's' => TreeEntry::Leaf(Node::Skipped { size: r.u64()? }),
            b'd' => TreeEntry::Dir(r.id()?),
            other => {
                return Err(CheckpointError::Corrupt(format!(
                    "unknown tree entry kind {other}"
                )));
            }
        };
        out.push((name, entry));
    }
    Ok(out)
}

/// `a/b` from a directory path and a name.
pub(crate) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        return name.to_vec();
    }
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    p.extend_from_slice(dir);
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

/// Builds the tree objects of a flat manifest bottom-up; `put` stores one encoded tree and
/// returns its id. Returns the root tree's id.
pub(crate) fn build(
    manifest: &Manifest,
    mut put: impl FnMut(Vec<u8>) -> Result<ObjectId>,
) -> Result<ObjectId> {
    let mut children: BTreeMap<&[u8], Vec<(Vec<u8>, TreeEntry)>> = BTreeMap::new();
    children.insert(b"", Vec::new());
    for d in &manifest.dirs {
        children.entry(d.as_slice()).or_default();
    }
    for (path, node) in &manifest.entries {
        let (dir, name) = split(path);
        children
            .entry(dir)
            .or_default()
            .push((name.to_vec(), TreeEntry::Leaf(node.clone())));
    }
    // Deepest directories first, so each parent sees its children's ids.
    let mut dirs: Vec<&[u8]> = children.keys().copied().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(depth(d)));
    let mut root = None;
    for d in dirs {
        let mut entries = children.remove(d).unwrap_or_default();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let id = put(encode(&entries))?;
        if d.is_empty() {
            root = Some(id);
        } else {
            let (parent, name) = split(d);
            children
                .entry(parent)
                .or_default()
                .push((name.to_vec(), TreeEntry::Dir(id)));
        }
    }
    root.ok_or_else(|| CheckpointError::Corrupt("no root tree".into()))
}

fn depth(p: &[u8]) -> usize {
    if p.is_empty() {
        0
    } else {
        1 + p.iter().filter(|&&b| b == b'/').count()
    }
}

fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b"", path),
    }
}

/// Flattens the tree `root`; `get` reads one tree object.
pub(crate) fn flatten(
    root: ObjectId,
    mut get: impl FnMut(ObjectId) -> Result<Vec<u8>>,
) -> Result<Manifest> {
    let mut m = Manifest::default();
    let mut stack = vec![(Vec::new(), root)];
    while let Some((dir, id)) = stack.pop() {
        for (name, e) in decode(&get(id)?)? {
            let path = join(&dir, &name);
            match e {
                TreeEntry::Leaf(n) => {
                    m.entries.insert(path, n);
                }
                TreeEntry::Dir(sub) => {
                    m.dirs.insert(path.clone());
                    stack.push((path, sub));
                }
            }
        }
    }
    Ok(m)
}

/// Every object a tree reaches (its trees and blobs), for garbage collection.
pub(crate) fn reach(
    root: ObjectId,
    trees: &mut BTreeSet<ObjectId>,
    blobs: &mut BTreeSet<ObjectId>,
    mut get: impl FnMut(ObjectId) -> Result<Vec<u8>>,
) -> Result<()> {
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        if !trees.insert(id) {
            continue;
        }
        for (_, e) in decode(&get(id)?)? {
            match e {
                TreeEntry::Leaf(Node::File { id, .. }) => {
                    blobs.insert(id);
                }
                TreeEntry::Dir(sub) => stack.push(sub),
                TreeEntry::Leaf(_) => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn build_then_flatten_round_trips() {
        let mut m = Manifest::default();
        let f = |s: &[u8], x| Node::File {
            id: ObjectId::of(s),
            size: s.len() as u64,
            executable: x,
        };
        m.entries.insert(b"a.txt".to_vec(), f(b"a", false));
        m.entries.insert(b"bin/run".to_vec(), f(b"run", true));
        m.entries.insert(
            b"bin/link".to_vec(),
            Node::Symlink {
                target: b"run".to_vec(),
            },
        );
        m.entries
            .insert(b"deep/er/big".to_vec(), Node::Skipped { size: 1 << 30 });
        for d in ["bin", "deep", "deep/er", "empty"] {
            m.dirs.insert(d.as_bytes().to_vec());
        }
        let mut objects = HashMap::new();
        let root = build(&m, |bytes| {
            let id = ObjectId::of(&bytes);
            objects.insert(id, bytes);
            Ok(id)
        })
        .expect("build");
        let back = flatten(root, |id| {
            objects
                .get(&id)
                .cloned()
                .ok_or_else(|| CheckpointError::NotFound(id.hex()))
        })
        .expect("flatten");
        assert_eq!(back, m);
    }
}
