//! `vocab bench assign`: one exact assignment pass of the first rows of a partition set against
//! a vocabulary, per kernel, timed (the paper-scale run's exact pass at k = 1,048,576 on a slice,
//! `eval/paper_scale/`).

use std::io::Write as _;
use std::time::Instant;

use anyhow::Context;
use vocab_pipeline::kmeans::engine::{Engine, Local};
use vocab_pipeline::kmeans::files::read_vocabulary;
use vocab_pipeline::kmeans::{Assignment, Params, Shard};
use vocab_pipeline::partition::{PartitionSet, Rows, Verify, read_manifest};

use crate::cli::BenchAssignArgs;

/// CSV header of the rows `vocab bench assign` prints.
const HEADER: &str = "rows,k,dims,element,kernel,threads,seconds,gmac_per_s,inertia";

/// Assigns the first `--rows` rows to the vocabulary with each kernel; one CSV row each.
pub fn assign(args: &BenchAssignArgs) -> anyhow::Result<()> {
    // Only the partitions holding the first rows are opened (and verified).
    let manifest = read_manifest(&args.features)?;
    let (mut first, mut held) = (Vec::new(), 0u64);
    for (i, p) in manifest.partitions.iter().enumerate() {
        if held >= args.rows as u64 {
            break;
        }
        first.push(i);
        held = held.saturating_add(p.count);
    }
    let set = PartitionSet::open_subset(&args.features, Some(&first), Verify::Full)
        .with_context(|| format!("opening {}", args.features.display()))?;
    let centroids = read_vocabulary(&args.vocabulary)
        .with_context(|| format!("reading {}", args.vocabulary.display()))?;
    let mut slice: Vec<Rows<'_>> = Vec::new();
    let mut left = args.rows;
    for part in set.vectors() {
        let take = left.min(part.rows());
        if take > 0 {
            slice.push(part.slice(0, take));
        }
        left -= take;
    }
    let rows = args.rows - left;
    anyhow::ensure!(
        rows > 0 && slice.first().is_some_and(|p| p.dims() == centroids.dims()),
        "{} holds no rows of the vocabulary's {} dims",
        args.features.display(),
        centroids.dims()
    );
    let element = slice[0].element().name();
    let threads = rayon::current_num_threads();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{HEADER}")?;
    for &kernel in &args.kernel {
        let params = Params {
            k: centroids.k(),
            max_iter: 1,
            assignment: Assignment::Full(kernel),
            ..Params::default()
        };
        let mut engine = Local::new(Shard::numbered(&slice), &params)?;
        let started = Instant::now();
        let step = engine.step(1, &centroids)?;
        let seconds = started.elapsed().as_secs_f64();
        let macs = rows as f64 * centroids.k() as f64 * centroids.dims() as f64;
        writeln!(
            out,
            "{rows},{},{},{element},{},{threads},{seconds:.3},{:.1},{:e}",
            centroids.k(),
            centroids.dims(),
            kernel.name(),
            macs / seconds / 1e9,
            step.inertia
        )?;
        out.flush()?;
    }
    Ok(())
}
