//! One opening at a time per session id.
//!
//! Two clients may resume the same stored session at the same moment (two UIs following a
//! rewind's fork, a prompt sent to a stored session while another client opens it). Each
//! checks whether the host already serves it and, if not, opens it, taking its write lock:
//! without this, the second opening finds the lock taken by the first and fails with
//! `SESSION_LOCKED` instead of joining the session the first just opened.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::OwnedMutexGuard;

/// The openings in progress, one lock per session id (removed when nobody waits on it).
#[derive(Default)]
pub(crate) struct Openings {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Held while one session id is being opened; the next opener of that id waits for it.
pub(crate) struct Opening<'a> {
    openings: &'a Openings,
    id: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Openings {
    /// Waits until no other opening of `id` is in progress, then holds it.
    pub(crate) async fn lock(&self, id: &str) -> Opening<'_> {
        let lock = self.locks.lock().entry(id.to_owned()).or_default().clone();
        let guard = lock.lock_owned().await;
        Opening {
            openings: self,
            id: id.to_owned(),
            guard: Some(guard),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks.lock().len()
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut locks = self.openings.locks.lock();
        drop(self.guard.take());
        // The map's own reference is the last one: nobody waits on this id.
        if locks
            .get(&self.id)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            locks.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_opening_of_one_id_waits_for_the_first() {
        let openings = Openings::default();
        let first = openings.lock("a").await;
        // Another id is not held up.
        drop(openings.lock("b").await);
        let second = openings.lock("a");
        tokio::pin!(second);
        assert!(
            futures::poll!(second.as_mut()).is_pending(),
            "the second opening of `a` went ahead of the first"
        );
        drop(first);
        let held = second.await;
        assert_eq!(openings.len(), 1);
        drop(held);
        assert_eq!(openings.len(), 0, "a lock nobody waits on is left behind");
    }
}
