//! The stages as the binary runs them: validated settings in, outputs and a summary out.

use std::path::Path;
use std::time::Instant;

use std::io::Write;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::encode::{self, Encoding};
use vocab_pipeline::features::{self, FeatureSummary, manifest_path};
use vocab_pipeline::hog::DESCRIPTOR_NAME;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::store::{self, Format};
use vocab_pipeline::synth;

use crate::cli::{ConvertArgs, NormArg};
use crate::progress::Ui;
use crate::settings::{EncodeSettings, FeatureSettings, PhotoSetSettings};

fn describe_sampling(s: &Sampling) -> String {
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

/// Runs the features stage and reports it to `out`.
pub fn features(
    settings: &FeatureSettings,
    ui: &Ui,
    out: &mut dyn Write,
) -> anyhow::Result<FeatureSummary> {
    let started = Instant::now();
    let collection = Collection::open(&settings.input, settings.labels.as_deref())?;
    if collection.photos().is_empty() {
        bail!("no photos found in {}", settings.input.display());
    }
    let bar = ui.bar(collection.photos().len() as u64, "features");
    let summary = features::extract(
        &collection,
        &settings.params,
        &settings.out,
        settings.format,
        &|p| {
            bar.set_position(p.images as u64);
            let secs = bar.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "{} patches, {:.0}/s",
                p.patches,
                p.patches as f64 / secs
            ));
        },
    )?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64().max(1e-9);
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
    writeln!(
        out,
        "  wrote {} ({}, {DESCRIPTOR_NAME}, {})",
        settings.out.display(),
        match settings.format {
            Format::Text => "text",
            Format::Bin => "bin",
        },
        describe_sampling(&settings.params.sampling),
    )?;
    writeln!(
        out,
        "  manifest {}",
        manifest_path(&settings.out, "images.csv").display()
    )?;
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok(summary)
}

/// The line naming the skipped photos' manifest, when there are any.
fn skipped_line(out: &mut dyn Write, skipped: usize, file: &Path) -> std::io::Result<()> {
    if skipped > 0 {
        writeln!(
            out,
            "  {skipped} photos skipped, reasons in {}",
            manifest_path(file, "skipped.csv").display()
        )?;
    }
    Ok(())
}

/// Runs the encode stage and reports it to `out`.
pub fn encode(
    settings: &EncodeSettings,
    ui: &Ui,
    out: &mut dyn Write,
) -> anyhow::Result<FeatureSummary> {
    let started = Instant::now();
    let vocabulary = read_word_vocabulary(&settings.vocabulary)?;
    let collection = Collection::open(&settings.input, settings.labels.as_deref())?;
    if collection.photos().is_empty() {
        bail!("no photos found in {}", settings.input.display());
    }
    let bar = ui.bar(collection.photos().len() as u64, "encode");
    let summary = encode::encode(
        &collection,
        &vocabulary,
        &settings.params,
        &settings.out,
        &|p| {
            bar.set_position(p.images as u64);
            bar.set_message(format!("{} patches", p.patches));
        },
    )?;
    bar.finish_and_clear();
    let o = &settings.options;
    let encoding = Encoding {
        vocabulary: std::fs::canonicalize(&settings.vocabulary)
            .unwrap_or_else(|_| settings.vocabulary.clone())
            .display()
            .to_string(),
        k: vocabulary.k(),
        stride: o.stride,
        norm: match o.norm {
            NormArg::L1 => "l1".into(),
            NormArg::Hellinger => "hellinger".into(),
        },
        pyramid: o.pyramid,
        max_side: o.max_side,
        soft: settings.params.soft,
        kernel: settings.params.kernel,
        scales: settings.params.scales.clone(),
    };
    let encoding_path = manifest_path(&settings.out, "encoding.json");
    vocab_pipeline::atomic::write(
        &encoding_path,
        serde_json::to_string_pretty(&encoding)?.as_bytes(),
    )
    .with_context(|| format!("cannot write {}", encoding_path.display()))?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    writeln!(
        out,
        "encode: {} photos, {} skipped, {} patches over {} words in {secs:.1} s ({:.0} photos/s); {} values each",
        summary.images,
        summary.skipped,
        summary.patches,
        vocabulary.k(),
        summary.images as f64 / secs,
        encode::encoded_len(vocabulary.k(), o.pyramid),
    )?;
    writeln!(
        out,
        "  wrote {} and {}",
        settings.out.display(),
        manifest_path(&settings.out, "images.csv").display()
    )?;
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok(summary)
}

/// `vocab convert`.
pub fn convert(args: &ConvertArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let from = Format::detect(&args.input)?;
    let to = args.format.map_or(
        match from {
            Format::Text => Format::Bin,
            Format::Bin => Format::Text,
        },
        Format::from,
    );
    let count = store::convert(&args.input, &args.out, to)?;
    println!(
        "convert: {count} records {} -> {} in {:.2} s",
        args.input.display(),
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
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

/// Reads a vocabulary for encoding HOG patches: its words must have the descriptor's dims (the
/// error names the vocabulary, not the histograms being written).
pub fn read_word_vocabulary(path: &Path) -> anyhow::Result<vocab_pipeline::kmeans::Centroids> {
    let vocabulary = vocab_pipeline::kmeans::files::read_vocabulary(path)?;
    ensure!(
        vocabulary.dims() == vocab_pipeline::hog::DIMS,
        "{}: words of {} dims, the HOG descriptor has {}",
        path.display(),
        vocabulary.dims(),
        vocab_pipeline::hog::DIMS
    );
    Ok(vocabulary)
}
