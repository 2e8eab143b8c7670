//! A k-means job's root, whatever its team: rank 0 of a team of ranks ([`Root`], which maps its
//! share too), or the driver of TCP workers ([`Driver`], with their recovery). Both are the
//! k-means [`Engine`]; [`Team`] is either, started from [`Nodes`], so a caller picks the nodes
//! once and runs the one k-means loop on what it started, or the one mixture loop (both are
//! also the mixture's [`MixtureEngine`]: its PCA and EM steps run as the same job's map steps).

use std::collections::BTreeMap;

use vocab_pipeline::kmeans::Centroids;
use vocab_pipeline::kmeans::engine::{Engine, StepResult};
use vocab_pipeline::mixture::{Engine as MixtureEngine, Moments, Statistic};
use vocab_pipeline::partition::Manifest;

use super::driver::{Driver, Options as DriverOptions};
use super::layout::Options;
use super::root::Root;
use crate::collective::calibration::{Calibration, labels};
use crate::engine::Nodes;
use crate::engine::crew::DriverError;

/// A k-means job started on its nodes.
pub enum Team<'a> {
    /// Rank 0 of a team of ranks.
    Ranks {
        /// The root half.
        root: Box<Root<'a>>,
        /// Host -> rack, as the job was given it.
        racks: BTreeMap<String, String>,
    },
    /// The driver of TCP workers.
    Workers(Box<Driver>),
}

impl std::fmt::Debug for Team<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ranks { root, .. } => f.debug_tuple("Ranks").field(root).finish(),
            Self::Workers(_) => f.debug_tuple("Workers").finish(),
        }
    }
}

impl<'a> Team<'a> {
    /// Starts the job on `nodes`: every member caches its share of the partitions of
    /// `manifest` as `options` say. On ranks the root maps a share too when
    /// `options.root_maps`; on TCP workers the driver only drives, the chunk size and the
    /// chains come from the cluster file's settings and its racks from its nodes
    /// (`options.plan.chunk`, `chains` and `racks` are the ranks' own).
    pub fn start(
        nodes: Nodes<'a>,
        options: Options,
        manifest: Manifest,
    ) -> Result<Self, DriverError> {
        match nodes {
            Nodes::Ranks { transport, members } => {
                let racks = options.racks.clone();
                // Names this job's partitions at the members (a fresh job each run).
                let job = rand::random::<u64>() >> 1;
                let root = Root::start(transport, members, options, manifest, job)
                    .map_err(DriverError::Engine)?;
                Ok(Self::Ranks {
                    root: Box::new(root),
                    racks,
                })
            }
            Nodes::Workers { cluster, secret } => {
                let options = DriverOptions {
                    dir: options.dir,
                    algorithm: options.plan.algorithm,
                    stage1: options.stage1,
                    assignment: options.assignment,
                    auto: options.auto,
                    known: options.known,
                    deal: options.deal,
                    remake: options.remake,
                };
                let driver = Driver::connect(cluster, secret, options, manifest)?;
                Ok(Self::Workers(Box::new(driver)))
            }
        }
    }

    /// The team, for messages: `the MPI ranks`, `the workers`.
    pub fn whence(&self) -> &'static str {
        match self {
            Self::Ranks { .. } => "the MPI ranks",
            Self::Workers(_) => "the workers",
        }
    }

    /// The members for people: `2 MPI ranks (chain 0@a (rack r1), 1@b)`, `2 workers (w0, w1),
    /// dropped w2`.
    pub fn describe(&self) -> String {
        match self {
            Self::Ranks { root, racks } => {
                // The chain as `rank@host`, with the host's rack where the map names one.
                let rack_of = |member: &str| {
                    let host = member.split_once('@').map_or(member, |(_, h)| h);
                    (racks.get(host))
                        .map_or_else(|| member.to_string(), |r| format!("{member} ({r})"))
                };
                let chain: Vec<String> = root.members().iter().map(|m| rack_of(m)).collect();
                format!(
                    "{} MPI ranks (chain {})",
                    root.transport().size(),
                    chain.join(", ")
                )
            }
            Self::Workers(driver) => {
                let (members, dropped) = (driver.members(), driver.dropped());
                format!(
                    "{} workers ({}){}",
                    members.len(),
                    members.join(", "),
                    if dropped.is_empty() {
                        String::new()
                    } else {
                        format!(", dropped {}", dropped.join(", "))
                    },
                )
            }
        }
    }

    /// The links measured (`--order auto`), with the members' names for people (`rank@host`
    /// on ranks) and their labels in saved links.
    pub fn calibration(&self) -> Option<(&Calibration, Vec<String>, Vec<String>)> {
        match self {
            Self::Ranks { root, .. } => {
                let hosts = root.hosts();
                let names = (hosts.iter().enumerate())
                    .map(|(r, h)| format!("{r}@{h}"))
                    .collect();
                (root.calibration()).map(|c| (c, names, labels(hosts)))
            }
            Self::Workers(driver) => {
                (driver.calibration()).map(|(c, names)| (c, names.clone(), names))
            }
        }
    }

    /// Partitions no member held that were made again from their photos (partition, host).
    pub fn remade(&self) -> &[(u32, String)] {
        match self {
            Self::Ranks { root, .. } => root.remade(),
            Self::Workers(driver) => driver.remade(),
        }
    }
}

impl Engine for Team<'_> {
    type Error = DriverError;

    fn step(&mut self, iteration: u64, centroids: &Centroids) -> Result<StepResult, DriverError> {
        match self {
            // (Transparent: the engine's own message.)
            Self::Ranks { root, .. } => {
                root.step(iteration, centroids).map_err(DriverError::Engine)
            }
            Self::Workers(driver) => driver.step(iteration, centroids),
        }
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, DriverError> {
        match self {
            Self::Ranks { root, .. } => root.rows(indices).map_err(DriverError::Engine),
            Self::Workers(driver) => driver.rows(indices),
        }
    }
}

impl MixtureEngine for Team<'_> {
    type Error = DriverError;

    fn moments(&mut self, step: u64, statistic: &Statistic) -> Result<Moments, DriverError> {
        match self {
            Self::Ranks { root, .. } => root.moments(step, statistic).map_err(DriverError::Engine),
            Self::Workers(driver) => driver.moments(step, statistic),
        }
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, DriverError> {
        Engine::rows(self, indices)
    }

    fn shape(&self) -> (u64, usize) {
        match self {
            Self::Ranks { root, .. } => root.shape(),
            Self::Workers(driver) => driver.shape(),
        }
    }
}
