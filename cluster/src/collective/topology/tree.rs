//! Trees for the tree collectives, built from measured links (Gong, He and Zhong, Algorithms 3
//! and 4), with their cost models and the Monte Carlo sample of random trees.
//!
//! * [`Model::broadcast_tree`] (Algorithm 3): earliest completion first. Starting from the root, the
//!   next edge is the one whose receiver would hold the message soonest (the sender free after
//!   its earlier sends, plus `L + m / B` of the link), with one constraint from the
//!   [`Hierarchy`]: each group is entered by one edge, from outside, so a slow core link carries
//!   the message once per group. [`Model::reduce_tree`] is the same on the reversed links: a reduction
//!   is a broadcast run backwards, with the same message size on every edge.
//! * [`Model::gather_tree`] (Algorithm 4): every group not holding the collector sends through one
//!   leader, the member with the cheapest link to the collector for the group's bytes; inside a
//!   finest group the members send to their leader, and a local search moves a member under
//!   another member of its group where the model says that is faster (a slow uplink to the
//!   leader, a faster relay). Pieces grow on the way up, so the model charges each edge the
//!   bytes of the whole subtree below it.
//!
//! The cost model ([`Model`]) is store and forward; a broadcast sends to a member's children in
//! turn, a gather receives from all of them at once; what transfers share (a member's way in, a
//! group's way out and in) each hold for their bytes at its measured capacity.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use thiserror::Error;

use super::{Hierarchy, Links};

/// A change the gather tree's local search accepts must save this fraction of the model's time:
/// less is within the noise of measured links, and every relay is a real store and forward.
pub const GAIN: f64 = 0.02;

/// Finest groups up to this size get the gather tree's local search (its cost grows with the
/// square of the group and of the team).
pub const SEARCHED: usize = 32;

/// A tree over members `0..n` rooted at one of them: each member's parent, and the children in
/// the order it serves them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tree {
    root: usize,
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
}

/// A tree that does not span its members once each.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TreeError {
    /// A member number outside the tree.
    #[error("a tree over {members} members names member {member}")]
    OutOfRange {
        /// Members of the tree.
        members: usize,
        /// The member named.
        member: usize,
    },
    /// A member with two parents, or the root with one.
    #[error("member {0} is reached twice in the tree")]
    Twice(usize),
    /// A member the root does not reach.
    #[error("member {0} is not reached from the root of the tree")]
    Unreached(usize),
}

impl Tree {
    /// The tree with these children lists (member `m`'s at `children[m]`), checked to span
    /// every member once from `root`.
    pub fn from_children(root: usize, children: Vec<Vec<usize>>) -> Result<Self, TreeError> {
        let n = children.len();
        let check = |m: usize| {
            if m < n {
                Ok(m)
            } else {
                Err(TreeError::OutOfRange {
                    members: n,
                    member: m,
                })
            }
        };
        check(root)?;
        let mut parent = vec![None; n];
        let mut reached = vec![false; n];
        reached[root] = true;
        let mut queue = vec![root];
        while let Some(m) = queue.pop() {
            for &c in &children[m] {
                check(c)?;
                if std::mem::replace(&mut reached[c], true) {
                    return Err(TreeError::Twice(c));
                }
                parent[c] = Some(m);
                queue.push(c);
            }
        }
        if let Some(m) = reached.iter().position(|r| !r) {
            return Err(TreeError::Unreached(m));
        }
        Ok(Self {
            root,
            parent,
            children,
        })
    }

    /// Every member a child of the root.
    pub fn star(n: usize, root: usize) -> Self {
        let mut children = vec![Vec::new(); n];
        children[root] = (0..n).filter(|&m| m != root).collect();
        Self::spanning(root, children)
    }

