//! A connection's wake-up: what wakes its wait for input besides the socket (an invalidation message for
//! CLIENT TRACKING, CLIENT KILL, the server's shutdown).
//!
//! One waiter (the connection's task), any number of wakers, no lock: a flag and an `AtomicWaker`. The wait
//! is polled on every turn of the connection's loop, so its cost is per request: a `tokio::sync::Notify`
//! waiter takes the Notify's mutex at every poll and again when dropped, which made the three waits this
//! replaces about a tenth of an INCR's instructions (issue 41, docs/perf/request-cpu.md).

use futures_util::task::AtomicWaker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Wakeup {
    set: AtomicBool,
    waker: AtomicWaker,
}

impl Wakeup {
    /// Wakes the waiter, or the next wait if none waits now (the wake-up is kept until a wait takes it).
    pub fn wake(&self) {
        self.set.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Resolves once a [`Wakeup::wake`] happened since the last wait that resolved. Only one task may wait.
    pub async fn wait(&self) {
        std::future::poll_fn(|cx| self.poll_wait(cx)).await
    }

    fn poll_wait(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.set.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        // A wake between the first check and the registration would otherwise be missed.
        if self.set.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Wakeup;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_wake_before_the_wait_is_kept_and_taken_once() {
        let w = Wakeup::default();
        w.wake();
        w.wake();
        tokio::time::timeout(Duration::from_secs(5), w.wait()).await.expect("the kept wake-up resolves the wait");
        // Both wakes were taken by that one wait.
        assert!(tokio::time::timeout(Duration::from_millis(50), w.wait()).await.is_err());
    }

    #[tokio::test]
    async fn a_wake_from_another_thread_ends_a_wait_in_progress() {
        let w = Arc::new(Wakeup::default());
        let waker = w.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            waker.wake();
        });
        tokio::time::timeout(Duration::from_secs(5), w.wait()).await.expect("woken by the other thread");
        t.join().unwrap();
    }
}
