//! Writes vocab's dense SIFT (`vocab_pipeline::sift`) of every photo in the layout `vocab
//! --from DIR` reads, so that the built-in descriptor can be scored by the scripts that score
//! descriptors made elsewhere (`eval/descriptors/beside.sh`) before it has a stage of its own.
//!
//! usage: dense_sift PHOTOS OUT STEP WINDOWS [--flip] [--whole]
//!
//! PHOTOS holds `labels.csv` (the photos' paths in its first column); WINDOWS is a comma list of
//! window sides in pixels (`24,42`). For `a/b.jpg` writes `OUT/a/b.npy`: rows `x, y, window`
//! and the 128 values, `f32`. `--flip` describes each photo mirrored left to right (the rows in
//! the mirrored photo's coordinates); `--whole` lays one grid over the whole photo for every
//! window (`Grid::Whole`) instead of each window's grid inside it. Photos are described in
//! parallel (rayon).

use std::path::{Path, PathBuf};
use std::time::Instant;

use ndarray::Array2;
use rayon::prelude::*;
use vocab_pipeline::image_io::{Collection, MAX_PIXELS, load_luminance};
use vocab_pipeline::sift::{DenseSift, Grid, SIFT_DIMS};

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, photos, out, step, windows, rest @ ..] = args.as_slice() else {
        return Err("usage: dense_sift PHOTOS OUT STEP WINDOWS [--flip] [--whole]".into());
    };
    let (mut flip, mut grid) = (false, Grid::Inside);
    for flag in rest {
        match flag.as_str() {
            "--flip" => flip = true,
            "--whole" => grid = Grid::Whole,
            _ => return Err(format!("unknown argument {flag}").into()),
        }
    }
    let sides = windows
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("WINDOWS {windows}: {e}"))?;
    let step = step.parse().map_err(|e| format!("STEP {step}: {e}"))?;
    let sift = DenseSift::new(step, sides, grid)?;
    let root = PathBuf::from(photos);
    let collection = Collection::open(&root, Some(&root.join("labels.csv")))?;
    let started = Instant::now();
    let rows: Vec<usize> = collection
        .photos()
        .par_iter()
        .map(|photo| describe(&sift, &root, Path::new(out), &photo.rel_path, flip))
        .collect::<Result<_, Error>>()?;
    eprintln!(
        "dense_sift: {} photos, {} descriptors in {:.1} s (step {step}, windows {windows}, flip {flip}, {grid:?})",
        rows.len(),
        rows.iter().sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// An error naming the photo or file it is about.
type Error = Box<dyn std::error::Error + Send + Sync>;

fn describe(
    sift: &DenseSift,
    root: &Path,
    out: &Path,
    rel: &str,
    flip: bool,
) -> Result<usize, Error> {
    let mut lum =
        load_luminance(&root.join(rel), None, MAX_PIXELS).map_err(|e| format!("{rel}: {e:?}"))?;
    if flip {
        lum.mirror();
    }
    let (keys, values) = sift.describe(&lum);
    let mut table = Array2::<f32>::zeros((keys.len(), 3 + SIFT_DIMS));
    for ((k, d), mut row) in keys
        .iter()
        .zip(values.chunks_exact(SIFT_DIMS))
        .zip(table.rows_mut())
    {
        row[0] = k.x as f32;
        row[1] = k.y as f32;
        row[2] = k.window;
        row.iter_mut().skip(3).zip(d).for_each(|(r, v)| *r = *v);
    }
    let dest = out.join(rel).with_extension("npy");
    let parent = dest.parent().ok_or_else(|| format!("{rel}: no folder"))?;
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    ndarray_npy::write_npy(&dest, &table).map_err(|e| format!("{}: {e}", dest.display()))?;
    Ok(keys.len())
}
