//! `vocab bench ...`: measurements whose results are committed under `eval/`.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{Context, ensure};
use rayon::prelude::*;
use vocab_pipeline::hog::{BlockGrid, CELL_SIDE, DIMS, PatchDescriber};
use vocab_pipeline::image_io::{Collection, Luminance, load_luminance};
use vocab_pipeline::patch::Sampling;

use crate::cli::BenchHogArgs;

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

/// `vocab bench hog`.
pub fn hog(args: &BenchHogArgs) -> anyhow::Result<()> {
    let collection = Collection::open(&args.input, args.labels.as_deref())?;
    let photos: Vec<(u32, String, Luminance)> = collection
        .photos()
        .par_iter()
        .filter_map(|p| {
            load_luminance(&collection.path_of(p), None)
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

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut csv = String::from("picture_id,path,row,col\n");
    for ((id, path, _), positions) in photos.iter().zip(&patches) {
        for (r, c) in positions {
            let _ = writeln!(csv, "{id},{path},{r},{c}");
        }
    }
    let patches_csv = args.out.join("patches.csv");
    std::fs::write(&patches_csv, csv)
        .with_context(|| format!("cannot write {}", patches_csv.display()))?;
    let threads = rayon::current_num_threads();
    let dense_mpix = pixels as f64 / dense_secs / 1e6;
    let patch_rate = n_patches as f64 / patch_secs;
    let results = args.out.join("vocab.csv");
    std::fs::write(
        &results,
        format!(
            "implementation,workers,photos,megapixels,dense_windows,dense_seconds,dense_mpix_per_s,patches,patch_seconds,patches_per_s\n\
             vocab,{threads},{},{:.3},{windows},{dense_secs:.5},{dense_mpix:.2},{n_patches},{patch_secs:.5},{patch_rate:.0}\n",
            photos.len(),
            pixels as f64 / 1e6,
        ),
    )
    .with_context(|| format!("cannot write {}", results.display()))?;
    println!(
        "bench hog: {} photos, {:.2} Mpix, {threads} threads: dense {dense_mpix:.1} Mpix/s ({windows} windows), random {patch_rate:.0} patches/s ({n_patches} patches)",
        photos.len(),
        pixels as f64 / 1e6,
    );
    Ok(())
}
