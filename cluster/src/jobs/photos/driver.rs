//! A photo stage (features or encode) on the worker daemons, with their recovery.

use std::collections::BTreeMap;
use std::ops::Range;

use vocab_pipeline::encode::Words;
use vocab_pipeline::features::Outcome;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::store::Element;

use super::job::PhotoStage;
use super::root::{MemberTime, PhotoRoot};
use super::wire::Value;
use crate::engine::crew::{self, Attempt, Crew, DriverError};
use crate::engine::{Members, exit};
use crate::jobs::born::Born;
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::transport::tcp::TcpTransport;

/// A photo stage (features or encode) on the daemons: the driver deals rounds of photos out to
/// the workers and takes their results in picture-id order (`crate::jobs::photos`). A round lost with
/// a member is redone on a new team of the members that answer; rounds already returned stay
/// returned.
pub struct PhotoDriver {
    crew: Crew,
    collection: Collection,
    stage: PhotoStage,
    vocabulary: Option<Words>,
    /// Features whose patches the workers keep ([`PhotoDriver::born`]), with the partition
    /// folder under which they also save their kept rounds.
    keep: Option<Option<String>>,
    root: Option<PhotoRoot<'static>>,
    /// Time per member over every team so far, by name.
    times: BTreeMap<String, MemberTime>,
    bytes: u64,
}

impl std::fmt::Debug for PhotoDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhotoDriver")
            .field("members", &self.crew.members)
            .field("dropped", &self.crew.dropped)
            .field("epoch", &self.crew.epoch)
            .finish()
    }
}

/// Starts a photo job on a new team: every member's hello, then the job (names by rank as the
/// members' labels).
fn start_photos(
    transport: TcpTransport,
    collection: &Collection,
    stage: &PhotoStage,
    vocabulary: Option<&Words>,
    keep: Option<Option<&str>>,
) -> Result<PhotoRoot<'static>, Attempt> {
    crew::begin(transport, |transport, _| {
        let members = Members {
            hosts: transport.names().to_vec(),
        };
        match (keep, stage) {
            (Some(dir), stage) => PhotoRoot::start_keeping(
                Box::new(transport),
                &members,
                collection,
                stage,
                false,
                dir,
            ),
            _ => PhotoRoot::start(
                Box::new(transport),
                &members,
                collection,
                stage,
                vocabulary,
                false,
            ),
        }
    })
}

impl PhotoDriver {
    /// Forms a team of every node of `cluster` and starts the photo job on it: each worker
    /// reads `collection`'s photos at the same path (it checks a few are there) and, for
    /// encode, takes the `vocabulary`. Unreachable nodes are dropped; a node that refuses the
    /// job (other build, photos missing) is an error.
    ///
    /// Call it from a plain thread, not from inside a tokio runtime.
    pub fn connect(
        cluster: Cluster,
        secret: Secret,
        collection: Collection,
        stage: PhotoStage,
        vocabulary: Option<Words>,
    ) -> Result<Self, DriverError> {
        Self::begin(cluster, secret, collection, stage, vocabulary, None)
    }

    /// [`PhotoDriver::connect`] for a features job whose workers keep the patches they
    /// describe and cut them into partitions where they are ([`PhotoDriver::born`]); with
    /// `dir`, they also save their kept rounds there ([`PhotoRoot::start_keeping`]).
    pub fn connect_keeping(
        cluster: Cluster,
        secret: Secret,
        collection: Collection,
        stage: PhotoStage,
        dir: Option<String>,
    ) -> Result<Self, DriverError> {
        Self::begin(cluster, secret, collection, stage, None, Some(dir))
    }

