//! The worker daemon: accepts authenticated connections, answers pings, and serves the jobs of
//! drivers. A [`Message::Join`] makes it a member of a team (`crate::net::transport::tcp::team`),
//! which it then serves with every job (`crate::engine::serve` over `crate::jobs::members`:
//! k-means steps, photo rounds, cuts, broadcasts) on a thread of its own until the driver ends
//! the job or the team breaks; a [`Message::Link`] from another worker is filed for the team it
//! belongs to. The jobs of the last team stay for the next (the partitions of a k-means job stay
//! open). Faults are injected through the [`Hooks`] the caller passes in.
//!
//! Each connection is one task until it is handed to a team. Before authentication a
//! connection has a small frame limit and small buffers, a deadline for each stage of the
//! handshake (its hello, then its proof), and a place in the worker's
//! [`Admission`](crate::admission::Admission): every connection is admitted at once up to a
//! bound far above what a flood holds, with random early drop near it, and none is evicted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use crate::admission::{Admission, Ticket};
use crate::engine::{Checkpoint, Hooks, Job};
use crate::net::auth::{Secret, server_hello, server_prove};
use crate::net::config::Cluster;
use crate::net::connection::Connection;
use crate::net::frame::Frame;
use crate::net::messages::Message;
use crate::net::transport::tcp::team::{self, Forming, Host};

