//! The TCP transport: the members of a team are processes joined pairwise by the cluster's
//! framed, authenticated connections (one per pair; [`team`] forms them), and a message is a
//! run of [`Frame::Data`] pieces of at most [`PIECE`] bytes.
//!
//! Each link has a reader task and a writer task on the tokio runtime the team was formed on.
//! The reader files every piece under (sender, tag) in this member's inbox as it arrives, so
//! sockets always drain and two members sending to each other at once never block; the
//! writer takes pieces from a bounded queue (sends wait when it is full) and, when nothing
//! else goes out for a while, a [`Frame::Ping`] as a heartbeat. A link on which nothing arrived
//! for the cluster's I/O timeout is down: a stalled or vanished peer fails the receives that
//! wait for it instead of hanging them, while a slow one (a long map step) keeps beating.
//!
//! [`Transport::exchange`] is blocking: call it from a plain thread, never from inside the
//! runtime (the driver and the workers' serving threads do).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Recv, Send, Tag, Transport, TransportError, check_peers, pieces};
use crate::net::connection::{Connection, FrameReader, FrameWriter};
use crate::net::frame::Frame;

pub mod team;

/// A two-thread runtime for the links of tests' teams.
#[cfg(test)]
pub(crate) fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Largest piece of a message in one frame (bytes).
pub const PIECE: usize = 1 << 20;

/// Frames queued for a link's writer before a send waits.
const QUEUE: usize = 16;

/// Liveness of a team's links: beat every `beat`, declare a link down after `silence`.
#[derive(Debug, Clone, Copy)]
pub struct Liveness {
    /// Heartbeat period of an idle link.
    pub beat: Duration,
    /// A link with nothing received for this long is down.
    pub silence: Duration,
}

impl Liveness {
    /// From the cluster's I/O timeout: silence after the timeout, beats four times as often
    /// (at least once a second).
    pub fn from_io_timeout(io_timeout: Duration) -> Self {
        Self {
            beat: (io_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1)),
            silence: io_timeout.max(Duration::from_millis(50)),
        }
    }
}

/// Called with the payload bytes of every piece received (fault injection of the daemons).
pub type OnReceived = Arc<dyn Fn(u64) + std::marker::Send + Sync>;

#[derive(Debug, Default)]
struct Mailbox {
    queues: HashMap<(usize, Tag), VecDeque<Bytes>>,
    /// Why each member's link ended, once it did.
    down: Vec<Option<String>>,
}

#[derive(Debug, Default)]
struct Inbox {
    mail: Mutex<Mailbox>,
    arrived: Condvar,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, Mailbox> {
        self.mail.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliver(&self, from: usize, tag: Tag, data: Bytes) {
        self.lock()
            .queues
            .entry((from, tag))
            .or_default()
            .push_back(data);
        self.arrived.notify_all();
    }

    fn fail(&self, member: usize, reason: String) {
        let mut mail = self.lock();
        if let Some(slot) = mail.down.get_mut(member) {
            slot.get_or_insert(reason);
        }
        drop(mail);
        self.arrived.notify_all();
    }

    /// The next piece from `from` with `tag`; waits while the link is up.
    fn take(&self, from: usize, tag: Tag) -> Result<Bytes, TransportError> {
        let mut mail = self.lock();
        loop {
            if let Some(data) = mail
                .queues
                .get_mut(&(from, tag))
                .and_then(VecDeque::pop_front)
            {
                return Ok(data);
            }
            if let Some(reason) = mail.down.get(from).and_then(Clone::clone) {
                return Err(TransportError::Link {
                    member: from,
                    reason,
                });
            }
            mail = self.arrived.wait(mail).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn reason(&self, member: usize) -> String {
        self.lock()
            .down
            .get(member)
            .and_then(Clone::clone)
            .unwrap_or_else(|| "the link closed".into())
    }
}

/// Writers still running, so that dropping a transport can wait for its last messages.
#[derive(Debug, Default)]
struct Writers {
    running: Mutex<usize>,
    ended: Condvar,
}

impl Writers {
    fn done(&self) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        *running = running.saturating_sub(1);
        self.ended.notify_all();
    }
}

/// How long dropping a transport waits for its writers to send what was queued.
const DRAIN: Duration = Duration::from_secs(5);

/// One member's end of a TCP team.
pub struct TcpTransport {
    rank: usize,
    names: Vec<String>,
    outs: Vec<Option<mpsc::Sender<Frame>>>,
    inbox: Arc<Inbox>,
    tasks: Vec<JoinHandle<()>>,
    writers: Arc<Writers>,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("rank", &self.rank)
            .field("names", &self.names)
            .finish()
    }
}

impl TcpTransport {
    /// Member `rank` of the team `names` (node names; a member's host is its name), over
    /// `links[m]`, the connection to member `m` (`None` at `rank`). The link tasks run on
    /// `runtime`.
    ///
    /// # Panics
    /// If `links` does not have one entry per name, or has one at `rank`: the caller builds
    /// both from the same list.
    pub fn new(
        runtime: &Handle,
        rank: usize,
        names: Vec<String>,
        links: Vec<Option<Connection>>,
        liveness: Liveness,
        on_received: Option<OnReceived>,
    ) -> Self {
        assert_eq!(links.len(), names.len(), "one link per member");
        assert!(links[rank].is_none(), "no link to oneself");
        let inbox = Arc::new(Inbox::default());
        inbox.lock().down = vec![None; names.len()];
        let mut outs = Vec::with_capacity(links.len());
        let mut tasks = Vec::new();
        let writers = Arc::new(Writers::default());
        for (member, link) in links.into_iter().enumerate() {
            let Some(conn) = link else {
                outs.push(None);
                continue;
            };
            let (reader, writer) = conn.into_split();
            let (tx, rx) = mpsc::channel(QUEUE);
            outs.push(Some(tx));
            *writers.running.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            let (link_inbox, link_writers) = (Arc::clone(&inbox), Arc::clone(&writers));
            tasks.push(runtime.spawn(async move {
                write_link(writer, rx, liveness.beat, member, link_inbox).await;
                link_writers.done();
            }));
            tasks.push(runtime.spawn(read_link(
                reader,
                liveness.silence,
                member,
                Arc::clone(&inbox),
                on_received.clone(),
            )));
        }
        Self {
            rank,
            names,
            outs,
            inbox,
            tasks,
            writers,
        }
    }

