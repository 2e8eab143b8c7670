//! The collectives every job of a team uses (k-means, the photo stages, the cut, the benchmark),
//! written once against [`Transport`].
//!
//! A [`Team`] is a transport with the members put in chain order: member `0` is the root (the
//! rank that drives), and the others follow racks together. Every collective here is called by
//! all members of a team with the same arguments; each works out its own part.
//!
//! * [`broadcast`]: the root's bytes to every member, by [`Algorithm`]: `chain` (Twister's
//!   pipelined chain: chunk `i + 1` arrives while chunk `i` is forwarded), `multichain` (the
//!   message cut into slices, each down its own rotation of the chain, all at once), `mst`
//!   (a tree: the team's measured broadcast tree when it has one, else the binomial tree,
//!   largest subtree first) and `simple` (the root sends to each member in turn).
//! * [`reduce_ranges`] (stage 2): member `j` owns centroid range `j`; in round `d` every member
//!   sends range `me + d` of its partial sums to that range's owner while it receives its own
//!   range from member `me - d`, chunk by chunk, adding each chunk into its accumulator as it
//!   arrives. Receive memory is one range; send memory one peer's range.
//! * [`gather`] (stage 3): every member's bytes to the root, directly, or up the team's
//!   measured gather tree when it has one (a member forwards its subtree's pieces at once).
//!
//! Sizes read from peers are checked before they allocate.

pub mod aggregate;
pub mod calibration;
pub mod topology;

use std::ops::Range;

use thiserror::Error;
use vocab_pipeline::kmeans::Partial;

use crate::collective::aggregate::{RangeSum, encode_range, range_len, range_of};
use crate::collective::topology::Links;
use crate::collective::topology::tree::{Tree, TreeError};
use crate::net::transport::{Recv, Send, Tag, Transport, TransportError};

/// Tags of the collectives (each phase its own, so phases never match each other's messages).
pub mod tags {
    use crate::net::transport::Tag;

    /// Gathered lengths.
    pub const GATHER_LEN: Tag = 3;
    /// Gathered bodies.
    pub const GATHER: Tag = 4;
    /// Stage-2 partial counts.
    pub const STAGE2_LEN: Tag = 5;
    /// Stage-2 chunks.
    pub const STAGE2: Tag = 6;
    /// Calibration probes.
    pub const CALIBRATE: Tag = 7;
    /// Positions and lengths of the pieces of a subtree (gather up a tree).
    pub const GATHER_HEAD: Tag = 8;
    /// Records of a partition born on the nodes, to its owner ([`crate::jobs::born`]).
    pub const BORN: Tag = 9;
    /// Broadcast data; chain `c` of a multi-chain broadcast uses `BROADCAST + c`.
    pub const BROADCAST: Tag = 100;
}

/// Largest control message or gathered piece a member accepts (bytes).
pub const MAX_CONTROL: u64 = 1 << 30;

/// Largest data broadcast or gathered piece a member accepts (bytes): far above any real job
/// (the paper's 1M x 512 centroids are 2 GiB), it only stops a corrupt size from allocating.
pub const MAX_DATA: u64 = 1 << 38;

/// Errors of the collectives.
#[derive(Debug, Error)]
pub enum CollectiveError {
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A chain order that is not a permutation of the members with the root first (or, for a
    /// subset, that repeats a member or leaves this one out).
    #[error("chain order {order:?} is not a permutation of 0..{size} starting at 0")]
    Order {
        /// The order given.
        order: Vec<usize>,
        /// Team size.
        size: usize,
    },
    /// A peer announced a size this member refuses.
    #[error("member {member} announced {bytes} bytes (limit {limit})")]
    TooLarge {
        /// The member.
        member: usize,
        /// Bytes announced.
        bytes: u64,
        /// Limit.
        limit: u64,
    },
    /// A tree that does not fit the team.
    #[error("tree for a team of {size}")]
    Tree {
        /// Team size.
        size: usize,
        /// What is wrong.
        source: TreeError,
    },
    /// A tree rooted elsewhere than at the team's root.
    #[error("a tree rooted at rank {0}, not at the team's root")]
    TreeRoot(usize),
    /// A gathered piece from a member that is not below the sender, or twice.
    #[error("member {member} forwarded a piece of member {piece}, which is not its to forward")]
    Stray {
        /// The sender.
        member: usize,
        /// Position of the piece.
        piece: usize,
    },
    /// A gather up a tree that ended without a member's piece.
    #[error("the gather ended without the piece of member {0}")]
    Missing(usize),
    /// Stage-2 data that does not fit the accumulator.
    #[error("stage 2")]
    Stage2(#[source] crate::collective::aggregate::AggregateError),
}

/// A transport with its members in chain order.
pub struct Team<'t> {
    transport: &'t dyn Transport,
    /// Rank of each member, in chain order (`order[0]` is the root).
    order: Vec<usize>,
    /// This process's position in `order`.
    me: usize,
    /// The measured broadcast tree, by position (else the binomial tree).
    broadcast_tree: Option<Tree>,
    /// The measured gather tree, by position (else every member sends to the root).
    gather_tree: Option<Tree>,
}

impl std::fmt::Debug for Team<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("order", &self.order)
            .field("me", &self.me)
            .finish()
    }
}