    /// The binomial tree over members `0..n` rooted at 0 (MPI's minimum spanning tree
    /// broadcast), children largest subtree first. A member `m` with span `s` serves members
    /// `m + 1 ..= m + s`: its first child `m + 1 + s / 2` takes the upper part, and the lower
    /// `s / 2` is split the same way.
    pub fn binomial(n: usize) -> Self {
        let mut children = vec![Vec::new(); n];
        let mut stack = vec![(0usize, n.saturating_sub(1))];
        while let Some((m, span)) = stack.pop() {
            let mut rest = span;
            while rest > 0 {
                let child = m + 1 + rest / 2;
                children[m].push(child);
                stack.push((child, rest - rest / 2 - 1));
                rest /= 2;
            }
        }
        Self::spanning(0, children)
    }

    /// A tree known to span (built here).
    fn spanning(root: usize, children: Vec<Vec<usize>>) -> Self {
        let mut parent = vec![None; children.len()];
        for (m, cs) in children.iter().enumerate() {
            for &c in cs {
                parent[c] = Some(m);
            }
        }
        Self {
            root,
            parent,
            children,
        }
    }

    /// Members.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// Whether the tree has no member.
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// The root.
    pub fn root(&self) -> usize {
        self.root
    }

    /// Member `m`'s parent (`None` for the root).
    pub fn parent(&self, m: usize) -> Option<usize> {
        self.parent[m]
    }

    /// Member `m`'s children, in the order it serves them.
    pub fn children(&self, m: usize) -> &[usize] {
        &self.children[m]
    }

    /// Every member's children.
    pub fn children_lists(&self) -> &[Vec<usize>] {
        &self.children
    }

    /// Whether member `m` is `top` or below it.
    pub fn is_below(&self, m: usize, top: usize) -> bool {
        below(&self.parent, m, top)
    }

    /// Edges from the root to the deepest member.
    pub fn depth(&self) -> usize {
        (0..self.len())
            .map(|mut m| {
                let mut d = 0;
                while let Some(p) = self.parent[m] {
                    (m, d) = (p, d + 1);
                }
                d
            })
            .max()
            .unwrap_or(0)
    }

    /// The same tree with member `order[p]` renamed `p` (a tree over ranks, as positions of a
    /// team in that order). `order` must be a permutation of the members.
    pub fn relabel(&self, order: &[usize]) -> Result<Self, TreeError> {
        let n = self.len();
        let mut at = vec![usize::MAX; n];
        for (p, &m) in order.iter().enumerate() {
            if m >= n || order.len() != n {
                return Err(TreeError::OutOfRange {
                    members: n,
                    member: m,
                });
            }
            if at[m] != usize::MAX {
                return Err(TreeError::Twice(m));
            }
            at[m] = p;
        }
        let children = order
            .iter()
            .map(|&m| self.children[m].iter().map(|&c| at[c]).collect())
            .collect();
        Self::from_children(at[self.root], children)
    }

    /// Members below `m` (itself included).
    fn subtree_sizes(&self) -> Vec<usize> {
        let mut size = vec![1usize; self.len()];
        for m in self.post_order() {
            if let Some(p) = self.parent[m] {
                size[p] += size[m];
            }
        }
        size
    }

    /// Members children first (every member after all of its subtree).
    fn post_order(&self) -> Vec<usize> {
        let mut pre = Vec::with_capacity(self.len());
        let mut stack = vec![self.root];
        while let Some(m) = stack.pop() {
            pre.push(m);
            stack.extend(self.children[m].iter().copied());
        }
        pre.reverse();
        pre
    }
}

/// The cost model of the tree collectives: a transfer takes `L + m / B` of its link, store and
/// forward. What transfers share is a capacity, the fastest link measured through it: a
/// member's way in (for receiving, in gathers) and each group's way out and way in (the groups
/// of the [`Hierarchy`] stand for what pairwise probes cannot see: a rack's uplink that every
/// transfer leaving the rack shares). A transfer holds each shared way for its bytes at that
/// way's capacity, so transfers slower than a way overlap on it, as concurrent TCP streams do.
/// A broadcast sends to a member's children one after another (as `mst` does); a gather
/// receives from all children at once. Transfers are scheduled greedily, each as early as its
/// sender and the ways allow.
#[derive(Debug, Clone)]
pub struct Model<'l> {
    links: &'l Links,
    hierarchy: Hierarchy,
    /// Each member's groups from the top of the hierarchy down (index at each level).
    paths: Vec<Vec<usize>>,
    /// Each member's way in: the fastest link into it.
    into: Vec<f64>,
    /// Each group's way out and way in (by path prefix): the fastest link across it.
    group_out: std::collections::HashMap<Vec<usize>, f64>,
    group_in: std::collections::HashMap<Vec<usize>, f64>,
}

