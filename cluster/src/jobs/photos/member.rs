//! A photo job's member half: the job received and checked, then its share of each round
//! computed (the next round's started early on a thread of its own) and gathered at the root.

use crate::jobs::error::JobError;
use std::sync::{Arc, Mutex};

use super::job::{
    Command, MAX_PIECE, Ready, Spec, TAG, Work, job_plan, open_work, vocabulary_bytes_of,
};
use crate::collective::{MAX_CONTROL, Team, broadcast, gather};
use crate::engine::{EngineError, Job, Member, decode, encode};
use crate::jobs::place::lock;
use crate::net::messages::BUILD;
use crate::net::transport::Transport;

/// A member's current photo job, shared with the jobs that build on it (the cut of partitions
/// born on the nodes takes the patches a kept features job holds).
#[derive(Debug, Default)]
pub struct Current {
    /// The job's work, once started and accepted.
    pub(crate) work: Option<Arc<Work>>,
    /// A range of the next round being computed.
    pub(crate) ahead: Option<Ahead>,
}

/// [`Current`], shared.
pub type Slot = Arc<Mutex<Current>>;

/// The photo job at a member.
#[derive(Debug, Default)]
pub struct Photos {
    current: Slot,
    /// Rounds served in this team (for the hooks).
    rounds: u64,
}

impl Photos {
    /// The job keeping its current work in `current`.
    pub fn new(current: Slot) -> Self {
        Self { current, rounds: 0 }
    }
}

impl Job for Photos {
    fn tag(&self) -> &'static str {
        TAG
    }

    fn begin(&mut self) {
        *lock(&self.current) = Current::default();
        self.rounds = 0;
    }

    /// The described photos a kept job holds are the team's: a new team starts the job anew.
    fn end(&mut self) {
        self.begin();
    }

    fn serve(&mut self, member: &Member<'_>, body: &[u8]) -> Result<(), EngineError> {
        let transport = member.transport();
        match decode(0, body)? {
            Command::Start {
                job_bytes,
                vocabulary_bytes,
                ref build,
            } => {
                lock(&self.current).ahead = None;
                let work = serve_job(transport, job_bytes, vocabulary_bytes, build)?;
                lock(&self.current).work = work;
            }
            Command::Shard {
                ref ranges,
                ref next,
            } => {
                self.rounds += 1;
                member.reached(TAG, "round", self.rounds);
                let mut current = lock(&self.current);
                let Current { work, ahead } = &mut *current;
                serve_shard(transport, work.as_ref(), ahead, ranges, next)?;
            }
        }
        Ok(())
    }
}

/// A member's side of [`Command::Start`]: the job and vocabulary broadcasts, then its answer.
/// Errors of the job itself go back to the root in the answer; the member keeps serving.
fn serve_job(
    transport: &dyn Transport,
    job_bytes: u64,
    vocabulary_bytes: u64,
    build: &str,
) -> Result<Option<std::sync::Arc<Work>>, EngineError> {
    let control = Team::ranks(transport);
    let (job, vocabulary) = receive_job(&control, job_bytes, vocabulary_bytes)?;
    let digest = format!("{:08x}", crc32fast::hash(&job));
    let node = transport.host();
    let work = if build != BUILD {
        Err(format!("it runs {BUILD}, the root runs {build}"))
    } else {
        decode::<Spec>(0, &job)
            .map_err(|e| e.to_string())
            .and_then(|job| {
                let want = vocabulary_bytes_of(&job);
                if want != Some(vocabulary.len() as u64) {
                    return Err(format!(
                        "a vocabulary of {} bytes for {} words",
                        vocabulary.len(),
                        job.k
                    ));
                }
                open_work(job, vocabulary, (transport.rank(), &node), &digest)
            })
    };
    let (reply, work) = match work {
        Ok(w) => (Ready { error: None }, Some(std::sync::Arc::new(w))),
        Err(error) => (Ready { error: Some(error) }, None),
    };
    gather(&control, &encode(&reply), MAX_CONTROL)?;
    Ok(work)
}

/// Receives the job and vocabulary broadcasts (both lengths checked first).
fn receive_job(
    control: &Team<'_>,
    job_bytes: u64,
    vocabulary_bytes: u64,
) -> Result<(Vec<u8>, Vec<u8>), EngineError> {
    let mut bufs = Vec::new();
    for bytes in [job_bytes, vocabulary_bytes] {
        if bytes > MAX_CONTROL {
            return Err(JobError::Shape {
                got: usize::try_from(bytes).unwrap_or(usize::MAX),
                want: MAX_CONTROL as usize,
            }
            .into());
        }
        let mut data = vec![0u8; bytes as usize];
        broadcast(control, job_plan(), &mut data)?;
        bufs.push(data);
    }
    let vocabulary = bufs.pop().unwrap_or_default();
    let job = bufs.pop().unwrap_or_default();
    Ok((job, vocabulary))
}

/// A member's range of the next round, being computed on a thread of its own while this round's
/// piece travels.
#[derive(Debug)]
pub struct Ahead {
    range: (u64, u64),
    piece: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Ahead {
    /// Waits for the range to be done (and, for a kept job, kept).
    pub(crate) fn wait(self) -> Option<Vec<u8>> {
        self.piece.recv().ok()
    }
}

/// This member's range among `ranges`, checked against the collection.
fn my_range(work: &Work, ranges: &[(u64, u64)], me: usize) -> Result<(u64, u64), EngineError> {
    let &(start, end) = ranges.get(me).ok_or_else(|| EngineError::Malformed {
        rank: 0,
        reason: format!("{} ranges for rank {me}", ranges.len()),
    })?;
    let n = work.collection.photos().len() as u64;
    if start > end || end > n {
        return Err(EngineError::Malformed {
            rank: 0,
            reason: format!("photos {start}..{end} of a collection of {n}"),
        });
    }
    Ok((start, end))
}

/// A member's side of [`Command::Shard`]: its range of this round (taken from `ahead` when it
/// was computed there), then its range of the next round (`next`, if any) started on a thread
/// of its own, then this round's piece gathered at the root: computing the next round overlaps
/// sending this one.
fn serve_shard(
    transport: &dyn Transport,
    work: Option<&std::sync::Arc<Work>>,
    ahead: &mut Option<Ahead>,
    ranges: &[(u64, u64)],
    next: &[(u64, u64)],
) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    let me = transport.rank();
    let work = work.ok_or(JobError::NotLoaded(me))?;
    let (start, end) = my_range(work, ranges, me)?;
    let done = match ahead.take() {
        Some(a) if a.range == (start, end) => a.piece.recv().ok(),
        _ => None,
    };
    let piece = done.unwrap_or_else(|| work.piece(start as usize..end as usize));
    if !next.is_empty() {
        let (s, e) = my_range(work, next, me)?;
        if s < e {
            let (tx, rx) = std::sync::mpsc::channel();
            let work = std::sync::Arc::clone(work);
            let spawned = std::thread::Builder::new()
                .name("photos-ahead".into())
                .spawn(move || {
                    // The receiver may be gone (the team ended): nothing to do then.
                    let _ = tx.send(work.piece(s as usize..e as usize));
                });
            // Without a thread the range is simply computed when its round comes.
            if spawned.is_ok() {
                *ahead = Some(Ahead {
                    range: (s, e),
                    piece: rx,
                });
            }
        }
    }
    gather(&control, &piece, MAX_PIECE)?;
    Ok(())
}
