//! The worker daemon: accepts authenticated connections, answers pings, receives, stores and
//! forwards broadcasts, and serves the jobs of drivers: a [`Message::Join`] makes it a member of
//! a team (`crate::transport::tcp::team`), which it then serves with the SPMD engine
//! (`crate::spmd::serve_cached`) on a thread of its own until the driver ends the job or the
//! team breaks. The partitions of the last job stay cached for the next team of that job.
//!
//! Each connection is one task; a broadcast stream on it (`Begin` then chunks) is received into a
//! preallocated buffer while a second task forwards the chunks to the successor (chain route), or
//! is sent on to binomial-tree children once complete (tree route). The node answers upstream
//! with `Ack` once its copy's checksum matches and everything downstream acknowledged, or with
//! `Failed` naming the node where delivery broke.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc};

use crate::auth::{Secret, server_handshake};
use crate::broadcast::{Slice, await_ack, deliver, tree_children};
use crate::config::Cluster;
use crate::connection::{Connection, ConnectionError};
use crate::frame::{Begin, Frame, ROUTE_CHAIN, ROUTE_TREE};
use crate::messages::Message;
use crate::peer::dial_name;
use crate::share::Share;
use crate::transport::tcp::team::{self, Forming, Host};

/// Largest broadcast a worker accepts (bounds what an authenticated peer can make it allocate).
pub const MAX_MESSAGE: u64 = 8 << 30;
/// Broadcasts a worker keeps (the newest ids).
const KEEP: usize = 2;
/// Chunks queued between receiving and forwarding.
const FORWARD_QUEUE: usize = 16;
/// Authenticated connections a worker serves at once; further ones wait for a slot.
const MAX_CONNECTIONS: usize = 256;
/// Connections in the handshake at once; a new connection that finds them all taken evicts the
/// oldest (an honest handshake takes a round trip, so only a stalled one is that old), so idle
/// or hostile peers cannot crowd out authenticated ones.
const MAX_HANDSHAKES: usize = 32;

/// Pending handshakes, oldest first, each with the signal that evicts it.
#[derive(Debug, Default)]
struct Handshakes {
    next: u64,
    pending: VecDeque<(u64, Arc<tokio::sync::Notify>)>,
}
/// Longest handshake (a Hello and a Response: two small frames).
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(3);
/// Payload limit before authentication: a Hello is a name and a nonce.
pub const HANDSHAKE_MAX_PAYLOAD: usize = 1024;
/// Closed connections a worker reports per second (the rest are counted, then summarised).
const LOG_PER_SECOND: u64 = 10;

/// Broadcast messages by id, and the ids in arrival order.
type Store = (BTreeMap<u64, Vec<u8>>, VecDeque<u64>);

/// A running worker's identity and state.
#[derive(Debug)]
pub struct Worker {
    name: String,
    cluster: Cluster,
    secret: Secret,
    /// Broadcast messages by id, and the ids in arrival order (the oldest is evicted first).
    store: Mutex<Store>,
    received: AtomicU64,
    log_window: AtomicU64,
    log_count: AtomicU64,
    log_skipped: AtomicU64,
    /// Links of teams still forming.
    forming: Forming,
    /// The share of the last job served, for the next team of the same job.
    cached: std::sync::Mutex<Option<Share>>,
    faults: Faults,
}

/// Fault injection for tests: ways to make a worker process die on cue.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Exit after receiving this many broadcast bytes.
    pub exit_after_bytes: Option<u64>,
    /// Exit in the middle of k-means iteration `n`: after the map tasks, before stage 2.
    pub exit_at_step: Option<u64>,
}

impl Worker {
    /// A worker named `name` of `cluster`.
    pub fn new(name: &str, cluster: Cluster, secret: Secret, faults: Faults) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_string(),
            cluster,
            secret,
            store: Mutex::new((BTreeMap::new(), VecDeque::new())),
            received: AtomicU64::new(0),
            log_window: AtomicU64::new(0),
            log_count: AtomicU64::new(0),
            log_skipped: AtomicU64::new(0),
            forming: Forming::default(),
            cached: std::sync::Mutex::new(None),
            faults,
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

