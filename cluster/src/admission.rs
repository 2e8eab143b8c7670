//! Admission of unauthenticated connections to the handshake.
//!
//! A worker runs at most [`MAX_HANDSHAKES`] handshakes at once, so idle or hostile peers cannot
//! hold its memory or its connection slots. A connection that finds them all taken:
//!
//! * evicts the oldest **silent** handshake (one whose peer has not sent its hello) if the set
//!   is stuck: that handshake has run for [`EVICTABLE_AFTER`] and no handshake has succeeded
//!   for as long, and it still is a [`GRACE`] later; it then takes its place;
//! * otherwise waits, newest first, for a slot: one freed by a handshake that ends (every one
//!   ends by its deadline), or one it may evict once the set is stuck.
//!
//! Age alone does not tell a stalled peer from an honest one on a busy machine: a team of 125
//! loopback workers on 2 cores links 7,750 pairs at once (each worker takes up to 124 links),
//! and measured there an honest handshake took up to 1.2 s (median 0.26 s), and evicting at an
//! age of 500 ms broke formations. An honest client sends its hello as it connects, though, and
//! honest handshakes succeed as they go (a peer without the secret can never make one succeed):
//! so a peer that said hello, or a set in which handshakes succeed, is left to its deadline,
//! and a member's link is never evicted (there, evicting the silent at 500 ms without the grace
//! still broke formations: a process paused longer finds its timers due before the hellos it
//! has received are read). A flood of silent connections keeps a new peer out for at most
//! [`EVICTABLE_AFTER`] and the grace: the newest waiter is served first and evicts the flood's
//! oldest. At most [`MAX_WAITING`] connections wait; past that the one that has waited longest
//! is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Handshakes a worker runs at once.
pub const MAX_HANDSHAKES: usize = 32;
/// Connections waiting for a handshake slot, at most.
pub const MAX_WAITING: usize = 224;
/// How long a full set of handshakes must have gone without a success, and its oldest have
/// run, before the oldest may be evicted to make room.
pub const EVICTABLE_AFTER: Duration = Duration::from_secs(1);
/// How long a set must stay stuck, once seen stuck, before its oldest silent handshake goes.
pub const GRACE: Duration = Duration::from_millis(100);

/// Why a connection lost its place before its handshake finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Its handshake was evicted for a newer connection.
    #[error(
        "evicted: the oldest of a full set of handshakes, none of which succeeded for {} ms",
        EVICTABLE_AFTER.as_millis()
    )]
    Evicted,
    /// It waited longest in a full queue when another connection came.
    #[error("dropped: the longest waiting of {MAX_WAITING} connections queued for a handshake")]
    Dropped,
    /// No slot came free in time.
    #[error("no handshake slot within {} ms", .0.as_millis())]
    Timeout(Duration),
}

/// A worker's handshakes and the connections waiting for one.
#[derive(Debug, Default)]
pub struct Admission {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    /// In the handshake, oldest first.
    running: VecDeque<Running>,
    /// Waiting for a slot: id, signal; newest last.
    waiting: Vec<(u64, Arc<Notify>)>,
    /// When a handshake last succeeded.
    success: Option<Instant>,
}

/// A handshake in progress.
#[derive(Debug)]
struct Running {
    id: u64,
    admitted: Instant,
    /// The peer sent its hello.
    greeted: bool,
    signal: Arc<Notify>,
}

impl State {
    fn admit(&mut self, id: u64, now: Instant, signal: Arc<Notify>) {
        self.running.push_back(Running {
            id,
            admitted: now,
            greeted: false,
            signal,
        });
    }

    /// The oldest silent handshake.
    fn silent(&self) -> Option<usize> {
        self.running.iter().position(|r| !r.greeted)
    }

    fn evict(&mut self, id: u64) {
        let at = self.running.iter().position(|r| r.id == id);
        if let Some(r) = at.and_then(|at| self.running.remove(at)) {
            // Stores a permit: the handshake ends even if it is not listening yet.
            r.signal.notify_one();
        }
    }

    /// When the set becomes stuck, if it stays without a success and its oldest silent
    /// handshake stays silent: that one's admission or the last success, whichever is later,
    /// plus [`EVICTABLE_AFTER`].
    fn stuck_at(&self) -> Option<Instant> {
        let oldest = self.running[self.silent()?].admitted;
        Some(oldest.max(self.success.unwrap_or(oldest)) + EVICTABLE_AFTER)
    }

    /// The handshake to evict, if the set is stuck: its oldest silent one.
    fn stuck(&self, now: Instant) -> Option<u64> {
        if self.running.len() < MAX_HANDSHAKES || self.stuck_at().is_none_or(|at| now < at) {
            return None;
        }
        self.silent().map(|at| self.running[at].id)
    }

    /// Wakes the newest waiter to look again (it may now evict, or run a timer).
    fn nudge_newest(&self) {
        if let Some((_, signal)) = self.waiting.last() {
            signal.notify_one();
        }
    }
}

