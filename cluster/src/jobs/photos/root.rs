//! A photo job's root half: the job started on every member, then rounds of photos dealt out
//! in contiguous ranges and each member's piece checked before anything is written.

use crate::jobs::error::JobError;
use std::ops::Range;

use vocab_pipeline::encode::Words;
use vocab_pipeline::features::{Outcome, Unread};
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::store::Element;

use super::job::{
    Command, Keep, Kept, MAX_PIECE, PRESENT, PhotoStage, Ready, Spec, TAG, Work, job_plan,
    open_work,
};
use super::wire::{Expect, Value, take_piece};
use crate::collective::{MAX_CONTROL, Team, broadcast, gather};
use crate::engine::{EngineError, Members, decode, encode, send_json};
use crate::jobs::born::{self, Born, Cut};
use crate::net::messages::BUILD;
use crate::net::transport::Transport;

/// A member's time in a photo stage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberTime {
    /// Its host (or node name).
    pub host: String,
    /// Seconds it spent decoding and describing.
    pub seconds: f64,
    /// Photos it did.
    pub photos: u64,
}

/// The root of a photo job on an SPMD team.
pub struct PhotoRoot<'t> {
    transport: Box<dyn Transport + 't>,
    /// The root does a share of the photos too (an MPI rank 0), else only the others.
    root_works: bool,
    own: Option<Work>,
    /// What a piece holds (its photos aside), for checking pieces.
    expect: Expect,
    /// Per rank.
    times: Vec<MemberTime>,
    /// Bytes of results gathered so far, and of the job's broadcasts.
    bytes: u64,
    /// Photos in the collection.
    photos: usize,
    /// The collection, to name the photos none of which could be read.
    collection: Collection,
    /// What the members keep after [`PhotoRoot::kept_rounds`].
    pub(super) kept: Option<Kept>,
}

impl std::fmt::Debug for PhotoRoot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhotoRoot")
            .field("root_works", &self.root_works)
            .field("times", &self.times)
            .finish()
    }
}

impl<'t> PhotoRoot<'t> {
    /// Starts a photo job on every member of `transport` (whose hosts `members` gathered):
    /// `collection` as the members see it, `stage`, and for encode the `vocabulary`.
    pub fn start(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        collection: &Collection,
        stage: &PhotoStage,
        vocabulary: Option<&Words>,
        root_works: bool,
    ) -> Result<Self, EngineError> {
        Self::begin(
            transport, members, collection, stage, vocabulary, root_works, None,
        )
    }

    /// Starts a features job (`stage`, which members refuse to keep unless it is
    /// [`PhotoStage::Features`]) whose members keep the patches they describe
    /// ([`PhotoRoot::kept_rounds`], then [`PhotoRoot::cut`] makes them partitions). With
    /// `dir` (the partition folder the cut will write, as members see it), members also save
    /// each kept round there, so that the job run again after an interruption takes them back
    /// instead of describing the photos again.
    pub fn start_keeping(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        collection: &Collection,
        stage: &PhotoStage,
        root_works: bool,
        dir: Option<&str>,
    ) -> Result<Self, EngineError> {
        let keep = Keep {
            dir: dir.map(str::to_string),
        };
        Self::begin(
            transport,
            members,
            collection,
            stage,
            None,
            root_works,
            Some(keep),
        )
    }

    fn begin(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        collection: &Collection,
        stage: &PhotoStage,
        vocabulary: Option<&Words>,
        root_works: bool,
        keep: Option<Keep>,
    ) -> Result<Self, EngineError> {
        let k = vocabulary.map_or(0, |v| v.k() as u64);
        let expect = stage.expect(k as usize);
        let job = Spec {
            root: collection.root().display().to_string(),
            photos: collection.listing(),
            present: present(collection),
            stage: stage.clone(),
            k,
            keep: keep.is_some(),
            keep_dir: keep.and_then(|k| k.dir),
        };
        let job = encode(&job);
        let mut vocabulary: Vec<u8> = vocabulary.map(Words::to_bytes).unwrap_or_default();
        let control = Team::ranks(transport.as_ref());
        let command = Command::Start {
            job_bytes: job.len() as u64,
            vocabulary_bytes: vocabulary.len() as u64,
            build: BUILD.into(),
        };
        send_json(transport.as_ref(), TAG, &command)?;
        let mut job_copy = job.clone();
        broadcast(&control, job_plan(), &mut job_copy)?;
        broadcast(&control, job_plan(), &mut vocabulary)?;
        // The root's own work (when it does photos) is checked like a member's, and its
        // answer gathered with theirs, so that every member leaves the job's collectives alike.
        let own = if root_works {
            let digest = format!("{:08x}", crc32fast::hash(&job));
            let me = (transport.rank(), transport.host());
            decode::<Spec>(0, &job)
                .map_err(|e| e.to_string())
                .and_then(|job| open_work(job, vocabulary.clone(), (me.0, &me.1), &digest))
                .map(Some)
        } else {
            Ok(None)
        };
        let mine = Ready {
            error: own.as_ref().err().cloned(),
        };
        let replies = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
        for (rank, bytes) in replies.iter().enumerate() {
            let ready: Ready = decode(rank, bytes)?;
            if let Some(reason) = ready.error {
                return Err(EngineError::Refused {
                    rank,
                    host: members.hosts.get(rank).cloned().unwrap_or_default(),
                    reason,
                });
            }
        }
        let own = own.map_err(|reason| EngineError::Refused {
            rank: 0,
            host: transport.host(),
            reason,
        })?;
        let size = transport.size();
        let times = (0..size)
            .map(|r| MemberTime {
                host: members.hosts.get(r).cloned().unwrap_or_default(),
                ..MemberTime::default()
            })
            .collect();
        let bytes = (job.len() + vocabulary.len()) as u64 * (size as u64 - 1);
        Ok(Self {
            transport,
            root_works,
            own,
            expect,
            times,
            bytes,
            photos: collection.photos().len(),
            collection: collection.clone(),
            kept: None,
        })
    }

