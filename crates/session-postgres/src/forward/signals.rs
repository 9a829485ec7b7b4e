//! Hints: PostgreSQL notifications (LISTEN on a connection of its own) turned into wake-ups of
//! the tasks waiting on a key. A hint only makes a waiter look at the tables again; every
//! waiter also looks every poll interval, so a lost notification (a reconnect, a proxy without
//! LISTEN, notifications turned off) costs latency, never correctness.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, Config, NoTls};

/// What a hint is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// Ops for this host were queued.
    Ops,
    /// An op was answered.
    Op(i64),
    /// A session committed a batch or released its lease.
    Session(String),
}

/// How many keys the map holds before the ones nobody waits on are dropped.
const PRUNE_AT: usize = 256;

/// Wake-up counters by key.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    keys: Mutex<HashMap<Key, watch::Sender<u64>>>,
}

impl Signals {
    /// A receiver of `key`'s hints (mark it seen before looking, then wait for a change).
    pub(crate) fn watch(&self, key: Key) -> watch::Receiver<u64> {
        let mut keys = self.keys.lock();
        // Keys whose waiters are gone and that no hint came for (an op answered while the
        // notifications were off) go now and then.
        if keys.len() >= PRUNE_AT {
            keys.retain(|_, tx| tx.receiver_count() > 0);
        }
        keys.entry(key)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Wakes the waiters of `key`.
    pub(crate) fn hint(&self, key: &Key) {
        let mut keys = self.keys.lock();
        if let Some(tx) = keys.get(key) {
            if tx.receiver_count() == 0 {
                keys.remove(key);
            } else {
                tx.send_modify(|n| *n += 1);
            }
        }
    }

    /// Wakes every waiter (notifications may have been missed).
    pub(crate) fn hint_all(&self) {
        let mut keys = self.keys.lock();
        keys.retain(|_, tx| tx.receiver_count() > 0);
        for tx in keys.values() {
            tx.send_modify(|n| *n += 1);
        }
    }
}

/// Waits for a hint on `rx` or `poll`, whichever comes first.
pub(crate) async fn wait(rx: &mut watch::Receiver<u64>, poll: Duration) {
    let _ = tokio::time::timeout(poll, rx.changed()).await;
}

/// Listens on the forwarding channels until the process ends, reconnecting with backoff; after
/// each (re)connect every waiter is woken, since notifications sent while no connection
/// listened are lost. `me` gives this host's owner id (ops for other owners are not hints).
pub(crate) async fn listen(
    config: Config,
    signals: Arc<Signals>,
    me: Arc<dyn Fn() -> Option<String> + Send + Sync>,
) {
    let mut pause = Duration::from_millis(100);
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(m) = messages.next().await {
                        match m {
                            Ok(AsyncMessage::Notification(n)) => {
                                if tx.send(n).is_err() {
                                    return;
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!("forwarding hints: the connection ended: {e}");
                                return;
                            }
                        }
                    }
                });
                match client.batch_execute(super::sql::LISTEN).await {
                    Ok(()) => {
                        pause = Duration::from_millis(100);
                        signals.hint_all();
                        while let Some(n) = rx.recv().await {
                            let key = match n.channel() {
                                "dsh_ops" if me().as_deref() == Some(n.payload()) => Key::Ops,
                                "dsh_op_done" => match n.payload().parse() {
                                    Ok(id) => Key::Op(id),
                                    Err(_) => continue,
                                },
                                "dsh_commits" => Key::Session(n.payload().to_owned()),
                                _ => continue,
                            };
                            signals.hint(&key);
                        }
                        tracing::info!("forwarding hints: connection lost; reconnecting");
                    }
                    Err(e) => tracing::warn!("forwarding hints: LISTEN failed: {e}"),
                }
                driver.abort();
                drop(client);
            }
            Err(e) => tracing::warn!("forwarding hints: cannot connect: {e}"),
        }
        // Whatever was notified meanwhile is lost: everyone looks again.
        signals.hint_all();
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_wakes_the_waiters_of_its_key_only() {
        let s = Signals::default();
        let mut a = s.watch(Key::Session("a".into()));
        let mut b = s.watch(Key::Session("b".into()));
        a.borrow_and_update();
        b.borrow_and_update();
        s.hint(&Key::Session("a".into()));
        assert!(a.has_changed().unwrap());
        assert!(!b.has_changed().unwrap());
        s.hint_all();
        assert!(b.has_changed().unwrap());
    }

    #[test]
    fn keys_nobody_waits_on_go() {
        let s = Signals::default();
        drop(s.watch(Key::Op(1)));
        s.hint(&Key::Op(1));
        assert!(s.keys.lock().is_empty());
        for i in 0..(PRUNE_AT as i64) {
            drop(s.watch(Key::Op(i)));
        }
        let _kept = s.watch(Key::Ops);
        assert_eq!(s.keys.lock().len(), 1);
    }
}
