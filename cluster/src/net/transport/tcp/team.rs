//! Forming a TCP team: the driver is member 0, the workers it names follow, and every pair of
//! members gets one authenticated connection.
//!
//! 1. The driver dials every worker and sends [`Message::Join`] (job, epoch, the members by
//!    rank, the worker's rank); that connection is the pair's link.
//! 2. A worker that accepts the join dials every worker of a higher rank and sends
//!    [`Message::Link`] on the new connection; it waits for the links of the workers below it,
//!    which its daemon files in [`Forming`] as they arrive (possibly before the join itself).
//! 3. With a link to every member, the worker answers [`Message::Joined`] and builds its
//!    [`TcpTransport`]; the driver builds its own once every worker joined.
//!
//! A worker that cannot link with a member answers [`Message::Unlinked`] naming it, so the
//! driver knows whom to suspect; one that refuses the job (another build, a team that does not
//! name it) answers [`Message::Refused`]. A link's authenticated name must be the member its
//! rank names. Every formation of a job has its own epoch, so the links of a failed formation
//! never mix with the next one's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::{Liveness, OnReceived, TcpTransport};
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::connection::Connection;
use crate::net::messages::{BUILD, Join, Link, Message, MessageError, recv, send};
use crate::net::peer::dial_name;

/// Links a worker holds for teams still forming, at most (further ones are refused).
const MAX_PENDING: usize = 1024;

/// Why a team did not form.
#[derive(Debug, Error)]
pub enum FormError {
    /// A member could not be reached or linked: retrying without it may help.
    #[error("{node}: {reason}")]
    Unreachable {
        /// The member suspected.
        node: String,
        /// What happened.
        reason: String,
    },
    /// A worker refused the job: retrying cannot help.
    #[error("worker {node} refused: {reason}")]
    Refused {
        /// The worker.
        node: String,
        /// Why.
        reason: String,
    },
}

/// Dials `name` as `me` and sends `first` on the new connection.
async fn open(
    cluster: &Cluster,
    secret: &Secret,
    me: &str,
    name: &str,
    first: &Message,
) -> Result<Connection, OpenError> {
    let mut conn = dial_name(cluster, name, secret, me).await?;
    send(&mut conn, first).await?;
    Ok(conn)
}

/// Why a member could not be reached with a first message.
#[derive(Debug, Error)]
pub enum OpenError {
    /// Dialing or the handshake failed.
    #[error(transparent)]
    Dial(#[from] crate::net::peer::DialError),
    /// The first message could not be sent.
    #[error("cannot send the first message")]
    Send(#[from] MessageError),
}

/// Why a link from another member was not filed.
#[derive(Debug, Error)]
pub enum LinkError {
    /// Too many links of forming teams wait already.
    #[error("{held} links of forming teams are waiting already")]
    Full {
        /// Links held.
        held: usize,
    },
    /// A rank that is no index.
    #[error("rank {0} out of range")]
    Rank(u64),
}

/// Why a worker refuses a join.
#[derive(Debug, Error)]
pub enum Refusal {
    /// Another build.
    #[error("it runs {ours}, the driver runs {theirs}; start the same build on every node")]
    Build {
        /// This worker's build.
        ours: String,
        /// The driver's.
        theirs: String,
    },
    /// The team does not name this worker where the join says.
    #[error("the team does not name {me} as rank {rank}")]
    NotMember {
        /// This worker.
        me: String,
        /// The rank the join gives it.
        rank: u64,
    },
    /// The join's driver is not the peer that sent it.
    #[error("{peer} sent a join that names another driver")]
    OtherDriver {
        /// The sender.
        peer: String,
    },
    /// A member this worker's cluster file does not list.
    #[error("member {0} is not in this worker's cluster file")]
    Unknown(String),
    /// A member named twice.
    #[error("member {0} is named twice")]
    Twice(String),
}

/// How long forming may take: dialing, then each member's handshake and answer.
fn deadline(cluster: &Cluster) -> Duration {
    let s = &cluster.settings;
    Duration::from_millis(
        s.connect_timeout_ms
            .saturating_add(s.io_timeout_ms.saturating_mul(2)),
    )
}

/// The driver's side: forms the team `driver_name` + `workers` (in rank order) for `(job,
/// epoch)` and returns member 0's transport. Call it on the runtime the links should run on.
pub async fn form(
    cluster: &Cluster,
    secret: &Secret,
    driver_name: &str,
    workers: &[String],
    job: u64,
    epoch: u64,
) -> Result<TcpTransport, FormError> {
    let mut names = vec![driver_name.to_string()];
    names.extend(workers.iter().cloned());
    let limit = deadline(cluster);
    let mut set = JoinSet::new();
    for (i, name) in workers.iter().enumerate() {
        let join = Join {
            job,
            epoch,
            members: names.clone(),
            rank: (i + 1) as u64,
            build: BUILD.into(),
        };
        let (cluster, secret, me, name) = (
            cluster.clone(),
            secret.clone(),
            driver_name.to_string(),
            name.clone(),
        );
        set.spawn(async move {
            let result = async {
                let unreachable = |reason: String| FormError::Unreachable {
                    node: name.clone(),
                    reason,
                };
                let mut conn = open(&cluster, &secret, &me, &name, &Message::Join(join))
                    .await
                    .map_err(|e| unreachable(vocab_pipeline::chain(&e)))?;
                let unreachable = |e: MessageError| unreachable(e.to_string());
                match recv(&mut conn, limit).await {
                    Ok(Message::Joined) => Ok(conn),
                    Ok(Message::Unlinked { node, reason }) => {
                        Err(FormError::Unreachable { node, reason })
                    }
                    Ok(other) => Err(unreachable(MessageError::Unexpected(other.name().into()))),
                    Err(MessageError::Remote(reason)) => Err(FormError::Refused {
                        node: name.clone(),
                        reason,
                    }),
                    Err(e) => Err(unreachable(e)),
                }
            }
            .await;
            (i + 1, result)
        });
    }
    let mut links: Vec<Option<Connection>> = (0..names.len()).map(|_| None).collect();
    let mut first: Option<FormError> = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((rank, Ok(conn))) => links[rank] = Some(conn),
            // The first failure dooms this formation: stop waiting for the others (a worker
            // may wait for a link of the failed member until its deadline).
            Ok((_, Err(e))) => {
                first.get_or_insert(e);
                set.abort_all();
            }
            Err(e) => {
                first.get_or_insert(FormError::Unreachable {
                    node: driver_name.to_string(),
                    reason: e.to_string(),
                });
            }
        }
    }
    if let Some(e) = first {
        return Err(e);
    }
    Ok(TcpTransport::new(
        &Handle::current(),
        0,
        names,
        links,
        Liveness::from_io_timeout(Duration::from_millis(cluster.settings.io_timeout_ms)),
        None,
    ))
}

