//! Collectives built from measured links (Gong, He and Zhong, "Network Performance Aware MPI
//! Collective Communication Operations in the Cloud"): where no rack labels exist, or links are
//! uneven and asymmetric, measure every pair ([`crate::collective::calibrate`]) and build the chain from the
//! measurements.
//!
//! * [`Links`]: latency and bandwidth from every member to every other; the network
//!   performance matrix of a message of `m` bytes is `L + m / B`.
//! * [`groups`]: the members grouped into a hierarchy by that matrix (agglomerative, average
//!   linkage on the symmetric cost; a level is cut where the merge cost jumps by at least
//!   [`GAP`]), so members behind one switch, or one fast fabric, end up together.
//! * [`chain`]: the order of the pipelined chain broadcast: the root's group first, groups kept
//!   together (one crossing of each slow core link instead of many, which pairwise
//!   measurements alone cannot see), the order of the groups and of the members inside each
//!   chosen by a local search on [`chain_seconds`], the pipelined chain's cost model. A member
//!   with a slow link therefore ends up where only its inbound link is used: the chain's end.
//! * [`random_chain_seconds`]: the cost of random orders, for the paper's Monte Carlo check.
//! * [`tree`]: the broadcast and reduction trees (Algorithm 3) and the gather tree (Algorithm 4)
//!   from the same links and hierarchy, with their cost models.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod tree;

/// A merge that costs this many times the previous one starts a new level of the hierarchy.
pub const GAP: f64 = 1.5;

/// Measured links: `latency[i][j]` seconds and `bandwidth[i][j]` bytes per second from member
/// `i` to member `j` (the diagonal is unused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Links {
    /// Seconds of a small message.
    pub latency: Vec<Vec<f64>>,
    /// Bytes per second of a large one.
    pub bandwidth: Vec<Vec<f64>>,
}

impl Links {
    /// Members measured.
    pub fn len(&self) -> usize {
        self.latency.len()
    }

    /// Whether no member was measured.
    pub fn is_empty(&self) -> bool {
        self.latency.is_empty()
    }

    /// Seconds to send `bytes` from `i` to `j`: `L + m / B` (0 to oneself).
    pub fn cost(&self, i: usize, j: usize, bytes: f64) -> f64 {
        if i == j {
            return 0.0;
        }
        let b = self.bandwidth[i][j];
        let transfer = if b > 0.0 { bytes / b } else { f64::INFINITY };
        self.latency[i][j] + transfer
    }

