//! Fault injection for tests: the hook behind the hidden flags (`cluster worker --exit-*`,
//! `--exit-rank-at`, `--exit-rank-in-round`), which ends the process at a chosen checkpoint of
//! a job. The libraries only report checkpoints; ending the process is the binary's business.

use vocab_cluster::engine::{Checkpoint, Hooks};
use vocab_cluster::jobs::{kmeans, photos};

/// Where to end the process (status 3); each `None` never.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExitAt {
    /// After receiving this many bytes of team messages (broadcasts, stage-2 ranges).
    pub after_bytes: Option<u64>,
    /// In k-means iteration `n`: after the map tasks, before stage 2.
    pub step: Option<u64>,
    /// When told to do the `n`-th round of a photo job's photos (counted per team).
    pub round: Option<u64>,
}

impl Hooks for ExitAt {
    fn reached(&self, at: &Checkpoint<'_>) {
        let what = match (at.job, at.event) {
            ("team", "received") if self.after_bytes.is_some_and(|limit| at.count >= limit) => {
                format!("after {} bytes", at.count)
            }
            (kmeans::TAG, "mapped") if self.step == Some(at.count) => {
                format!("in iteration {}", at.count)
            }
            (photos::TAG, "round") if self.round == Some(at.count) => {
                format!("in photo round {}", at.count)
            }
            _ => return,
        };
        eprintln!("rank {}: exiting {what} (fault injection)", at.rank);
        std::process::exit(3);
    }
}
