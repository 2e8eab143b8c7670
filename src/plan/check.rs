//! The checks that refuse a run up front (`config check`, `--plan` and `vocab run` before its
//! first stage): a vocabulary larger than its sample, a k-means that cannot fit in memory here.

use anyhow::bail;

use super::cost::kmeans_memory;
use crate::config::Config;
use crate::memory::{breakdown, human, memory_here};
use crate::settings::Backend;

/// Refuses a config whose vocabularies cannot be built from `training` photos: a `k` larger
/// than the sample, or a k-means that needs more memory than this machine has (when it runs
/// here).
pub fn check_sizes(config: &Config, engine: &Backend, training: u64) -> anyhow::Result<()> {
    let per_image = config.features.per_image as u64;
    let n = training * per_image;
    let largest = config.sizes().iter().copied().max().unwrap_or(0) as u64;
    if largest > n {
        let (key, what) = if config.fisher() {
            ("[mixture] components", "mixture")
        } else {
            ("[kmeans] k", "vocabulary")
        };
        bail!(
            "{key} = {largest} is larger than the {what}'s sample: {training} training photos x \
             {per_image} patches ([features] per_image) = {n} vectors; lower it or raise \
             per_image"
        );
    }
    if config.fisher() {
        // A mixture's memory is its sums, small beside the sample the partitions hold.
        return Ok(());
    }
    let at = engine.nodes()?;
    if at.here
        && let Some(total) = memory_here()
    {
        let tasks = rayon::current_num_threads() as u64;
        // Loopback workers share this machine.
        let plan = kmeans_memory(config, n, largest, at.nodes, tasks);
        let need = at.nodes.saturating_mul(plan.total());
        if need > total {
            bail!(
                "k-means at k = {largest} needs about {} here ({}; per node {}), and this \
                     machine has {}: lower k, or run on a cluster",
                human(need as f64),
                at.name,
                breakdown(&plan),
                human(total as f64)
            );
        }
    }
    Ok(())
}