    /// Checks the shape and the values (finite, latency >= 0, bandwidth > 0 off the diagonal).
    pub fn check(&self) -> Result<(), LinksError> {
        let n = self.len();
        if self.bandwidth.len() != n
            || self
                .latency
                .iter()
                .chain(&self.bandwidth)
                .any(|row| row.len() != n)
        {
            return Err(LinksError::Shape(n));
        }
        for i in 0..n {
            for j in (0..n).filter(|&j| j != i) {
                let (l, b) = (self.latency[i][j], self.bandwidth[i][j]);
                if !(l.is_finite() && l >= 0.0 && b.is_finite() && b > 0.0) {
                    return Err(LinksError::Value {
                        from: i,
                        to: j,
                        latency: l,
                        bandwidth: b,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Link matrices that cannot be used.
#[derive(Debug, Error, PartialEq)]
pub enum LinksError {
    /// Rows of the wrong length.
    #[error("link matrices are not {0} x {0}")]
    Shape(usize),
    /// A link with a negative or non-finite latency, or a bandwidth that is not positive.
    #[error("link {from} -> {to}: latency {latency} s, bandwidth {bandwidth} B/s")]
    Value {
        /// Sender.
        from: usize,
        /// Receiver.
        to: usize,
        /// Seconds.
        latency: f64,
        /// Bytes per second.
        bandwidth: f64,
    },
}

/// Links as saved to a file (`<cluster>.links.json`, `<out>.links.json`): by member label, so
/// a later job reuses them for the members it shares with the measured team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    /// Member labels (node names, or hosts), by row.
    pub members: Vec<String>,
    /// Seconds of a small message, row -> column.
    pub latency_seconds: Vec<Vec<f64>>,
    /// Bytes per second of a large one, row -> column.
    pub bandwidth_bytes_per_second: Vec<Vec<f64>>,
    /// Seconds the measurement took.
    #[serde(default)]
    pub seconds: f64,
}

impl Saved {
    /// The links of `members` (labelled as `labels`, in that order).
    pub fn new(labels: &[String], links: &Links, seconds: f64) -> Self {
        Self {
            members: labels.to_vec(),
            latency_seconds: links.latency.clone(),
            bandwidth_bytes_per_second: links.bandwidth.clone(),
            seconds,
        }
    }

    /// The links among `labels`, in that order, when every one was measured (and the file's
    /// matrices are sound); else `None`.
    pub fn links_for(&self, labels: &[String]) -> Option<Links> {
        let n = self.members.len();
        let whole = Links {
            latency: self.latency_seconds.clone(),
            bandwidth: self.bandwidth_bytes_per_second.clone(),
        };
        if whole.len() != n || whole.check().is_err() {
            return None;
        }
        let at: Vec<usize> = labels
            .iter()
            .map(|l| self.members.iter().position(|m| m == l))
            .collect::<Option<_>>()?;
        let pick = |m: &Vec<Vec<f64>>| -> Vec<Vec<f64>> {
            at.iter()
                .map(|&i| at.iter().map(|&j| m[i][j]).collect())
                .collect()
        };
        Some(Links {
            latency: pick(&whole.latency),
            bandwidth: pick(&whole.bandwidth),
        })
    }
}

/// Symmetric cost of a pair: the mean of both directions.
fn pair(links: &Links, i: usize, j: usize, bytes: f64) -> f64 {
    (links.cost(i, j, bytes) + links.cost(j, i, bytes)) / 2.0
}

/// Average-linkage distance between two groups.
fn linkage(links: &Links, a: &[usize], b: &[usize], bytes: f64) -> f64 {
    let sum: f64 = a
        .iter()
        .flat_map(|&i| b.iter().map(move |&j| (i, j)))
        .map(|(i, j)| pair(links, i, j, bytes))
        .sum();
    sum / (a.len() * b.len()) as f64
}

/// Groups `members` at the top level of the hierarchy for messages of `bytes`: agglomerative
/// with average linkage, cut before the merge whose cost jumps most over the one before it, if
/// that jump is at least [`GAP`]; otherwise one group. Groups are sorted by their smallest
/// member, members ascending.
pub fn split(links: &Links, members: &[usize], bytes: f64) -> Vec<Vec<usize>> {
    let mut clusters: Vec<Vec<usize>> = members.iter().map(|&m| vec![m]).collect();
    // Merge heights, and the clusters before each merge.
    let mut heights = Vec::new();
    let mut before = Vec::new();
    while clusters.len() > 1 {
        let mut best = (f64::INFINITY, 0, 1);
        for a in 0..clusters.len() {
            for b in a + 1..clusters.len() {
                let d = linkage(links, &clusters[a], &clusters[b], bytes);
                if d < best.0 {
                    best = (d, a, b);
                }
            }
        }
        before.push(clusters.clone());
        heights.push(best.0);
        let merged = clusters.remove(best.2);
        clusters[best.1].extend(merged);
    }
    let floor = heights
        .iter()
        .copied()
        .filter(|h| *h > 0.0)
        .fold(f64::INFINITY, f64::min);
    let cut = (1..heights.len())
        .map(|t| {
            let prev = heights[t - 1].max(floor.min(1e-12));
            (heights[t] / prev, t)
        })
        .filter(|(ratio, _)| *ratio >= GAP)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let mut groups = match cut {
        Some((_, t)) => before[t].clone(),
        None => vec![members.to_vec()],
    };
    for g in &mut groups {
        g.sort_unstable();
    }
    groups.sort_by_key(|g| g.first().copied());
    groups
}

/// The hierarchy of groups: the top-level groups of all members, each split again while it
/// splits (at most `depth` levels). Leaves are lists of members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Hierarchy {
    /// Members with no structure among them.
    Leaf(Vec<usize>),
    /// Groups.
    Groups(Vec<Hierarchy>),
}

/// Groups the `n` members of `links` into a hierarchy for messages of `bytes`.
pub fn groups(links: &Links, bytes: f64) -> Hierarchy {
    let all: Vec<usize> = (0..links.len()).collect();
    hierarchy(links, &all, bytes, 3)
}

fn hierarchy(links: &Links, members: &[usize], bytes: f64, depth: usize) -> Hierarchy {
    let top = split(links, members, bytes);
    if depth == 0 || top.len() < 2 {
        return Hierarchy::Leaf(members.to_vec());
    }
    Hierarchy::Groups(
        top.iter()
            .map(|g| hierarchy(links, g, bytes, depth - 1))
            .collect(),
    )
}

impl Hierarchy {
    /// The top-level groups, each flattened to its members.
    pub fn top(&self) -> Vec<Vec<usize>> {
        match self {
            Self::Leaf(m) => vec![m.clone()],
            Self::Groups(gs) => gs.iter().map(Self::members).collect(),
        }
    }

    /// Every member, in order.
    pub fn members(&self) -> Vec<usize> {
        match self {
            Self::Leaf(m) => m.clone(),
            Self::Groups(gs) => gs.iter().flat_map(Self::members).collect(),
        }
    }

    /// The leaves, in order: the finest groups.
    pub fn leaves(&self) -> Vec<Vec<usize>> {
        match self {
            Self::Leaf(m) => vec![m.clone()],
            Self::Groups(gs) => gs.iter().flat_map(Self::leaves).collect(),
        }
    }
}

/// Seconds of a pipelined chain broadcast of `bytes` in chunks of `chunk` down `order` (the
/// root first): every hop carries each chunk once; the first chunk fills the pipe, the rest
/// follow at the pace of the slowest hop.
pub fn chain_seconds(links: &Links, order: &[usize], bytes: f64, chunk: f64) -> f64 {
    if order.len() < 2 || bytes <= 0.0 {
        return 0.0;
    }
    let chunk = chunk.clamp(1.0, bytes);
    let chunks = (bytes / chunk).ceil();
    let hops = order.windows(2).map(|h| links.cost(h[0], h[1], chunk));
    let (fill, slowest) = hops.fold((0.0, 0.0f64), |(sum, max), t| (sum + t, max.max(t)));
    fill + (chunks - 1.0) * slowest
}

/// The chain order for broadcasting `bytes` in chunks of `chunk` from member `root`: groups of
/// the hierarchy contiguous, the root's group first and the root at its head; the order of the
/// groups and of the members within each chosen by local search on [`chain_seconds`].
pub fn chain(links: &Links, root: usize, bytes: f64, chunk: f64) -> Vec<usize> {
    let n = links.len();
    if n == 0 {
        return Vec::new();
    }
    let leaves = groups(links, chunk.min(bytes.max(1.0))).leaves();
    // Blocks: the root's leaf (root first), then the other leaves; each in greedy
    // nearest-neighbour order from its first member.
    let mut blocks: Vec<Vec<usize>> = Vec::with_capacity(leaves.len());
    for leaf in &leaves {
        let start = if leaf.contains(&root) { root } else { leaf[0] };
        blocks.push(greedy_path(links, leaf, start, chunk));
    }
    if let Some(at) = blocks.iter().position(|b| b.first() == Some(&root)) {
        let first = blocks.remove(at);
        blocks.insert(0, first);
    }
    let cost = |blocks: &[Vec<usize>]| {
        let order: Vec<usize> = blocks.concat();
        chain_seconds(links, &order, bytes, chunk)
    };
    let mut best = cost(&blocks);
    // Local search until no move improves: relocate a member inside its block (never the
    // root), reverse a block (not the root's), move a block (not the root's).
    loop {
        let mut improved = false;
        for b in 0..blocks.len() {
            let len = blocks[b].len();
            let first = usize::from(b == 0);
            for from in first..len {
                for to in first..len {
                    if from == to {
                        continue;
                    }
                    let mut trial = blocks.clone();
                    let m = trial[b].remove(from);
                    trial[b].insert(to, m);
                    let c = cost(&trial);
                    if c < best * (1.0 - 1e-9) {
                        (blocks, best, improved) = (trial, c, true);
                    }
                }
            }
            if b > 0 && len > 1 {
                let mut trial = blocks.clone();
                trial[b].reverse();
                let c = cost(&trial);
                if c < best * (1.0 - 1e-9) {
                    (blocks, best, improved) = (trial, c, true);
                }
            }
        }
        for from in 1..blocks.len() {
            for to in 1..blocks.len() {
                if from == to {
                    continue;
                }
                let mut trial = blocks.clone();
                let block = trial.remove(from);
                trial.insert(to, block);
                let c = cost(&trial);
                if c < best * (1.0 - 1e-9) {
                    (blocks, best, improved) = (trial, c, true);
                }
            }
        }
        if !improved {
            return blocks.concat();
        }
    }
}

/// Members of `group` from `start`, each next the cheapest to reach from the last.
fn greedy_path(links: &Links, group: &[usize], start: usize, chunk: f64) -> Vec<usize> {
    let mut left: Vec<usize> = group.iter().copied().filter(|&m| m != start).collect();
    let mut path = vec![start];
    while !left.is_empty() {
        let last = path[path.len() - 1];
        let (at, _) = left
            .iter()
            .enumerate()
            .map(|(at, &m)| (at, links.cost(last, m, chunk)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        path.push(left.remove(at));
    }
    path
}

/// The cost of `samples` random chain orders from `root` (the root first), for the Monte
/// Carlo check: where the chosen chain falls among them.
pub fn random_chain_seconds(
    links: &Links,
    root: usize,
    bytes: f64,
    chunk: f64,
    samples: usize,
    seed: u64,
) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rest: Vec<usize> = (0..links.len()).filter(|&m| m != root).collect();
    (0..samples)
        .map(|_| {
            let mut order = rest.clone();
            order.shuffle(&mut rng);
            order.insert(0, root);
            chain_seconds(links, &order, bytes, chunk)
        })
        .collect()
}

/// Links of a synthetic cluster for tests and simulations: members in `racks` (rack of each
/// member), `local` bytes/s within a rack and `core` bytes/s across, 50 us and 200 us latency,
/// with multiplicative noise up to `noise` from `seed`.
pub fn synthetic(racks: &[usize], local: f64, core: f64, noise: f64, seed: u64) -> Links {
    let n = racks.len();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut latency = vec![vec![0.0; n]; n];
    let mut bandwidth = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in (0..n).filter(|&j| j != i) {
            let same = racks[i] == racks[j];
            let jitter = 1.0 + noise * rng.random::<f64>();
            latency[i][j] = if same { 50e-6 } else { 200e-6 } * jitter;
            bandwidth[i][j] = if same { local } else { core } / jitter;
        }
    }
    Links { latency, bandwidth }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    #[test]
    fn two_clean_racks_are_two_groups_and_the_chain_keeps_them_together() {
        // Racks interleaved by member number, as a scheduler may place them.
        let racks = [0, 1, 0, 1, 0, 1, 0, 1];
        let links = synthetic(&racks, 100.0 * MB, 10.0 * MB, 0.1, 1);
        let top = groups(&links, 65536.0).top();
        assert_eq!(top, vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        let order = chain(&links, 0, 16.0 * MB, 65536.0);
        assert_eq!(order[0], 0);
        let crossings = order
            .windows(2)
            .filter(|h| racks[h[0]] != racks[h[1]])
            .count();
        assert_eq!(crossings, 1, "{order:?}");
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn three_racks_behind_cores_of_different_speed_group_by_rack() {
        let racks = [0, 0, 1, 1, 1, 2, 2, 0];
        let mut links = synthetic(&racks, 100.0 * MB, 20.0 * MB, 0.05, 2);
        // Racks 1 and 2 share a faster core between them than either has to rack 0.
        for i in 0..8 {
            for j in 0..8 {
                if i != j && racks[i] != racks[j] && racks[i] != 0 && racks[j] != 0 {
                    links.bandwidth[i][j] = 40.0 * MB;
                }
            }
        }
        let h = groups(&links, 65536.0);
        let leaves = h.leaves();
        assert_eq!(
            leaves,
            vec![vec![0, 1, 7], vec![2, 3, 4], vec![5, 6]],
            "{h:?}"
        );
    }

    #[test]
    fn a_member_with_a_slow_link_ends_the_chain() {
        let racks = [0; 6];
        let mut links = synthetic(&racks, 100.0 * MB, 100.0 * MB, 0.05, 3);
        // Member 3's access link is 10x slower both ways.
        for j in 0..6 {
            if j != 3 {
                links.bandwidth[3][j] = 10.0 * MB;
                links.bandwidth[j][3] = 10.0 * MB;
            }
        }
        let order = chain(&links, 0, 16.0 * MB, 65536.0);
        assert_eq!(order.last(), Some(&3), "{order:?}");
        assert_eq!(order[0], 0);
        // And the chosen chain beats every one of a sample of random orders or ties the best.
        let chosen = chain_seconds(&links, &order, 16.0 * MB, 65536.0);
        let random = random_chain_seconds(&links, 0, 16.0 * MB, 65536.0, 200, 9);
        assert!(random.iter().all(|&r| chosen <= r * 1.0001), "{chosen}");
    }

    #[test]
    fn saved_links_give_the_submatrix_of_the_members_asked_for() {
        let links = synthetic(&[0, 0, 1, 1], 100.0 * MB, 10.0 * MB, 0.2, 5);
        let labels: Vec<String> = ["driver", "a", "b", "c"].map(String::from).to_vec();
        let saved = Saved::new(&labels, &links, 1.5);
        let text = serde_json::to_string(&saved).expect("json");
        let back: Saved = serde_json::from_str(&text).expect("read");
        let ask: Vec<String> = ["driver", "c", "a"].map(String::from).to_vec();
        let sub = back.links_for(&ask).expect("all measured");
        assert_eq!(sub.bandwidth[1][2], links.bandwidth[3][1]);
        assert_eq!(sub.latency[2][0], links.latency[1][0]);
        let stranger: Vec<String> = ["driver", "z"].map(String::from).to_vec();
        assert!(back.links_for(&stranger).is_none());
    }

    #[test]
    fn uniform_links_are_one_group_and_the_cost_model_is_the_pipeline() {
        let links = synthetic(&[0; 4], 100.0 * MB, 100.0 * MB, 0.0, 4);
        assert_eq!(groups(&links, 65536.0), Hierarchy::Leaf(vec![0, 1, 2, 3]));
        // 4 chunks over 3 equal hops: 3 to fill, 3 more at the slowest hop's pace.
        let hop = links.cost(0, 1, 1000.0);
        let t = chain_seconds(&links, &[0, 1, 2, 3], 4000.0, 1000.0);
        assert!((t - 6.0 * hop).abs() < 1e-12, "{t} vs {}", 6.0 * hop);
        assert_eq!(chain_seconds(&links, &[0], 4000.0, 1000.0), 0.0);
        assert!(links.check().is_ok());
        let mut bad = links.clone();
        bad.bandwidth[1][2] = 0.0;
        let err = bad.check().expect_err("zero bandwidth").to_string();
        assert!(err.contains("1 -> 2"), "{err}");
    }
}
