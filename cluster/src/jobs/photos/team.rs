//! A photo job's root, whatever its team: rank 0 of MPI ranks (or of an in-memory team), which
//! does photos too, or the driver of TCP workers, with their recovery. What a photo stage asks
//! of its nodes (rounds of photos, the kept features cut into partitions, each member's time)
//! is asked here once, so the caller picks the team when it starts the job and never again.

use std::ops::Range;

use vocab_pipeline::encode::Words;
use vocab_pipeline::features::Outcome;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::store::Element;

use super::driver::PhotoDriver;
use super::job::PhotoStage;
use super::root::{MemberTime, PhotoRoot};
use super::wire::Value;
use crate::engine::Nodes;
use crate::engine::crew::DriverError;
use crate::jobs::born::Born;

/// A photo job started on its nodes.
pub enum PhotoTeam<'a> {
    /// Rank 0 of a team of ranks.
    Ranks(Box<PhotoRoot<'a>>),
    /// The driver of TCP workers.
    Workers(Box<PhotoDriver>),
}

impl std::fmt::Debug for PhotoTeam<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ranks(root) => f.debug_tuple("Ranks").field(root).finish(),
            Self::Workers(_) => f.debug_tuple("Workers").finish(),
        }
    }
}

impl<'a> PhotoTeam<'a> {
    /// Starts `stage` on `nodes`: `collection` as the members see it and, for encode, the
    /// `vocabulary` ([`PhotoRoot::start`], [`PhotoDriver::connect`]).
    pub fn start(
        nodes: Nodes<'a>,
        collection: &Collection,
        stage: &PhotoStage,
        vocabulary: Option<&Words>,
    ) -> Result<Self, DriverError> {
        Ok(match nodes {
            Nodes::Ranks { transport, members } => Self::Ranks(Box::new(
                PhotoRoot::start(transport, members, collection, stage, vocabulary, true)
                    .map_err(DriverError::Engine)?,
            )),
            Nodes::Workers { cluster, secret } => Self::Workers(Box::new(PhotoDriver::connect(
                cluster,
                secret,
                collection.clone(),
                stage.clone(),
                vocabulary.cloned(),
            )?)),
        })
    }

    /// Starts a features job whose members keep the patches they describe, saving their kept
    /// rounds in `dir` (the partition folder, as they see it) so that a job run again takes
    /// them back ([`PhotoRoot::start_keeping`], [`PhotoDriver::connect_keeping`]); then
    /// [`PhotoTeam::born`].
    pub fn start_keeping(
        nodes: Nodes<'a>,
        collection: &Collection,
        stage: &PhotoStage,
        dir: &str,
    ) -> Result<Self, DriverError> {
        Ok(match nodes {
            Nodes::Ranks { transport, members } => Self::Ranks(Box::new(
                PhotoRoot::start_keeping(transport, members, collection, stage, true, Some(dir))
                    .map_err(DriverError::Engine)?,
            )),
            Nodes::Workers { cluster, secret } => {
                Self::Workers(Box::new(PhotoDriver::connect_keeping(
                    cluster,
                    secret,
                    collection.clone(),
                    stage.clone(),
                    Some(dir.to_string()),
                )?))
            }
        })
    }

    /// Members that do photos.
    pub fn workers(&self) -> usize {
        match self {
            Self::Ranks(root) => root.workers(),
            Self::Workers(driver) => driver.members().len(),
        }
    }

    /// The photos `range` done by the members, results in picture-id order (`next`: the round
    /// after, started early). The TCP driver redoes a round lost with a member on a new team.
    pub fn round<T: Value>(
        &mut self,
        range: Range<usize>,
        next: Option<Range<usize>>,
    ) -> Result<Vec<Outcome<T>>, DriverError> {
        match self {
            // (Transparent: the engine's own message.)
            Self::Ranks(root) => root.round::<T>(range, next).map_err(DriverError::Engine),
            Self::Workers(driver) => driver.round::<T>(range, next),
        }
    }

    /// The whole job of [`PhotoTeam::start_keeping`]: the members describe their shards and
    /// keep the patches (`progress` told the photos done), then cut them into `parts`
    /// partitions of `element`s in `dir` (`source` names the features in the manifest).
    /// Returns each photo's size and patch count and the partitions' placing.
    pub fn born(
        &mut self,
        dir: &str,
        parts: usize,
        element: Element,
        source: &str,
        progress: &mut dyn FnMut(usize),
    ) -> Result<(Vec<Outcome<()>>, Born), DriverError> {
        match self {
            Self::Ranks(root) => {
                let sized = root.kept_rounds(progress).map_err(DriverError::Engine)?;
                let born = (root.cut(dir, parts, element, source)).map_err(DriverError::Engine)?;
                Ok((sized, born))
            }
            Self::Workers(driver) => driver.born(dir, parts, element, source, progress),
        }
    }

    /// Each member's time and photos over the job (ranks named `rank@host`; TCP members
    /// dropped on the way included).
    pub fn times(&self) -> Vec<MemberTime> {
        match self {
            Self::Ranks(root) => (root.times().into_iter().enumerate())
                .map(|(r, t)| MemberTime {
                    host: format!("{r}@{}", t.host),
                    ..t
                })
                .collect(),
            Self::Workers(driver) => driver.times(),
        }
    }

    /// Bytes the job moved: the job to every member, the results to the root.
    pub fn bytes(&self) -> u64 {
        match self {
            Self::Ranks(root) => root.bytes(),
            Self::Workers(driver) => driver.bytes(),
        }
    }

    /// Members dropped so far (TCP workers only: a lost rank ends an MPI job).
    pub fn dropped(&self) -> Vec<String> {
        match self {
            Self::Ranks(_) => Vec::new(),
            Self::Workers(driver) => driver.dropped().to_vec(),
        }
    }
}
