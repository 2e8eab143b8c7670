//! The bytes of the plan's cost model (from `eval/distributed/`): a feature vector and its
//! record, what a node holds during a k-means iteration, and what stage 2 of an iteration moves.

use vocab_pipeline::kmeans;

use crate::config::Config;

/// HOG values per vector.
pub(super) const DIMS: u64 = 512;

/// Values per vector of the config's descriptor (`[features] descriptor`).
pub(super) fn dims(config: &Config) -> u64 {
    config.features.descriptor.dims() as u64
}
/// Bytes before the values of a binary feature record.
pub(super) const RECORD_HEAD: u64 = vocab_pipeline::store::RECORD_HEAD as u64;

/// What one node holds during a k-means iteration over `n` vectors on `nodes` nodes
/// ([`kmeans::Memory`]): its share of the vectors, the centroids, the sums, and what the
/// assignment adds (int8 codes, pruning bounds, the approximate search's index).
pub(super) fn kmeans_memory(
    config: &Config,
    n: u64,
    k: u64,
    nodes: u64,
    tasks: u64,
) -> kmeans::Memory {
    let assignment = config.kmeans.assignment().unwrap_or_default();
    kmeans::Memory::estimate(
        n.div_ceil(nodes.max(1)),
        k,
        dims(config),
        config.partition.element,
        tasks,
        assignment,
        nodes > 1,
    )
}

/// Stage-2 bytes of one iteration over vectors of `d` values, summed over `nodes` nodes that
/// each ship `partials` partials of `vectors` vectors: each partial sends a piece of every other node's range of
/// `k / nodes` centroids, dense or sparse, whichever is smaller (the wire layout of
/// `vocab_cluster::collective::aggregate`). The centroids a partial touches are estimated as if its vectors
/// fell uniformly on the `k` centroids, `k (1 - (1 - 1/k)^vectors)`: clustered data touches
/// fewer, so this is an upper estimate.
pub(super) fn stage2_bytes(k: u64, vectors: u64, nodes: u64, partials: u64, d: u64) -> u64 {
    if nodes < 2 || k == 0 {
        return 0;
    }
    let touched = k as f64 * (1.0 - (1.0 - 1.0 / k as f64).powf(vectors as f64));
    let range = k as f64 / nodes as f64;
    let dense = range * (d + 1) as f64;
    let sparse = touched / nodes as f64 * (d + 2) as f64;
    let piece = 8.0 * (1.0 + dense.min(sparse));
    (piece * (nodes * (nodes - 1) * partials) as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_two_counts_sparse_pieces_at_the_papers_shape() {
        // 742 vectors per map task and 1M centroids: a task touches at most 742 of them.
        let (k, nodes) = (1 << 20, 125);
        let dense = stage2_bytes(k, 1 << 30, nodes, 1, DIMS);
        let sparse = stage2_bytes(k, 742, nodes, 1, DIMS);
        let full = (nodes * (nodes - 1)) as f64 * 8.0 * (1.0 + (k * (DIMS + 1)) as f64 / 125.0);
        assert!(
            (dense as f64 - full).abs() < 1e-6 * full,
            "{dense} vs {full}"
        );
        assert!(
            sparse * 500 < dense,
            "sparse {sparse} is not 2.5 orders below dense {dense}"
        );
        // Few centroids, many vectors: every piece dense.
        assert_eq!(
            stage2_bytes(20, 1000, 4, 1, DIMS),
            4 * 3 * 8 * (1 + 5 * (DIMS + 1))
        );
        assert_eq!(stage2_bytes(20, 1000, 1, 1, DIMS), 0);
    }
}
