//! A team of TCP daemons and the driver (member 0): membership, failure detection and
//! recovery, whatever the job.
//!
//! The driver forms a team (`crate::net::transport::tcp::team`): itself as member 0, the cluster
//! file's nodes in chain order after it, linked pairwise over authenticated connections. A member
//! that breaks a link, falls silent for the I/O timeout, or cannot be reached while a team forms
//! fails the attempt: the driver drops the team (its links close, so every worker leaves it),
//! pings every member, drops the ones that do not answer, forms a new team under a new epoch
//! (the workers keep what their jobs cached), and the job redoes its attempt (`Crew::recover`).

use std::time::Duration;

use thiserror::Error;
use tokio::task::JoinSet;

use super::error::EngineError;
use super::root::{Members, hello};
use crate::collective::CollectiveError;
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::peer::ping;
use crate::net::transport::tcp::TcpTransport;
use crate::net::transport::tcp::team::{FormError, form};

/// The name the driver authenticates with.
pub const DRIVER: &str = "driver";

/// Errors of the driver.
#[derive(Debug, Error)]
pub enum DriverError {
    /// A worker cannot take part (other build, other partitions); retrying cannot help.
    #[error("worker {node} refused: {reason}")]
    Refused {
        /// The worker.
        node: String,
        /// Why.
        reason: String,
    },
    /// Attempts exhausted.
    #[error("{what} failed at node {node} after {attempts} attempts: {reason}")]
    Failed {
        /// What failed: `starting the job`, `iteration 3`, `broadcast`.
        what: String,
        /// Attempts made.
        attempts: u32,
        /// The node blamed last.
        node: String,
        /// What happened.
        reason: String,
    },
    /// Every member was dropped.
    #[error("no workers left (dropped: {})", .0.join(", "))]
    NoWorkers(Vec<String>),
    /// The engine failed in a way retrying cannot mend (data out of range, counts that do
    /// not add up, a protocol error).
    #[error(transparent)]
    Engine(EngineError),
    /// The driver's own runtime could not start.
    #[error("cannot start the driver's runtime: {0}")]
    Runtime(std::io::Error),
}

/// A failed attempt that a new team may mend.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) node: String,
    pub(crate) reason: String,
}

pub(crate) enum Attempt {
    Fatal(DriverError),
    Retry(Failure),
}

/// What a run with recovery returns beside its value.
#[derive(Debug)]
pub(crate) struct Recovered<T> {
    pub(crate) value: T,
    pub(crate) attempts: u32,
    pub(crate) dropped: Vec<String>,
    pub(crate) failures: Vec<String>,
}

/// Membership of the daemons' teams, and recovery from lost members: shared by every job's
/// driver (k-means, photo stages, the collectives benchmark).
pub(crate) struct Crew {
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) cluster: Cluster,
    pub(crate) secret: Secret,
    /// Live workers, in chain order.
    pub(crate) members: Vec<String>,
    pub(crate) dropped: Vec<String>,
    pub(crate) job: u64,
    pub(crate) epoch: u64,
}