    /// The stored message `id`, if complete slices of it arrived.
    pub async fn message(&self, id: u64) -> Option<Vec<u8>> {
        self.store.lock().await.0.get(&id).cloned()
    }

    /// Accepts connections until the listener fails.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        let mut backoff = Duration::from_millis(10);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let handshakes = Arc::new(std::sync::Mutex::new(Handshakes::default()));
        loop {
            match listener.accept().await {
                Ok((socket, _)) => {
                    backoff = Duration::from_millis(10);
                    let evict = Arc::new(tokio::sync::Notify::new());
                    let id = {
                        let mut h = handshakes.lock().unwrap_or_else(|e| e.into_inner());
                        if h.pending.len() >= MAX_HANDSHAKES
                            && let Some((_, oldest)) = h.pending.pop_front()
                        {
                            // Stores a permit: the oldest ends even if it is not waiting yet.
                            oldest.notify_one();
                        }
                        h.next += 1;
                        let id = h.next;
                        h.pending.push_back((id, Arc::clone(&evict)));
                        id
                    };
                    let (worker, slots, registry) = (
                        Arc::clone(&self),
                        Arc::clone(&slots),
                        Arc::clone(&handshakes),
                    );
                    tokio::spawn(async move {
                        let result = worker.handle(socket, &evict, slots, || {
                            let mut h = registry.lock().unwrap_or_else(|e| e.into_inner());
                            h.pending.retain(|(i, _)| *i != id);
                        });
                        if let Err(e) = result.await {
                            worker.log_closed(&e);
                        }
                    });
                }
                // Too many open files and the like: back off instead of spinning.
                Err(_) if backoff < Duration::from_secs(2) => {
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
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
        evict: &tokio::sync::Notify,
        slots: Arc<tokio::sync::Semaphore>,
        handshake_done: impl FnOnce(),
    ) -> Result<(), String> {
        let _ = socket.set_nodelay(true);
        let mut conn = Connection::with_limit(socket, HANDSHAKE_MAX_PAYLOAD);
        let deadline = HANDSHAKE_DEADLINE.min(Duration::from_millis(
            self.cluster.settings.io_timeout_ms.max(1),
        ));
        let shaken = tokio::select! {
            r = server_handshake(&mut conn, &self.secret, deadline) => r.map_err(|e| e.to_string()),
            () = evict.notified() => Err("evicted: the oldest of a full set of handshakes".into()),
        };
        handshake_done();
        let peer = shaken?;
        conn.set_limit(crate::frame::DEFAULT_MAX_PAYLOAD);
        let _slot = slots
            .acquire_owned()
            .await
            .map_err(|_| "the worker is stopping".to_string())?;
        while let Some(frame) = conn
            .read_frame()
            .await
            .map_err(|e| format!("{peer}: {e}"))?
        {
            match frame {
                Frame::Ping { seq } => conn
                    .write_frame(&Frame::Pong { seq })
                    .await
                    .map_err(|e| e.to_string())?,
                Frame::Begin(begin) => {
                    self.receive(&mut conn, begin)
                        .await
                        .map_err(|e| format!("{peer}: {e}"))?;
                }
                Frame::Control(body) => {
                    let message =
                        crate::messages::decode(&body).map_err(|e| format!("{peer}: {e}"))?;
                    return match message {
                        Message::Join(join) => self.join(&peer, conn, join).await,
                        Message::Link(link) => {
                            let stale = Duration::from_millis(
                                self.cluster.settings.io_timeout_ms.saturating_mul(4),
                            );
                            self.forming.link(peer.clone(), conn, &link, stale)
                        }
                        other => Err(format!("{peer}: unexpected {}", other.name())),
                    };
                }
                other => {
                    let message = format!("unexpected {}", other.describe());
                    let _ = conn
                        .write_frame(&Frame::Error {
                            message: message.clone(),
                        })
                        .await;
                    return Err(message);
                }
            }
        }
        Ok(())
    }

    async fn receive(
        &self,
        upstream: &mut Connection,
        begin: Begin,
    ) -> Result<(), ConnectionError> {
        let Begin {
            id,
            route,
            offset,
            len,
            total,
            checksum,
            ..
        } = begin;
        let hops = &begin.hops;
        if total > MAX_MESSAGE {
            let reason = format!("message of {total} bytes exceeds {MAX_MESSAGE}");
            return upstream
                .write_frame(&Frame::Failed {
                    id,
                    node: self.name.clone(),
                    reason,
                })
                .await;
        }
        let deadline = Duration::from_millis(self.cluster.settings.io_timeout_ms);
        let mut failure: Option<(String, String)> = None;
        // Chain: connect to the successor first, so chunks can flow on as they arrive.
        let mut forward = None;
        if route == ROUTE_CHAIN && !hops.is_empty() {
            match dial_name(&self.cluster, &hops[0], &self.secret, &self.name).await {
                Ok(mut down) => {
                    let next = Frame::Begin(Begin {
                        hops: hops[1..].to_vec(),
                        ..begin
                    });
                    match down.write_frame(&next).await {
                        Ok(()) => {
                            let (tx, mut rx) = mpsc::channel::<Frame>(FORWARD_QUEUE);
                            let task = tokio::spawn(async move {
                                while let Some(frame) = rx.recv().await {
                                    down.write_frame(&frame).await?;
                                }
                                Ok::<_, ConnectionError>(down)
                            });
                            forward = Some((tx, task));
                        }
                        Err(e) => failure = Some((hops[0].clone(), e.to_string())),
                    }
                }
                Err(e) => failure = Some((hops[0].clone(), e.to_string())),
            }
        }
        let mut buf = vec![0u8; len as usize];
        let mut received = 0u64;
        while received < len {
            let frame = match tokio::time::timeout(deadline, upstream.read_frame()).await {
                Err(_) => return Err(ConnectionError::Io(std::io::ErrorKind::TimedOut.into())),
                Ok(result) => result?.ok_or(ConnectionError::Reset)?,
            };
            let Frame::Chunk {
                id: cid,
                offset: at,
                total: t,
                data,
            } = frame
            else {
                return Err(ConnectionError::Frame(
                    crate::frame::FrameError::Malformed {
                        kind: "chunk",
                        message: "expected the next chunk of the broadcast",
                    },
                ));
            };
            if cid != id
                || t != total
                || at != offset + received
                || received + data.len() as u64 > len
            {
                return Err(ConnectionError::Frame(
                    crate::frame::FrameError::Malformed {
                        kind: "chunk",
                        message: "chunk out of sequence",
                    },
                ));
            }
            buf[received as usize..][..data.len()].copy_from_slice(&data);
            received += data.len() as u64;
            self.count_and_maybe_exit(data.len() as u64);
            if let Some((tx, _)) = &forward {
                if tx
                    .send(Frame::Chunk {
                        id,
                        offset: at,
                        total,
                        data,
                    })
                    .await
                    .is_err()
                    && failure.is_none()
                {
                    failure = Some((hops[0].clone(), "connection to it broke".into()));
                }
            }
        }
        let good = crc32fast::hash(&buf) == checksum;
        let slice = Slice {
            id,
            offset,
            total,
            checksum,
            data: Bytes::from(buf),
        };
        if let Some((tx, task)) = forward {
            drop(tx);
            match task.await {
                Ok(Ok(mut down)) => {
                    let hop_deadline = deadline * (hops.len() as u32);
                    if let Err(f) = await_ack(&mut down, &hops[0], &slice, hop_deadline).await {
                        failure.get_or_insert((f.node, f.reason));
                    }
                }
                Ok(Err(e)) => {
                    failure.get_or_insert((hops[0].clone(), e.to_string()));
                }
                Err(e) => {
                    failure.get_or_insert((hops[0].clone(), e.to_string()));
                }
            }
        }
        if good && route == ROUTE_TREE && failure.is_none() {
            for (child, sub) in tree_children(hops) {
                if let Err(f) = deliver(
                    &self.cluster,
                    &self.secret,
                    &self.name,
                    &child,
                    ROUTE_TREE,
                    &sub,
                    &slice,
                )
                .await
                {
                    failure = Some((f.node, f.reason));
                    break;
                }
            }
        }
        if good {
            self.keep(&slice).await;
        }
        let reply = match (good, failure) {
            (false, _) => Frame::Failed {
                id,
                node: self.name.clone(),
                reason: "checksum mismatch".into(),
            },
            (true, Some((node, reason))) => Frame::Failed { id, node, reason },
            (true, None) => Frame::Ack { id, checksum },
        };
        upstream.write_frame(&reply).await
    }

    async fn keep(&self, slice: &Slice) {
        let mut guard = self.store.lock().await;
        let (store, order) = &mut *guard;
        let message = store.entry(slice.id).or_insert_with(|| {
            order.push_back(slice.id);
            vec![0u8; slice.total as usize]
        });
        message[slice.offset as usize..][..slice.data.len()].copy_from_slice(&slice.data);
        while order.len() > KEEP {
            if let Some(old) = order.pop_front() {
                store.remove(&old);
            }
        }
    }

    /// Joins the team of a driver's job and serves it on a thread of its own.
    async fn join(
        self: &Arc<Self>,
        peer: &str,
        conn: Connection,
        join: crate::messages::Join,
    ) -> Result<(), String> {
        let (job, epoch) = (join.job, join.epoch);
        let counter = Arc::clone(self);
        let on_received: crate::transport::tcp::OnReceived =
            Arc::new(move |n| counter.count_and_maybe_exit(n));
        let host = Host {
            cluster: &self.cluster,
            secret: &self.secret,
            name: &self.name,
            forming: &self.forming,
        };
        let transport = team::join(host, peer, conn, join, Some(on_received))
            .await
            .map_err(|e| format!("job {job:x} epoch {epoch}: {e}"))?;
        let worker = Arc::clone(self);
        let faults = crate::spmd::Faults {
            exit_at_step: self.faults.exit_at_step,
        };
        std::thread::Builder::new()
            .name(format!("{}-job", self.name))
            .spawn(move || {
                let mut cached = worker
                    .cached
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                let served = crate::spmd::serve_cached(&transport, faults, &mut cached);
                *worker.cached.lock().unwrap_or_else(|e| e.into_inner()) = cached;
                if let Err(e) = served {
                    worker.log_closed(&format!("job {job:x} epoch {epoch} ended: {e}"));
                }
            })
            .map(|_| ())
            .map_err(|e| format!("cannot start a thread for job {job:x}: {e}"))
    }

    fn count_and_maybe_exit(&self, n: u64) {
        let total = self.received.fetch_add(n, Ordering::Relaxed) + n;
        if self
            .faults
            .exit_after_bytes
            .is_some_and(|limit| total >= limit)
        {
            eprintln!(
                "worker {}: exiting after {total} bytes (fault injection)",
                self.name
            );
            std::process::exit(3);
        }
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
                Faults::default(),
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
    use crate::broadcast::{Algorithm, broadcast};

    const SECRET: &[u8] = b"test-secret-0123456789";

    /// Starts `n` in-process workers on loopback and returns the cluster and the workers.
    async fn start(n: usize, racks: usize, chains: usize) -> (Cluster, Vec<Arc<Worker>>) {
        let settings = format!("chunk_size = 65536\nchains = {chains}\nretries = 2\n");
        start_workers(n, racks, &settings, SECRET).await
    }

    fn message(len: usize) -> Bytes {
        Bytes::from((0..len).map(|i| (i * 31 % 251) as u8).collect::<Vec<_>>())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_algorithm_delivers_the_whole_message_to_every_node() {
        let (cluster, workers) = start(5, 2, 3).await;
        let secret = Secret::from_bytes(SECRET);
        for (id, algorithm) in [
            Algorithm::Chain,
            Algorithm::Simple,
            Algorithm::Mst,
            Algorithm::MultiChain,
        ]
        .into_iter()
        .enumerate()
        {
            let data = message(1_000_003 + id);
            let report = broadcast(
                &cluster,
                &secret,
                "driver",
                id as u64,
                data.clone(),
                algorithm,
            )
            .await
            .expect("broadcast");
            assert_eq!(
                (report.nodes, report.attempts, report.dropped.len()),
                (5, 1, 0),
                "{algorithm:?}"
            );
            for w in &workers {
                assert_eq!(
                    w.message(id as u64).await.as_deref(),
                    Some(&data[..]),
                    "{algorithm:?} at {}",
                    w.name
                );
            }
        }
        // An empty message is a message too.
        broadcast(
            &cluster,
            &secret,
            "driver",
            9,
            Bytes::new(),
            Algorithm::Chain,
        )
        .await
        .expect("empty");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_node_is_dropped_and_the_chain_relinked_or_the_call_fails_naming_it() {
        let (cluster, workers) = start(3, 1, 1).await;
        // Add a node nobody listens on, in the middle of the chain.
        let dead = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind")
            .local_addr()
            .expect("addr");
        let mut text =
            String::from("[settings]\nchunk_size = 65536\nretries = 2\nconnect_timeout_ms = 500\n");
        for (i, node) in cluster.nodes.iter().enumerate() {
            text.push_str(&format!(
                "[[nodes]]\nname = \"{}\"\naddress = \"{}\"\n",
                node.name, node.address
            ));
            if i == 0 {
                text.push_str(&format!(
                    "[[nodes]]\nname = \"ghost\"\naddress = \"{dead}\"\n"
                ));
            }
        }
        let with_ghost =
            Cluster::parse(&text, std::path::Path::new("ghost.toml")).expect("cluster");
        let secret = Secret::from_bytes(SECRET);
        let data = message(300_000);
        // Workers resolve hops with their own cluster file, which lacks the ghost: they report it.
        let report = broadcast(
            &with_ghost,
            &secret,
            "driver",
            1,
            data.clone(),
            Algorithm::Chain,
        )
        .await
        .expect("relinked");
        assert_eq!(report.dropped, vec!["ghost".to_string()]);
        assert_eq!(report.nodes, 3);
        for w in &workers {
            assert_eq!(w.message(1).await.as_deref(), Some(&data[..]));
        }
        // Without retries the same fault is an error naming the node.
        let strict = Cluster::parse(
            &text.replace("retries = 2", "retries = 0"),
            std::path::Path::new("g.toml"),
        )
        .expect("c");
        let err = broadcast(&strict, &secret, "driver", 2, data, Algorithm::Chain)
            .await
            .expect_err("no retries");
        assert!(err.to_string().contains("ghost"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_root_with_the_wrong_secret_cannot_broadcast() {
        let (cluster, workers) = start(2, 1, 1).await;
        let outsider = Secret::from_bytes(b"not-the-cluster-secret!!".to_vec());
        let err = broadcast(
            &cluster,
            &outsider,
            "intruder",
            1,
            message(1000),
            Algorithm::Chain,
        )
        .await
        .expect_err("refused");
        assert!(err.to_string().contains("w0"), "{err}");
        assert!(workers[0].message(1).await.is_none());
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
        // An authenticated peer gets through at once: it evicts the oldest idle handshake.
        let started = std::time::Instant::now();
        crate::peer::ping(&cluster, &cluster.nodes[0], &secret, "driver")
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
        let mut header = crate::frame::MAGIC.to_vec();
        header.extend_from_slice(&[crate::frame::PROTOCOL_VERSION, 1]);
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
        let chunk = Frame::Chunk {
            id: 1,
            offset: 0,
            total: 1 << 20,
            data: Bytes::from(vec![7u8; 1 << 20]),
        };
        let text = chunk.describe();
        assert_eq!(text, "a chunk frame (1048576 bytes)");
        assert_eq!(Frame::Welcome.describe(), "a welcome frame");
    }
}
