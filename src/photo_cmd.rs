//! The stages as the binary runs them: validated settings in, outputs and a summary out.

use std::path::Path;
use std::time::Instant;

use std::io::Write;

use anyhow::{Context, ensure};
use vocab_pipeline::encode::fisher::FisherModel;
use vocab_pipeline::encode::{self, EncodeParams, Encoding, Words};
use vocab_pipeline::features::{self, FeatureSummary, manifest_path};
use vocab_pipeline::hog::DESCRIPTOR_NAME;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::store::{self, Format};
use vocab_pipeline::synth;

use crate::cli::ConvertArgs;
use crate::progress::Ui;
use crate::settings::{EncodeSettings, FeatureSettings, OrFlag, PhotoSetSettings};
use crate::sharded::On;
use vocab_cluster::jobs::photos::PhotoStage;

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

/// The photos of a photo stage: the folder made absolute when other nodes read it too.
fn open_collection(input: &Path, labels: Option<&Path>, on: On<'_>) -> anyhow::Result<Collection> {
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
fn forget_rounds(file: &Path) -> anyhow::Result<()> {
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
    let (summary, spread) = if let Some(born) = born {
        let (summary, spread, at) =
            crate::sharded::born(on, &collection, settings.params, file, born, &progress)?;
        placed = Some(at);
        (summary, Some(spread))
    } else if on.engine.distributed() {
        let (summary, spread) = crate::sharded::run(
            on,
            &collection,
            PhotoStage::Features(settings.params),
            None,
            file,
            &mut |source| features::extract_from(&collection, file, format, source, &progress),
        )?;
        (summary, Some(spread))
    } else {
        forget_rounds(file)?;
        let summary = features::extract(&collection, &settings.params, file, format, &progress)?;
        (summary, None)
    };
    bar.finish();
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
    match (&placed, born) {
        (Some(crate::sharded::Placed { manifest: m, .. }), Some(born)) => writeln!(
            out,
            "  kept at the nodes as {} partitions in {} ({DESCRIPTOR_NAME}, {}; the sample was \
             not gathered here)",
            m.partitions.len(),
            born.dir.display(),
            describe_sampling(&settings.params.sampling),
        )?,
        _ => {
            writeln!(
                out,
                "  wrote {} ({}, {DESCRIPTOR_NAME}, {})",
                settings.out.display(),
                settings.format.name(),
                describe_sampling(&settings.params.sampling),
            )?;
            crate::tables::how_to_read(out, &settings.out, settings.format)?;
        }
    }
    writeln!(
        out,
        "  manifest {}",
        manifest_path(&settings.out, "images.csv").display()
    )?;
    if let Some(spread) = spread {
        spread.write(out)?;
    }
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok((summary, placed))
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

/// Runs the encode stage (here, or sharded over the nodes of `on`) and reports it to `out`.
pub fn encode(
    settings: &EncodeSettings,
    ui: &Ui,
    on: On<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<FeatureSummary> {
    let started = Instant::now();
    // The record binds the histograms to the vocabulary's bytes, not to its path: a mixture's
    // digest is of the bytes the settings read it from; a vocabulary's is taken before its words
    // are read, so a file changed meanwhile is one the record does not match.
    let (digest, mixture) = match &settings.mixture {
        Some((file, digest)) => (digest.clone(), Some(file)),
        None => {
            let digest = vocab_pipeline::input::digest(&settings.vocabulary)
                .with_context(|| format!("cannot read {}", settings.vocabulary.display()))?;
            (digest, None)
        }
    };
    let vocabulary = read_words(&settings.vocabulary, &settings.params, mixture)?;
    vocabulary_rules(settings, &vocabulary)?;
    let collection = open_collection(&settings.input, settings.labels.as_deref(), on)?;
    let bar = ui.bar(collection.photos().len() as u64, "encode");
    let progress = |p: features::Progress| {
        bar.set_position(p.images as u64);
        if let Some(patches) = p.patches {
            bar.set_message(format!("{patches} patches"));
        }
    };
    let file = &settings.out;
    let (summary, spread) = if on.engine.distributed() {
        // The workers quantise the vocabulary; the driver only writes histograms.
        let stage = PhotoStage::Encode(settings.params.clone());
        let len = stage.histogram_len(vocabulary.k());
        let (summary, spread) = crate::sharded::run(
            on,
            &collection,
            stage,
            Some(&vocabulary),
            file,
            &mut |source| encode::encode_from(&collection, len, file, source, &progress),
        )
        .with_context(|| over(&settings.vocabulary))?;
        (summary, Some(spread))
    } else {
        forget_rounds(file)?;
        let params = &settings.params;
        let summary = encode::encode(&collection, &vocabulary, params, file, &progress)
            .with_context(|| over(&settings.vocabulary))?;
        (summary, None)
    };
    bar.finish();
    write_encoding(settings, &vocabulary, digest)?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    writeln!(
        out,
        "encode: {} photos{}, {} skipped, {} patches over {} {} in {secs:.1} s ({:.0} photos/s); {} values each",
        summary.images,
        if settings.params.features.mirror {
            " mirrored"
        } else {
            ""
        },
        summary.skipped,
        summary.patches,
        vocabulary.k(),
        if vocabulary.centroids().is_some() {
            "words"
        } else {
            "Gaussians"
        },
        summary.images as f64 / secs,
        settings.params.len(vocabulary.k()),
    )?;
    writeln!(
        out,
        "  wrote {} and {}",
        settings.out.display(),
        manifest_path(&settings.out, "images.csv").display()
    )?;
    if let Some(spread) = spread {
        spread.write(out)?;
    }
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok(summary)
}

/// The rules of `settings` that need the vocabulary's size, checked before any photo is read:
/// the encoding's own, and a vector that fits a line of the text format when `--out` is text.
fn vocabulary_rules(settings: &EncodeSettings, vocabulary: &Words) -> anyhow::Result<()> {
    if let Err(e) = settings.params.check(Some(vocabulary.k())) {
        use vocab_pipeline::params::Broken as _;
        anyhow::bail!(
            "--{} {}: {} (the vocabulary {} has {} words)",
            e.key(),
            e.value(),
            e.rule(),
            settings.vocabulary.display(),
            vocabulary.k()
        );
    }
    // A text line holds at most MAX_LINE_BYTES, some 16 bytes a value at worst: a longer
    // vector would be written and then never read back.
    let values = settings.params.len(vocabulary.k());
    let widest = values.saturating_mul(16).saturating_add(32);
    if Format::for_path(&settings.out) == Format::Text && widest > store::MAX_LINE_BYTES {
        anyhow::bail!(
            "--out {}: {values} values a photo can make a text line longer than the {} bytes \
             the text format holds; write .bin, .npy or .fvecs",
            settings.out.display(),
            store::MAX_LINE_BYTES
        );
    }
    Ok(())
}

/// Writes the encoding's record beside the histograms (`encoding.json`): the vocabulary's path
/// (made absolute where it resolves), its size and `digest` (the SHA-256 of its bytes), and the
/// settings.
fn write_encoding(
    settings: &EncodeSettings,
    vocabulary: &Words,
    digest: String,
) -> anyhow::Result<()> {
    let vocabulary_path =
        std::fs::canonicalize(&settings.vocabulary).unwrap_or_else(|_| settings.vocabulary.clone());
    let encoding = Encoding::new(
        vocabulary_path.display().to_string(),
        vocabulary.k(),
        settings.params.clone(),
    )
    .with_context(|| format!("the vocabulary {}", settings.vocabulary.display()))?
    .with_digest(digest);
    let encoding_path = manifest_path(&settings.out, "encoding.json");
    vocab_pipeline::atomic::write(
        &encoding_path,
        serde_json::to_string_pretty(&encoding)?.as_bytes(),
    )
    .with_context(|| format!("cannot write {}", encoding_path.display()))?;
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

/// What an encode's error is said to be over: the file whose words (or mixture) made the values,
/// which is the one to look at when a value is not finite.
fn over(words: &Path) -> String {
    format!("encoding over {}", words.display())
}

/// Reads what HOG patches are encoded against for `params`: a vocabulary whose words have the
/// descriptor's dims, or for Fisher vectors a mixture over the HOG descriptor projected onto
/// the method's dims (the error names the file, not the histograms being written); `mixture`,
/// that file as the settings read it (read here when not given).
pub fn read_words(
    path: &Path,
    params: &EncodeParams,
    mixture: Option<&vocab_pipeline::mixture::MixtureFile>,
) -> anyhow::Result<Words> {
    let dims = vocab_pipeline::hog::DIMS;
    let Some(projected) = params.method.projected() else {
        let vocabulary = vocab_pipeline::kmeans::files::read_vocabulary(path).map_err(|e| {
            // A mixture given for words: say what it is for.
            match vocab_pipeline::mixture::MixtureFile::read(path) {
                Ok(_) => anyhow::anyhow!(
                    "{} is a mixture (vocab mixture): it encodes Fisher vectors, --method fisher",
                    path.display()
                ),
                Err(_) => e.into(),
            }
        })?;
        ensure!(
            vocabulary.dims() == dims,
            "{}: words of {} dims, the HOG descriptor has {dims}",
            path.display(),
            vocabulary.dims(),
        );
        return Ok(Words::Vocabulary(vocabulary));
    };
    let read;
    let file = match mixture {
        Some(file) => file,
        None => {
            read = vocab_pipeline::mixture::MixtureFile::read(path)?;
            &read
        }
    };
    let model = FisherModel::of(file).with_context(|| format!("the mixture {}", path.display()))?;
    ensure!(
        model.input_dims() == dims && model.dims() == projected,
        "{}: a mixture projecting {} dims onto {}, where the HOG descriptor's {dims} onto \
         {projected} are wanted",
        path.display(),
        model.input_dims(),
        model.dims(),
    );
    Ok(Words::Mixture(Box::new(model)))
}