/// When the groups' ways out and in are next free (by path prefix).
#[derive(Debug, Default)]
struct Wires {
    out: std::collections::HashMap<Vec<usize>, f64>,
    into: std::collections::HashMap<Vec<usize>, f64>,
}

impl<'l> Model<'l> {
    /// The model of `links` with the shared ways of `hierarchy`'s groups.
    pub fn new(links: &'l Links, hierarchy: &Hierarchy) -> Self {
        let n = links.len();
        let paths = paths(hierarchy, n);
        let mut into = vec![0.0f64; n];
        let mut group_out = std::collections::HashMap::new();
        let mut group_in = std::collections::HashMap::new();
        for i in 0..n {
            for j in (0..n).filter(|&j| j != i) {
                let b = links.bandwidth[i][j];
                into[j] = into[j].max(b);
                let c = paths[i]
                    .iter()
                    .zip(&paths[j])
                    .take_while(|(a, b)| a == b)
                    .count();
                for l in c + 1..=paths[i].len() {
                    let way = group_out.entry(paths[i][..l].to_vec()).or_insert(0.0f64);
                    *way = way.max(b);
                }
                for l in c + 1..=paths[j].len() {
                    let way = group_in.entry(paths[j][..l].to_vec()).or_insert(0.0f64);
                    *way = way.max(b);
                }
            }
        }
        Self {
            links,
            hierarchy: hierarchy.clone(),
            paths,
            into,
            group_out,
            group_in,
        }
    }

    /// The links.
    pub fn links(&self) -> &Links {
        self.links
    }

