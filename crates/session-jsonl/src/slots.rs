//! The store's table of sessions open for write: one lock per writer.
//!
//! The table's own lock is held only to look a writer up or to change an entry, never through
//! I/O: one session's fsync, log read or repair does not hold up another session's appends.
//! A session being opened, closed, repaired or removed is [`Slot::Busy`] meanwhile; whoever
//! would have to wait for that (a second open, a create of the same id, a removal) waits on the
//! table's condition variable until the entry settles, so each of those steps is seen whole.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::StoreError;
use crate::store::Writer;

/// One session's entry.
#[derive(Debug)]
enum Slot {
    /// Opened, closed, repaired or removed right now (the entry settles when that ends).
    Busy,
    /// Open for write: its session directory (read without the writer's lock) and its writer.
    Open(PathBuf, Arc<Mutex<Writer>>),
}

type Map = HashMap<String, Slot>;

/// The sessions open for write in this store.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    map: Mutex<Map>,
    /// Signalled whenever a busy entry settles.
    settled: Condvar,
    /// Threads waiting for an entry to settle (for tests to know one waits).
    #[cfg(test)]
    pub(crate) waiting: std::sync::atomic::AtomicUsize,
}

impl Slots {
    /// The table, once `id`'s entry is not busy.
    fn settled(&self, id: &str) -> MutexGuard<'_, Map> {
        let mut map = self.map.lock();
        while matches!(map.get(id), Some(Slot::Busy)) {
            #[cfg(test)]
            self.waiting
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.settled.wait(&mut map);
            #[cfg(test)]
            self.waiting
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        map
    }

    /// The writer of `id` when it is open (not while it is opened or closed).
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Mutex<Writer>>> {
        match self.map.lock().get(id) {
            Some(Slot::Open(_, w)) => Some(w.clone()),
            _ => None,
        }
    }

    /// [`Self::get`] without waiting for the table's lock: `None` when it is held.
    pub(crate) fn try_get(&self, id: &str) -> Option<Option<Arc<Mutex<Writer>>>> {
        let map = self.map.try_lock()?;
        Some(match map.get(id) {
            Some(Slot::Open(_, w)) => Some(w.clone()),
            _ => None,
        })
    }

    /// The session directory of `id` when it is open (without waiting for its writer, which
    /// may be in an fsync).
    pub(crate) fn dir(&self, id: &str) -> Option<PathBuf> {
        match self.map.lock().get(id) {
            Some(Slot::Open(dir, _)) => Some(dir.clone()),
            _ => None,
        }
    }

    /// Whether `id` is open for write here (once any open or close of it has finished).
    pub(crate) fn is_open(&self, id: &str) -> bool {
        self.settled(id).contains_key(id)
    }

    /// The ids open for write.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.map.lock().keys().cloned().collect()
    }

    /// Enters a new session's writer; `Exists` when `id` is open or `stored()` says it is on
    /// disk (asked with the entry busy: two creates of one id cannot both pass, and the look
    /// on disk holds up no other session).
    pub(crate) fn create(
        &self,
        id: &str,
        writer: Writer,
        stored: impl FnOnce() -> bool,
    ) -> Result<(), StoreError> {
        let reservation = match self.reserve(id) {
            Err(StoreError::Locked(_)) => return Err(StoreError::Exists(id.to_owned())),
            r => r?,
        };
        if stored() {
            return Err(StoreError::Exists(id.to_owned()));
        }
        reservation.fill(writer);
        Ok(())
    }

    /// Marks `id` busy for an open, a repair or a removal in this process; `Locked` when it is
    /// open for write here. The entry settles when the reservation is filled or dropped.
    pub(crate) fn reserve(&self, id: &str) -> Result<Reservation<'_>, StoreError> {
        let mut map = self.settled(id);
        if map.contains_key(id) {
            return Err(StoreError::Locked(id.to_owned()));
        }
        map.insert(id.to_owned(), Slot::Busy);
        Ok(Reservation {
            slots: self,
            id: id.to_owned(),
        })
    }

    /// Starts closing `id`: its writer, with `id` busy until the reservation is dropped (after
    /// the last flush, so a new open waits for it). `None` when `id` is not open.
    pub(crate) fn begin_close(&self, id: &str) -> Option<(Reservation<'_>, Arc<Mutex<Writer>>)> {
        let mut map = self.settled(id);
        let Some(Slot::Open(_, w)) = map.insert(id.to_owned(), Slot::Busy) else {
            map.remove(id);
            return None;
        };
        Some((
            Reservation {
                slots: self,
                id: id.to_owned(),
            },
            w,
        ))
    }
}

/// A busy entry of [`Slots`]: settled when dropped (removed, unless filled with a writer).
#[derive(Debug)]
pub(crate) struct Reservation<'a> {
    slots: &'a Slots,
    id: String,
}

impl Reservation<'_> {
    /// The session is open: enters its writer.
    pub(crate) fn fill(self, writer: Writer) {
        let dir = writer.dir.clone();
        self.slots.map.lock().insert(
            self.id.clone(),
            Slot::Open(dir, Arc::new(Mutex::new(writer))),
        );
        // Dropped here: the entry is no longer busy, waiters are woken.
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut map = self.slots.map.lock();
        if matches!(map.get(&self.id), Some(Slot::Busy)) {
            map.remove(&self.id);
        }
        drop(map);
        self.slots.settled.notify_all();
    }
}
