//! A photo job's settings and what a member makes of them: the stage (features or encode), the
//! collection's listing, checked on arrival ([`check_stage`]), and the member's [`Work`] (the
//! collection rebuilt, the encoder, the patches a kept features job holds).

use std::ops::Range;
use std::path::{Component, Path};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use vocab_pipeline::encode::{EncodeParams, Encoder, Words};
use vocab_pipeline::features::{self, Described, FeatureParams, Outcome};
use vocab_pipeline::image_io::Collection;

use super::source::Journal;
use super::wire::put_outcomes;
use crate::collective::{Algorithm, BroadcastPlan, MAX_CONTROL};
use crate::jobs::place::{lock, member_dir};

/// The tag of a photo job's commands.
pub const TAG: &str = "photos";

/// What the root tells the members.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) enum Command {
    /// Start a photo job: its settings and listing follow as a broadcast of `job_bytes`, then
    /// the vocabulary's `vocabulary_bytes`.
    Start {
        job_bytes: u64,
        vocabulary_bytes: u64,
        build: String,
    },
    /// Do the photos `ranges[rank]` of the photo job and gather the results at the root.
    Shard {
        ranges: Vec<(u64, u64)>,
        /// Ranges of the round after, by rank, to start on early (empty: none).
        #[serde(default)]
        next: Vec<(u64, u64)>,
    },
}

/// Largest piece of one round a member sends (bytes): far above a round of dense photos, it
/// only stops a corrupt size from allocating.
pub(super) const MAX_PIECE: u64 = 1 << 34;

/// Photos the root checks are present at every member.
pub(super) const PRESENT: usize = 16;

/// Which stage a photo job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PhotoStage {
    /// Patches of every photo (the features stage).
    Features(FeatureParams),
    /// A histogram of every photo over the vocabulary sent with the job (encode).
    Encode(EncodeParams),
}

impl PhotoStage {
    /// Values of a result's histogram with a vocabulary of `k` words (0 for features).
    pub fn histogram_len(&self, k: usize) -> usize {
        match self {
            Self::Encode(p) => p.len(k),
            Self::Features(_) => 0,
        }
    }
}

/// What the members receive when a job starts (JSON).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Spec {
    /// The photo folder, as every member sees it.
    pub(super) root: String,
    /// Relative path and why unusable, in picture-id order.
    pub(super) photos: Vec<(String, Option<String>)>,
    /// Photos the root found in its folder: each member checks it finds them too.
    pub(super) present: Vec<u32>,
    pub(super) stage: PhotoStage,
    /// Words of the vocabulary that follows (encode).
    pub(super) k: u64,
    /// Features only: members keep the patches they describe (for `crate::jobs::born`) and send
    /// the root only each photo's size and patch count.
    #[serde(default)]
    pub(super) keep: bool,
    /// With `keep`: the partition folder (as members see it, [`member_dir`]) under
    /// which each member also saves its kept rounds, so that a job interrupted before its cut
    /// resumes without describing them again.
    #[serde(default)]
    pub(super) keep_dir: Option<String>,
}

/// Where a member saves the rounds it keeps (`.kept-<job digest>-<rank>@<node>` in its partition
/// folder).
fn kept_journal(
    keep_dir: Option<&str>,
    digest: &str,
    me: usize,
    node: &str,
) -> Option<std::io::Result<Journal>> {
    let dir = keep_dir?;
    // One per member: members may share the folder (one filesystem, no `{node}` in it).
    let own = format!(".kept-{digest}-{me}@{}", node.replace('/', "_"));
    let folder = Path::new(&member_dir(dir, me, node)).join(own);
    Some(Journal::open(&folder, digest, 0))
}

/// A kept features job's setting ([`PhotoRoot::start_keeping`]).
#[derive(Debug, Clone)]
pub(super) struct Keep {
    /// The partition folder under which members save their kept rounds.
    pub(super) dir: Option<String>,
}

/// A member's answer to a job.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Ready {
    pub(super) error: Option<String>,
}

/// A member's job: the collection and what to make of its photos.
#[derive(Debug)]
pub(crate) struct Work {
    pub(crate) collection: Collection,
    pub(super) stage: Stage,
    /// Whether described photos are kept here rather than sent ([`Job::keep`]).
    pub(super) keep: bool,
    /// The kept results, by the first photo of their range.
    pub(crate) held: std::sync::Mutex<std::collections::BTreeMap<usize, Vec<Outcome<Described>>>>,
    /// Where kept rounds are saved too (a job with a partition folder).
    pub(crate) journal: Option<Journal>,
}

#[derive(Debug)]
pub(super) enum Stage {
    Features(FeatureParams),
    Encode(Box<Encoder>),
}

/// Bytes of `k` words (or a mixture of `k` components) for an encoding of `params`, if they
/// can be counted.
fn vocabulary_bytes(params: &EncodeParams, k: u64) -> Option<u64> {
    Words::wire_len(params.method.projected(), usize::try_from(k).ok()?)
}

