//! The plan's lines on learning the vocabularies or mixtures: per size, what an iteration (or EM
//! step) moves, computes and holds, and the seconds it takes; and the key to their columns.

use super::cost::{dims, kmeans_memory, stage2_bytes};
use super::rates::{self, APPROX_INT8_RATE, APPROX_RATE, F32_RATE, INT8_RATE, rate_of};
use crate::config::Config;
use crate::memory::{breakdown, human};

/// The mixture lines of the plan (Fisher vectors): per mixture, what a step moves and computes;
/// returns, per mixture, the seconds of an EM step (map and communication).
pub(super) fn print_mixture(
    config: &Config,
    n: u64,
    (nodes, racks): (u64, usize),
    link: f64,
) -> Vec<(u64, f64, f64)> {
    let m = &config.mixture;
    let d = m.pca_dims as u64;
    let dims = dims(config);
    println!(
        "  mixture     {nodes} node{} on {racks} rack{}: the covariance ({dims} x {dims} sums), \
         the PCA to {d} dims, then at most {} EM steps (tol {}), each a map over the partitions",
        if nodes == 1 { "" } else { "s" },
        if racks == 1 { "" } else { "s" },
        m.iterations,
        m.tol
    );
    println!(
        "    {:<8} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "G", "broadcast", "sums", "map flop", "map s", "comm s"
    );
    let mut steps = Vec::new();
    for &g in &m.components {
        let g = g as u64;
        // The projection and the mixture go down; a component's weight and moments come back.
        let bcast = (dims * d + dims + d + 1 + g * (2 * d + 1)) * 8;
        let sums = g * (2 * d + 1) * 8;
        // Per vector: the projection, the log densities, the moments.
        let flops = 2.0 * n as f64 * (dims * d + 4 * g * d) as f64;
        let map_seconds =
            n as f64 * rates::EM_VECTOR_SECONDS * (g * d) as f64 / nodes.max(1) as f64;
        let seconds = (bcast as f64 + sums as f64 * nodes as f64) / link;
        steps.push((g, map_seconds, seconds));
        println!(
            "    {g:<8} {:>9} {:>9} {:>9.2e} {:>7.2} {:>7.2}",
            human(bcast as f64),
            human(sums as f64),
            flops,
            map_seconds,
            seconds
        );
    }
    steps
}

/// The k-means lines of the plan: per vocabulary size, what an iteration moves, computes and
/// holds on `nodes` nodes (on `racks` racks) of `tasks` map tasks, over links of `link` bytes/s.
/// Returns, per vocabulary size, the map and communication seconds of an iteration.
pub(super) fn print_kmeans(
    config: &Config,
    n: u64,
    (nodes, racks): (u64, usize),
    tasks: u64,
    link: f64,
) -> Vec<(u64, f64, f64)> {
    let mut iterations = Vec::new();
    let km = &config.kmeans;
    let dims = dims(config);
    println!(
        "  kmeans      {nodes} node{} on {racks} rack{}, {tasks} map tasks per node, up to {} \
         iterations",
        if nodes == 1 { "" } else { "s" },
        if racks == 1 { "" } else { "s" },
        km.iterations
    );
    println!(
        "    per iteration: bytes summed over the nodes (stage 2 with / without stage-1 \
         aggregation,\n    sparse pieces where a partial touches few centroids: an upper \
         estimate);\n    memory and partial sums per node"
    );
    println!(
        "    {:<8} {:>9} {:>21} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9}",
        "k",
        "broadcast",
        "stage 2 on / off",
        "stage 3",
        "map flop",
        "map s",
        "comm s",
        "memory",
        "partials"
    );
    let rate = rate_of(config.kmeans.assignment().unwrap_or_default());
    for &k in &km.k {
        let k = k as u64;
        let bcast = k * dims * 4;
        let per_node = n.div_ceil(nodes.max(1));
        let stage2_on = stage2_bytes(k, per_node, nodes, 1, dims);
        let stage2_off = stage2_bytes(k, per_node.div_ceil(tasks.max(1)), nodes, tasks, dims);
        let stage3 = k * (4 * dims + 8);
        // Distances per vector: every centroid, or (approximate) the coarse centres and the
        // members of the probed lists.
        let searched = match config
            .kmeans
            .assignment()
            .ok()
            .and_then(|a| a.approx(k as usize))
        {
            Some((lists, probes)) => {
                lists as f64 + probes.min(lists) as f64 * k as f64 / lists.max(1) as f64
            }
            None => k as f64,
        };
        let flops = 2.0 * n as f64 * searched * dims as f64;
        let memory = kmeans_memory(config, n, k, nodes, tasks);
        let seconds = (bcast as f64 + (nodes - 1) as f64 * 65536.0) / link
            + stage2_on as f64 / nodes.max(1) as f64 / link
            + stage3 as f64 / link;
        let map_seconds = flops / 2.0 / (nodes.max(1) as f64 * rate);
        iterations.push((k, map_seconds, seconds));
        println!(
            "    {k:<8} {:>9} {:>21} {:>9} {:>9.2e} {:>6.1} {:>6.1} {:>9} {:>9}",
            human(bcast as f64),
            format!("{} / {}", human(stage2_on as f64), human(stage2_off as f64)),
            human(stage3 as f64),
            flops,
            map_seconds,
            seconds,
            human(memory.total() as f64),
            human(memory.sums as f64)
        );
    }
    if let Some(&k) = km.k.iter().max() {
        let memory = kmeans_memory(config, n, k as u64, nodes, tasks);
        println!("    memory per node at k = {k}: {}", breakdown(&memory));
    }
    iterations
}

/// The key to the learning lines' columns (comm s, map flop, map s) and the rates behind them,
/// printed after the svm line.
pub(super) fn print_key(config: &Config) {
    println!(
        "  (comm s: link-bound seconds per iteration at {} Mbit/s per node, both directions at \
         once;\n   map flop: 2 x multiply-adds of the assignment, all nodes; map s: their seconds \
         on nodes\n   as fast as eval/paper_scale's 2 AVX2 cores: f32 {:.0}, int8 {:.0}, approximate \
         {:.0}\n   (int8 search {:.0}) G multiply-adds/s; an iteration takes about map s + comm s)",
        config.plan.link_mbit,
        F32_RATE / 1e9,
        INT8_RATE / 1e9,
        APPROX_RATE / 1e9,
        APPROX_INT8_RATE / 1e9
    );
}
