//! The stages as the binary runs them: validated settings in, outputs and a summary out.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::features::{self, FeatureParams, FeatureSummary, manifest_path};
use vocab_pipeline::hog::{DESCRIPTOR_NAME, PATCH_SIDE};
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::store::{self, Format};
use vocab_pipeline::synth;

use crate::cli::{ConvertArgs, EncodeArgs, FeaturesArgs, FileFormat, Mode, NormArg, PhotosArgs};
use crate::progress::Ui;

/// Validated settings of the features stage.
#[derive(Debug, Clone)]
pub struct FeatureSettings {
    /// Photo folder.
    pub input: PathBuf,
    /// Optional labels CSV restricting the photos.
    pub labels: Option<PathBuf>,
    /// Feature file.
    pub out: PathBuf,
    /// Output format.
    pub format: Format,
    /// Sampling and decoding parameters.
    pub params: FeatureParams,
}

impl FeatureSettings {
    /// Checks the command-line arguments.
    pub fn from_args(args: &FeaturesArgs) -> anyhow::Result<Self> {
        Self::new(
            &args.input,
            args.labels.as_deref(),
            &args.out,
            args.format,
            args.mode,
            args.per_image,
            args.stride,
            args.seed,
            args.max_side,
            args.max_pixels,
        )
    }

    /// Checks settings from any source; errors name the offending option.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: &Path,
        labels: Option<&Path>,
        out: &Path,
        format: Option<FileFormat>,
        mode: Mode,
        per_image: usize,
        stride: usize,
        seed: u64,
        max_side: Option<usize>,
        max_mpix: u64,
    ) -> anyhow::Result<Self> {
        let max_pixels = max_mpix
            .checked_mul(1_000_000)
            .filter(|&p| p > 0)
            .with_context(|| format!("--max-pixels {max_mpix}: 1 or more megapixels"))?;
        let sampling = match mode {
            Mode::Random => {
                ensure!(per_image > 0, "--per-image must be at least 1");
                ensure!(
                    per_image <= vocab_pipeline::patch::MAX_PER_IMAGE,
                    "--per-image {per_image}: at most {} patches per photo",
                    vocab_pipeline::patch::MAX_PER_IMAGE
                );
                Sampling::Random { per_image, seed }
            }
            Mode::Dense => {
                ensure!(stride > 0, "--stride must be at least 1 pixel");
                Sampling::Dense { stride }
            }
        };
        if let Some(side) = max_side {
            ensure!(
                side >= PATCH_SIDE,
                "--max-side {side} is smaller than a {PATCH_SIDE}x{PATCH_SIDE} patch"
            );
        }
        Ok(Self {
            input: input.to_path_buf(),
            labels: labels.map(Path::to_path_buf),
            out: out.to_path_buf(),
            format: format.map_or_else(|| format_for(out), Format::from),
            params: FeatureParams {
                sampling,
                max_side,
                max_pixels,
            },
        })
    }
}

/// Text for `.txt`/`.text` files, binary otherwise.
pub fn format_for(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("txt") || ext.eq_ignore_ascii_case("text") => {
            Format::Text
        }
        _ => Format::Bin,
    }
}

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

/// Runs the features stage and prints its summary.
pub fn features(settings: &FeatureSettings, ui: &Ui) -> anyhow::Result<FeatureSummary> {
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
                "{} patches, {:.0} patches/s",
                p.patches,
                p.patches as f64 / secs
            ));
        },
    )
    .with_context(|| format!("features stage writing {}", settings.out.display()))?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "features: {} photos described, {} skipped, {} patches in {:.2} s ({:.0} photos/s, {:.0} patches/s, {:.1} Mpix/s)",
        summary.images,
        summary.skipped,
        summary.patches,
        secs,
        summary.images as f64 / secs,
        summary.patches as f64 / secs,
        summary.pixels as f64 / secs / 1e6,
    );
    println!(
        "  wrote {} ({}, {DESCRIPTOR_NAME}, {})",
        settings.out.display(),
        match settings.format {
            Format::Text => "text",
            Format::Bin => "bin",
        },
        describe_sampling(&settings.params.sampling),
    );
    println!(
        "  manifest {}",
        manifest_path(&settings.out, "images.csv").display()
    );
    if summary.skipped > 0 {
        println!(
            "  {} photos skipped, reasons in {}",
            summary.skipped,
            manifest_path(&settings.out, "skipped.csv").display()
        );
    }
    Ok(summary)
}

