//! A photo job's settings and what a member makes of them: the stage (features or encode), the
//! collection's listing, checked on arrival ([`check_stage`]), and the member's [`Work`] (the
//! collection rebuilt, the encoder, the patches a kept features job holds).

use std::ops::Range;
use std::path::{Component, Path};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use vocab_pipeline::descriptors::{self, Foreign};
use vocab_pipeline::encode::{EncodeParams, Encoder, Words};
use vocab_pipeline::features::{Described, Descriptor, FeatureParams, Outcome};
use vocab_pipeline::hog::{DIMS, PATCH_SIDE};
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::sift::SIFT_DIMS;

use super::source::Journal;
use super::wire::{Expect, put_outcomes};
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
pub(crate) const MAX_PIECE: u64 = 1 << 34;

/// Photos the root checks are present at every member.
pub(super) const PRESENT: usize = 16;

/// Descriptors made elsewhere, as a photo job reads them (`vocab_pipeline::descriptors`): their
/// folder, mirroring the photo folder, as every member sees it, and their values each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Elsewhere {
    /// The folder.
    pub dir: String,
    /// Values of a descriptor.
    pub dims: u64,
}

impl Elsewhere {
    /// The descriptors in `dir` (as every member sees it), of `dims` values.
    pub fn new(dir: &Path, dims: usize) -> Self {
        Self {
            dir: dir.display().to_string(),
            dims: dims as u64,
        }
    }

    /// Their values each, within the readers' bounds.
    fn dims(&self) -> Result<usize, String> {
        usize::try_from(self.dims)
            .ok()
            .filter(|d| (1..=descriptors::MAX_DIMS).contains(d))
            .ok_or_else(|| format!("descriptors of {} values", self.dims))
    }

    /// The folder as this member sees it, which must be there.
    fn open(&self) -> Result<Foreign, String> {
        Foreign::new(Path::new(&self.dir)).map_err(|e| e.to_string())
    }
}

/// Which stage a photo job runs, on HOG or (with [`Elsewhere`]) on descriptors made elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PhotoStage {
    /// Patches of every photo (the features stage); from descriptors made elsewhere, the
    /// vocabulary's sample: `per_image` rows of each photo's file drawn from the seed.
    Features(FeatureParams, Option<Elsewhere>),
    /// A histogram of every photo over the vocabulary sent with the job (encode).
    Encode(EncodeParams, Option<Elsewhere>),
}

impl PhotoStage {
    /// Values of a result's histogram with a vocabulary of `k` words (0 for features).
    pub fn histogram_len(&self, k: usize) -> usize {
        match self {
            Self::Encode(p, _) => p.len(k),
            Self::Features(..) => 0,
        }
    }

    /// The descriptors made elsewhere it reads (none: HOG).
    pub fn elsewhere(&self) -> Option<&Elsewhere> {
        match self {
            Self::Features(_, from) | Self::Encode(_, from) => from.as_ref(),
        }
    }

    /// What each member's piece must hold with a vocabulary of `k` words (photos left 0): the
    /// histogram's values, or each patch's and the smallest patch's side (a keypoint's: 1).
    pub fn expect(&self, k: usize) -> Expect {
        let (dims, side) = match self {
            Self::Features(_, Some(from)) => (usize::try_from(from.dims).unwrap_or(0), 1),
            // Keypoints' centres, as descriptors made elsewhere place them.
            Self::Features(p, None) if p.descriptor == Descriptor::Sift => (SIFT_DIMS, 1),
            Self::Features(_, None) | Self::Encode(..) => (DIMS, PATCH_SIDE),
        };
        Expect {
            photos: 0,
            histogram: self.histogram_len(k),
            dims,
            side,
        }
    }
}

/// How a member describes photos for a features job, or to make a partition born on the nodes
/// again: vocab's own descriptor (HOG patches, or dense SIFT's keypoints), or rows of
/// descriptor files made elsewhere.
#[derive(Debug)]
pub(crate) enum Describe {
    /// vocab's own descriptor of the params (HOG of patches they cut, or dense SIFT).
    Own(FeatureParams),
    /// `per_image` rows of each photo's file (of `dims` values), drawn from `seed`.
    Read {
        foreign: Foreign,
        dims: usize,
        draw: (usize, u64),
    },
}

/// The rules of a features stage of `params` (`from`: descriptors made elsewhere): the
/// params' own, and for descriptors made elsewhere random rows of each file drawn from the seed
/// (`per_image`, `seed`), no mirror images, their values within the readers' bounds.
fn features_rules(
    params: &FeatureParams,
    from: Option<&Elsewhere>,
) -> Result<Option<(usize, u64, usize)>, String> {
    params.check().map_err(|e| e.to_string())?;
    let Some(from) = from else {
        return Ok(None);
    };
    let Sampling::Random { per_image, seed } = params.sampling else {
        return Err(format!(
            "descriptors made elsewhere in {} are sampled as random rows",
            from.dir
        ));
    };
    if params.descriptor != Descriptor::Hog {
        return Err(format!(
            "descriptors made elsewhere in {} and vocab's {} at once",
            from.dir,
            params.descriptor.name()
        ));
    }
    if params.mirror {
        return Err(format!(
            "no mirror images of descriptors made elsewhere in {}",
            from.dir
        ));
    }
    if let Some(patch) = params.patch {
        return Err(format!(
            "no patch side ({patch} px) for descriptors made elsewhere in {}: they are taken as \
             they are",
            from.dir
        ));
    }
    Ok(Some((per_image, seed, from.dims()?)))
}