impl Admission {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection: admitted at once if a slot is free or the oldest
    /// handshake may be evicted, else in the queue.
    pub fn arrive(self: &Arc<Self>) -> Ticket {
        let signal = Arc::new(Notify::new());
        let mut s = self.lock();
        s.next += 1;
        let id = s.next;
        let now = Instant::now();
        if s.running.len() < MAX_HANDSHAKES {
            s.admit(id, now, Arc::clone(&signal));
        } else {
            if s.waiting.len() >= MAX_WAITING {
                let (_, longest) = s.waiting.remove(0);
                longest.notify_one();
            }
            s.waiting.push((id, Arc::clone(&signal)));
        }
        Ticket {
            admission: Arc::clone(self),
            id,
            signal,
        }
    }

    /// Handshakes running and connections waiting.
    #[cfg(test)]
    fn load(&self) -> (usize, usize) {
        let s = self.lock();
        (s.running.len(), s.waiting.len())
    }
}

/// Where a connection stands.
enum Place {
    Running,
    Waiting { newest: bool },
    Gone,
}

/// A connection's place in the [`Admission`]: dropping it (the handshake is over, whatever
/// its outcome) frees the slot for the newest waiter.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    signal: Arc<Notify>,
}

impl Ticket {
    fn place(&self, s: &State) -> Place {
        if s.running.iter().any(|r| r.id == self.id) {
            return Place::Running;
        }
        match s.waiting.iter().position(|w| w.0 == self.id) {
            Some(at) => Place::Waiting {
                newest: at + 1 == s.waiting.len(),
            },
            None => Place::Gone,
        }
    }

    /// Waits until the connection may run its handshake, at most `limit`.
    pub async fn admitted(&self, limit: Duration) -> Result<(), Refused> {
        let end = Instant::now() + limit;
        // The handshake found stuck, and when: it is evicted only if it still is a grace
        // later (after a pause of the whole process, its hello may be waiting to be read).
        let mut suspect: Option<(u64, Instant)> = None;
        loop {
            let wake = {
                let mut s = self.admission.lock();
                match self.place(&s) {
                    Place::Running => return Ok(()),
                    Place::Gone => return Err(Refused::Dropped),
                    Place::Waiting { newest: false } => end,
                    Place::Waiting { newest: true } => {
                        let now = Instant::now();
                        match (s.stuck(now), suspect) {
                            (Some(id), Some((was, since))) if id == was && now >= since + GRACE => {
                                s.evict(id);
                                s.waiting.pop();
                                s.admit(self.id, now, Arc::clone(&self.signal));
                                s.nudge_newest();
                                return Ok(());
                            }
                            (Some(id), Some((was, since))) if id == was => (since + GRACE).min(end),
                            (Some(id), _) => {
                                suspect = Some((id, now));
                                (now + GRACE).min(end)
                            }
                            (None, _) => {
                                suspect = None;
                                s.stuck_at().map_or(end, |at| at.min(end))
                            }
                        }
                    }
                }
            };
            tokio::select! {
                () = self.signal.notified() => {}
                () = tokio::time::sleep_until(wake) => {
                    if Instant::now() >= end {
                        return Err(Refused::Timeout(limit));
                    }
                }
            }
        }
    }

    /// Records that the peer sent its hello: the handshake is no longer evicted.
    pub fn greeted(&self) {
        let mut s = self.admission.lock();
        if let Some(r) = s.running.iter_mut().find(|r| r.id == self.id) {
            r.greeted = true;
        }
    }

    /// Records that the handshake succeeded (the peer proved it holds the secret).
    pub fn succeeded(&self) {
        self.admission.lock().success = Some(Instant::now());
    }

