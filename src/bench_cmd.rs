//! `vocab bench ...`: measurements whose results are committed under `eval/`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use rayon::prelude::*;
use vocab_cluster::collective::aggregate::{encode_range, range_of};
use vocab_pipeline::hog::{BlockGrid, CELL_SIDE, DIMS, PatchDescriber};
use vocab_pipeline::image_io::{Collection, Luminance, load_luminance};
use vocab_pipeline::kmeans::partial::UnitRows;
use vocab_pipeline::kmeans::{Accumulation, Partial, merge_tasks};
use vocab_pipeline::partition::Rows;
use vocab_pipeline::patch::Sampling;

use crate::cli::{BenchHogArgs, BenchPartialsArgs};

mod assign;
#[cfg(feature = "mpi")]
mod collectives;

pub use self::assign::assign;
#[cfg(feature = "mpi")]
pub use self::collectives::collectives;

/// Best wall time of `repeat` runs of `f`, in seconds.
fn best_of(repeat: usize, mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut produced = 0;
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        produced = std::hint::black_box(f());
        best = best.min(started.elapsed().as_secs_f64());
    }
    (best, produced)
}

/// The next value of the benchmark's LCG (Knuth's MMIX constants), advancing `state`.
#[inline]
fn lcg_next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state
}

/// `vocab bench partials`: one node's partial sums at a given shape, each way of holding them,
/// side by side; one CSV row per (k, form) on stdout. Every form must give the same merged sums
/// (checked), so the rows differ only in time and bytes.
pub fn partials(args: &BenchPartialsArgs) -> anyhow::Result<()> {
    let (dims, n) = (args.dims, args.vectors);
    ensure!(dims > 0 && n > 0, "--dims and --vectors must be positive");
    ensure!(
        args.tasks > 0 && args.tasks <= n,
        "--tasks {}: between 1 and --vectors",
        args.tasks
    );
    ensure!(args.nodes > 0, "--nodes must be positive");
    let values = n
        .checked_mul(dims)
        .context("--vectors x --dims overflows")?;
    // Values of HOG's range from a fixed LCG.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let x: Vec<f32> = (0..values)
        .map(|_| (lcg_next(&mut state) >> 40) as f32 / (1u64 << 24) as f32)
        .collect();
    let dist = vec![1f32; n];
    println!(
        "k,dims,vectors,tasks,nodes,form,accumulate_seconds,merge_seconds,encode_seconds,\
         task_bytes,merged_bytes,stage2_bytes"
    );
    for &k in &args.k {
        ensure!(
            k > 0 && k <= u32::MAX as usize,
            "--k {k}: between 1 and 2^32 - 1"
        );
        let labels: Vec<u32> = (0..n)
            .map(|_| ((lcg_next(&mut state) >> 33) % k as u64) as u32)
            .collect();
        // The node's rows in `tasks` contiguous runs, one map unit each.
        let units: Vec<UnitRows<'_>> = (0..args.tasks)
            .map(|t| {
                let (a, b) = (n * t / args.tasks, n * (t + 1) / args.tasks);
                (
                    t as u64,
                    Rows::dense(&x[a * dims..b * dims], dims),
                    &labels[a..b],
                    &dist[a..b],
                )
            })
            .collect();
        partials_at(args, k, &units)?;
    }
    Ok(())
}