#[derive(Debug)]
struct Pending {
    /// Rank -> (authenticated name, connection).
    links: BTreeMap<usize, (String, Connection)>,
    since: Instant,
}

/// A worker's links of teams still forming (filed by its daemon as they arrive).
#[derive(Debug, Default)]
pub struct Forming {
    pending: Mutex<HashMap<(u64, u64), Pending>>,
    arrived: Notify,
}

impl Forming {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64), Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Files the connection `conn` from `peer` (its authenticated name), sent with `link`.
    /// Links of formations older than `stale` are dropped first.
    pub fn link(
        &self,
        peer: String,
        conn: Connection,
        link: &Link,
        stale: Duration,
    ) -> Result<(), LinkError> {
        let mut pending = self.lock();
        pending.retain(|_, p| p.since.elapsed() < stale);
        let held: usize = pending.values().map(|p| p.links.len()).sum();
        if held >= MAX_PENDING {
            return Err(LinkError::Full { held });
        }
        let rank = usize::try_from(link.rank).map_err(|_| LinkError::Rank(link.rank))?;
        pending
            .entry((link.job, link.epoch))
            .or_insert_with(|| Pending {
                links: BTreeMap::new(),
                since: Instant::now(),
            })
            .links
            .insert(rank, (peer, conn));
        drop(pending);
        self.arrived.notify_waiters();
        Ok(())
    }

    /// Waits until the links of ranks `1..below` of `(job, epoch)` are filed and takes them.
    async fn wait(
        &self,
        join: &Join,
        below: usize,
        limit: Duration,
    ) -> Result<BTreeMap<usize, Connection>, FormError> {
        let key = (join.job, join.epoch);
        let started = Instant::now();
        loop {
            let notified = self.arrived.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut pending = self.lock();
                let have = pending.get(&key).map_or(0, |p| {
                    (1..below).filter(|r| p.links.contains_key(r)).count()
                });
                if have + 1 >= below {
                    let p = pending.remove(&key).map(|p| p.links).unwrap_or_default();
                    let mut links = BTreeMap::new();
                    for (rank, (peer, conn)) in p {
                        let want = join.members.get(rank).filter(|_| rank < below);
                        match want {
                            Some(name) if *name == peer => {
                                links.insert(rank, conn);
                            }
                            _ => {
                                return Err(FormError::Refused {
                                    node: peer.clone(),
                                    reason: format!(
                                        "it linked as rank {rank} of job {}, which it is not",
                                        join.job
                                    ),
                                });
                            }
                        }
                    }
                    return Ok(links);
                }
            }
            let left = limit.saturating_sub(started.elapsed());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                let pending = self.lock();
                let missing = (1..below)
                    .find(|r| !pending.get(&key).is_some_and(|p| p.links.contains_key(r)))
                    .and_then(|r| join.members.get(r))
                    .cloned()
                    .unwrap_or_default();
                return Err(FormError::Unreachable {
                    node: missing,
                    reason: format!("no link from it within {} ms", limit.as_millis()),
                });
            }
        }
    }
}