impl Crew {
    pub(crate) fn new(cluster: Cluster, secret: Secret) -> Result<Self, DriverError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vocab-driver")
            .enable_all()
            .build()
            .map_err(DriverError::Runtime)?;
        let members = cluster.chain_nodes().map(|n| n.name.clone()).collect();
        Ok(Self {
            runtime,
            cluster,
            secret,
            members,
            dropped: Vec::new(),
            job: rand::random::<u64>() >> 1,
            epoch: 0,
        })
    }

    /// Forms a team of the driver and the live workers under a new epoch.
    fn form(&mut self) -> Result<TcpTransport, Attempt> {
        self.epoch += 1;
        let formed = self.runtime.block_on(form(
            &self.cluster,
            &self.secret,
            DRIVER,
            &self.members,
            self.job,
            self.epoch,
        ));
        formed.map_err(|e| match e {
            FormError::Refused { node, reason } => {
                Attempt::Fatal(DriverError::Refused { node, reason })
            }
            FormError::Unreachable { node, reason } => Attempt::Retry(Failure { node, reason }),
        })
    }

    /// Pings every member and drops the ones that do not answer.
    fn drop_dead(&mut self) -> Result<(), DriverError> {
        let alive = self.runtime.block_on(async {
            let mut set = JoinSet::new();
            for (j, name) in self.members.iter().enumerate() {
                let Some(node) = self.cluster.nodes.iter().find(|n| n.name == *name).cloned()
                else {
                    continue;
                };
                let (cluster, secret) = (self.cluster.clone(), self.secret.clone());
                set.spawn(async move { (j, ping(&cluster, &node, &secret, DRIVER).await.is_ok()) });
            }
            let mut alive = vec![false; self.members.len()];
            while let Some(Ok((j, ok))) = set.join_next().await {
                alive[j] = ok;
            }
            alive
        });
        let mut j = 0;
        self.members.retain(|m| {
            let keep = alive[j];
            j += 1;
            if !keep {
                self.dropped.push(m.clone());
            }
            keep
        });
        if self.members.is_empty() {
            return Err(DriverError::NoWorkers(self.dropped.clone()));
        }
        Ok(())
    }

    /// Runs `work` on the session in `session`, started by `start` on a new team when there
    /// is none, until it succeeds, fails for good, or the cluster's retries run out. After a
    /// failure the session is dropped (its links close, so every worker leaves the team), the
    /// silent members are dropped, and the next attempt starts on a new team. `what` names the
    /// work in errors.
    pub(crate) fn recover<S, T>(
        &mut self,
        what: &str,
        session: &mut Option<S>,
        mut start: impl FnMut(TcpTransport) -> Result<S, Attempt>,
        mut work: impl FnMut(&mut S) -> Result<T, EngineError>,
    ) -> Result<Recovered<T>, DriverError> {
        let dropped_before = self.dropped.len();
        let mut failures = Vec::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let names: Vec<String> = std::iter::once(DRIVER.to_string())
                .chain(self.members.iter().cloned())
                .collect();
            let s = match session {
                Some(s) => s,
                None => match self.form().and_then(&mut start) {
                    Ok(s) => session.insert(s),
                    Err(Attempt::Fatal(e)) => return Err(e),
                    Err(Attempt::Retry(f)) => {
                        self.failed(what, attempts, f, &mut failures)?;
                        continue;
                    }
                },
            };
            match work(s).map_err(|e| classify(e, &names)) {
                Ok(value) => {
                    return Ok(Recovered {
                        value,
                        attempts,
                        dropped: self.dropped[dropped_before..].to_vec(),
                        failures,
                    });
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(f)) => {
                    *session = None;
                    self.failed(what, attempts, f, &mut failures)?;
                }
            }
        }
    }

    /// Books a failed attempt: backs off, drops the members that do not answer a ping, and
    /// gives up when the retries are spent. The driver sees only its own links, so the member
    /// that reported a failure may be the neighbour of the one that died: a member that does
    /// not answer is named instead.
    fn failed(
        &mut self,
        what: &str,
        attempts: u32,
        f: Failure,
        failures: &mut Vec<String>,
    ) -> Result<(), DriverError> {
        failures.push(format!("{}: {}", f.node, f.reason));
        std::thread::sleep(Duration::from_millis(50 << (attempts - 1).min(6)));
        let before = self.dropped.len();
        let alive = self.drop_dead();
        if attempts > self.cluster.settings.retries {
            let (node, reason) = match self.dropped.get(before) {
                Some(dead) if *dead != f.node => (
                    dead.clone(),
                    format!("it does not answer; {} reported: {}", f.node, f.reason),
                ),
                _ => (f.node, f.reason),
            };
            return Err(DriverError::Failed {
                what: what.to_string(),
                attempts,
                node,
                reason,
            });
        }
        alive
    }
}

/// Sorts an engine error on the team `names` into what a new team may mend (a member lost)
/// and what it cannot.
pub(crate) fn classify(e: EngineError, names: &[String]) -> Attempt {
    let name = |m: usize| {
        names
            .get(m)
            .cloned()
            .unwrap_or_else(|| format!("member {m}"))
    };
    match e {
        EngineError::Collective(CollectiveError::Transport(t)) => {
            let node = t.suspect().map_or_else(|| DRIVER.to_string(), name);
            Attempt::Retry(Failure {
                node,
                reason: t.to_string(),
            })
        }
        EngineError::Refused { rank, reason, .. } => Attempt::Fatal(DriverError::Refused {
            node: name(rank),
            reason,
        }),
        other => Attempt::Fatal(DriverError::Engine(other)),
    }
}

impl Crew {
    /// The current team's members by rank: the driver, then the live workers.
    pub(crate) fn names(&self) -> Vec<String> {
        std::iter::once(DRIVER.to_string())
            .chain(self.members.iter().cloned())
            .collect()
    }
}

/// Starts a job on a new team: every member's hello, then `start` with what the hello
/// gathered; what fails is sorted by whether a new team may mend it.
pub(crate) fn begin<S>(
    transport: TcpTransport,
    start: impl FnOnce(TcpTransport, Members) -> Result<S, EngineError>,
) -> Result<S, Attempt> {
    let names = transport.names().to_vec();
    hello(&transport)
        .and_then(|members| start(transport, members))
        .map_err(|e| classify(e, &names))
}
