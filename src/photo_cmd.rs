//! The stages as the binary runs them: validated settings in, outputs and a summary out.

use std::path::Path;
use std::time::Instant;

use std::io::Write;

use anyhow::Context;
use vocab_pipeline::descriptors::{self, Foreign};
use vocab_pipeline::features::{self, FeatureSummary, manifest_path};
use vocab_pipeline::features::{Descriptor, FeatureParams, SIFT_SAMPLE_STEP, SIFT_WINDOWS};
use vocab_pipeline::hog::DESCRIPTOR_NAME;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::sift::SIFT_NAME;
use vocab_pipeline::store::{self, Format};
use vocab_pipeline::synth;

use crate::cli::ConvertArgs;
use crate::progress::Ui;
use crate::settings::{FeatureSettings, OrFlag, PhotoSetSettings};
use crate::sharded::On;
use vocab_cluster::jobs::photos::{Elsewhere, PhotoStage};

fn describe_sampling(p: &FeatureParams) -> String {
    let s = &p.sampling;
    if p.descriptor == Descriptor::Sift {
        let windows: Vec<String> = SIFT_WINDOWS.iter().map(f32::to_string).collect();
        let windows = windows.join("/");
        return match s {
            Sampling::Random { per_image, seed } => format!(
                "random, {per_image} per photo of the {SIFT_SAMPLE_STEP}-px grid at {windows}-px \
                 windows, seed {seed}"
            ),
            Sampling::Dense { stride } => format!("dense, stride {stride}, {windows}-px windows"),
        };
    }
    match s {
        Sampling::Random { per_image, seed } => {
            format!("random, {per_image} per photo, seed {seed}")
        }
        Sampling::Dense { stride } if s.is_cell_aligned() => {
            format!("dense, stride {stride}, whole-image HOG")
        }
        Sampling::Dense { stride } => format!("dense, stride {stride}, per-patch HOG"),
    }
}

/// The photos of a photo stage: the folder made absolute when other nodes read it too.
pub(crate) fn open_collection(
    input: &Path,
    labels: Option<&Path>,
    on: On<'_>,
) -> anyhow::Result<Collection> {
    let root = if on.engine.distributed() {
        std::fs::canonicalize(input)
            .with_context(|| format!("cannot resolve {}", input.display()))?
    } else {
        input.to_path_buf()
    };
    Ok(Collection::open(&root, labels)?)
}

/// Removes the rounds a sharded run of a photo stage writing `file` left when it was interrupted
/// (this run does every photo here).
pub(crate) fn forget_rounds(file: &Path) -> anyhow::Result<()> {
    let dir = crate::sharded::journal_dir(file);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(())
}