impl<'t> Team<'t> {
    /// The transport's members in rank order.
    pub fn ranks(transport: &'t dyn Transport) -> Self {
        let order = (0..transport.size()).collect();
        Self {
            transport,
            order,
            me: transport.rank(),
            broadcast_tree: None,
            gather_tree: None,
        }
    }

    /// The transport's members in `order` (ranks, root first).
    pub fn ordered(
        transport: &'t dyn Transport,
        order: Vec<usize>,
    ) -> Result<Self, CollectiveError> {
        if order.len() != transport.size() || order.first() != Some(&0) {
            return Err(CollectiveError::Order {
                order,
                size: transport.size(),
            });
        }
        Self::subset(transport, order)
    }

    /// Some of the transport's members, in `order`, for collectives without a root (stage 2
    /// among the members that map); this process must be one of them.
    pub fn subset(
        transport: &'t dyn Transport,
        order: Vec<usize>,
    ) -> Result<Self, CollectiveError> {
        let size = transport.size();
        let mut seen = vec![false; size];
        let valid = order
            .iter()
            .all(|&r| r < size && !std::mem::replace(&mut seen[r], true));
        match order.iter().position(|&r| r == transport.rank()) {
            Some(me) if valid => Ok(Self {
                transport,
                order,
                me,
                broadcast_tree: None,
                gather_tree: None,
            }),
            _ => Err(CollectiveError::Order { order, size }),
        }
    }

    /// The team with trees for `mst` broadcasts and for gathers (over ranks, rooted at the
    /// team's root); `None` keeps the binomial tree and the direct gather.
    pub fn with_trees(
        mut self,
        broadcast: Option<&Tree>,
        gather: Option<&Tree>,
    ) -> Result<Self, CollectiveError> {
        let size = self.size();
        let place = |tree: Option<&Tree>| -> Result<Option<Tree>, CollectiveError> {
            let Some(tree) = tree else { return Ok(None) };
            let placed = if tree.len() == size {
                tree.relabel(&self.order)
            } else {
                Err(TreeError::OutOfRange {
                    members: size,
                    member: tree.len().saturating_sub(1),
                })
            };
            match placed {
                Ok(t) if t.root() == 0 => Ok(Some(t)),
                Ok(t) => Err(CollectiveError::TreeRoot(self.order[t.root()])),
                Err(source) => Err(CollectiveError::Tree { size, source }),
            }
        };
        self.broadcast_tree = place(broadcast)?;
        self.gather_tree = place(gather)?;
        Ok(self)
    }

    /// Members in the team.
    pub fn size(&self) -> usize {
        self.order.len()
    }

    /// This member's position in chain order (0: the root).
    pub fn me(&self) -> usize {
        self.me
    }

    /// Ranks in chain order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The underlying transport.
    pub fn transport(&self) -> &'t dyn Transport {
        self.transport
    }

    /// An exchange with peers named by chain position.
    fn exchange(&self, sends: &[Send<'_>], recvs: &mut [Recv<'_>]) -> Result<(), TransportError> {
        let sends: Vec<Send<'_>> = sends
            .iter()
            .map(|s| Send {
                to: self.order[s.to],
                tag: s.tag,
                data: s.data,
            })
            .collect();
        let mut recvs: Vec<Recv<'_>> = recvs
            .iter_mut()
            .map(|r| Recv {
                from: self.order[r.from],
                tag: r.tag,
                buf: &mut *r.buf,
            })
            .collect();
        self.transport.exchange(&sends, &mut recvs)
    }

    pub(crate) fn send(&self, to: usize, tag: Tag, data: &[u8]) -> Result<(), TransportError> {
        self.exchange(&[Send { to, tag, data }], &mut [])
    }

    pub(crate) fn recv(&self, from: usize, tag: Tag, buf: &mut [u8]) -> Result<(), TransportError> {
        self.exchange(&[], &mut [Recv { from, tag, buf }])
    }
}

/// Broadcast algorithms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Algorithm {
    /// Pipelined chain, racks together.
    #[default]
    Chain,
    /// Root sends to each node in turn.
    Simple,
    /// Binomial tree (MPI's MST).
    Mst,
    /// Several chains in parallel, each with a slice.
    #[cfg_attr(feature = "clap", value(name = "multichain"))]
    MultiChain,
}

impl Algorithm {
    /// Parses `chain`, `simple`, `mst` or `multichain`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "chain" => Some(Self::Chain),
            "simple" => Some(Self::Simple),
            "mst" => Some(Self::Mst),
            "multichain" => Some(Self::MultiChain),
            _ => None,
        }
    }

    /// The name [`Algorithm::from_name`] parses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chain => "chain",
            Self::Simple => "simple",
            Self::Mst => "mst",
            Self::MultiChain => "multichain",
        }
    }
}