    fn begin(
        cluster: Cluster,
        secret: Secret,
        collection: Collection,
        stage: PhotoStage,
        vocabulary: Option<Words>,
        keep: Option<Option<String>>,
    ) -> Result<Self, DriverError> {
        let mut driver = Self {
            crew: Crew::new(cluster, secret)?,
            collection,
            stage,
            vocabulary,
            keep,
            root: None,
            times: BTreeMap::new(),
            bytes: 0,
        };
        let (c, st, v, k) = (
            &driver.collection,
            &driver.stage,
            driver.vocabulary.as_ref(),
            driver.keep.as_ref().map(Option::as_deref),
        );
        driver.crew.recover(
            "starting the photo job",
            &mut driver.root,
            |t| start_photos(t, c, st, v, k),
            |_| Ok(()),
        )?;
        Ok(driver)
    }

    /// The whole job of [`PhotoDriver::connect_keeping`]: the workers describe their shards and
    /// keep the patches ([`PhotoRoot::kept_rounds`], `progress` told the photos done), then cut
    /// them into `parts` partitions in their folders `dir` ([`PhotoRoot::cut`]). Returns each
    /// photo's size and patch count and the partitions' placing. A member lost on the way
    /// takes its patches with it: the job is done again on a new team of the members that
    /// answer.
    pub fn born(
        &mut self,
        dir: &str,
        parts: usize,
        element: Element,
        source: &str,
        progress: &mut dyn FnMut(usize),
    ) -> Result<(Vec<Outcome<()>>, Born), DriverError> {
        let (c, st, v, keep) = (
            &self.collection,
            &self.stage,
            self.vocabulary.as_ref(),
            self.keep.as_ref().map(Option::as_deref),
        );
        let done = self.crew.recover(
            "the kept features",
            &mut self.root,
            |t| start_photos(t, c, st, v, keep),
            |root| {
                let sized = root.kept_rounds(progress)?;
                let born = root.cut(dir, parts, element, source)?;
                Ok((sized, born, root.take_times(), root.take_bytes()))
            },
        )?;
        let (sized, born, times, bytes) = done.value;
        self.add(times, bytes);
        Ok((sized, born))
    }

    /// Adds a team's member times and bytes to the stage's.
    fn add(&mut self, times: Vec<MemberTime>, bytes: u64) {
        for t in times {
            let entry = self.times.entry(t.host.clone()).or_insert(MemberTime {
                host: t.host,
                ..MemberTime::default()
            });
            entry.seconds += t.seconds;
            entry.photos += t.photos;
        }
        self.bytes += bytes;
    }

    /// Current members, in rank order.
    pub fn members(&self) -> Vec<String> {
        self.crew.members.clone()
    }

    /// Members dropped so far.
    pub fn dropped(&self) -> &[String] {
        &self.crew.dropped
    }

    /// Has the workers do the photos `range` and returns their results in picture-id order,
    /// redoing the round on a new team when a member is lost.
    /// With `next`, the workers start on that range early (see [`PhotoRoot::round`]).
    pub fn round<T: Value>(
        &mut self,
        range: Range<usize>,
        next: Option<Range<usize>>,
    ) -> Result<Vec<Outcome<T>>, DriverError> {
        let (c, st, v, keep) = (
            &self.collection,
            &self.stage,
            self.vocabulary.as_ref(),
            self.keep.as_ref().map(Option::as_deref),
        );
        let done = self.crew.recover(
            &format!("photos {}..{}", range.start, range.end),
            &mut self.root,
            |t| start_photos(t, c, st, v, keep),
            |root| {
                let outcomes = root.round::<T>(range.clone(), next.clone())?;
                Ok((outcomes, root.take_times(), root.take_bytes()))
            },
        )?;
        let (outcomes, times, bytes) = done.value;
        self.add(times, bytes);
        Ok(outcomes)
    }

    /// Each member's time over the stage (members dropped on the way included).
    pub fn times(&self) -> Vec<MemberTime> {
        self.times.values().cloned().collect()
    }

    /// Bytes the stage moved: the job to every member and the results to the driver.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for PhotoDriver {
    fn drop(&mut self) {
        if let Some(root) = self.root.take() {
            let _ = exit(root.transport());
        }
    }
}