/// The worker a join arrives at.
#[derive(Debug, Clone, Copy)]
pub struct Host<'a> {
    /// Its cluster file.
    pub cluster: &'a Cluster,
    /// The shared secret.
    pub secret: &'a Secret,
    /// Its name.
    pub name: &'a str,
    /// Its links of teams still forming.
    pub forming: &'a Forming,
}

/// Tells the driver why this worker refuses the join; the error to return.
async fn refuse(conn: &mut Connection, message: String) -> MessageError {
    let refused = Message::Refused {
        message: message.clone(),
    };
    match send(conn, &refused).await {
        Ok(()) => MessageError::Remote(message),
        Err(e) => e,
    }
}

/// Checks a join against this worker (`me`, dialed by `peer`).
fn check_join(cluster: &Cluster, me: &str, peer: &str, join: &Join) -> Result<usize, Refusal> {
    if join.build != BUILD {
        return Err(Refusal::Build {
            ours: BUILD.into(),
            theirs: join.build.clone(),
        });
    }
    let rank = usize::try_from(join.rank).unwrap_or(usize::MAX);
    if join.members.get(rank).is_none_or(|m| m != me) || rank == 0 {
        return Err(Refusal::NotMember {
            me: me.into(),
            rank: join.rank,
        });
    }
    if join.members.first().is_none_or(|d| d != peer) {
        return Err(Refusal::OtherDriver { peer: peer.into() });
    }
    for (i, name) in join.members.iter().enumerate().skip(1) {
        if !cluster.nodes.iter().any(|n| n.name == *name) {
            return Err(Refusal::Unknown(name.clone()));
        }
        if join.members[..i].contains(name) {
            return Err(Refusal::Twice(name.clone()));
        }
    }
    Ok(rank)
}

/// The worker's side of [`Message::Join`] received on `conn` from `peer` (the driver): links
/// up with every member and answers; returns this member's transport, or an error when the
/// team did not form (the driver was told why).
pub async fn join(
    host: Host<'_>,
    peer: &str,
    mut conn: Connection,
    join: Join,
    on_received: Option<OnReceived>,
) -> Result<TcpTransport, MessageError> {
    let Host {
        cluster,
        secret,
        name: me,
        forming,
    } = host;
    let rank = match check_join(cluster, me, peer, &join) {
        Ok(rank) => rank,
        Err(refusal) => return Err(refuse(&mut conn, refusal.to_string()).await),
    };
    let limit = deadline(cluster);
    let mut dials = JoinSet::new();
    for (r, name) in join.members.iter().enumerate().skip(rank + 1) {
        let link = Link {
            job: join.job,
            epoch: join.epoch,
            rank: rank as u64,
        };
        let (cluster, secret, me, name) = (
            cluster.clone(),
            secret.clone(),
            me.to_string(),
            name.clone(),
        );
        dials.spawn(async move {
            let result = open(&cluster, &secret, &me, &name, &Message::Link(link)).await;
            (r, name, result)
        });
    }
    let mut links: Vec<Option<Connection>> = (0..join.members.len()).map(|_| None).collect();
    let mut failed: Option<(String, String)> = None;
    while let Some(done) = dials.join_next().await {
        match done {
            Ok((r, _, Ok(c))) => links[r] = Some(c),
            Ok((_, node, Err(reason))) => {
                failed.get_or_insert((node, vocab_pipeline::chain(&reason)));
            }
            Err(e) => {
                failed.get_or_insert((me.to_string(), e.to_string()));
            }
        }
    }
    if failed.is_none() {
        match forming.wait(&join, rank, limit).await {
            Ok(lower) => {
                for (r, c) in lower {
                    links[r] = Some(c);
                }
            }
            Err(FormError::Unreachable { node, reason }) => failed = Some((node, reason)),
            Err(FormError::Refused { node, reason }) => {
                return Err(refuse(&mut conn, format!("{node}: {reason}")).await);
            }
        }
    }
    if let Some((node, reason)) = failed {
        let text = format!("cannot link with {node}: {reason}");
        send(&mut conn, &Message::Unlinked { node, reason }).await?;
        return Err(MessageError::Remote(text));
    }
    send(&mut conn, &Message::Joined).await?;
    links[0] = Some(conn);
    Ok(TcpTransport::new(
        &Handle::current(),
        rank,
        join.members,
        links,
        Liveness::from_io_timeout(Duration::from_millis(cluster.settings.io_timeout_ms)),
        on_received,
    ))
}