    /// The members' names, by rank.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        // Closing the queues ends the writers once they have sent what was queued: wait for
        // that (bounded), so a last message (the driver's exit, a final gather) is not lost
        // when the process or its runtime ends right after. The readers would wait for the
        // peers, and a writer still blocked on a stalled peer after the wait would too: stop
        // them.
        self.outs.clear();
        let deadline = std::time::Instant::now() + DRAIN;
        let mut running = self
            .writers
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while *running > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            running = match self.writers.ended.wait_timeout(running, left) {
                Ok((guard, _)) => guard,
                Err(e) => e.into_inner().0,
            };
        }
        drop(running);
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn read_link(
    mut reader: FrameReader,
    silence: Duration,
    member: usize,
    inbox: Arc<Inbox>,
    on_received: Option<OnReceived>,
) {
    let reason = loop {
        match tokio::time::timeout(silence, reader.read_frame()).await {
            Err(_) => break format!("nothing received for {} ms", silence.as_millis()),
            Ok(Ok(Some(Frame::Data { tag, data }))) => {
                if let Some(hook) = &on_received {
                    hook(data.len() as u64);
                }
                inbox.deliver(member, tag, data);
            }
            Ok(Ok(Some(Frame::Ping { .. }))) => {}
            Ok(Ok(Some(other))) => break format!("sent {} inside a team", other.describe()),
            Ok(Ok(None)) => break "closed the connection".into(),
            Ok(Err(e)) => break vocab_pipeline::chain(&e),
        }
    };
    inbox.fail(member, reason);
}

async fn write_link(
    mut writer: FrameWriter,
    mut queue: mpsc::Receiver<Frame>,
    beat: Duration,
    member: usize,
    inbox: Arc<Inbox>,
) {
    let mut tick = tokio::time::interval(beat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq = 0u64;
    loop {
        let frame = tokio::select! {
            next = queue.recv() => match next {
                Some(frame) => frame,
                None => return,
            },
            _ = tick.tick() => {
                seq += 1;
                Frame::Ping { seq }
            }
        };
        if let Err(e) = writer.write_frame(&frame).await {
            inbox.fail(
                member,
                format!("cannot write to it: {}", vocab_pipeline::chain(&e)),
            );
            return;
        }
        tick.reset();
    }
}

impl Transport for TcpTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.names.len()
    }

    fn host(&self) -> String {
        self.names[self.rank].clone()
    }