/// Why a worker stopped serving a connection.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The peer did not authenticate.
    #[error("handshake")]
    Handshake(#[source] crate::net::auth::AuthError),
    /// The worker is shutting down.
    #[error("the worker is stopping")]
    Stopping,
    /// The connection failed.
    #[error("{peer}")]
    Connection {
        /// The authenticated peer.
        peer: String,
        /// What failed.
        source: crate::net::connection::ConnectionError,
    },
    /// A control message that does not parse.
    #[error("{peer}")]
    Message {
        /// The authenticated peer.
        peer: String,
        /// What is wrong.
        source: crate::net::messages::MessageError,
    },
    /// A frame or message the worker does not take here.
    #[error("{peer}: unexpected {what}")]
    Unexpected {
        /// The authenticated peer.
        peer: String,
        /// What came.
        what: String,
    },
    /// The job's team did not form.
    #[error("job {job:x} epoch {epoch}")]
    Join {
        /// Job id.
        job: u64,
        /// Epoch.
        epoch: u64,
        /// Why.
        source: crate::net::messages::MessageError,
    },
    /// A link of a forming team was not filed.
    #[error(transparent)]
    Link(#[from] team::LinkError),
    /// No thread for the job.
    #[error("cannot start a thread for job {job:x}")]
    Thread {
        /// Job id.
        job: u64,
        /// Why.
        source: std::io::Error,
    },
}

/// Authenticated connections a worker serves at once; further ones wait for a slot.
const MAX_CONNECTIONS: usize = 256;
/// Longest stage of a handshake: from the connection to its hello, and from the challenge to
/// the proof (each a small frame an honest peer sends at once).
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(3);
/// Payload limit before authentication: a Hello is a name and a nonce.
pub const HANDSHAKE_MAX_PAYLOAD: usize = 1024;
/// Closed connections a worker reports per second (the rest are counted, then summarised).
const LOG_PER_SECOND: u64 = 10;

/// A running worker's identity and state.
#[derive(Debug)]
pub struct Worker {
    name: String,
    cluster: Cluster,
    secret: Secret,
    received: AtomicU64,
    log_window: AtomicU64,
    log_count: AtomicU64,
    log_skipped: AtomicU64,
    /// Links of teams still forming.
    forming: Forming,
    /// The jobs of the last team served, for the next team (k-means keeps its partitions
    /// open); taken while a team runs, so a team formed meanwhile starts with fresh jobs.
    jobs: std::sync::Mutex<Option<Vec<Box<dyn Job>>>>,
    /// What happens at checkpoints (fault injection in tests).
    hooks: Arc<dyn Hooks + Send>,
}

impl Worker {
    /// A worker named `name` of `cluster`.
    pub fn new(
        name: &str,
        cluster: Cluster,
        secret: Secret,
        hooks: Arc<dyn Hooks + Send>,
    ) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_string(),
            cluster,
            secret,
            received: AtomicU64::new(0),
            log_window: AtomicU64::new(0),
            log_count: AtomicU64::new(0),
            log_skipped: AtomicU64::new(0),
            forming: Forming::default(),
            jobs: std::sync::Mutex::new(None),
            hooks,
        })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cluster the node belongs to.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Accepts connections until the listener fails.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        let mut backoff = Duration::from_millis(10);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let admission = Arc::new(Admission::default());
        loop {
            match listener.accept().await {
                Ok((socket, _)) => {
                    backoff = Duration::from_millis(10);
                    let ticket = match admission.arrive() {
                        Ok(ticket) => ticket,
                        Err(refused) => {
                            self.log_closed(&refused.to_string());
                            continue;
                        }
                    };
                    let (worker, slots) = (Arc::clone(&self), Arc::clone(&slots));
                    tokio::spawn(async move {
                        let result = worker.handle(socket, ticket, slots);
                        if let Err(e) = result.await {
                            worker.log_closed(&vocab_pipeline::chain(&e));
                        }
                    });
                }
                // Too many open files and the like: back off instead of spinning, and keep
                // serving (a flood that takes every descriptor for a while must not end the
                // worker); other errors end it after the backoff grew past 2 s.
                Err(e)
                    if backoff < Duration::from_secs(2)
                        || matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) =>
                {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reports a closed connection on stderr, at most [`LOG_PER_SECOND`] lines a second; the
    /// lines left out are counted in the next one that is written.
    fn log_closed(&self, reason: &str) {
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let window = self.log_window.load(Ordering::Relaxed);
        if window != second {
            self.log_window.store(second, Ordering::Relaxed);
            self.log_count.store(0, Ordering::Relaxed);
        }
        if self.log_count.fetch_add(1, Ordering::Relaxed) < LOG_PER_SECOND {
            let skipped = self.log_skipped.swap(0, Ordering::Relaxed);
            let skipped = if skipped > 0 {
                format!(" ({skipped} more not shown)")
            } else {
                String::new()
            };
            eprintln!("worker {}: connection closed: {reason}{skipped}", self.name);
        } else {
            self.log_skipped.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn handle(
        self: &Arc<Self>,
        socket: TcpStream,
        ticket: Ticket,
        slots: Arc<tokio::sync::Semaphore>,
    ) -> Result<(), ServeError> {
        let _ = socket.set_nodelay(true);
        let mut conn = Connection::with_limit(socket, HANDSHAKE_MAX_PAYLOAD);
        let deadline = HANDSHAKE_DEADLINE.min(Duration::from_millis(
            self.cluster.settings.io_timeout_ms.max(1),
        ));
        // One deadline for the whole handshake, on top of each stage's: a peer that dribbles
        // its hello to the end of one stage cannot then hold the next as long.
        let shaken = tokio::time::timeout(deadline, async {
            let hello = server_hello(&mut conn, deadline).await?;
            server_prove(&mut conn, &self.secret, hello, deadline).await
        })
        .await
        .unwrap_or(Err(crate::net::auth::AuthError::Timeout))
        .map_err(ServeError::Handshake);
        // The place is free again, whatever the outcome.
        drop(ticket);
        let peer = shaken?;
        conn.set_limit(crate::net::frame::DEFAULT_MAX_PAYLOAD);
        let _slot = slots
            .acquire_owned()
            .await
            .map_err(|_| ServeError::Stopping)?;
        let broken = |source| ServeError::Connection {
            peer: peer.clone(),
            source,
        };
        while let Some(frame) = conn.read_frame().await.map_err(broken)? {
            match frame {
                Frame::Ping { seq } => conn
                    .write_frame(&Frame::Pong { seq })
                    .await
                    .map_err(broken)?,
                Frame::Control(body) => {
                    let message = crate::net::messages::decode(&body).map_err(|source| {
                        ServeError::Message {
                            peer: peer.clone(),
                            source,
                        }
                    })?;
                    return match message {
                        Message::Join(join) => self.join(&peer, conn, join).await,
                        Message::Link(link) => {
                            let stale = Duration::from_millis(
                                self.cluster.settings.io_timeout_ms.saturating_mul(4),
                            );
                            Ok(self.forming.link(peer.clone(), conn, &link, stale)?)
                        }
                        other => Err(ServeError::Unexpected {
                            peer: peer.clone(),
                            what: other.name().into(),
                        }),
                    };
                }
                other => {
                    let what = other.describe();
                    let _ = conn
                        .write_frame(&Frame::Error {
                            message: format!("unexpected {what}"),
                        })
                        .await;
                    return Err(ServeError::Unexpected { peer, what });
                }
            }
        }
        Ok(())
    }

    /// Joins the team of a driver's job and serves it on a thread of its own.
    async fn join(
        self: &Arc<Self>,
        peer: &str,
        conn: Connection,
        join: crate::net::messages::Join,
    ) -> Result<(), ServeError> {
        let (job, epoch) = (join.job, join.epoch);
        let counter = Arc::clone(self);
        let on_received: crate::net::transport::tcp::OnReceived =
            Arc::new(move |n| counter.count_received(n));
        let host = Host {
            cluster: &self.cluster,
            secret: &self.secret,
            name: &self.name,
            forming: &self.forming,
        };
        let transport = team::join(host, peer, conn, join, Some(on_received))
            .await
            .map_err(|source| ServeError::Join { job, epoch, source })?;
        let worker = Arc::clone(self);
        std::thread::Builder::new()
            .name(format!("{}-job", self.name))
            .spawn(move || {
                let mut jobs = worker
                    .jobs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .unwrap_or_else(crate::jobs::members);
                let served = crate::engine::serve(&transport, &mut jobs, &*worker.hooks);
                *worker.jobs.lock().unwrap_or_else(|e| e.into_inner()) = Some(jobs);
                if let Err(e) = served {
                    worker.log_closed(&format!(
                        "job {job:x} epoch {epoch} ended: {}",
                        vocab_pipeline::chain(&e)
                    ));
                }
            })
            .map(|_| ())
            .map_err(|source| ServeError::Thread { job, source })
    }

    /// Counts bytes of team messages received and reports the total to the hooks.
    fn count_received(&self, n: u64) {
        let total = self.received.fetch_add(n, Ordering::Relaxed) + n;
        self.hooks.reached(&Checkpoint {
            job: "team",
            event: "received",
            count: total,
            rank: 0,
        });
    }
}

/// Starts `n` in-process workers on loopback, spread over `racks`, with the cluster file's
/// `[settings]` lines `settings` and the shared secret `secret` (tests only).
#[cfg(test)]
pub(crate) async fn start_workers(
    n: usize,
    racks: usize,
    settings: &str,
    secret: &[u8],
) -> (Cluster, Vec<Arc<Worker>>) {
    let mut text = format!("[settings]\nio_timeout_ms = 5000\n{settings}");
    let mut listeners = Vec::new();
    for i in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        text.push_str(&format!(
            "[[nodes]]\nname = \"w{i}\"\naddress = \"{}\"\nrack = \"r{}\"\n",
            l.local_addr().expect("addr"),
            i % racks
        ));
        listeners.push(l);
    }
    let cluster =
        Cluster::parse(&text, std::path::Path::new("test-cluster.toml")).expect("cluster");
    let workers = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let w = Worker::new(
                &format!("w{i}"),
                cluster.clone(),
                Secret::from_bytes(secret.to_vec()),
                Arc::new(crate::engine::NoHooks),
            );
            tokio::spawn(Arc::clone(&w).serve(l));
            w
        })
        .collect();
    (cluster, workers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"test-secret-0123456789";

    /// Starts `n` in-process workers on loopback and returns the cluster and the workers.
    async fn start(n: usize, racks: usize, chains: usize) -> (Cluster, Vec<Arc<Worker>>) {
        let settings = format!("chunk_size = 65536\nchains = {chains}\nretries = 2\n");
        start_workers(n, racks, &settings, SECRET).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_and_oversized_unauthenticated_peers_do_not_lock_out_the_cluster() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (cluster, _workers) = start(1, 1, 1).await;
        let address = cluster.nodes[0].address;
        let secret = Secret::from_bytes(SECRET.to_vec());
        // More idle connections than the worker serves at all: before handshakes had their own
        // pool and deadline, these held every slot for the 30 s I/O timeout.
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 44 {
            idle.push(TcpStream::connect(address).await.expect("connect"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // An authenticated peer gets through: it waits at most until the oldest idle handshake
        // may be evicted.
        let started = std::time::Instant::now();
        crate::net::peer::ping(&cluster, &cluster.nodes[0], &secret, "driver")
            .await
            .expect("ping through the flood");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        drop(idle);
        // A frame header announcing 16 MiB before authentication: the worker closes the
        // connection without reading (or allocating) the payload.
        let mut raw = TcpStream::connect(address).await.expect("connect");
        let mut header = crate::net::frame::MAGIC.to_vec();
        header.extend_from_slice(&[crate::net::frame::PROTOCOL_VERSION, 1]);
        header.extend_from_slice(&(16u32 << 20).to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        raw.write_all(&header).await.expect("write");
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(2), raw.read(&mut buf))
            .await
            .expect("closed promptly");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    #[test]
    fn frames_describe_themselves_without_their_payload() {
        let chunk = Frame::Data {
            tag: 1,
            data: bytes::Bytes::from(vec![7u8; 1 << 20]),
        };
        let text = chunk.describe();
        assert_eq!(text, "a data frame (1048576 bytes)");
        assert_eq!(
            Frame::Welcome { proof: [0; 32] }.describe(),
            "a welcome frame"
        );
    }
}