/// The CSV rows of [`partials`] at `k` centroids over `units`: each form in turn, unless its
/// dense tables would pass `--max-bytes`; every form's merged sums must equal the first's.
fn partials_at(args: &BenchPartialsArgs, k: usize, units: &[UnitRows<'_>]) -> anyhow::Result<()> {
    let (dims, n) = (args.dims, args.vectors);
    let dense = (k as u64).saturating_mul(dims as u64 + 1).saturating_mul(8);
    let mut want: Option<Partial> = None;
    for form in [
        Accumulation::Sparse,
        Accumulation::PerTask,
        Accumulation::Shared,
    ] {
        let tables = match form {
            Accumulation::PerTask => args.tasks as u64,
            _ => 1,
        };
        if form != Accumulation::Sparse && dense.saturating_mul(tables) > args.max_bytes {
            eprintln!(
                "k = {k}: {form:?} would hold {:.1} GB of sums (--max-bytes): skipped",
                (dense * tables) as f64 / 1e9
            );
            continue;
        }
        let FormRun {
            accumulate,
            merge,
            encode,
            task_bytes,
            merged_bytes,
            stage2,
        } = run_form(args, k, form, units, &mut want)?;
        println!(
            "{k},{dims},{n},{},{},{},{accumulate:.4},{merge:.4},{encode:.4},{task_bytes},\
             {merged_bytes},{stage2}",
            args.tasks,
            args.nodes,
            match form {
                Accumulation::Sparse => "sparse",
                Accumulation::PerTask => "dense-per-task",
                Accumulation::Shared => "dense-shared",
            }
        );
    }
    Ok(())
}

/// One form's measurements in [`partials`]: the best seconds of each phase over the repeats,
/// and the bytes of the last repeat.
struct FormRun {
    /// Accumulating the tasks' partials.
    accumulate: f64,
    /// Merging them (stage 1).
    merge: f64,
    /// Encoding the other nodes' ranges (stage 2).
    encode: f64,
    /// The tasks' tables.
    task_bytes: u64,
    /// The merged table.
    merged_bytes: u64,
    /// The ranges stage 2 sends.
    stage2: u64,
}

/// Runs `form` at `k` centroids over `units` `--repeat` times: accumulate, merge, encode the
/// ranges of `--nodes - 1` other nodes. The merged sums must equal `want` (set by the first
/// run when empty).
fn run_form(
    args: &BenchPartialsArgs,
    k: usize,
    form: Accumulation,
    units: &[UnitRows<'_>],
    want: &mut Option<Partial>,
) -> anyhow::Result<FormRun> {
    let dims = args.dims;
    let (mut accumulate, mut merge, mut encode) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let (mut task_bytes, mut merged_bytes, mut stage2) = (0, 0, 0);
    for _ in 0..args.repeat.max(1) {
        let started = Instant::now();
        let tasks = accumulate_tasks(form, k, dims, units);
        accumulate = accumulate.min(started.elapsed().as_secs_f64());
        task_bytes = tasks.iter().map(Partial::table_bytes).sum();
        let started = Instant::now();
        let merged = std::hint::black_box(merge_tasks(tasks, k, dims, 30));
        merge = merge.min(started.elapsed().as_secs_f64());
        merged_bytes = merged.table_bytes();
        // Stage 2: this node's pieces of every other node's range (node 0's view).
        let started = Instant::now();
        stage2 = (1..args.nodes)
            .into_par_iter()
            .map(|j| {
                encode_range(std::slice::from_ref(&merged), range_of(k, args.nodes, j)).len() as u64
            })
            .sum::<u64>();
        encode = encode.min(started.elapsed().as_secs_f64());
        let mut merged = merged;
        merged.units.sort_by_key(|u| u.0);
        match want {
            None => *want = Some(merged),
            Some(w) => ensure!(&merged == w, "k = {k}: {form:?} gave other sums"),
        }
    }
    Ok(FormRun {
        accumulate,
        merge,
        encode,
        task_bytes,
        merged_bytes,
        stage2,
    })
}

/// The map tasks' partials of `units` held as `form` says (scale 30).
fn accumulate_tasks(
    form: Accumulation,
    k: usize,
    dims: usize,
    units: &[UnitRows<'_>],
) -> Vec<Partial> {
    match form {
        Accumulation::Sparse => units
            .par_iter()
            .map(|u| Partial::sparse_of(k, dims, 30, std::slice::from_ref(u)))
            .collect(),
        Accumulation::PerTask => units
            .par_iter()
            .map(|&(key, m, l, d)| {
                let mut p = Partial::new(k, dims, 30);
                p.accumulate(key, m, l, d);
                p
            })
            .collect(),
        Accumulation::Shared => {
            let mut p = Partial::new(k, dims, 30);
            p.accumulate_units(units);
            vec![p]
        }
    }
}

/// `vocab bench hog`.
pub fn hog(args: &BenchHogArgs) -> anyhow::Result<()> {
    let collection = Collection::open(&args.input, args.labels.as_deref())?;
    let photos: Vec<(u32, String, Luminance)> = collection
        .photos()
        .par_iter()
        .filter_map(|p| {
            load_luminance(
                &collection.path_of(p),
                None,
                vocab_pipeline::image_io::MAX_PIXELS,
            )
            .ok()
            .map(|lum| (p.picture_id, p.rel_path.clone(), lum))
        })
        .collect();
    ensure!(
        !photos.is_empty(),
        "no decodable photos in {}",
        args.input.display()
    );
    let sampling = Sampling::Random {
        per_image: args.per_image,
        seed: args.seed,
    };
    let dense = Sampling::Dense { stride: CELL_SIDE };
    let patches: Vec<Vec<(usize, usize)>> = photos
        .iter()
        .map(|(id, _, lum)| sampling.positions(*id, lum.width, lum.height))
        .collect();
    let pixels: usize = photos.iter().map(|(_, _, l)| l.width * l.height).sum();
    let n_patches: usize = patches.iter().map(Vec::len).sum();

    // Dense: the block grid of every photo and all stride-8 windows, as OpenCV's compute returns.
    let (dense_secs, windows) = best_of(args.repeat, || {
        photos
            .par_iter()
            .map_init(
                || (BlockGrid::default(), Vec::new()),
                |(grid, out): &mut (BlockGrid, Vec<f32>), (_, _, lum)| {
                    grid.compute(&lum.data, lum.width, lum.height);
                    let positions = dense.positions(0, lum.width, lum.height);
                    out.resize(positions.len() * DIMS, 0.0);
                    for (&(r, c), dst) in positions.iter().zip(out.chunks_exact_mut(DIMS)) {
                        grid.window(r / CELL_SIDE, c / CELL_SIDE, dst);
                    }
                    positions.len()
                },
            )
            .sum()
    });
    // Random patches: each described on its own (gradients inside the patch).
    let (patch_secs, _) = best_of(args.repeat, || {
        photos
            .par_iter()
            .zip(&patches)
            .map_init(
                || (PatchDescriber::default(), vec![0f32; DIMS]),
                |(describer, out), ((_, _, lum), positions)| {
                    for &(r, c) in positions {
                        describer.describe(&lum.data, lum.width, r, c, out);
                    }
                    positions.len()
                },
            )
            .sum()
    });

    vocab_pipeline::output::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    write_patches(&args.out, &photos, &patches)?;
    let threads = rayon::current_num_threads();
    let dense_mpix = pixels as f64 / dense_secs / 1e6;
    let patch_rate = n_patches as f64 / patch_secs;
    let results = args.out.join("vocab.csv");
    vocab_pipeline::atomic::write(
        &results,
        format!(
            "implementation,workers,photos,megapixels,dense_windows,dense_seconds,dense_mpix_per_s,patches,patch_seconds,patches_per_s\n\
             vocab,{threads},{},{:.3},{windows},{dense_secs:.5},{dense_mpix:.2},{n_patches},{patch_secs:.5},{patch_rate:.0}\n",
            photos.len(),
            pixels as f64 / 1e6,
        )
        .as_bytes(),
    )
    .with_context(|| format!("cannot write {}", results.display()))?;
    println!(
        "bench hog: {} photos, {:.2} Mpix, {threads} threads: dense {dense_mpix:.1} Mpix/s ({windows} windows), random {patch_rate:.0} patches/s ({n_patches} patches)",
        photos.len(),
        pixels as f64 / 1e6,
    );
    Ok(())
}

/// Writes the sampled patches of `photos` (`patches`, in the photos' order) to `patches.csv` in
/// the folder `out`, for the other implementations (`eval/hog_bench/`) to describe the same
/// patches.
fn write_patches(
    out: &Path,
    photos: &[(u32, String, Luminance)],
    patches: &[Vec<(usize, usize)>],
) -> anyhow::Result<()> {
    let rows = photos
        .iter()
        .zip(patches)
        .flat_map(|((id, path, _), positions)| {
            positions.iter().map(move |(r, c)| {
                vec![
                    id.to_string(),
                    path.to_string(),
                    r.to_string(),
                    c.to_string(),
                ]
            })
        });
    let csv = crate::tables::csv_text(&["picture_id", "path", "row", "col"], rows)?;
    let patches_csv = out.join("patches.csv");
    vocab_pipeline::atomic::write(&patches_csv, csv.as_bytes())
        .with_context(|| format!("cannot write {}", patches_csv.display()))?;
    Ok(())
}