    fn exchange(&self, sends: &[Send<'_>], recvs: &mut [Recv<'_>]) -> Result<(), TransportError> {
        check_peers(self.size(), sends, recvs)?;
        for s in sends.iter().filter(|s| !s.data.is_empty()) {
            let out = self.outs[s.to]
                .as_ref()
                .ok_or(TransportError::NoSuchMember {
                    member: s.to,
                    size: self.size(),
                })?;
            for r in pieces(s.data.len(), PIECE) {
                let frame = Frame::Data {
                    tag: s.tag,
                    data: Bytes::copy_from_slice(&s.data[r]),
                };
                out.blocking_send(frame).map_err(|_| TransportError::Link {
                    member: s.to,
                    reason: self.inbox.reason(s.to),
                })?;
            }
        }
        for r in recvs.iter_mut().filter(|r| !r.buf.is_empty()) {
            if r.from == self.rank {
                return Err(TransportError::NoSuchMember {
                    member: r.from,
                    size: self.size(),
                });
            }
            let want = r.buf.len();
            for range in pieces(want, PIECE) {
                let data = self.inbox.take(r.from, r.tag)?;
                if data.len() != range.len() {
                    return Err(TransportError::Length {
                        from: r.from,
                        tag: r.tag,
                        got: data.len(),
                        want: range.len(),
                    });
                }
                r.buf[range].copy_from_slice(&data);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Algorithm;
    use crate::collective::topology::tree::Tree;
    use crate::collective::{BroadcastPlan, Team, broadcast, gather};
    use tokio::net::{TcpListener, TcpStream};

    /// A team of `n` over loopback sockets (no handshake), on a runtime of its own.
    fn team(rt: &tokio::runtime::Runtime, n: usize, liveness: Liveness) -> Vec<TcpTransport> {
        let mut links: Vec<Vec<Option<Connection>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let pairs = (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b)));
            for (a, b) in pairs {
                let client = TcpStream::connect(addr).await.expect("connect");
                let (server, _) = listener.accept().await.expect("accept");
                links[a][b] = Some(Connection::new(client));
                links[b][a] = Some(Connection::new(server));
            }
        });
        let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        links
            .into_iter()
            .enumerate()
            .map(|(rank, l)| TcpTransport::new(rt.handle(), rank, names.clone(), l, liveness, None))
            .collect()
    }

    use crate::net::transport::tcp::test_runtime as runtime;

    #[test]
    fn messages_above_a_piece_cross_in_order_and_collectives_run() {
        let rt = runtime();
        let members = team(&rt, 4, Liveness::from_io_timeout(Duration::from_secs(10)));
        let big: Vec<u8> = (0..PIECE * 2 + 77).map(|i| (i * 31 % 251) as u8).collect();
        std::thread::scope(|s| {
            for t in &members {
                let big = &big;
                s.spawn(move || {
                    let team = Team::ranks(t);
                    // Two messages with one tag, the first above two pieces: they arrive whole
                    // and in order.
                    if t.rank() == 1 {
                        t.send(2, 9, big).expect("send");
                        t.send(2, 9, b"after").expect("send");
                    }
                    if t.rank() == 2 {
                        let mut got = vec![0u8; big.len()];
                        let mut after = [0u8; 5];
                        t.recv(1, 9, &mut got).expect("recv");
                        t.recv(1, 9, &mut after).expect("recv");
                        assert!(got == *big && &after == b"after");
                    }
                    for algorithm in [Algorithm::Chain, Algorithm::Mst, Algorithm::MultiChain] {
                        let mut data = if t.rank() == 0 {
                            big.clone()
                        } else {
                            vec![0u8; big.len()]
                        };
                        let plan = BroadcastPlan {
                            algorithm,
                            chunk: 100_000,
                            chains: 2,
                        };
                        broadcast(&team, plan, &mut data).expect("broadcast");
                        assert!(data == *big, "{algorithm:?} at {}", t.rank());
                    }
                    let all = gather(&team, &[t.rank() as u8; 3], 1 << 20).expect("gather");
                    if t.rank() == 0 {
                        let all = all.expect("root");
                        assert_eq!(all, (0..4u8).map(|r| vec![r; 3]).collect::<Vec<_>>());
                    }
                    // Up a tree (0 > 2 > 3 1), pieces above a transport piece.
                    let tree = Tree::from_children(0, vec![vec![2], vec![], vec![3, 1], vec![]])
                        .expect("tree");
                    let team = Team::ranks(t)
                        .with_trees(Some(&tree), Some(&tree))
                        .expect("trees");
                    let mine = vec![t.rank() as u8; PIECE + t.rank()];
                    let all = gather(&team, &mine, 1 << 22).expect("gather up the tree");
                    if t.rank() == 0 {
                        let all = all.expect("root");
                        let want: Vec<Vec<u8>> = (0..4).map(|r| vec![r as u8; PIECE + r]).collect();
                        assert!(all == want, "pieces in rank order");
                    }
                });
            }
        });
    }

    #[test]
    fn a_departed_or_silent_peer_fails_the_receive_naming_it() {
        let rt = runtime();
        let liveness = Liveness {
            beat: Duration::from_millis(20),
            silence: Duration::from_millis(300),
        };
        let mut members = team(&rt, 3, liveness);
        // Member 2 sends, then leaves: what it sent is still delivered, then the link is down.
        members[2].send(0, 4, b"last words").expect("send");
        drop(members.pop());
        let mut buf = [0u8; 10];
        members[0]
            .recv(2, 4, &mut buf)
            .expect("delivered before the close");
        let err = members[0].recv(2, 4, &mut buf).expect_err("gone");
        assert!(
            matches!(err, TransportError::Link { member: 2, .. }),
            "{err}"
        );
        // A quiet but live member beats: waiting longer than the silence limit is fine.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(600));
                members[1].send(0, 5, b"late").expect("send");
            });
            let mut late = [0u8; 4];
            members[0]
                .recv(1, 5, &mut late)
                .expect("a slow member is not a dead one");
            assert_eq!(&late, b"late");
        });
    }
}