    /// Resolves when the handshake is evicted (never, if it is not).
    pub async fn evicted(&self) {
        loop {
            self.signal.notified().await;
            // A permit left from the wait (a nudge) is not an eviction.
            if !matches!(self.place(&self.admission.lock()), Place::Running) {
                return;
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.admission.lock();
        if let Some(at) = s.running.iter().position(|r| r.id == self.id) {
            s.running.remove(at);
            if s.running.len() < MAX_HANDSHAKES
                && let Some((id, signal)) = s.waiting.pop()
            {
                s.admit(id, Instant::now(), Arc::clone(&signal));
                signal.notify_one();
                s.nudge_newest();
            }
        } else if let Some(at) = s.waiting.iter().position(|w| w.0 == self.id) {
            s.waiting.remove(at);
            if at == s.waiting.len() {
                s.nudge_newest();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` honest connections arrive at once, handshake `i` taking `work(i)`; returns how many
    /// were evicted and how long the last took to finish.
    async fn burst(
        admission: &Arc<Admission>,
        n: usize,
        work: impl Fn(usize) -> Duration,
    ) -> (usize, Duration) {
        let started = Instant::now();
        let tickets: Vec<Ticket> = (0..n).map(|_| admission.arrive()).collect();
        let mut tasks = tokio::task::JoinSet::new();
        for (i, ticket) in tickets.into_iter().enumerate() {
            let work = work(i);
            tasks.spawn(async move {
                ticket.admitted(Duration::from_secs(10)).await?;
                tokio::select! {
                    () = tokio::time::sleep(work) => {
                        ticket.succeeded();
                        Ok(())
                    }
                    () = ticket.evicted() => Err(Refused::Evicted),
                }
            });
        }
        let mut evicted = 0;
        while let Some(done) = tasks.join_next().await {
            if done.expect("task").is_err() {
                evicted += 1;
            }
        }
        (evicted, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_honest_handshakes_is_admitted_in_turn_and_none_is_evicted() {
        let admission = Arc::new(Admission::default());
        // 124 links at once (a team of 125), each handshake 20 ms: four rounds of 32.
        let (evicted, took) = burst(&admission, 124, |_| Duration::from_millis(20)).await;
        assert_eq!(evicted, 0);
        assert!(took <= Duration::from_millis(100), "{took:?}");
        assert_eq!(admission.load(), (0, 0));
        // On a busy machine: handshakes of 0.2 to 1.4 s, most longer than the eviction age,
        // with others waiting; they keep succeeding, so none is evicted.
        let slow = |i: usize| Duration::from_millis(200 + (i as u64 * 37) % 1200);
        let (evicted, _) = burst(&admission, 124, slow).await;
        assert_eq!(evicted, 0);
        // Handshakes slower than the eviction age are not evicted while nobody waits.
        let (evicted, _) = burst(&admission, MAX_HANDSHAKES, |_| EVICTABLE_AFTER * 3).await;
        assert_eq!(evicted, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_stalled_connections_keeps_a_newcomer_out_no_longer_than_the_age() {
        let admission = Arc::new(Admission::default());
        let flood: Vec<Ticket> = (0..MAX_HANDSHAKES + MAX_WAITING + 40)
            .map(|_| admission.arrive())
            .collect();
        assert_eq!(admission.load(), (MAX_HANDSHAKES, MAX_WAITING));
        // The 40 that waited longest were dropped for the later ones.
        let dropped = &flood[MAX_HANDSHAKES..MAX_HANDSHAKES + 40];
        for t in dropped {
            assert_eq!(t.admitted(Duration::ZERO).await, Err(Refused::Dropped));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let newcomer = admission.arrive();
        let started = Instant::now();
        newcomer
            .admitted(Duration::from_secs(3))
            .await
            .expect("admitted");
        let waited = started.elapsed();
        assert!(
            waited >= EVICTABLE_AFTER + GRACE - Duration::from_millis(100)
                && waited <= EVICTABLE_AFTER + GRACE,
            "{waited:?}"
        );
        // The flood's oldest handshake made room.
        assert!(flood[0].evicted_now());
        assert_eq!(admission.load(), (MAX_HANDSHAKES, MAX_WAITING - 1));
        drop(flood);
        drop(newcomer);
        assert_eq!(admission.load(), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_finds_no_slot_in_time_gives_up_its_place() {
        let admission = Arc::new(Admission::default());
        let young: Vec<Ticket> = (0..MAX_HANDSHAKES).map(|_| admission.arrive()).collect();
        let late = admission.arrive();
        let limit = Duration::from_millis(10);
        assert_eq!(late.admitted(limit).await, Err(Refused::Timeout(limit)));
        drop(late);
        assert_eq!(admission.load(), (MAX_HANDSHAKES, 0));
        // A slot freed is the newest waiter's.
        let (first, second) = (admission.arrive(), admission.arrive());
        drop(young);
        second.admitted(limit).await.expect("newest first");
        first.admitted(limit).await.expect("then the next");
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_said_hello_is_left_to_its_deadline() {
        let admission = Arc::new(Admission::default());
        let mut greeted: Vec<Ticket> = (0..MAX_HANDSHAKES).map(|_| admission.arrive()).collect();
        for t in &greeted {
            t.greeted();
        }
        // Long past the eviction age, with nothing succeeding, a newcomer still waits.
        tokio::time::sleep(EVICTABLE_AFTER * 4).await;
        let newcomer = admission.arrive();
        let limit = EVICTABLE_AFTER * 2;
        assert_eq!(newcomer.admitted(limit).await, Err(Refused::Timeout(limit)));
        assert!(greeted.iter().all(|t| !t.evicted_now()));
        drop(newcomer);
        // One silent handshake among them is the one evicted.
        drop(greeted.remove(0));
        let silent = admission.arrive();
        tokio::time::sleep(EVICTABLE_AFTER).await;
        let newcomer = admission.arrive();
        newcomer.admitted(limit).await.expect("admitted");
        assert!(silent.evicted_now());
        assert!(greeted.iter().all(|t| !t.evicted_now()));
    }

    impl Ticket {
        fn evicted_now(&self) -> bool {
            matches!(self.place(&self.admission.lock()), Place::Gone)
        }
    }
}