/// How a broadcast runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BroadcastPlan {
    /// Algorithm.
    pub algorithm: Algorithm,
    /// Chunk size of the pipelined chains (bytes).
    pub chunk: usize,
    /// Chains of a multi-chain broadcast.
    pub chains: usize,
}

/// Broadcasts the root's `data` to every member; the others pass a buffer of the same length
/// (sent before, e.g. in a control message), which is filled.
pub fn broadcast(
    team: &Team<'_>,
    plan: BroadcastPlan,
    data: &mut [u8],
) -> Result<(), CollectiveError> {
    let w = team.size();
    if w < 2 || data.is_empty() {
        return Ok(());
    }
    match plan.algorithm {
        Algorithm::Chain => pipelined(
            team,
            &[(chain_path(w, 0, 1), 0..data.len())],
            plan.chunk,
            data,
        ),
        Algorithm::MultiChain => {
            let chains = plan.chains.clamp(1, w - 1);
            let len = data.len();
            let paths: Vec<(Vec<usize>, Range<usize>)> = (0..chains)
                .map(|c| {
                    (
                        chain_path(w, c, chains),
                        len * c / chains..len * (c + 1) / chains,
                    )
                })
                .collect();
            pipelined(team, &paths, plan.chunk, data)
        }
        Algorithm::Simple => {
            if team.me() == 0 {
                for m in 1..w {
                    team.send(m, tags::BROADCAST, data)?;
                }
            } else {
                team.recv(0, tags::BROADCAST, data)?;
            }
            Ok(())
        }
        Algorithm::Mst => {
            let binomial;
            let tree = match &team.broadcast_tree {
                Some(t) => t,
                None => {
                    binomial = Tree::binomial(w);
                    &binomial
                }
            };
            let me = team.me();
            if let Some(p) = tree.parent(me) {
                team.recv(p, tags::BROADCAST, data)?;
            }
            for &c in tree.children(me) {
                team.send(c, tags::BROADCAST, data)?;
            }
            Ok(())
        }
    }
}

/// Chain `c` of `chains`: the root, then members `1..w` rotated so that the chains start at
/// different members.
fn chain_path(w: usize, c: usize, chains: usize) -> Vec<usize> {
    let mut rest: Vec<usize> = (1..w).collect();
    rest.rotate_left((w - 1) * c / chains);
    std::iter::once(0).chain(rest).collect()
}

/// Pipelined chains: each `(path, slice)` streams `data[slice]` from `path[0]` (the root) down
/// `path` in chunks. At step `s` the member at position `p` of a path receives chunk `s - p + 1`
/// and forwards chunk `s - p`; every link carries a chunk at every step.
fn pipelined(
    team: &Team<'_>,
    paths: &[(Vec<usize>, Range<usize>)],
    chunk: usize,
    data: &mut [u8],
) -> Result<(), CollectiveError> {
    let chunk = chunk.max(1);
    let me = team.me();
    let steps = paths
        .iter()
        .map(|(path, slice)| slice.len().div_ceil(chunk) + path.len().saturating_sub(2))
        .max()
        .unwrap_or(0);
    for step in 0..steps {
        // (region of data, peer, tag, is a receive)
        let mut ops: Vec<(Range<usize>, usize, Tag, bool)> = Vec::new();
        for (c, (path, slice)) in paths.iter().enumerate() {
            let Some(p) = path.iter().position(|&m| m == me) else {
                continue;
            };
            let n = slice.len().div_ceil(chunk);
            let region =
                |i: usize| slice.start + i * chunk..(slice.start + (i + 1) * chunk).min(slice.end);
            let tag = tags::BROADCAST + c as Tag;
            if p > 0 && step + 1 >= p && step + 1 - p < n {
                ops.push((region(step + 1 - p), path[p - 1], tag, true));
            }
            if p + 1 < path.len() && step >= p && step - p < n {
                ops.push((region(step - p), path[p + 1], tag, false));
            }
        }
        if ops.is_empty() {
            continue;
        }
        // The regions are disjoint: cut `data` at their edges and lend each out once.
        ops.sort_by_key(|op| op.0.start);
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        let mut rest: &mut [u8] = data;
        let mut at = 0;
        for (region, peer, tag, receive) in ops {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(region.start - at);
            let (piece, tail) = tail.split_at_mut(region.len());
            rest = tail;
            at = region.end;
            if receive {
                recvs.push(Recv {
                    from: peer,
                    tag,
                    buf: piece,
                });
            } else {
                sends.push(Send {
                    to: peer,
                    tag,
                    data: &*piece,
                });
            }
        }
        team.exchange(&sends, &mut recvs)?;
    }
    Ok(())
}

