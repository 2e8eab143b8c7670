//! Admission of unauthenticated connections to the handshake: every connection at once, up to a
//! bound, with random early drop near it; nothing admitted is ever evicted.
//!
//! A flood cannot win by being newer or faster than an honest peer, because no connection is
//! preferred to another: while fewer than [`EARLY_DROP_FROM`] handshakes run, every connection
//! starts its handshake as it arrives; from there to [`MAX_HANDSHAKES`] a new connection is
//! dropped with a probability that rises linearly from 0 to 1 (random early drop, as OpenSSH's
//! `MaxStartups` does); at [`MAX_HANDSHAKES`] every new one is. What keeps the set small is the
//! worker's deadline for each stage of the handshake (the hello, then the proof): a connection
//! that stays silent, dribbles its hello a byte at a time, or says hello and never proves
//! itself holds its place no longer than a stage's deadline. A place is cheap (a handshake's
//! buffers are a few KiB), so the bound is set far above what a flood of a few hundred
//! connections a second holds at once (rate times deadline), and far above the 124 links a
//! member of a 125-member team takes at once, which are therefore never dropped.
//!
//! Earlier rules and why they went: a set of 32 handshakes with the newest waiter served first
//! let a steady flood of 60 connections a second stay ahead of the honest peer, and evicting
//! the oldest silent handshake broke team formations on a busy machine.

use std::sync::{Arc, Mutex, MutexGuard};

use rand::Rng;

/// Handshakes a worker runs at once, at most.
pub const MAX_HANDSHAKES: usize = 2048;
/// Handshakes running from which new connections are dropped at random.
pub const EARLY_DROP_FROM: usize = 1024;

/// Why a connection was not admitted to a handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Dropped on arrival: `running` handshakes were under way.
    #[error(
        "dropped on arrival: {running} handshakes under way (random early drop from \
         {EARLY_DROP_FROM}, all from {MAX_HANDSHAKES})"
    )]
    Dropped {
        /// Handshakes running when it arrived.
        running: usize,
    },
}

/// A worker's running handshakes.
#[derive(Debug, Default)]
pub struct Admission {
    running: Mutex<usize>,
}

impl Admission {
    fn lock(&self) -> MutexGuard<'_, usize> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place in a handshake for a new connection, or its refusal.
    pub fn arrive(self: &Arc<Self>) -> Result<Ticket, Refused> {
        self.arrive_with(&mut rand::rng())
    }

    /// [`Admission::arrive`] drawing the early drop from `rng`.
    fn arrive_with(self: &Arc<Self>, rng: &mut impl Rng) -> Result<Ticket, Refused> {
        let mut running = self.lock();
        let n = *running;
        if n >= EARLY_DROP_FROM {
            // 0 at EARLY_DROP_FROM, 1 at MAX_HANDSHAKES.
            let over = (n - EARLY_DROP_FROM) as f64 / (MAX_HANDSHAKES - EARLY_DROP_FROM) as f64;
            if n >= MAX_HANDSHAKES || rng.random::<f64>() < over {
                return Err(Refused::Dropped { running: n });
            }
        }
        *running = n + 1;
        Ok(Ticket {
            admission: Arc::clone(self),
        })
    }

    /// Handshakes running.
    pub fn running(&self) -> usize {
        *self.lock()
    }
}

/// A connection's place in a handshake: dropping it (the handshake is over, whatever its
/// outcome) frees the place.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut running = self.admission.lock();
        *running = running.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_teams_burst_is_admitted_whole_and_places_come_back() {
        let admission = Arc::new(Admission::default());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        // 124 links at once (a team of 125), far below the early drop: all admitted.
        let burst: Vec<Ticket> = (0..124)
            .map(|_| admission.arrive_with(&mut rng).expect("admitted"))
            .collect();
        assert_eq!(admission.running(), 124);
        drop(burst);
        assert_eq!(admission.running(), 0);
    }

    #[test]
    fn past_the_early_drop_arrivals_are_dropped_in_proportion_and_none_at_the_bound() {
        let admission = Arc::new(Admission::default());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let held: Vec<Ticket> = (0..EARLY_DROP_FROM)
            .map(|_| {
                admission
                    .arrive_with(&mut rng)
                    .expect("below the early drop")
            })
            .collect();
        // Halfway to the bound: about half of the arrivals are dropped, whoever they are.
        let half = (MAX_HANDSHAKES - EARLY_DROP_FROM) / 2;
        let more: Vec<Ticket> = (0..)
            .map_while(|_| {
                (admission.running() < EARLY_DROP_FROM + half)
                    .then(|| admission.arrive_with(&mut rng).ok())
            })
            .flatten()
            .collect();
        let trials = 10_000;
        let dropped = (0..trials)
            .filter(|_| admission.arrive_with(&mut rng).is_err())
            .count();
        let share = dropped as f64 / f64::from(trials);
        assert!((0.45..0.55).contains(&share), "{share}");
        // At the bound every arrival is dropped, naming how many run.
        let full: Vec<Ticket> = (0..)
            .map_while(|_| {
                (admission.running() < MAX_HANDSHAKES).then(|| admission.arrive_with(&mut rng).ok())
            })
            .flatten()
            .collect();
        assert_eq!(
            admission.arrive_with(&mut rng).map(|_| ()),
            Err(Refused::Dropped {
                running: MAX_HANDSHAKES
            })
        );
        drop((held, more, full));
        assert_eq!(admission.running(), 0);
    }
}
