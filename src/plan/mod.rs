//! `vocab run --plan`: the stages, data sizes, memory and per-iteration traffic a config implies,
//! from the cost model of `eval/distributed/` (bytes exact, seconds a link-bound estimate); and
//! the checks that refuse a run up front (`config check`, `--plan` and `vocab run` before its
//! first stage): a vocabulary larger than its sample, a k-means that cannot fit in memory here.
//!
//! This module prints the plan section by section: the sample (`sample`), learning the
//! vocabularies or mixtures (`learning`), the encodings and models (`encode`) and the time
//! (`time`), from the bytes of `cost` and the measured rates of `rates`; `check` holds the checks.

mod calibrate;
mod check;
mod cost;
mod disk;
mod encode;
mod learning;
mod rates;
mod sample;
mod time;

pub use self::check::check_sizes;

use self::calibrate::Calibration;
use self::disk::{Disk, print_disk};
use self::encode::{print_encode, print_svm};
use self::learning::{print_key, print_kmeans, print_mixture};
use self::sample::print_sample;
use self::time::{Estimate, print_time};
use crate::cli::RunArgs;
use crate::config::Config;
use crate::settings::{Backend, NodeCount};

/// What the plan says of the photos: how many, how many train each trial's vocabulary, and the
/// protocol (for people) with its number of trials.
pub struct Photos<'a> {
    /// Photos encoded (with a test folder's).
    pub photos: u64,
    /// Photos whose patches make a trial's vocabulary sample.
    pub training: u64,
    /// The protocol, for people.
    pub protocol: &'a str,
    /// Trials, each learning its own vocabularies and models.
    pub trials: usize,
    /// Mean width and height of a sample of the photos (headers read), when they are here.
    pub sizes: Option<(f64, f64)>,
    /// Classes of each attribute learned (from the labels; `[plan] classes` or 2 without them).
    pub classes: Vec<usize>,
    /// The photo folder and its photos (relative paths), when they are here: the rates are
    /// measured on some of them.
    pub here: Option<(&'a std::path::Path, &'a [String])>,
}

/// Prints the plan.
pub fn print(
    config: &Config,
    args: &RunArgs,
    engine: &Backend,
    photos: &Photos<'_>,
) -> anyhow::Result<()> {
    let &Photos {
        photos,
        training,
        protocol,
        trials,
        sizes,
        ref classes,
        here,
    } = photos;
    let NodeCount {
        nodes,
        racks,
        name: where_,
        ..
    } = engine.nodes()?;
    let n = training * config.features.per_image as u64;
    let tasks = config.plan.map_tasks_per_node as u64;
    let link = config.plan.link_mbit * 1e6 / 8.0;
    println!("plan for {} ({where_})", args.experiment.config.display());
    println!("  dataset     {photos} photos; {protocol}");
    println!(
        "    {training} photos train {} vocabularies and models",
        if trials > 1 { "each trial's" } else { "the" }
    );
    if trials > 1 {
        println!(
            "    every line below holds for each of the {trials} trials (each has its own \
             sample, vocabularies, encodings and models)"
        );
    }
    if let Some(from) = &config.features.from {
        println!(
            "    descriptors made elsewhere, in {}: the sizes and times below are reckoned for \
             HOG's 512 values a vector and scale with their dimension",
            from.display()
        );
    }
    if config.features.descriptor == vocab_pipeline::features::Descriptor::Sift {
        println!(
            "    dense SIFT: the times below are reckoned at HOG's rates and patch counts (on the \
             15-Scene stand-in, SIFT every 8 px encoded in 1.1x the time of HOG's setting: \
             eval/scene15-run/field-protocol.md)"
        );
    }
    print_joined(config);
    print_sample(config, engine, n, nodes, link)?;
    let iterations = if config.fisher() {
        print_mixture(config, n, (nodes, racks), link)
    } else {
        print_kmeans(config, n, (nodes, racks), tasks, link)
    };
    print_encode(config, engine, nodes, photos)?;
    print_svm(config);
    print_key(config);
    let born = config.partition.at == crate::config::PartitionAt::Nodes && engine.distributed();
    let disk = Disk::of(config, (photos, training, n), classes, born)?;
    // The photo stages' rates are a whole machine's: loopback workers share its cores. (The
    // k-means rates are a node's, and a 2-core machine running two measured alike.)
    let machines = if engine.nodes_here().is_some() {
        1
    } else {
        nodes.max(1)
    };
    let per_iteration: Vec<(u64, f64)> = (iterations.into_iter())
        .map(|(k, map, comm)| (k, map + comm))
        .collect();
    // This machine speaks for the nodes only when they run on it.
    let here_only = !engine.distributed() || engine.nodes_here().is_some();
    let calibration = if config.plan.calibrate && here_only {
        Calibration::measure(config, here)?
    } else {
        Calibration::REFERENCE
    };
    let estimate = Estimate {
        photos,
        training,
        machines,
        sizes,
        classes,
        per_iteration: &per_iteration,
        calibration,
    };
    print_time(config, &estimate, trials)?;
    print_disk(&disk, trials);
    Ok(())
}

/// The plan's line on the parts joined with the run's own (`[[join]]`), if any.
fn print_joined(config: &Config) {
    if config.join.is_empty() {
        return;
    }
    let parts: Vec<String> = (config.parts().iter().skip(1))
        .map(|p| {
            format!(
                "{} ({} a photo, stride {})",
                p.features.descriptor.name(),
                p.features.per_image,
                p.encode.stride
            )
        })
        .collect();
    println!(
        "    joined with {}: each part's sample, dictionaries and encodings come on top of the \
         lines below, which reckon the run's own part alone; the SVMs train on the joined \
         vectors",
        parts.join(", ")
    );
}

/// Mean width and height of up to 64 of `paths` (relative to `folder`), spread over them,
/// from their headers; `None` when none can be read.
pub fn photo_sizes(folder: &std::path::Path, paths: &[String]) -> Option<(f64, f64)> {
    let step = paths.len().div_ceil(64).max(1);
    let sizes: Vec<(u32, u32)> = (paths.iter().step_by(step))
        .filter_map(|p| image::image_dimensions(folder.join(p)).ok())
        .collect();
    let n = sizes.len() as f64;
    (n > 0.0).then(|| {
        let (w, h) = sizes.iter().fold((0.0, 0.0), |(w, h), &(a, b)| {
            (w + f64::from(a), h + f64::from(b))
        });
        (w / n, h / n)
    })
}