/// Broadcasts a control message of any length from the root (binomial tree: it is small).
/// The root passes `Some(bytes)`; the others `None` and get the bytes.
pub fn broadcast_message(
    team: &Team<'_>,
    message: Option<&[u8]>,
) -> Result<Vec<u8>, CollectiveError> {
    if message.is_none()
        && let Some(parent) = Tree::binomial(team.size()).parent(team.me())
    {
        team.transport
            .wait_idle(team.order[parent], tags::BROADCAST);
    }
    let mut len = message.map_or(0, |m| m.len() as u64).to_le_bytes();
    let tree = BroadcastPlan {
        algorithm: Algorithm::Mst,
        chunk: usize::MAX,
        chains: 1,
    };
    broadcast(team, tree, &mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_CONTROL {
        return Err(CollectiveError::TooLarge {
            member: 0,
            bytes: len,
            limit: MAX_CONTROL,
        });
    }
    let mut body = match message {
        Some(m) => m.to_vec(),
        None => vec![0; len as usize],
    };
    broadcast(team, tree, &mut body)?;
    Ok(body)
}

/// Gathers every member's `mine` at the root, in chain order (the root gets `Some(all)`, the
/// others `None`): up the team's gather tree when it has one, else directly. Lengths travel
/// first, each checked against `limit`.
pub fn gather(
    team: &Team<'_>,
    mine: &[u8],
    limit: u64,
) -> Result<Option<Vec<Vec<u8>>>, CollectiveError> {
    if let Some(tree) = &team.gather_tree {
        return gather_up(team, tree, mine, limit);
    }
    let w = team.size();
    if team.me() != 0 {
        let len = (mine.len() as u64).to_le_bytes();
        team.send(0, tags::GATHER_LEN, &len)?;
        team.send(0, tags::GATHER, mine)?;
        return Ok(None);
    }
    let mut lens = vec![[0u8; 8]; w];
    let others: Vec<usize> = (1..w).collect();
    recv_each(team, &others, tags::GATHER_LEN, &mut lens[1..])?;
    let mut all: Vec<Vec<u8>> = Vec::with_capacity(w);
    all.push(mine.to_vec());
    for (m, len) in lens.iter().enumerate().skip(1) {
        let bytes = u64::from_le_bytes(*len);
        if bytes > limit {
            return Err(CollectiveError::TooLarge {
                member: m,
                bytes,
                limit,
            });
        }
        all.push(vec![0; bytes as usize]);
    }
    recv_each(team, &others, tags::GATHER, &mut all[1..])?;
    Ok(Some(all))
}

/// Receives one message tagged `tag` from each of `from` (chain positions) into the buffer at
/// the same index, all at once.
fn recv_each<B: AsMut<[u8]>>(
    team: &Team<'_>,
    from: &[usize],
    tag: Tag,
    bufs: &mut [B],
) -> Result<(), TransportError> {
    let mut recvs: Vec<Recv<'_>> = from
        .iter()
        .zip(bufs.iter_mut())
        .map(|(&from, buf)| Recv {
            from,
            tag,
            buf: buf.as_mut(),
        })
        .collect();
    team.exchange(&[], &mut recvs)
}

/// [`gather`] up `tree`: a member receives its children's pieces (each child's subtree, with
/// their positions and lengths first), adds its own and sends them all to its parent.
fn gather_up(
    team: &Team<'_>,
    tree: &Tree,
    mine: &[u8],
    limit: u64,
) -> Result<Option<Vec<Vec<u8>>>, CollectiveError> {
    let (w, me) = (team.size(), team.me());
    let children = tree.children(me);
    let mut counts = vec![[0u8; 8]; children.len()];
    recv_each(team, children, tags::GATHER_LEN, &mut counts)?;
    let mut heads: Vec<Vec<u8>> = Vec::with_capacity(children.len());
    for (&c, count) in children.iter().zip(&counts) {
        let n = u64::from_le_bytes(*count);
        if n > w as u64 {
            return Err(CollectiveError::TooLarge {
                member: c,
                bytes: n,
                limit: w as u64,
            });
        }
        heads.push(vec![0; n as usize * 16]);
    }
    recv_each(team, children, tags::GATHER_HEAD, &mut heads)?;
    // (position, length) of every piece below, checked: each from the child's own subtree, once.
    let mut held = vec![false; w];
    held[me] = true;
    let mut pieces: Vec<(usize, usize)> = vec![(me, mine.len())];
    let mut bodies: Vec<Vec<u8>> = Vec::with_capacity(children.len());
    let mut per_child: Vec<usize> = Vec::with_capacity(children.len());
    for (&c, head) in children.iter().zip(&heads) {
        per_child.push(head.len() / 16);
        let mut total = 0u64;
        for entry in head.chunks_exact(16) {
            let value = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8]));
            let (at, len) = (value(&entry[..8]), value(&entry[8..]));
            let stray = CollectiveError::Stray {
                member: c,
                piece: usize::try_from(at).unwrap_or(usize::MAX),
            };
            let at = usize::try_from(at)
                .ok()
                .filter(|&at| at < w && !held[at] && tree.is_below(at, c))
                .ok_or(stray)?;
            if len > limit {
                return Err(CollectiveError::TooLarge {
                    member: c,
                    bytes: len,
                    limit,
                });
            }
            held[at] = true;
            total += len;
            pieces.push((at, len as usize));
        }
        bodies.push(vec![0; usize::try_from(total).unwrap_or(usize::MAX)]);
    }
    recv_each(team, children, tags::GATHER, &mut bodies)?;
    let below_count = pieces.len();
    match tree.parent(me) {
        Some(parent) => {
            let mut head = Vec::with_capacity(below_count * 16);
            for &(at, len) in &pieces {
                head.extend_from_slice(&(at as u64).to_le_bytes());
                head.extend_from_slice(&(len as u64).to_le_bytes());
            }
            let mut body = mine.to_vec();
            for b in &bodies {
                body.extend_from_slice(b);
            }
            let count = (below_count as u64).to_le_bytes();
            team.exchange(
                &[
                    Send {
                        to: parent,
                        tag: tags::GATHER_LEN,
                        data: &count,
                    },
                    Send {
                        to: parent,
                        tag: tags::GATHER_HEAD,
                        data: &head,
                    },
                    Send {
                        to: parent,
                        tag: tags::GATHER,
                        data: &body,
                    },
                ],
                &mut [],
            )?;
            Ok(None)
        }
        None => {
            let mut all: Vec<Option<Vec<u8>>> = vec![None; w];
            all[me] = Some(mine.to_vec());
            let mut rest = pieces[1..].iter();
            for (body, &n) in bodies.iter().zip(&per_child) {
                let mut at = 0;
                for &(p, len) in rest.by_ref().take(n) {
                    all[p] = Some(body[at..at + len].to_vec());
                    at += len;
                }
            }
            all.into_iter()
                .enumerate()
                .map(|(p, piece)| piece.ok_or(CollectiveError::Missing(p)))
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        }
    }
}