    /// Length of the groups `s` and `u` share.
    fn common(&self, s: usize, u: usize) -> usize {
        self.paths[s]
            .iter()
            .zip(&self.paths[u])
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// The earliest a transfer `s -> u` can start at or after `t`.
    fn earliest(&self, wires: &Wires, s: usize, u: usize, t: f64) -> f64 {
        let c = self.common(s, u);
        let out = (c + 1..=self.paths[s].len()).map(|l| &self.paths[s][..l]);
        let into = (c + 1..=self.paths[u].len()).map(|l| &self.paths[u][..l]);
        out.filter_map(|g| wires.out.get(g))
            .chain(into.filter_map(|g| wires.into.get(g)))
            .fold(t, |t, &busy| t.max(busy))
    }

    /// Books the groups' ways for a transfer of `bytes` from `s` to `u` starting at `start`:
    /// each is held for the bytes at its capacity.
    fn book(&self, wires: &mut Wires, s: usize, u: usize, start: f64, bytes: f64) {
        let c = self.common(s, u);
        for l in c + 1..=self.paths[s].len() {
            let g = &self.paths[s][..l];
            wires
                .out
                .insert(g.to_vec(), start + held(self.group_out.get(g), bytes));
        }
        for l in c + 1..=self.paths[u].len() {
            let g = &self.paths[u][..l];
            wires
                .into
                .insert(g.to_vec(), start + held(self.group_in.get(g), bytes));
        }
    }

    /// Seconds until every member holds the root's `bytes` sent down `tree` (a member sends to
    /// its children in order, once it holds the message).
    pub fn broadcast(&self, tree: &Tree, bytes: f64) -> f64 {
        let n = tree.len();
        let mut wires = Wires::default();
        let mut free = vec![f64::INFINITY; n];
        let mut next = vec![0usize; n];
        free[tree.root] = 0.0;
        let mut last = 0.0f64;
        loop {
            // The sender whose next transfer can start first.
            let pick = (0..n)
                .filter(|&s| free[s].is_finite() && next[s] < tree.children[s].len())
                .map(|s| {
                    let u = tree.children[s][next[s]];
                    (self.earliest(&wires, s, u, free[s]), s, u)
                })
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((start, s, u)) = pick else {
                return last;
            };
            let end = start + self.links.cost(s, u, bytes);
            self.book(&mut wires, s, u, start, bytes);
            (free[s], free[u], next[s]) = (end, end, next[s] + 1);
            last = last.max(end);
        }
    }

    /// Seconds of a collective up `tree`: member `c` sends `size(c)` bytes to its parent once it
    /// holds everything from its children; a member receives from all of them at once, sharing
    /// its way in.
    fn upward(&self, tree: &Tree, size: impl Fn(usize) -> f64) -> f64 {
        let n = tree.len();
        let mut wires = Wires::default();
        let mut waiting: Vec<usize> = tree.children.iter().map(Vec::len).collect();
        let mut ready = vec![0.0f64; n];
        let mut receiving = vec![0.0f64; n];
        let mut sent = vec![false; n];
        sent[tree.root] = true;
        loop {
            let pick = (0..n)
                .filter(|&c| !sent[c] && waiting[c] == 0)
                .filter_map(|c| tree.parent[c].map(|p| (c, p)))
                .map(|(c, p)| {
                    let t = ready[c].max(receiving[p]);
                    (self.earliest(&wires, c, p, t), c, p)
                })
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((start, c, p)) = pick else {
                return ready[tree.root];
            };
            let bytes = size(c);
            let end = start + self.links.cost(c, p, bytes);
            self.book(&mut wires, c, p, start, bytes);
            sent[c] = true;
            receiving[p] = start + held(Some(&self.into[p]), bytes);
            waiting[p] -= 1;
            // Done once the last of its children's transfers ends.
            ready[p] = ready[p].max(end);
        }
    }

    /// Seconds of a gather of `bytes` from every member but the root, up `tree`: each edge
    /// carries the pieces of the whole subtree below it.
    pub fn gather(&self, tree: &Tree, bytes: f64) -> f64 {
        let size = tree.subtree_sizes();
        self.upward(tree, |c| size[c] as f64 * bytes)
    }

    /// Seconds of a reduction of `bytes` from every member to the root up `tree`: every edge
    /// carries one partial result.
    pub fn reduce(&self, tree: &Tree, bytes: f64) -> f64 {
        self.upward(tree, |_| bytes)
    }

    /// Algorithm 3: the broadcast tree for `bytes` from `root`, earliest completion first,
    /// each group entered by one edge.
    pub fn broadcast_tree(&self, root: usize, bytes: f64) -> Tree {
        let n = self.links.len();
        if n == 0 {
            return Tree::star(0, 0);
        }
        let paths = &self.paths;
        // Groups (as path prefixes) that already hold the message.
        let mut entered = std::collections::BTreeSet::new();
        let enter = |m: usize, entered: &mut std::collections::BTreeSet<Vec<usize>>| {
            for l in 0..=paths[m].len() {
                entered.insert(paths[m][..l].to_vec());
            }
        };
        enter(root, &mut entered);
        let mut wires = Wires::default();
        let mut children = vec![Vec::new(); n];
        let mut free = vec![f64::INFINITY; n];
        free[root] = 0.0;
        let mut left: Vec<usize> = (0..n).filter(|&m| m != root).collect();
        while !left.is_empty() {
            let mut best: Option<(f64, f64, usize, usize)> = None;
            for s in (0..n).filter(|&s| free[s].is_finite()) {
                for (at, &u) in left.iter().enumerate() {
                    let common = self.common(s, u);
                    // The outermost group of `u` that `s` is not in must not hold it yet.
                    if common < paths[u].len() && entered.contains(&paths[u][..=common]) {
                        continue;
                    }
                    let start = self.earliest(&wires, s, u, free[s]);
                    let end = start + self.links.cost(s, u, bytes);
                    if best.is_none_or(|(b, ..)| end < b) {
                        best = Some((end, start, s, at));
                    }
                }
            }
            // Some group always has a member to enter from (the root's own groups at worst).
            let Some((end, start, s, at)) = best else {
                break;
            };
            let u = left.remove(at);
            self.book(&mut wires, s, u, start, bytes);
            children[s].push(u);
            (free[s], free[u]) = (end, end);
            enter(u, &mut entered);
        }
        Tree::spanning(root, children)
    }

    /// The reduction tree for `bytes` to `root`: [`Model::broadcast_tree`] on the reversed
    /// links (a reduction is a broadcast run backwards).
    pub fn reduce_tree(&self, root: usize, bytes: f64) -> Tree {
        let n = self.links.len();
        let flip = |m: &Vec<Vec<f64>>| -> Vec<Vec<f64>> {
            (0..n).map(|i| (0..n).map(|j| m[j][i]).collect()).collect()
        };
        let reversed = Links {
            latency: flip(&self.links.latency),
            bandwidth: flip(&self.links.bandwidth),
        };
        Model::new(&reversed, &self.hierarchy).broadcast_tree(root, bytes)
    }

    /// Algorithm 4: the gather tree for `bytes` from every member to `root`: one leader per
    /// group sends the group's pieces to the collector above it; inside a finest group,
    /// members move under one another where [`Model::gather`] says that is faster.
    pub fn gather_tree(&self, root: usize, bytes: f64) -> Tree {
        let n = self.links.len();
        let mut parent: Vec<Option<usize>> = vec![None; n];
        let mut leaves: Vec<Vec<usize>> = Vec::new();
        attach(
            self.links,
            &self.hierarchy,
            root,
            bytes,
            &mut parent,
            &mut leaves,
        );
        let build = |parent: &[Option<usize>]| {
            let mut children = vec![Vec::new(); n];
            for (m, p) in parent.iter().enumerate() {
                if let Some(p) = *p {
                    children[p].push(m);
                }
            }
            Tree::spanning(root, children)
        };
        let mut best_tree = build(&parent);
        let mut best = self.gather(&best_tree, bytes);
        // Local search inside the finest groups: move a member (not a group's leader: its
        // edge leaves the group) under another member of its group that is not below it.
        // Each trial costs a run of the model, so groups larger than SEARCHED keep the leader.
        let leaves: Vec<Vec<usize>> = leaves.into_iter().filter(|l| l.len() <= SEARCHED).collect();
        for _ in 0..n.max(1) {
            let mut improved = false;
            for leaf in &leaves {
                for &v in leaf {
                    let Some(old) = parent[v] else { continue };
                    if !leaf.contains(&old) {
                        continue;
                    }
                    for &p in leaf.iter().filter(|&&p| p != v && p != old) {
                        if below(&parent, p, v) {
                            continue;
                        }
                        parent[v] = Some(p);
                        let tree = build(&parent);
                        let t = self.gather(&tree, bytes);
                        if t < best * (1.0 - GAIN) {
                            (best, best_tree, improved) = (t, tree, true);
                            break;
                        }
                        parent[v] = Some(old);
                    }
                }
            }
            if !improved {
                break;
            }
        }
        best_tree
    }
}

/// Seconds a way of `capacity` bytes per second is held by `bytes` (none without a capacity).
fn held(capacity: Option<&f64>, bytes: f64) -> f64 {
    capacity.filter(|&&b| b > 0.0).map_or(0.0, |b| bytes / b)
}

/// Each member's groups from the top of `hierarchy` down: the index of its group at each level.
fn paths(hierarchy: &Hierarchy, n: usize) -> Vec<Vec<usize>> {
    fn walk(h: &Hierarchy, prefix: &mut Vec<usize>, out: &mut [Vec<usize>]) {
        match h {
            Hierarchy::Leaf(members) => {
                for &m in members {
                    if let Some(slot) = out.get_mut(m) {
                        *slot = prefix.clone();
                    }
                }
            }
            Hierarchy::Groups(groups) => {
                for (i, g) in groups.iter().enumerate() {
                    prefix.push(i);
                    walk(g, prefix, out);
                    prefix.pop();
                }
            }
        }
    }
    let mut out = vec![Vec::new(); n];
    walk(hierarchy, &mut Vec::new(), &mut out);
    out
}

/// Whether `m` is `v` or below it under `parent`.
fn below(parent: &[Option<usize>], mut m: usize, v: usize) -> bool {
    loop {
        if m == v {
            return true;
        }
        match parent[m] {
            Some(p) => m = p,
            None => return false,
        }
    }
}

/// Hangs the members of `h` under `collector` (one of them, or a member outside `h` collecting
/// for it): groups without the collector through the leader with the cheapest link to it.
/// Collects the finest groups (with their collector) for the local search.
fn attach(
    links: &Links,
    h: &Hierarchy,
    collector: usize,
    bytes: f64,
    parent: &mut [Option<usize>],
    leaves: &mut Vec<Vec<usize>>,
) {
    match h {
        Hierarchy::Leaf(members) => {
            for &m in members.iter().filter(|&&m| m != collector) {
                parent[m] = Some(collector);
            }
            let mut leaf = members.clone();
            if !leaf.contains(&collector) {
                leaf.push(collector);
            }
            leaves.push(leaf);
        }
        Hierarchy::Groups(groups) => {
            for g in groups {
                let members = g.members();
                if members.contains(&collector) {
                    attach(links, g, collector, bytes, parent, leaves);
                    continue;
                }
                let load = members.len() as f64 * bytes;
                let leader = members
                    .iter()
                    .copied()
                    .min_by(|&a, &b| {
                        links
                            .cost(a, collector, load)
                            .total_cmp(&links.cost(b, collector, load))
                    })
                    .unwrap_or(collector);
                parent[leader] = Some(collector);
                attach(links, g, leader, bytes, parent, leaves);
            }
        }
    }
}

/// `samples` random trees over the members of `links` rooted at `root` (each member after the
/// first under a uniformly chosen earlier one of a random order; children in that order), for
/// the Monte Carlo check of a tree.
pub fn random_trees(n: usize, root: usize, samples: usize, seed: u64) -> Vec<Tree> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rest: Vec<usize> = (0..n).filter(|&m| m != root).collect();
    (0..samples)
        .map(|_| {
            let mut order = rest.clone();
            order.shuffle(&mut rng);
            order.insert(0, root);
            let mut children = vec![Vec::new(); n];
            for i in 1..order.len() {
                let p = order[rng.random_range(0..i)];
                children[p].push(order[i]);
            }
            Tree::spanning(root, children)
        })
        .collect()
}