    /// Members that do photos.
    pub fn workers(&self) -> usize {
        let size = self.transport.size();
        if self.root_works { size } else { size - 1 }
    }

    /// The members' times so far (ranks that do no photos left out).
    pub fn times(&self) -> Vec<MemberTime> {
        let skip = usize::from(!self.root_works);
        self.times[skip..].to_vec()
    }

    /// [`PhotoRoot::times`], counted from zero again after.
    pub fn take_times(&mut self) -> Vec<MemberTime> {
        let times = self.times();
        for t in &mut self.times {
            t.seconds = 0.0;
            t.photos = 0;
        }
        times
    }

    /// Bytes the job moved so far: its broadcasts to every member and the results gathered.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// [`PhotoRoot::bytes`], counted from zero again after.
    pub fn take_bytes(&mut self) -> u64 {
        std::mem::take(&mut self.bytes)
    }

    /// The transport (to release the members with [`crate::engine::exit`]).
    pub fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    /// Each rank's part of the photos `range`: contiguous, even ranges in rank order (empty for
    /// a root that does no photos).
    fn deal(&self, range: &Range<usize>) -> Vec<(u64, u64)> {
        let size = self.transport.size();
        let first = usize::from(!self.root_works);
        let workers = size - first;
        let n = range.len();
        (0..size)
            .map(|r| match r.checked_sub(first) {
                None => (range.start as u64, range.start as u64),
                Some(j) => (
                    (range.start + n * j / workers) as u64,
                    (range.start + n * (j + 1) / workers) as u64,
                ),
            })
            .collect()
    }

    /// Has the members do the photos `range` and returns their results in picture-id order,
    /// every piece checked. With `next`, the members start on their part of that range while
    /// this round's pieces travel (the next call should ask for it).
    pub fn round<T: Value>(
        &mut self,
        range: Range<usize>,
        next: Option<Range<usize>>,
    ) -> Result<Vec<Outcome<T>>, EngineError> {
        let ranges = self.deal(&range);
        let next = next.map(|r| self.deal(&r)).unwrap_or_default();
        Ok(self.shard(ranges, next)?.into_iter().flatten().collect())
    }

    /// Has every rank do its photos `ranges[rank]` (starting on `next[rank]` early) and returns
    /// each rank's results, every piece checked.
    fn shard<T: Value>(
        &mut self,
        ranges: Vec<(u64, u64)>,
        next: Vec<(u64, u64)>,
    ) -> Result<Vec<Vec<Outcome<T>>>, EngineError> {
        let first = usize::from(!self.root_works);
        let control = Team::ranks(self.transport.as_ref());
        let command = Command::Shard {
            ranges: ranges.clone(),
            next,
        };
        send_json(self.transport.as_ref(), TAG, &command)?;
        let own = match &self.own {
            Some(work) => work.piece(ranges[0].0 as usize..ranges[0].1 as usize),
            None => Vec::new(),
        };
        let pieces = gather(&control, &own, MAX_PIECE)?.unwrap_or_default();
        let mut outcomes: Vec<Vec<Outcome<T>>> = (0..pieces.len()).map(|_| Vec::new()).collect();
        for (rank, piece) in pieces.iter().enumerate().skip(first) {
            let (start, end) = ranges.get(rank).copied().unwrap_or_default();
            let expect = self.expect.of((end - start) as usize);
            let (seconds, got) =
                take_piece::<T>(piece, &expect).map_err(|reason| EngineError::Malformed {
                    rank,
                    reason: format!("photos {start}..{end}: {reason}"),
                })?;
            let time = &mut self.times[rank];
            time.seconds += seconds;
            time.photos += end - start;
            self.bytes += piece.len() as u64;
            outcomes[rank] = got;
        }
        Ok(outcomes)
    }

