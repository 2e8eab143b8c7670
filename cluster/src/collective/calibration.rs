//! The layout of a team from measured links (Gong, He, Zhong): the chain, the broadcast tree and
//! the stage-3 gather tree chosen under the cost model, each checked against 1,000 random ones
//! ([`Calibration::choose`]); the rack-ordered chain when nothing is measured ([`chain_order`]);
//! the labels under which links are saved ([`labels`]).

use std::collections::BTreeMap;

use super::Probe;
use super::topology::tree::{self, Check, Model, Tree};
use super::topology::{self, Hierarchy, Links};

/// The labels of members on `hosts` in saved calibrations: the hosts when they are distinct
/// (node names, one rank per host), else `rank@host`.
pub fn labels(hosts: &[String]) -> Vec<String> {
    let distinct = hosts
        .iter()
        .enumerate()
        .all(|(i, h)| !hosts[..i].contains(h));
    hosts
        .iter()
        .enumerate()
        .map(|(r, h)| {
            if distinct {
                h.clone()
            } else {
                format!("{r}@{h}")
            }
        })
        .collect()
}

/// Where the chain order of a distributed run comes from (the command line's and configs'
/// choice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Order {
    /// Racks: the cluster file's racks or `order`, or the MPI rack map.
    #[default]
    Racks,
    /// Measured: every link probed when the job starts, the chain and the trees built from
    /// the measurements (groups kept together, slow links at the end or at a leaf).
    Auto,
}

/// The chain from measured links ([`crate::collective::topology`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Auto {
    /// How the links are probed.
    pub probe: Probe,
    /// Bytes of the broadcast the chain is chosen for (the centroids).
    pub bytes: f64,
}

/// What a calibration found: the links, their groups, the chain and trees chosen, where they
/// fall among random ones under the cost model, and what measuring cost.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// Links by rank.
    pub links: Links,
    /// Seconds the probes took.
    pub seconds: f64,
    /// The groups found.
    pub groups: Hierarchy,
    /// The chain chosen (ranks, root first).
    pub order: Vec<usize>,
    /// The chain's predicted seconds against 1,000 random orders (the paper's Monte Carlo
    /// check under the pipelined chain's cost model).
    pub chain: Check,
    /// The tree of `mst` broadcasts (Algorithm 3, ranks), or the binomial tree in chain order
    /// when the model predicts that one faster.
    pub broadcast_tree: Tree,
    /// Its predicted seconds against 1,000 random trees.
    pub broadcast_check: Check,
    /// Predicted seconds of the binomial tree in chain order (MPI's).
    pub binomial: f64,
    /// The stage-3 gather tree (Algorithm 4, ranks), or the direct gather (a star) when the
    /// model predicts that one faster.
    pub gather_tree: Tree,
    /// Its predicted seconds against 1,000 random trees.
    pub gather_check: Check,
    /// Predicted seconds of the direct gather.
    pub star: f64,
    /// The links came from a saved calibration, not from probing now.
    pub reused: bool,
}

impl Calibration {
    /// Chooses the chain and the trees for `auto` on measured `links`, with chunks of `chunk`
    /// bytes. The gather is modelled with pieces of `auto.bytes` over the other members (the
    /// stage-3 ranges of the centroids).
    pub fn choose(links: Links, seconds: f64, auto: Auto, chunk: usize) -> Self {
        let chunk = chunk as f64;
        let groups = topology::groups(&links, chunk.min(auto.bytes.max(1.0)));
        let order = topology::chain(&links, 0, auto.bytes, chunk);
        let predicted = topology::chain_seconds(&links, &order, auto.bytes, chunk);
        let random = topology::random_chain_seconds(&links, 0, auto.bytes, chunk, 1000, 1);
        let chain = Check::of(predicted, random);
        let n = links.len();
        let model = Model::new(&links, &groups);
        let random_trees = tree::random_trees(n, 0, 1000, 2);
        let binomial_tree = Tree::binomial(n)
            .relabel(&inverse(&order))
            .unwrap_or_else(|_| Tree::binomial(n));
        let binomial = model.broadcast(&binomial_tree, auto.bytes);
        let mut broadcast_tree = model.broadcast_tree(0, auto.bytes);
        let mut predicted = model.broadcast(&broadcast_tree, auto.bytes);
        if binomial < predicted {
            (broadcast_tree, predicted) = (binomial_tree, binomial);
        }
        let random: Vec<f64> = (random_trees.iter())
            .map(|t| model.broadcast(t, auto.bytes))
            .collect();
        let broadcast_check = Check::of(predicted, random);
        let piece = auto.bytes / n.saturating_sub(1).max(1) as f64;
        let star_tree = Tree::star(n, 0);
        let star = model.gather(&star_tree, piece);
        let mut gather_tree = model.gather_tree(0, piece);
        let mut predicted = model.gather(&gather_tree, piece);
        // The direct gather unless the tree saves a real fraction (each relay is a store and
        // forward the model only estimates).
        if star <= predicted / (1.0 - 2.0 * tree::GAIN) {
            (gather_tree, predicted) = (star_tree, star);
        }
        let random: Vec<f64> = (random_trees.iter())
            .map(|t| model.gather(t, piece))
            .collect();
        let gather_check = Check::of(predicted, random);
        Self {
            links,
            seconds,
            groups,
            order,
            chain,
            broadcast_tree,
            broadcast_check,
            binomial,
            gather_tree,
            gather_check,
            star,
            reused: false,
        }
    }

