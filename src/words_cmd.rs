//! `vocab words`: a vocabulary drawn as patch montages (`pipeline::montage`), PNG beside a CSV of
//! the same tiles.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kmeans::files::read_vocabulary;
use vocab_pipeline::montage::{GAP, Montage, MontageParams, draw};

use crate::cli::WordsArgs;

/// The CSV beside a montage: `<png>.csv`.
pub fn csv_path(png: &Path) -> PathBuf {
    vocab_pipeline::output::side(png, "csv")
}

/// The montage's tiles as CSV: a line per tile, rows in the picture's order.
pub fn csv(montage: &Montage) -> anyhow::Result<String> {
    let rows = montage.rows.iter().enumerate().flat_map(|(r, row)| {
        row.tiles.iter().enumerate().map(move |(c, t)| {
            vec![
                (r + 1).to_string(),
                row.word.to_string(),
                row.won.to_string(),
                (c + 1).to_string(),
                t.picture_id.to_string(),
                t.path.clone(),
                t.row.to_string(),
                t.col.to_string(),
                format!("{:.6}", t.distance),
            ]
        })
    });
    crate::tables::csv_text(
        &[
            "row",
            "word",
            "patches_nearest",
            "column",
            "picture_id",
            "path",
            "patch_row",
            "patch_col",
            "distance",
        ],
        rows,
    )
}

/// Draws the montage of `vocabulary` over `photos` into `out` (PNG) and `<out>.csv`.
pub fn montage(
    vocabulary: &Path,
    collection: &Collection,
    params: &MontageParams,
    out: &Path,
) -> anyhow::Result<Montage> {
    let centroids = read_vocabulary(vocabulary)
        .with_context(|| format!("--vocabulary {}", vocabulary.display()))?;
    let mut montage = draw(collection, &centroids, params)
        .with_context(|| format!("drawing the words of {}", vocabulary.display()))?;
    // Each row named by its word and the sample's patches nearest it (the CSV's columns).
    let labels: Vec<String> = (montage.rows.iter())
        .map(|row| format!("word {}\n{} patches", row.word, row.won))
        .collect();
    montage.image = crate::figures::labelled_rows(&montage.image, &labels, (GAP, montage.pitch()))?;
    crate::figures::write_png(out, montage.image.clone())?;
    let table = csv_path(out);
    vocab_pipeline::atomic::write(&table, csv(&montage)?.as_bytes())
        .with_context(|| format!("cannot write {}", table.display()))?;
    Ok(montage)
}

/// The montage's settings from the flags.
fn params(args: &WordsArgs) -> MontageParams {
    MontageParams {
        words: args.words,
        patches: args.patches,
        photos: args.photos,
        per_image: args.per_image,
        seed: args.seed,
        zoom: args.zoom,
        max_side: args.max_side,
        patch: args.patch,
        max_pixels: args.max_pixels.saturating_mul(1_000_000),
    }
}

/// `vocab words`.
pub fn words(args: &WordsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let started = Instant::now();
    use crate::settings::OrFlag as _;
    crate::settings::output("out", &args.out).or_flag()?;
    let params = params(args);
    // Refused before any photo is read.
    params.check().map_err(|e| anyhow::anyhow!("--{e}"))?;
    let collection = Collection::open(&args.input, args.labels.as_deref())
        .with_context(|| format!("--input {}", args.input.display()))?;
    let montage = montage(&args.vocabulary, &collection, &params, &args.out)?;
    writeln!(
        out,
        "words: {} words x {} patches from {} patches of {} photos ({} skipped) in {:.1} s",
        montage.rows.len(),
        args.patches,
        montage.patches,
        montage.photos,
        montage.skipped,
        started.elapsed().as_secs_f64()
    )?;
    writeln!(
        out,
        "  wrote {} ({}x{} px) and {}",
        args.out.display(),
        montage.image.width(),
        montage.image.height(),
        csv_path(&args.out).display()
    )?;
    Ok(())
}
