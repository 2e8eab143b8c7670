//! `vocab run --plan`: the stages, data sizes and per-iteration traffic a config implies, from
//! the cost model of `eval/distributed/` (bytes exact, seconds a link-bound estimate).

use std::path::Path;

use anyhow::{Context, bail};

use crate::cli::{ElementArg, RunArgs};
use crate::config::Config;

/// HOG values per vector.
const DIMS: u64 = 512;
/// Bytes before the values of a binary feature record.
const RECORD_HEAD: u64 = 8;

fn human(bytes: f64) -> String {
    for (unit, size) in [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)] {
        if bytes >= size {
            return format!("{:.2} {unit}", bytes / size);
        }
    }
    format!("{bytes:.0} B")
}

fn count_photos(dir: &Path) -> u64 {
    const EXT: [&str; 8] = ["jpg", "jpeg", "png", "webp", "tif", "tiff", "bmp", "gif"];
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type().is_file()
                && e.path().extension().is_some_and(|x| {
                    EXT.contains(&x.to_string_lossy().to_ascii_lowercase().as_str())
                })
        })
        .count() as u64
}

/// Prints the plan.
pub fn print(config: &Config, base: &Path, args: &RunArgs) -> anyhow::Result<()> {
    let photos = match (
        &config.dataset.synthetic,
        &args.dataset,
        &config.dataset.path,
    ) {
        (Some(s), None, _) => 4 * s.per_kind as u64,
        (_, given, path) => {
            let dir = given
                .clone()
                .or_else(|| path.as_ref().map(|p| base.join(p)));
            match (dir.filter(|d| d.is_dir()), config.plan.photos) {
                (Some(d), _) => count_photos(&d),
                (None, Some(n)) => n,
                (None, None) => bail!(
                    "the photo folder is not readable here: set [plan] photos to plan without it"
                ),
            }
        }
    };
    let km = &config.kmeans;
    let cluster_file = args
        .cluster
        .clone()
        .or_else(|| km.cluster.as_ref().map(|c| base.join(c)));
    let (nodes, racks, where_) = match &cluster_file {
        Some(path) => {
            let c = vocab_cluster::config::Cluster::load(path)
                .with_context(|| format!("planning with {}", path.display()))?;
            let mut racks: Vec<&str> = c.nodes.iter().map(|n| n.rack.as_str()).collect();
            racks.sort_unstable();
            racks.dedup();
            (
                c.nodes.len() as u64,
                racks.len(),
                format!("cluster {}", path.display()),
            )
        }
        None if km.nodes == 0 => (1, 1, "one process".to_string()),
        None => (km.nodes as u64, 1, format!("{} loopback workers", km.nodes)),
    };
    let train = photos.div_ceil(2);
    let n = train * config.features.per_image as u64;
    let value = match config.partition.element {
        ElementArg::F32 => 4,
        ElementArg::U8 => 1,
    };
    let sample = n * (RECORD_HEAD + DIMS * 4);
    let parts = config.partition.parts as u64;
    let tasks = config.plan.map_tasks_per_node as u64;
    let link = config.plan.link_mbit * 1e6 / 8.0;
    println!("plan for {} ({where_})", args.config.display());
    println!("  dataset     {photos} photos; split 50/50: {train} train the vocabulary");
    println!(
        "  features    {} random patches x {DIMS} dims = {n} vectors, {}",
        config.features.per_image,
        human(sample as f64)
    );
    println!(
        "  partition   {parts} partitions of ~{} vectors ({} each, {} values)",
        n / parts.max(1),
        human((n / parts.max(1) * (RECORD_HEAD + DIMS * value)) as f64),
        if value == 4 { "f32" } else { "u8" }
    );
    println!(
        "  kmeans      {nodes} nodes on {racks} racks, {tasks} map tasks per node, up to {} iterations",
        km.iterations
    );
    println!(
        "              per iteration       broadcast   stage 2 (stage 1 on / off)   stage 3   map flops   est. comm s   partials per node"
    );
    for &k in &km.k {
        let k = k as u64;
        let bcast = k * DIMS * 4;
        let partial = k * (DIMS + 1) * 8;
        let stage2_on = (nodes - 1) * partial;
        let stage2_off = tasks * stage2_on;
        let stage3 = k * (4 * DIMS + 8);
        let flops = 2.0 * n as f64 * k as f64 * DIMS as f64;
        let seconds = (bcast as f64 + (nodes - 1) as f64 * 65536.0) / link
            + (nodes - 1) as f64 / nodes as f64 * partial as f64 / link
            + stage3 as f64 / link;
        println!(
            "              k = {k:<14} {:>9}   {:>10} / {:<12}    {:>8}   {:>9.2e}   {:>10.1}   {}",
            human(bcast as f64),
            human(stage2_on as f64),
            human(stage2_off as f64),
            human(stage3 as f64),
            flops,
            seconds,
            human((tasks * partial) as f64)
        );
    }
    println!(
        "  encode      every photo, dense patches every {} px, each to its nearest word",
        config.encode.stride
    );
    println!(
        "  svm         per vocabulary and attribute: C from {} folds x 5 values on the training half",
        config.classify.cv
    );
    println!(
        "  (seconds: link-bound estimate at {} Mbit/s per node, both directions at once)",
        config.plan.link_mbit
    );
    Ok(())
}