    /// A few lines for people: the matrices (microseconds, MB/s), the groups and the chain,
    /// members named by `names` (by rank).
    pub fn describe(&self, names: &[String]) -> String {
        use std::fmt::Write as _;
        let name = |r: usize| names.get(r).cloned().unwrap_or_else(|| r.to_string());
        let n = self.links.len();
        let cell = |i: usize, j: usize| {
            if i == j {
                "-".to_string()
            } else {
                format!(
                    "{:.0}/{:.0}",
                    self.links.latency[i][j] * 1e6,
                    self.links.bandwidth[i][j] / 1e6
                )
            }
        };
        let width = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| cell(i, j).len())
            .chain((0..n).map(|r| name(r).len()))
            .max()
            .unwrap_or(1);
        let mut out = if self.reused {
            format!(
                "calibration: {n} members, links measured before (saved); latency (us) and \
                 bandwidth (MB/s), row -> column\n"
            )
        } else {
            format!(
                "calibration: {n} members in {:.2} s; latency (us) and bandwidth (MB/s), row -> \
                 column\n",
                self.seconds
            )
        };
        let _ = writeln!(
            out,
            "{:>width$}{}",
            "",
            (0..n)
                .map(|j| format!(" {:>width$}", name(j)))
                .collect::<String>()
        );
        for i in 0..n {
            let cells: String = (0..n).map(|j| format!(" {:>width$}", cell(i, j))).collect();
            let _ = writeln!(out, "{:>width$}{cells}", name(i));
        }
        let groups: Vec<String> = self
            .groups
            .leaves()
            .iter()
            .map(|g| {
                format!(
                    "[{}]",
                    g.iter().map(|&r| name(r)).collect::<Vec<_>>().join(" ")
                )
            })
            .collect();
        let _ = writeln!(out, "groups: {}", groups.join(" "));
        let check = |c: &Check, what: &str| {
            format!(
                "model: {:.3} ms; 1,000 random {what}: median {:.3} ms, best {:.3} ms, {:.1}% \
                 slower than this one",
                c.predicted * 1e3,
                c.random_median * 1e3,
                c.random_best * 1e3,
                c.beats * 100.0
            )
        };
        let _ = writeln!(
            out,
            "chain: {} ({})",
            self.order
                .iter()
                .map(|&r| name(r))
                .collect::<Vec<_>>()
                .join(" -> "),
            check(&self.chain, "orders")
        );
        let _ = writeln!(
            out,
            "broadcast tree (mst): {} ({}; binomial {:.3} ms)",
            tree_text(&self.broadcast_tree, &name),
            check(&self.broadcast_check, "trees"),
            self.binomial * 1e3
        );
        let _ = write!(
            out,
            "gather tree (stage 3): {} ({}; direct {:.3} ms)",
            tree_text(&self.gather_tree, &name),
            check(&self.gather_check, "trees"),
            self.star * 1e3
        );
        out
    }
}

/// `tree` for people: each member with children, `parent > child child`, from the root down.
fn tree_text(tree: &Tree, name: &dyn Fn(usize) -> String) -> String {
    let mut parts = Vec::new();
    let mut stack = vec![tree.root()];
    while let Some(m) = stack.pop() {
        let kids = tree.children(m);
        if !kids.is_empty() {
            let names: Vec<String> = kids.iter().map(|&c| name(c)).collect();
            parts.push(format!("{} > {}", name(m), names.join(" ")));
        }
        stack.extend(kids.iter().rev());
    }
    if parts.is_empty() {
        name(tree.root())
    } else {
        parts.join("; ")
    }
}

/// The inverse of a permutation: where each member stands in `order`.
fn inverse(order: &[usize]) -> Vec<usize> {
    let mut at = vec![0; order.len()];
    for (p, &m) in order.iter().enumerate() {
        if let Some(slot) = at.get_mut(m) {
            *slot = p;
        }
    }
    at
}

/// Ranks in chain order: racks in order of first appearance in rank order, the ranks of a rack
/// together (rank 0's rack is first, so rank 0 heads the chain).
pub fn chain_order(hosts: &[String], racks: &BTreeMap<String, String>) -> Vec<usize> {
    let rack_of = |h: &String| racks.get(h).unwrap_or(h).clone();
    let mut first: Vec<String> = Vec::new();
    for h in hosts {
        let r = rack_of(h);
        if !first.contains(&r) {
            first.push(r);
        }
    }
    let mut order: Vec<usize> = (0..hosts.len()).collect();
    order.sort_by_key(|&i| first.iter().position(|r| *r == rack_of(&hosts[i])));
    order
}