/// Checks settings that came over the network before any photo is touched: by the rules of
/// the stage's parameters (`FeatureParams::check`, `EncodeParams::check` with the vocabulary's
/// size), and a vocabulary the control messages can carry.
pub(crate) fn check_stage(stage: &PhotoStage, k: u64) -> Result<(), String> {
    match stage {
        PhotoStage::Features(p) => p.check().map_err(|e| e.to_string()),
        PhotoStage::Encode(p) => {
            let words = usize::try_from(k).ok();
            p.check(words).map_err(|e| e.to_string())?;
            if k == 0 || vocabulary_bytes(p, k).is_none_or(|b| b > MAX_CONTROL) {
                return Err(format!("a vocabulary of {k} words"));
            }
            Ok(())
        }
    }
}

/// A relative path that stays inside the photo folder.
pub(crate) fn inside(rel: &str) -> bool {
    Path::new(rel)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Builds a member's work from the job (and the vocabulary), or says why it cannot.
/// `me` is the member's rank and node name and `digest` names the job's bytes (where a kept
/// job's rounds are saved).
pub(super) fn open_work(
    job: Spec,
    vocabulary: Vec<u8>,
    me: (usize, &str),
    digest: &str,
) -> Result<Work, String> {
    check_stage(&job.stage, job.k)?;
    if let Some((bad, _)) = job.photos.iter().find(|(p, _)| !inside(p)) {
        return Err(format!("photo path {bad:?} leaves the photo folder"));
    }
    let keep_dir = job.keep_dir.clone().filter(|_| job.keep);
    let root = Path::new(&job.root);
    let collection = Collection::listed(root, job.photos).map_err(|e| vocab_pipeline::chain(&e))?;
    for &id in &job.present {
        let photo = collection
            .photos()
            .get(id as usize)
            .ok_or_else(|| format!("photo {id} of {}", collection.photos().len()))?;
        let path = collection.path_of(photo);
        if !path.is_file() {
            return Err(format!(
                "{} is not there; the photo folder must hold the same photos on every node",
                path.display()
            ));
        }
    }
    let stage = match job.stage {
        PhotoStage::Features(p) => Stage::Features(p),
        PhotoStage::Encode(p) => {
            let k = usize::try_from(job.k).map_err(|_| format!("{} words", job.k))?;
            let words = Words::from_bytes(p.method.projected(), k, &vocabulary)?;
            let encoder = Encoder::new(words, p, root).map_err(|e| vocab_pipeline::chain(&e))?;
            Stage::Encode(Box::new(encoder))
        }
    };
    if job.keep && !matches!(stage, Stage::Features(_)) {
        return Err("only the features stage keeps its results at the members".into());
    }
    let journal = kept_journal(keep_dir.as_deref(), digest, me.0, me.1)
        .transpose()
        .map_err(|e| format!("cannot keep rounds under {keep_dir:?}: {e}"))?;
    Ok(Work {
        collection,
        stage,
        keep: job.keep,
        held: std::sync::Mutex::default(),
        journal,
    })
}

impl Work {
    /// The results of the photos `range`, as a piece: compute seconds, then the outcomes.
    pub(super) fn piece(&self, range: Range<usize>) -> Vec<u8> {
        let started = Instant::now();
        // The seconds go first, written once the results are in.
        let mut piece = vec![0u8; 8];
        match &self.stage {
            Stage::Features(p) if self.keep => {
                let (start, photos) = (range.start, range.len());
                let total = self.collection.photos().len();
                // A round saved by an interrupted run of the job is taken as it is.
                let saved = (self.journal.as_ref())
                    .and_then(|j| j.load::<Described>(start, total))
                    .filter(|o| o.len() == photos);
                let outcomes = saved.unwrap_or_else(|| {
                    let described = features::describe_range(&self.collection, p, range);
                    if let Some(j) = &self.journal {
                        // Without it the round is described again if the job is interrupted.
                        let _ = j.save(start, &described);
                    }
                    described
                });
                let sizes: Vec<Outcome<()>> = outcomes.iter().map(Outcome::sized).collect();
                put_outcomes(&mut piece, &sizes);
                lock(&self.held).insert(start, outcomes);
            }
            Stage::Features(p) => {
                let outcomes = features::describe_range(&self.collection, p, range);
                put_outcomes(&mut piece, &outcomes);
            }
            Stage::Encode(encoder) => {
                put_outcomes(&mut piece, &encoder.encode_range(&self.collection, range));
            }
        }
        piece[..8].copy_from_slice(&started.elapsed().as_secs_f64().to_le_bytes());
        piece
    }
}

/// Vocabulary bytes a job comes with.
pub(super) fn vocabulary_bytes_of(job: &Spec) -> Option<u64> {
    match job.stage {
        PhotoStage::Features(_) => Some(0),
        PhotoStage::Encode(ref p) => vocabulary_bytes(p, job.k),
    }
}

/// The plan of the job's broadcasts: the pipelined chain in rank order.
pub(super) fn job_plan() -> BroadcastPlan {
    BroadcastPlan {
        algorithm: Algorithm::Chain,
        chunk: 1 << 20,
        chains: 1,
    }
}

/// What the members of a kept features job hold: each rank's shard of photos and its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Photos of each rank, in rank order (contiguous, in photo order).
    pub shards: Vec<(u64, u64)>,
    /// Records each rank holds.
    pub records: Vec<u64>,
}