/// How [`calibrate`] probes a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Bytes of the latency probe (a ping-pong).
    pub small: usize,
    /// Round trips timed for the latency; the fastest counts.
    pub pings: usize,
    /// Bytes of the bandwidth probe (sent one way, answered by a small ack).
    pub large: usize,
}

impl Default for Probe {
    fn default() -> Self {
        Self {
            small: 64,
            pings: 5,
            large: 1 << 20,
        }
    }
}

/// The rounds of disjoint pairs in which every pair of `w` members meets once (the circle
/// method: `w - 1` rounds of `w / 2` pairs, one member sitting out each round when `w` is odd).
pub fn pair_rounds(w: usize) -> Vec<Vec<(usize, usize)>> {
    let n = w + w % 2;
    (0..n.saturating_sub(1))
        .map(|r| {
            (0..n / 2)
                .filter_map(|i| {
                    // Member n - 1 stays put, the others rotate.
                    let at = |k: usize| if k == n - 1 { n - 1 } else { (k + r) % (n - 1) };
                    let (a, b) = (at(i), at(n - 1 - i));
                    (a < w && b < w).then_some((a.min(b), a.max(b)))
                })
                .collect()
        })
        .collect()
}

/// Measures every pair of the team, both directions, as in Gong, He and Zhong: `w - 1` rounds of
/// disjoint pairs ([`pair_rounds`]) probing at once. Within a pair the lower member first times
/// `pings` round trips of `small` bytes (latency: half the fastest), then each side sends
/// `large` bytes to the other in turn, answered by a one-byte ack (bandwidth: `large` over the
/// time less one round trip). The root gets the links by member in team order; the others get
/// `None`.
pub fn calibrate(team: &Team<'_>, probe: Probe) -> Result<Option<Links>, CollectiveError> {
    let (w, me) = (team.size(), team.me());
    let mut latency = vec![0.0f64; w];
    let mut bandwidth = vec![0.0f64; w];
    let small = vec![0x5au8; probe.small.max(1)];
    let large = vec![0xa5u8; probe.large.max(1)];
    let (mut small_in, mut large_in, mut ack) = (small.clone(), large.clone(), [0u8; 1]);
    let tag = tags::CALIBRATE;
    for round in pair_rounds(w) {
        let Some(&(a, b)) = round.iter().find(|(a, b)| *a == me || *b == me) else {
            continue;
        };
        let (peer, first) = if a == me { (b, true) } else { (a, false) };
        // Latency: the lower member pings, the other echoes.
        let mut fastest = f64::INFINITY;
        for _ in 0..probe.pings.max(1) {
            if first {
                let t = std::time::Instant::now();
                team.send(peer, tag, &small)?;
                team.recv(peer, tag, &mut small_in)?;
                fastest = fastest.min(t.elapsed().as_secs_f64());
            } else {
                team.recv(peer, tag, &mut small_in)?;
                team.send(peer, tag, &small)?;
            }
        }
        let mut rtt = [0u8; 8];
        if first {
            rtt = fastest.to_le_bytes();
            team.send(peer, tag, &rtt)?;
        } else {
            team.recv(peer, tag, &mut rtt)?;
        }
        let rtt = f64::from_le_bytes(rtt);
        latency[peer] = rtt / 2.0;
        // Bandwidth, each way in turn: the sender times until the ack.
        for sending in [first, !first] {
            if sending {
                let t = std::time::Instant::now();
                team.send(peer, tag, &large)?;
                team.recv(peer, tag, &mut ack)?;
                let seconds = (t.elapsed().as_secs_f64() - rtt).max(1e-9);
                bandwidth[peer] = large.len() as f64 / seconds;
            } else {
                team.recv(peer, tag, &mut large_in)?;
                team.send(peer, tag, &[1])?;
            }
        }
    }
    let mut row = Vec::with_capacity(w * 16);
    for (l, b) in latency.iter().zip(&bandwidth) {
        row.extend_from_slice(&l.to_le_bytes());
        row.extend_from_slice(&b.to_le_bytes());
    }
    let Some(rows) = gather(team, &row, (w * 16) as u64)? else {
        return Ok(None);
    };
    let (mut lat, mut bw) = (vec![vec![0.0; w]; w], vec![vec![0.0; w]; w]);
    for (i, r) in rows.iter().enumerate() {
        if r.len() != w * 16 {
            return Err(CollectiveError::TooLarge {
                member: i,
                bytes: r.len() as u64,
                limit: (w * 16) as u64,
            });
        }
        for (j, pair) in r.chunks_exact(16).enumerate() {
            let value = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            lat[i][j] = value(&pair[..8]);
            bw[i][j] = value(&pair[8..]);
        }
    }
    Ok(Some(Links {
        latency: lat,
        bandwidth: bw,
    }))
}