/// Soft assignment from `--soft N --sharpness S` (`N = 0`: none).
pub fn soft_of(
    words: usize,
    sharpness: f32,
) -> anyhow::Result<Option<vocab_pipeline::encode::Soft>> {
    match words {
        0 => Ok(None),
        1 => bail!("--soft 1 is the nearest word alone: use 2 or more words, or 0"),
        w if w > 64 => bail!("--soft {w}: at most 64 words per patch"),
        w => {
            ensure!(
                sharpness.is_finite() && sharpness > 0.0,
                "--sharpness {sharpness}: a positive number"
            );
            Ok(Some(vocab_pipeline::encode::Soft {
                words: w,
                sharpness,
            }))
        }
    }
}

/// `vocab encode`.
pub fn encode(args: &EncodeArgs, ui: &Ui) -> anyhow::Result<()> {
    use vocab_pipeline::encode::{self, EncodeParams, Norm};
    ensure!(args.stride > 0, "--stride must be at least 1 pixel");
    ensure!(
        (1..=5).contains(&args.pyramid),
        "--pyramid must be 1 to 5 levels"
    );
    if let Some(side) = args.max_side {
        ensure!(
            side >= PATCH_SIDE,
            "--max-side {side} is smaller than a {PATCH_SIDE}x{PATCH_SIDE} patch"
        );
    }
    let started = Instant::now();
    let vocabulary = read_word_vocabulary(&args.vocabulary)
        .with_context(|| format!("--vocabulary {}", args.vocabulary.display()))?;
    let collection = Collection::open(&args.input, args.labels.as_deref())?;
    if collection.photos().is_empty() {
        bail!("no photos found in {}", args.input.display());
    }
    let params = EncodeParams {
        features: FeatureParams {
            sampling: Sampling::Dense {
                stride: args.stride,
            },
            max_side: args.max_side,
            max_pixels: args
                .max_pixels
                .checked_mul(1_000_000)
                .filter(|&p| p > 0)
                .with_context(|| {
                    format!("--max-pixels {}: 1 or more megapixels", args.max_pixels)
                })?,
        },
        norm: match args.norm {
            NormArg::L1 => Norm::L1,
            NormArg::Hellinger => Norm::Hellinger,
        },
        levels: args.pyramid,
        soft: soft_of(args.soft, args.sharpness)?,
    };
    let bar = ui.bar(collection.photos().len() as u64, "encode");
    let summary = encode::encode(&collection, &vocabulary, &params, &args.out, &|p| {
        bar.set_position(p.images as u64);
        bar.set_message(format!("{} patches", p.patches));
    })
    .with_context(|| format!("encode stage writing {}", args.out.display()))?;
    bar.finish_and_clear();
    let vocabulary_path =
        std::fs::canonicalize(&args.vocabulary).unwrap_or_else(|_| args.vocabulary.clone());
    let encoding = encode::Encoding {
        vocabulary: vocabulary_path.display().to_string(),
        k: vocabulary.k(),
        stride: args.stride,
        norm: match args.norm {
            NormArg::L1 => "l1".into(),
            NormArg::Hellinger => "hellinger".into(),
        },
        pyramid: args.pyramid,
        max_side: args.max_side,
        soft: params.soft,
    };
    let encoding_path = manifest_path(&args.out, "encoding.json");
    vocab_pipeline::atomic::write(
        &encoding_path,
        serde_json::to_string_pretty(&encoding)?.as_bytes(),
    )
    .with_context(|| format!("cannot write {}", encoding_path.display()))?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "encode: {} photos encoded, {} skipped, {} patches over {} words in {secs:.2} s ({:.0} patches/s); {} values per photo",
        summary.images,
        summary.skipped,
        summary.patches,
        vocabulary.k(),
        summary.patches as f64 / secs,
        encode::encoded_len(vocabulary.k(), args.pyramid),
    );
    println!(
        "  wrote {} and {}",
        args.out.display(),
        manifest_path(&args.out, "images.csv").display()
    );
    if summary.skipped > 0 {
        println!(
            "  {} photos skipped, reasons in {}",
            summary.skipped,
            manifest_path(&args.out, "skipped.csv").display()
        );
    }
    Ok(())
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
pub fn photos(args: &PhotosArgs) -> anyhow::Result<()> {
    ensure!(args.per_kind > 0, "--per-kind must be at least 1");
    let summary = synth::generate_photos(&args.out, args.per_kind, args.seed)?;
    println!(
        "datasets photos: {} photos of {} kinds in {} (labels {})",
        summary.photos,
        synth::KINDS.len(),
        args.out.display(),
        summary.labels.display()
    );
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