/// Where a chosen collective falls among random ones under the cost model (the paper's Monte
/// Carlo check).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Check {
    /// Predicted seconds of the chosen one.
    pub predicted: f64,
    /// Predicted seconds of the median random one.
    pub random_median: f64,
    /// Predicted seconds of the best random one.
    pub random_best: f64,
    /// Fraction of the random ones the chosen one beats.
    pub beats: f64,
}

impl Check {
    /// The check of `predicted` against the seconds of random samples.
    pub fn of(predicted: f64, mut random: Vec<f64>) -> Self {
        random.sort_by(f64::total_cmp);
        let beaten = random.iter().filter(|&&r| r > predicted).count();
        Self {
            predicted,
            random_median: random.get(random.len() / 2).copied().unwrap_or(predicted),
            random_best: random.first().copied().unwrap_or(predicted),
            beats: beaten as f64 / random.len().max(1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{groups, synthetic};
    use super::*;

    const MB: f64 = 1e6;

    fn spans(tree: &Tree) {
        let again = Tree::from_children(tree.root(), tree.children_lists().to_vec());
        assert_eq!(again.as_ref(), Ok(tree));
    }

    #[test]
    fn trees_are_checked_to_span_their_members_once() {
        assert!(Tree::from_children(0, vec![vec![1, 2], vec![], vec![]]).is_ok());
        assert_eq!(
            Tree::from_children(0, vec![vec![1], vec![2], vec![1]]),
            Err(TreeError::Twice(1))
        );
        assert_eq!(
            Tree::from_children(0, vec![vec![1], vec![], vec![]]),
            Err(TreeError::Unreached(2))
        );
        assert_eq!(
            Tree::from_children(0, vec![vec![1, 3], vec![], vec![]]),
            Err(TreeError::OutOfRange {
                members: 3,
                member: 3
            })
        );
        assert_eq!(
            Tree::from_children(1, vec![vec![1], vec![0]]),
            Err(TreeError::Twice(1))
        );
        let b = Tree::binomial(8);
        assert_eq!(b.children(0), &[4, 2, 1], "largest subtree first");
        assert_eq!(b.children(4), &[6, 5]);
        assert_eq!(b.children(6), &[7]);
        for n in 1..=17 {
            let b = Tree::binomial(n);
            spans(&b);
            assert!(b.depth() <= (n as f64).log2().ceil() as usize, "n {n}");
            spans(&Tree::star(n, n / 2));
        }
        let t = Tree::from_children(2, vec![vec![1], vec![], vec![0]]).expect("tree");
        // Positions: rank 2 first, then 0, then 1.
        let r = t.relabel(&[2, 0, 1]).expect("relabel");
        assert_eq!(r.root(), 0);
        assert_eq!(r.children(0), &[1]);
        assert_eq!(r.children(1), &[2]);
        assert!(t.relabel(&[2, 0, 0]).is_err());
        assert!(t.relabel(&[2, 0]).is_err());
    }

    #[test]
    fn the_broadcast_tree_enters_each_rack_once_and_beats_random_trees() {
        let racks = [0, 1, 0, 1, 0, 1, 0, 1, 2, 2];
        let links = synthetic(&racks, 100.0 * MB, 10.0 * MB, 0.1, 1);
        let bytes = 4.0 * MB;
        let h = groups(&links, bytes);
        let model = Model::new(&links, &h);
        let tree = model.broadcast_tree(0, bytes);
        spans(&tree);
        assert_eq!(tree.root(), 0);
        let crossings = (0..10)
            .filter(|&m| tree.parent(m).is_some_and(|p| racks[p] != racks[m]))
            .count();
        assert_eq!(crossings, 2, "{tree:?}");
        let chosen = model.broadcast(&tree, bytes);
        let random: Vec<f64> = random_trees(10, 0, 500, 3)
            .iter()
            .map(|t| model.broadcast(t, bytes))
            .collect();
        let check = Check::of(chosen, random);
        assert!(check.beats > 0.99, "{check:?}");
        assert!(chosen < model.broadcast(&Tree::binomial(10), bytes));
    }

    #[test]
    fn a_member_with_a_slow_link_is_a_leaf_of_every_tree() {
        let mut links = synthetic(&[0; 8], 100.0 * MB, 100.0 * MB, 0.05, 3);
        for j in (0..8).filter(|&j| j != 5) {
            links.bandwidth[5][j] = 5.0 * MB;
            links.bandwidth[j][5] = 5.0 * MB;
        }
        let bytes = 1.0 * MB;
        let h = groups(&links, bytes);
        let model = Model::new(&links, &h);
        for tree in [
            model.broadcast_tree(0, bytes),
            model.reduce_tree(0, bytes),
            model.gather_tree(0, bytes),
        ] {
            spans(&tree);
            assert!(tree.children(5).is_empty(), "{tree:?}");
        }
    }

    #[test]
    fn the_gather_tree_sends_each_rack_through_one_leader() {
        let racks = [0, 1, 1, 1, 2, 2, 2, 0];
        let links = synthetic(&racks, 100.0 * MB, 20.0 * MB, 0.05, 7);
        let bytes = 2.0 * MB;
        let h = groups(&links, bytes);
        let model = Model::new(&links, &h);
        let tree = model.gather_tree(0, bytes);
        spans(&tree);
        let crossings: Vec<usize> = (0..8)
            .filter(|&m| tree.parent(m).is_some_and(|p| racks[p] != racks[m]))
            .collect();
        assert_eq!(crossings.len(), 2, "{tree:?}");
        assert!(crossings.iter().all(|&m| tree.parent(m) == Some(0)));
        let chosen = model.gather(&tree, bytes);
        let random: Vec<f64> = random_trees(8, 0, 500, 5)
            .iter()
            .map(|t| model.gather(t, bytes))
            .collect();
        let check = Check::of(chosen, random);
        assert!(check.beats > 0.9, "{check:?}");
    }

    #[test]
    fn a_faster_relay_takes_a_member_with_a_slow_link_to_the_root() {
        // One group; member 3 reaches the root at 2 MB/s but member 1 at 100 MB/s.
        let mut links = synthetic(&[0; 4], 100.0 * MB, 100.0 * MB, 0.0, 1);
        links.bandwidth[3][0] = 2.0 * MB;
        let h = Hierarchy::Leaf(vec![0, 1, 2, 3]);
        let model = Model::new(&links, &h);
        let tree = model.gather_tree(0, MB);
        assert_eq!(tree.parent(3).map(|p| p != 0), Some(true), "{tree:?}");
        let star = model.gather(&Tree::star(4, 0), MB);
        assert!(model.gather(&tree, MB) < star / 5.0);
    }

    #[test]
    fn where_the_collector_is_the_bottleneck_the_gather_stays_direct() {
        // One fast group: pieces overlap on the collector's way in; relaying only adds a hop.
        let links = synthetic(&[0; 8], 100.0 * MB, 100.0 * MB, 0.05, 6);
        let model = Model::new(&links, &Hierarchy::Leaf((0..8).collect()));
        let tree = model.gather_tree(0, MB);
        assert_eq!(tree, Tree::star(8, 0));
        // Seven pieces through a 100 MB/s way in, overlapping: about 7 MB / 100 MB/s.
        let t = model.gather(&tree, MB);
        assert!((0.07..0.08).contains(&t), "{t}");
        // Slow senders (10 MB/s each) overlap on a fast way in: far less than one after another.
        let mut slow = links.clone();
        for i in 1..8 {
            slow.bandwidth[i][0] = 10.0 * MB;
        }
        slow.bandwidth[1][0] = 100.0 * MB;
        let model = Model::new(&slow, &Hierarchy::Leaf((0..8).collect()));
        let direct = model.gather(&Tree::star(8, 0), MB);
        assert!(direct < 0.2, "{direct}");
    }

    #[test]
    fn the_models_add_up_on_uniform_links() {
        let links = synthetic(&[0; 4], 100.0 * MB, 100.0 * MB, 0.0, 4);
        let model = Model::new(&links, &Hierarchy::Leaf(vec![0, 1, 2, 3]));
        let hop = links.cost(0, 1, MB);
        // Star broadcast: the root sends three times in turn.
        assert!((model.broadcast(&Tree::star(4, 0), MB) - 3.0 * hop).abs() < 1e-12);
        // Binomial: 0 -> 2 -> 3, then 0 -> 1: two hops deep.
        assert!((model.broadcast(&Tree::binomial(4), MB) - 2.0 * hop).abs() < 1e-12);
        // Gather up a path 3 -> 2 -> 1 -> 0: one, two, then three pieces.
        let path = Tree::from_children(0, vec![vec![1], vec![2], vec![3], vec![]]).expect("path");
        let expect = hop + links.cost(2, 1, 2.0 * MB) + links.cost(1, 0, 3.0 * MB);
        assert!((model.gather(&path, MB) - expect).abs() < 1e-12);
        assert!((model.reduce(&path, MB) - 3.0 * hop).abs() < 1e-12);
    }
}
