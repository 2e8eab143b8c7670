//! The plan's lines on the sample: the random patches described of each training photo, what a
//! node holds while describing them, where they are kept, and their partitions.

use super::cost::{RECORD_HEAD, dims};
use crate::config::Config;
use crate::memory::human;
use crate::settings::Backend;
use vocab_pipeline::features::Descriptor;

/// The features and partition lines of the plan, for `n` vectors described on `nodes` nodes over
/// links of `link` bytes/s.
pub(super) fn print_sample(
    config: &Config,
    engine: &Backend,
    n: u64,
    nodes: u64,
    link: f64,
) -> anyhow::Result<()> {
    let element = config.partition.element;
    let value = element.size() as u64;
    let dims = dims(config);
    let sample = n * (RECORD_HEAD + dims * 4);
    let parts = config.partition.parts as u64;
    let tasks = config.plan.map_tasks_per_node as u64;
    println!(
        "  features    {} random {}{} per photo x {dims} dims = {n} vectors, {} on disk",
        config.features.per_image,
        match config.features.descriptor {
            Descriptor::Hog => "patches",
            Descriptor::Sift => "SIFT keypoints",
        },
        config.features.patch.map_or(String::new(), |p| format!(
            " of {p} px (the photo resized {:.3}x)",
            vocab_pipeline::hog::PATCH_SIDE as f64 / p as f64
        )),
        human(sample as f64)
    );
    let per_photo = config.features.params()?.photo_memory();
    println!(
        "    {tasks} photos at once a node, at most {} each ({} Mpix limit: {} bytes a pixel \
         while decoding), {} in all",
        human(per_photo as f64),
        config.features.max_pixels,
        vocab_pipeline::image_io::BYTES_PER_PIXEL,
        human(per_photo.saturating_mul(tasks) as f64)
    );
    let born = config.partition.at == crate::config::PartitionAt::Nodes;
    if engine.distributed() && born {
        // Each boundary between two nodes' shards cuts at most one partition, whose smaller
        // part (at most half of it) travels to the node holding the rest.
        let part = sample / parts.max(1);
        let moved = nodes.saturating_sub(1) * part / 2;
        println!(
            "    described on the {nodes} node{} and kept there as partitions; at most {} of \
             boundary records move between neighbours, nothing to the driver",
            if nodes == 1 { "" } else { "s" },
            human(moved as f64),
        );
    } else if engine.distributed() {
        println!(
            "    described on the {nodes} node{}; the sample comes to the driver: {} ({:.1} s \
             into it at {} Mbit/s)",
            if nodes == 1 { "" } else { "s" },
            human(sample as f64),
            sample as f64 / link,
            config.plan.link_mbit
        );
    }
    println!(
        "  partition   {parts} partitions of ~{} vectors ({} each, {} values)",
        n / parts.max(1),
        human((n / parts.max(1) * (RECORD_HEAD + dims * value)) as f64),
        element.name()
    );
    Ok(())
}