impl Describe {
    /// The describing of a features stage of `params` (`from`: descriptors made elsewhere,
    /// whose folder must be at this member), or why it cannot be.
    pub(crate) fn new(params: FeatureParams, from: Option<&Elsewhere>) -> Result<Self, String> {
        match (features_rules(&params, from)?, from) {
            (Some((per_image, seed, dims)), Some(from)) => Ok(Self::Read {
                foreign: from.open()?,
                dims,
                draw: (per_image, seed),
            }),
            _ => Ok(Self::Own(params)),
        }
    }

    /// Values of each patch.
    pub(crate) fn dims(&self) -> usize {
        match self {
            Self::Own(params) => params.descriptor.dims(),
            Self::Read { dims, .. } => *dims,
        }
    }

    /// The photos `range` of `collection` described.
    pub(crate) fn range(
        &self,
        collection: &Collection,
        range: Range<usize>,
    ) -> Vec<Outcome<Described>> {
        match self {
            Self::Own(params) => vocab_pipeline::describe::range(collection, params, range),
            Self::Read {
                foreign,
                dims,
                draw,
            } => {
                let origin = descriptors::Origin::Files(foreign, *dims);
                descriptors::sample_range(collection, origin, *draw, range)
            }
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
/// folder), rounds that hold what `expect` says.
fn kept_journal(
    (keep_dir, expect): (Option<&str>, Expect),
    digest: &str,
    me: usize,
    node: &str,
) -> Option<std::io::Result<Journal>> {
    let dir = keep_dir?;
    // One per member: members may share the folder (one filesystem, no `{node}` in it).
    let own = format!(".kept-{digest}-{me}@{}", node.replace('/', "_"));
    let folder = Path::new(&member_dir(dir, me, node)).join(own);
    Some(Journal::open(&folder, digest, expect))
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
    Features(Describe),
    /// The encoder, and the descriptors made elsewhere it encodes (none: HOG).
    Encode(Box<Encoder>, Option<Foreign>),
}

/// Bytes of `k` words (or a mixture of `k` components) for an encoding of `params`, if they
/// can be counted.
fn vocabulary_bytes(params: &EncodeParams, k: u64) -> Option<u64> {
    Words::wire_len(
        params.dims,
        params.method.projected(),
        usize::try_from(k).ok()?,
    )
}

/// Checks settings that came over the network before any photo is touched: by the rules of
/// the stage's parameters (`FeatureParams::check`, `EncodeParams::check` with the vocabulary's
/// size), descriptors made elsewhere that agree with them, and a vocabulary the control
/// messages can carry. The folder of descriptors made elsewhere is looked for by
/// [`open_work`].
pub(crate) fn check_stage(stage: &PhotoStage, k: u64) -> Result<(), String> {
    match stage {
        PhotoStage::Features(p, from) => features_rules(p, from.as_ref()).map(drop),
        PhotoStage::Encode(p, from) => {
            let words = usize::try_from(k).ok();
            p.check(words).map_err(|e| e.to_string())?;
            match from {
                Some(from) if !p.foreign || from.dims()? != p.dims => {
                    return Err(format!(
                        "descriptors of {} values made elsewhere for an encoding of {}",
                        from.dims,
                        if p.foreign { "others" } else { "HOG" }
                    ));
                }
                None if p.foreign => {
                    return Err("an encoding of descriptors made elsewhere without them".into());
                }
                _ => {}
            }
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
    let expect = job.stage.expect(0);
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
        PhotoStage::Features(p, from) => Stage::Features(Describe::new(p, from.as_ref())?),
        PhotoStage::Encode(p, from) => {
            let k = usize::try_from(job.k).map_err(|_| format!("{} words", job.k))?;
            let words = Words::from_bytes(p.dims, p.method.projected(), k, &vocabulary)?;
            let foreign = from.as_ref().map(Elsewhere::open).transpose()?;
            let encoder = Encoder::new(words, p, root).map_err(|e| vocab_pipeline::chain(&e))?;
            Stage::Encode(Box::new(encoder), foreign)
        }
    };
    if job.keep && !matches!(stage, Stage::Features(_)) {
        return Err("only the features stage keeps its results at the members".into());
    }
    let journal = kept_journal((keep_dir.as_deref(), expect), digest, me.0, me.1)
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
    /// Values of each patch a features job's work keeps (none: an encode).
    pub(crate) fn dims(&self) -> Option<usize> {
        match &self.stage {
            Stage::Features(describe) => Some(describe.dims()),
            Stage::Encode(..) => None,
        }
    }

    /// The results of the photos `range`, as a piece: compute seconds, then the outcomes.
    pub(super) fn piece(&self, range: Range<usize>) -> Vec<u8> {
        let started = Instant::now();
        // The seconds go first, written once the results are in.
        let mut piece = vec![0u8; 8];
        match &self.stage {
            Stage::Features(describe) if self.keep => {
                let (start, photos) = (range.start, range.len());
                let total = self.collection.photos().len();
                // A round saved by an interrupted run of the job is taken as it is.
                let saved = (self.journal.as_ref())
                    .and_then(|j| j.load::<Described>(start, total))
                    .filter(|o| o.len() == photos);
                let outcomes = saved.unwrap_or_else(|| {
                    let described = describe.range(&self.collection, range);
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
            Stage::Features(describe) => {
                put_outcomes(&mut piece, &describe.range(&self.collection, range));
            }
            Stage::Encode(encoder, None) => {
                put_outcomes(&mut piece, &encoder.encode_range(&self.collection, range));
            }
            Stage::Encode(encoder, Some(foreign)) => {
                let outcomes = encoder.encode_foreign_range(&self.collection, foreign, range);
                put_outcomes(&mut piece, &outcomes);
            }
        }
        piece[..8].copy_from_slice(&started.elapsed().as_secs_f64().to_le_bytes());
        piece
    }
}

/// Vocabulary bytes a job comes with.
pub(super) fn vocabulary_bytes_of(job: &Spec) -> Option<u64> {
    match job.stage {
        PhotoStage::Features(..) => Some(0),
        PhotoStage::Encode(ref p, _) => vocabulary_bytes(p, job.k),
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

#[cfg(test)]
mod tests {
    use super::*;
    use vocab_pipeline::encode::{Method, Norm};
    use vocab_pipeline::kmeans::Kernel;

    /// Descriptors of `dims` values in `dir`.
    fn at(dir: &Path, dims: u64) -> Option<Elsewhere> {
        Some(Elsewhere {
            dir: dir.display().to_string(),
            dims,
        })
    }

    #[test]
    fn a_stage_of_descriptors_made_elsewhere_is_checked_before_any_photo() {
        let tmp = tempfile::tempdir().expect("tmp");
        let random = FeatureParams {
            sampling: Sampling::Random {
                per_image: 10,
                seed: 1,
            },
            max_side: None,
            max_pixels: vocab_pipeline::image_io::MAX_PIXELS,
            mirror: false,
            patch: None,
            descriptor: vocab_pipeline::features::Descriptor::Hog,
        };
        let dense = FeatureParams {
            sampling: Sampling::Dense { stride: 8 },
            ..random
        };
        let made = EncodeParams {
            features: dense,
            norm: Norm::L1,
            levels: 1,
            strips: 0,
            method: Method::Hard,
            kernel: Kernel::F32,
            scales: vec![PATCH_SIDE],
            approx: None,
            dims: 12,
            foreign: true,
        };
        let hog = EncodeParams {
            dims: DIMS,
            foreign: false,
            ..made.clone()
        };
        let dir = tmp.path();
        // What passes: the sample's random rows, an encoding of their dimension.
        check_stage(&PhotoStage::Features(random, at(dir, 12)), 0).expect("a sample");
        check_stage(&PhotoStage::Encode(made.clone(), at(dir, 12)), 4).expect("an encode");
        let mirrored = FeatureParams {
            mirror: true,
            ..random
        };
        let resized = FeatureParams {
            patch: Some(24),
            ..random
        };
        for (stage, k, want) in [
            (PhotoStage::Features(dense, at(dir, 12)), 0, "random rows"),
            (PhotoStage::Features(mirrored, at(dir, 12)), 0, "mirror"),
            (
                PhotoStage::Features(resized, at(dir, 12)),
                0,
                "no patch side (24 px)",
            ),
            (PhotoStage::Features(random, at(dir, 0)), 0, "of 0 values"),
            (
                PhotoStage::Features(random, at(dir, 4097)),
                0,
                "of 4097 values",
            ),
            (
                PhotoStage::Encode(made.clone(), at(dir, 13)),
                4,
                "13 values",
            ),
            (PhotoStage::Encode(hog, at(dir, 512)), 4, "encoding of HOG"),
            (PhotoStage::Encode(made, None), 4, "without them"),
        ] {
            let err = check_stage(&stage, k).expect_err(want);
            assert!(err.contains(want), "{want}: {err}");
        }
        // A member without the folder says so, naming it.
        let gone = tmp.path().join("gone");
        let err = Describe::new(random, at(&gone, 12).as_ref()).expect_err("no folder");
        assert!(
            err.contains("gone") && err.contains("does not exist"),
            "{err}"
        );
        let read = Describe::new(random, at(dir, 12).as_ref()).expect("a folder");
        assert_eq!(read.dims(), 12);
        assert_eq!(Describe::new(random, None).expect("HOG").dims(), DIMS);
    }
}