/// Runs the features stage (here, or sharded over the nodes of `on`) and reports it to `out`.
pub fn features(
    settings: &FeatureSettings,
    ui: &Ui,
    on: On<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<FeatureSummary> {
    Ok(features_into(settings, None, ui, on, out)?.0)
}

/// [`features`], with the partitions born on the nodes when `born` says where and `on` is
/// distributed (no feature file then: the nodes keep their patches as partitions in
/// `born.dir`; the manifest is returned).
pub fn features_into(
    settings: &FeatureSettings,
    born: Option<&crate::sharded::Born>,
    ui: &Ui,
    on: On<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<(FeatureSummary, Option<crate::sharded::Placed>)> {
    let started = Instant::now();
    let collection = open_collection(&settings.input, settings.labels.as_deref(), on)?;
    let foreign = (settings.from.as_deref())
        .map(|from| foreign_of(from, on))
        .transpose()?;
    let from = match &foreign {
        Some(foreign) if !on.engine.distributed() => {
            let summary = foreign_sample(settings, &collection, foreign, ui, out)?;
            return Ok((summary, None));
        }
        // The nodes read the files of the dimension the first readable one has.
        Some(foreign) => Some(Elsewhere::new(
            &foreign.dir,
            foreign.dims_of(&collection)?.0,
        )),
        None => None,
    };
    let bar = ui.bar(collection.photos().len() as u64, "features");
    let progress = |p: features::Progress| {
        bar.set_position(p.images as u64);
        // The nodes that keep their patches tell photos only: no patch count is claimed then.
        if let Some(patches) = p.patches {
            let secs = bar.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{patches} patches, {:.0}/s", patches as f64 / secs));
        }
    };
    let (file, format) = (&settings.out, settings.format);
    let born = born.filter(|_| on.engine.distributed());
    let mut placed = None;
    let stage = PhotoStage::Features(settings.params, from.clone());
    let dims = stage.expect(0).dims;
    let (summary, spread) = if let Some(born) = born {
        let (summary, spread, at) =
            crate::sharded::born(on, &collection, stage, file, born, &progress)?;
        placed = Some(at);
        (summary, Some(spread))
    } else if on.engine.distributed() {
        let (summary, spread) =
            crate::sharded::run(on, &collection, stage, None, file, &mut |source| {
                features::extract_from(&collection, (file, format, dims), source, &progress)
            })?;
        (summary, Some(spread))
    } else {
        forget_rounds(file)?;
        let summary = vocab_pipeline::describe::extract(
            &collection,
            &settings.params,
            file,
            format,
            &progress,
        )?;
        (summary, None)
    };
    bar.finish();
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let whence = (from.as_ref(), placed.as_ref().zip(born));
    write_features(out, settings, (&summary, secs), whence)?;
    if let Some(spread) = spread {
        spread.write(out)?;
    }
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok((summary, placed))
}

/// The features stage's summary: what it read (HOG patches, or descriptors made elsewhere
/// `from`) and where it left them (a file, or partitions kept at the nodes).
fn write_features(
    out: &mut dyn Write,
    settings: &FeatureSettings,
    (summary, secs): (&FeatureSummary, f64),
    (from, kept): (
        Option<&Elsewhere>,
        Option<(&crate::sharded::Placed, &crate::sharded::Born)>,
    ),
) -> std::io::Result<()> {
    let how = describe_sampling(&settings.params);
    let what = match from {
        None => {
            writeln!(
                out,
                "features: {} photos, {} skipped, {} patches in {:.1} s ({:.0} photos/s, {:.0} patches/s, {:.1} Mpix/s)",
                summary.images,
                summary.skipped,
                summary.patches,
                secs,
                summary.images as f64 / secs,
                summary.patches as f64 / secs,
                summary.pixels as f64 / secs / 1e6,
            )?;
            match settings.params.descriptor {
                Descriptor::Hog => DESCRIPTOR_NAME.to_string(),
                Descriptor::Sift => SIFT_NAME.to_string(),
            }
        }
        Some(from) => {
            let dims = from.dims as usize;
            foreign_line(out, summary, (dims, Path::new(&from.dir)), secs)?;
            format!("{dims} values a descriptor")
        }
    };
    match kept {
        Some((placed, born)) => writeln!(
            out,
            "  kept at the nodes as {} partitions in {} ({what}, {how}; the sample was not \
             gathered here)",
            placed.manifest.partitions.len(),
            born.dir.display(),
        )?,
        None => {
            writeln!(
                out,
                "  wrote {} ({}, {what}, {how})",
                settings.out.display(),
                settings.format.name(),
            )?;
            crate::tables::how_to_read(out, &settings.out, settings.format)?;
        }
    }
    writeln!(
        out,
        "  manifest {}",
        manifest_path(&settings.out, "images.csv").display()
    )
}

/// The first line of a features stage's summary from descriptors made elsewhere (`dims`
/// values each, in `from`).
fn foreign_line(
    out: &mut dyn Write,
    summary: &FeatureSummary,
    (dims, from): (usize, &Path),
    secs: f64,
) -> std::io::Result<()> {
    writeln!(
        out,
        "features: {} photos, {} skipped, {} descriptors of {dims} values from {} in {secs:.1} s",
        summary.images,
        summary.skipped,
        summary.patches,
        from.display(),
    )
}

/// The features stage from descriptors made elsewhere in `foreign`: `per_image` of each photo's
/// rows, drawn from the seed (on this process).
fn foreign_sample(
    settings: &FeatureSettings,
    collection: &Collection,
    foreign: &Foreign,
    ui: &Ui,
    out: &mut dyn Write,
) -> anyhow::Result<FeatureSummary> {
    let started = Instant::now();
    let Sampling::Random { per_image, seed } = settings.params.sampling else {
        anyhow::bail!(
            "--from {}: the sample is random rows (--per-image)",
            foreign.dir.display()
        );
    };
    let bar = ui.bar(collection.photos().len() as u64, "features");
    let progress = |p: features::Progress| bar.set_position(p.images as u64);
    forget_rounds(&settings.out)?;
    let file = (settings.out.as_path(), settings.format);
    let (summary, dims) =
        descriptors::sample(collection, foreign, (per_image, seed), file, &progress)?;
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    foreign_line(out, &summary, (dims, &foreign.dir), secs)?;
    writeln!(
        out,
        "  wrote {} ({}, {per_image} rows a photo at most, seed {seed})",
        settings.out.display(),
        settings.format.name()
    )?;
    crate::tables::how_to_read(out, &settings.out, settings.format)?;
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok(summary)
}

/// The descriptors made elsewhere in `from`, for a photo stage on `on`: the folder made
/// absolute when other nodes read it too (as the photo folder is, [`open_collection`]).
pub(crate) fn foreign_of(from: &Path, on: On<'_>) -> anyhow::Result<Foreign> {
    let foreign = Foreign::new(from)?;
    if !on.engine.distributed() {
        return Ok(foreign);
    }
    let dir = std::fs::canonicalize(from)
        .with_context(|| format!("cannot resolve {}", from.display()))?;
    Ok(Foreign::new(&dir)?)
}

/// The line naming the skipped photos' manifest, when there are any.
pub(crate) fn skipped_line(
    out: &mut dyn Write,
    skipped: usize,
    file: &Path,
) -> std::io::Result<()> {
    if skipped > 0 {
        writeln!(
            out,
            "  {skipped} photos skipped, reasons in {}",
            manifest_path(file, "skipped.csv").display()
        )?;
    }
    Ok(())
}

/// `vocab convert`.
pub fn convert(args: &ConvertArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let to = args.format.unwrap_or_else(|| Format::for_path(&args.out));
    crate::settings::output("out", &args.out)
        .and_then(|()| {
            let inputs = [("input", args.input.as_path())];
            crate::settings::apart("out", &args.out, crate::settings::Kind::File, &inputs)
        })
        .or_flag()?;
    let from = Format::detect(&args.input)?;
    let (count, what) = if args.vocabulary {
        let centroids = vocab_pipeline::kmeans::files::read_vocabulary(&args.input)?;
        vocab_pipeline::kmeans::files::write_vocabulary(&args.out, &centroids, to)?;
        (centroids.k() as u64, "centroids")
    } else {
        let count = store::convert(&args.input, &args.out, to).map_err(|e| {
            let hint = if from == Format::Text {
                " (a vocabulary in text, one centroid a line? add --vocabulary)"
            } else {
                ""
            };
            // The whole chain: an I/O error's reason (no space left, ...) is its source.
            anyhow::anyhow!("{}{hint}", vocab_pipeline::chain(&e))
        })?;
        (count, "records")
    };
    println!(
        "convert: {count} {what} {} ({}) -> {} ({}) in {:.2} s",
        args.input.display(),
        from.name(),
        args.out.display(),
        to.name(),
        started.elapsed().as_secs_f64()
    );
    crate::tables::how_to_read(&mut std::io::stdout(), &args.out, to)?;
    // (CSV keeps positions only under a picture_id,row,col header; vocab's formats always.)
    if !args.vocabulary && matches!(from, Format::Bin | Format::Text) && !to.keeps_positions() {
        println!(
            "  {} holds bare vectors: picture ids, rows and columns are left out (keep them: \
             .csv, .txt or vocab's binary format)",
            to.name()
        );
    }
    Ok(())
}

/// `vocab datasets scene15`: the unpacked 15-Scene folders as a dataset folder.
pub fn scene15(args: &crate::cli::Scene15Args) -> anyhow::Result<()> {
    crate::settings::new_folder("out", &args.out, &[("from", args.from.as_path())]).or_flag()?;
    let made = vocab_pipeline::scene15::prepare(&args.from, &args.out)?;
    let total: usize = made.counts.iter().sum();
    println!(
        "datasets scene15: {total} photos of 15 classes in {} (labels {})",
        args.out.display(),
        made.labels.display()
    );
    if !made.differences.is_empty() {
        println!(
            "  not the published set's counts (4,485 photos; a subset is fine): {}",
            made.differences.join("; ")
        );
    }
    Ok(())
}

/// `vocab datasets photos`.
pub fn photos(args: &PhotoSetSettings, out: &mut dyn Write) -> anyhow::Result<()> {
    let summary = synth::generate_photos(&args.out, args.per_kind, args.seed)?;
    writeln!(
        out,
        "datasets photos: {} photos of {} kinds in {} (labels {})",
        summary.photos,
        synth::KINDS.len(),
        args.out.display(),
        summary.labels.display()
    )?;
    Ok(())
}