    /// The rounds of a job started with [`PhotoRoot::start_keeping`]: each member does one
    /// contiguous shard of the collection (rank order is photo order), a few dozen photos a
    /// round, and keeps the patches; the root gets each photo's size and patch count, returned
    /// in picture-id order. `progress` is told the photos done after each round.
    pub fn kept_rounds(
        &mut self,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Outcome<()>>, EngineError> {
        let total = self.photos;
        let shards = self.deal(&(0..total));
        let per = shard_photos(total, self.workers()) as u64;
        let rounds = (shards.iter())
            .map(|&(s, e)| (e - s).div_ceil(per))
            .max()
            .unwrap_or(0);
        let at = |r: u64| -> Vec<(u64, u64)> {
            (shards.iter())
                .map(|&(s, e)| {
                    let a = s.saturating_add(r.saturating_mul(per)).min(e);
                    (a, a.saturating_add(per).min(e))
                })
                .collect()
        };
        let mut results: Vec<Option<Outcome<()>>> = vec![None; total];
        let mut done = 0;
        for r in 0..rounds {
            let next = if r + 1 < rounds {
                at(r + 1)
            } else {
                Vec::new()
            };
            let ranges = at(r);
            for (rank, got) in self
                .shard::<()>(ranges.clone(), next)?
                .into_iter()
                .enumerate()
            {
                let start = ranges.get(rank).map_or(0, |r| r.0 as usize);
                done += got.len();
                for (i, outcome) in got.into_iter().enumerate() {
                    results[start + i] = Some(outcome);
                }
            }
            progress(done);
        }
        let records = (shards.iter())
            .map(|&(s, e)| {
                (results[s as usize..e as usize].iter())
                    .flatten()
                    .map(|o| o.patches() as u64)
                    .sum()
            })
            .collect();
        let results: Option<Vec<Outcome<()>>> = results.into_iter().collect();
        let results = results.ok_or_else(|| EngineError::Malformed {
            rank: 0,
            reason: "the shards left photos undone".into(),
        })?;
        // Not one photo read: said as the features stage says it, before any cut.
        let mut unread = Unread::default();
        let mut read = 0;
        for (photo, outcome) in self.collection.photos().iter().zip(&results) {
            match outcome {
                Outcome::Skipped(reason) => unread.note(&photo.rel_path, reason),
                Outcome::Done { .. } => read += 1,
            }
        }
        (unread.check(&self.collection, read)).map_err(|e| EngineError::Job(Box::new(e)))?;
        self.kept = Some(Kept { shards, records });
        Ok(results)
    }
}

/// Up to [`PRESENT`] photos spread over the collection that the root finds in its folder.
pub(super) fn present(collection: &Collection) -> Vec<u32> {
    let photos = collection.photos();
    let step = photos.len().div_ceil(PRESENT).max(1);
    (photos.iter().step_by(step))
        .filter(|p| p.unusable.is_none() && collection.path_of(p).is_file())
        .map(|p| p.picture_id)
        .collect()
}

/// Photos per member in one round: a few dozen, fewer when the collection is small so that every
/// member gets several rounds.
pub fn shard_photos(photos: usize, workers: usize) -> usize {
    (photos / (workers.max(1) * 4)).clamp(1, 32)
}

impl PhotoRoot<'_> {
    /// After [`PhotoRoot::kept_rounds`]: has the members cut the patches they kept into the
    /// `parts` partitions one machine's `split` would make of the feature file, each written by
    /// the member holding most of its records into its partition folder (`dir`, as every
    /// member sees it; `{rank}` stands for the member's rank), only the records across shard
    /// boundaries travelling between members; returns the manifest (source named `source`),
    /// also written beside every member's partitions.
    pub fn cut(
        &mut self,
        dir: &str,
        parts: usize,
        element: Element,
        source: &str,
    ) -> Result<Born, EngineError> {
        let kept = self.kept.take().ok_or(JobError::NotLoaded(0))?;
        let cut = Cut {
            dir: dir.to_string(),
            parts: parts as u64,
            element: element.name().to_string(),
            dims: self.expect.dims as u64,
            shards: kept.shards,
            records: kept.records,
        };
        let hosts: Vec<String> = self.times.iter().map(|t| t.host.clone()).collect();
        let born = born::root(
            self.transport.as_ref(),
            &hosts,
            self.own.as_ref(),
            &cut,
            source,
        )?;
        self.bytes += born.bytes;
        Ok(born)
    }
}