/// Stage 2: reduces centroid range `me` of every member's `partials` (all of `k` centroids of
/// `dims`) at this member, in `w - 1` pairwise rounds of `chunk`-byte pieces. Returns the
/// accumulator and the bytes this member sent.
pub fn reduce_ranges(
    team: &Team<'_>,
    partials: &[Partial],
    k: usize,
    dims: usize,
    chunk: usize,
) -> Result<(RangeSum, u64), CollectiveError> {
    let (w, me) = (team.size(), team.me());
    let chunk = chunk.max(8) / 8 * 8;
    let own = range_of(k, w, me);
    let mut acc = RangeSum::new(own.clone(), dims);
    for p in partials {
        acc.add_partial(p);
    }
    let mut sent = 0u64;
    for d in 1..w {
        let (to, from) = ((me + d) % w, (me + w - d) % w);
        let blob = encode_range(partials, range_of(k, w, to));
        // Announced: pieces (partials) and bytes (pieces are dense or sparse).
        let mut mine = [0u8; 16];
        mine[..8].copy_from_slice(&(partials.len() as u64).to_le_bytes());
        mine[8..].copy_from_slice(&(blob.len() as u64).to_le_bytes());
        let mut theirs = [0u8; 16];
        team.exchange(
            &[Send {
                to,
                tag: tags::STAGE2_LEN,
                data: &mine,
            }],
            &mut [Recv {
                from,
                tag: tags::STAGE2_LEN,
                buf: &mut theirs,
            }],
        )?;
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8]));
        let (tasks, incoming) = (word(&theirs[..8]), word(&theirs[8..]));
        // A partial per map task at most, each piece at most dense: anything larger is a bug
        // or an attack.
        let limit = 1u64 << 20;
        if tasks > limit {
            return Err(CollectiveError::TooLarge {
                member: from,
                bytes: tasks,
                limit,
            });
        }
        let most = range_len(tasks as usize, own.len(), dims);
        if incoming > most {
            return Err(CollectiveError::TooLarge {
                member: from,
                bytes: incoming,
                limit: most,
            });
        }
        let mut buf = vec![0u8; chunk.min(incoming as usize)];
        let (mut out_at, mut in_at) = (0usize, 0u64);
        while out_at < blob.len() || in_at < incoming {
            let send_end = (out_at + chunk).min(blob.len());
            let recv_len = chunk.min((incoming - in_at) as usize);
            let sends = [Send {
                to,
                tag: tags::STAGE2,
                data: &blob[out_at..send_end],
            }];
            let mut recvs = [Recv {
                from,
                tag: tags::STAGE2,
                buf: &mut buf[..recv_len],
            }];
            team.exchange(&sends, &mut recvs)?;
            if recv_len > 0 {
                acc.add_chunk(in_at, &buf[..recv_len])
                    .map_err(CollectiveError::Stage2)?;
            }
            sent += (send_end - out_at) as u64;
            out_at = send_end;
            in_at += recv_len as u64;
        }
        if !own.is_empty() {
            acc.end_sender(tasks).map_err(CollectiveError::Stage2)?;
        }
    }
    Ok((acc, sent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::transport::memory::MemoryTransport;

    #[test]
    fn pair_rounds_meet_every_pair_once_in_disjoint_rounds() {
        for w in 1..=9 {
            let rounds = pair_rounds(w);
            let mut met = std::collections::BTreeSet::new();
            for round in &rounds {
                let mut busy = std::collections::BTreeSet::new();
                for &(a, b) in round {
                    assert!(a < b && b < w);
                    assert!(busy.insert(a) && busy.insert(b), "w {w}: {round:?}");
                    assert!(met.insert((a, b)), "w {w}: ({a}, {b}) twice");
                }
            }
            assert_eq!(met.len(), w * w.saturating_sub(1) / 2, "w {w}");
            assert!(rounds.len() <= w, "w {w}");
        }
    }

    #[test]
    fn calibration_measures_every_link_both_ways() {
        let probe = Probe {
            small: 16,
            pings: 2,
            large: 4096,
        };
        let results = on_team(
            5,
            |w| (0..w).collect(),
            move |team| calibrate(team, probe).expect("calibrate"),
        );
        let links = results[0].clone().expect("the root gets the matrices");
        let (lat, bw) = (links.latency, links.bandwidth);
        assert!(results[1..].iter().all(Option::is_none));
        for i in 0..5 {
            for j in (0..5).filter(|&j| j != i) {
                assert!(lat[i][j] > 0.0 && lat[i][j].is_finite(), "{i} -> {j}");
                assert!(bw[i][j] > 0.0 && bw[i][j].is_finite(), "{i} -> {j}");
                assert_eq!(lat[i][j], lat[j][i], "one round trip serves both ways");
            }
        }
    }

    /// Runs `f` on every member of an in-memory team of `w`, in chain order `order(w)`.
    fn on_team<T: std::marker::Send>(
        w: usize,
        order: impl Fn(usize) -> Vec<usize> + Sync,
        f: impl Fn(&Team<'_>) -> T + Sync,
    ) -> Vec<T> {
        let team = MemoryTransport::team(w);
        std::thread::scope(|s| {
            let handles: Vec<_> = team
                .iter()
                .map(|t| {
                    let (order, f) = (&order, &f);
                    s.spawn(move || f(&Team::ordered(t, order(w)).expect("order")))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("member"))
                .collect()
        })
    }

    fn reversed(w: usize) -> Vec<usize> {
        std::iter::once(0).chain((1..w).rev()).collect()
    }

    #[test]
    fn every_broadcast_delivers_the_roots_bytes_to_every_member() {
        let message: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        for w in [1, 2, 3, 5, 8] {
            for algorithm in [
                Algorithm::Chain,
                Algorithm::MultiChain,
                Algorithm::Mst,
                Algorithm::Simple,
            ] {
                for (chunk, chains) in [(64, 2), (1000, 3), (7, 4), (5000, 1)] {
                    let plan = BroadcastPlan {
                        algorithm,
                        chunk,
                        chains,
                    };
                    let got = on_team(w, reversed, |team| {
                        let mut data = if team.me() == 0 {
                            message.clone()
                        } else {
                            vec![0; message.len()]
                        };
                        broadcast(team, plan, &mut data).expect("broadcast");
                        data
                    });
                    for (m, data) in got.iter().enumerate() {
                        assert_eq!(data, &message, "w {w} {plan:?} member {m}");
                    }
                }
            }
        }
    }

    #[test]
    fn control_messages_and_gathers_arrive_whole_and_in_chain_order() {
        let got = on_team(4, reversed, |team| {
            let text = broadcast_message(team, (team.me() == 0).then_some(b"load this".as_slice()))
                .expect("bcast");
            let mine = vec![team.me() as u8; team.me() * 3];
            (text, gather(team, &mine, 100).expect("gather"))
        });
        for (m, (text, gathered)) in got.iter().enumerate() {
            assert_eq!(text, b"load this");
            if m == 0 {
                let all = gathered.as_ref().expect("root");
                for (j, piece) in all.iter().enumerate() {
                    assert_eq!(piece, &vec![j as u8; j * 3]);
                }
            } else {
                assert!(gathered.is_none());
            }
        }
        // A member that announces more than the limit is refused, naming it.
        let got = on_team(2, reversed, |team| gather(team, &[1; 50], 10).map(|_| ()));
        assert!(matches!(
            got[0],
            Err(CollectiveError::TooLarge {
                member: 1,
                bytes: 50,
                limit: 10
            })
        ));
    }

    #[test]
    fn measured_trees_broadcast_and_gather_like_the_fixed_ones() {
        use crate::collective::topology::tree::random_trees;
        let message: Vec<u8> = (0..700u32).map(|i| (i * 13 % 256) as u8).collect();
        for w in [1usize, 2, 3, 5, 8] {
            let mut trees = random_trees(w, 0, 4, w as u64);
            trees.push(Tree::star(w, 0));
            trees.push(Tree::binomial(w));
            for tree in &trees {
                let got = on_team(w, reversed, |team| {
                    let team = Team::ordered(team.transport(), team.order().to_vec())
                        .and_then(|t| t.with_trees(Some(tree), Some(tree)))
                        .expect("trees fit");
                    let mut data = if team.me() == 0 {
                        message.clone()
                    } else {
                        vec![0; message.len()]
                    };
                    let plan = BroadcastPlan {
                        algorithm: Algorithm::Mst,
                        chunk: 64,
                        chains: 1,
                    };
                    broadcast(&team, plan, &mut data).expect("broadcast");
                    // Some pieces empty, one at the end of a subtree at times.
                    let mine = vec![team.me() as u8 + 1; team.me() * 7 % 4];
                    (data, gather(&team, &mine, 100).expect("gather"))
                });
                for (m, (data, gathered)) in got.iter().enumerate() {
                    assert_eq!(data, &message, "w {w} {tree:?} member {m}");
                    if m == 0 {
                        let all = gathered.as_ref().expect("root");
                        assert_eq!(all.len(), w);
                        for (j, piece) in all.iter().enumerate() {
                            assert_eq!(piece, &vec![j as u8 + 1; j * 7 % 4], "{tree:?}");
                        }
                    } else {
                        assert!(gathered.is_none());
                    }
                }
            }
        }
        // A tree over another team size, or rooted elsewhere, is refused.
        let got = on_team(3, reversed, |team| {
            let small = Team::ordered(team.transport(), team.order().to_vec())
                .and_then(|t| t.with_trees(Some(&Tree::star(2, 0)), None));
            let elsewhere = Team::ordered(team.transport(), team.order().to_vec())
                .and_then(|t| t.with_trees(None, Some(&Tree::star(3, 1))));
            (small.is_err(), elsewhere.is_err())
        });
        assert!(got.iter().all(|&(a, b)| a && b));
    }

    #[test]
    fn a_member_forwarding_a_piece_not_below_it_is_named() {
        let star = Tree::star(3, 0);
        let got = on_team(
            3,
            |w| (0..w).collect(),
            |team| {
                let team = Team::ordered(team.transport(), vec![0, 1, 2])
                    .and_then(|t| t.with_trees(None, Some(&star)))
                    .expect("team");
                if team.me() == 2 {
                    // Claims member 1's piece.
                    let mut head = 1u64.to_le_bytes().to_vec();
                    head.extend_from_slice(&3u64.to_le_bytes());
                    team.send(0, tags::GATHER_LEN, &1u64.to_le_bytes())
                        .expect("send");
                    team.send(0, tags::GATHER_HEAD, &head).expect("send");
                    team.send(0, tags::GATHER, &[9; 3]).expect("send");
                    return None;
                }
                Some(gather(&team, &[7; 3], 100).map(|_| ()))
            },
        );
        assert!(
            matches!(
                got[0],
                Some(Err(CollectiveError::Stray {
                    member: 2,
                    piece: 1
                }))
            ),
            "{:?}",
            got[0]
        );
    }

    #[test]
    fn stage_two_gives_each_owner_the_sum_of_its_range() {
        use vocab_pipeline::partition::Rows;
        let (k, dims) = (11, 3);
        let partial = |seed: u32| {
            let x: Vec<f32> = (0..5 * dims as u32)
                .map(|i| ((i * 37 + seed * 11) % 19) as f32 - 9.0)
                .collect();
            let labels: Vec<u32> = (0..5).map(|i| (i * 5 + seed) % k as u32).collect();
            let mut p = Partial::new(k, dims, 20);
            p.accumulate(u64::from(seed), Rows::dense(&x, dims), &labels, &[0.5; 5]);
            p
        };
        for w in [1, 2, 3, 4, 12] {
            let got = on_team(w, reversed, |team| {
                // Member m holds m % 3 + 1 unmerged partials.
                let mine: Vec<Partial> = (0..team.me() % 3 + 1)
                    .map(|i| partial((team.me() * 3 + i) as u32))
                    .collect();
                (
                    team.me(),
                    reduce_ranges(team, &mine, k, dims, 24).expect("stage 2").0,
                )
            });
            let mut want = Partial::new(k, dims, 20);
            for m in 0..w {
                for i in 0..m % 3 + 1 {
                    want.merge(&partial((m * 3 + i) as u32));
                }
            }
            // Results come in rank order; ranges belong to chain positions.
            for (m, acc) in &got {
                let (m, r) = (*m, range_of(k, w, *m));
                assert_eq!(acc.counts, want.counts()[r.clone()], "w {w} member {m}");
                assert_eq!(
                    acc.sums,
                    want.sums()[r.start * dims..r.end * dims],
                    "w {w} member {m}"
                );
            }
        }
    }

    #[test]
    fn an_order_must_be_a_permutation_with_the_root_first() {
        let team = MemoryTransport::team(3);
        for bad in [vec![1, 0, 2], vec![0, 1], vec![0, 1, 1], vec![0, 1, 3]] {
            assert!(Team::ordered(&team[0], bad).is_err());
        }
        assert_eq!(
            Team::ordered(&team[2], vec![0, 2, 1]).expect("order").me(),
            1
        );
    }
}
