//! `vocab classify`: new photos encoded as the model's training photos were, then labelled.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::classify::{ModelFile, read_histograms};
use vocab_pipeline::descriptors::Foreign;
use vocab_pipeline::encode;
use vocab_pipeline::features::{Descriptor, manifest_path};
use vocab_pipeline::image_io::Collection;

use super::records::same_words;
use crate::progress::Ui;
use crate::settings::ClassifySettings;

/// What the model's photos were described by, in messages: "HOG patches", "SIFT keypoints"
/// (each part's, joined by "and").
fn described(enc: &vocab_pipeline::encode::Encoding) -> String {
    let names: Vec<&str> = enc
        .parts()
        .map(|p| match p.params().features.descriptor {
            Descriptor::Hog => "HOG patches",
            Descriptor::Sift => "SIFT keypoints",
        })
        .collect();
    names.join(" and ")
}

/// The photos of `collection` encoded into `hist` as the model's part `part` was (its own
/// vocabulary, checked by digest; descriptors made elsewhere from `foreign`).
fn encode_part(
    args: &ClassifySettings,
    part: &vocab_pipeline::encode::Encoding,
    (collection, foreign): (&Collection, Option<&Foreign>),
    hist: &Path,
    ui: &Ui,
) -> anyhow::Result<vocab_pipeline::features::FeatureSummary> {
    let words = Path::new(part.vocabulary());
    same_words(part, words, &format!("model {}", args.model.display()))?;
    let vocabulary = crate::encode_cmd::read_words(words, part.params(), None)
        .with_context(|| format!("the model's vocabulary {}", part.vocabulary()))?;
    ensure!(
        vocabulary.k() == part.k(),
        "the model's vocabulary {} holds {} words, the model was trained on {}",
        part.vocabulary(),
        vocabulary.k(),
        part.k()
    );
    let params = part.params();
    let bar = ui.bar(collection.photos().len() as u64, "classify");
    let progress = |p: vocab_pipeline::features::Progress| bar.set_position(p.images as u64);
    let summary = match (foreign, params.foreign) {
        (_, false) => encode::encode(collection, &vocabulary, params, hist, &progress)?,
        (Some(foreign), true) => {
            encode::encode_foreign(collection, &vocabulary, params, foreign, hist, &progress)?
        }
        (None, true) => bail!(
            "model {} was trained on descriptors made elsewhere ({} values): give the photos' \
             own with --from DIR",
            args.model.display(),
            params.dims
        ),
    };
    bar.finish();
    Ok(summary)
}

/// `vocab classify`: encodes new photos as the model's training data was encoded, then predicts.
pub fn classify(args: &ClassifySettings, ui: &Ui) -> anyhow::Result<()> {
    let model = ModelFile::load(&args.model)?;
    let enc = model.encoding.clone().with_context(|| {
        format!(
            "model {} records no encoding (train it on histograms from vocab encode)",
            args.model.display()
        )
    })?;
    // The model's encoding was checked by the rules of vocab encode when it was read. Its
    // vocabularies are inputs like those on the command line: nothing this command writes
    // may replace them.
    for part in enc.parts() {
        let words = Path::new(part.vocabulary());
        let name = format!("the model's vocabulary {}", words.display());
        vocab_pipeline::output::protect(name, words);
    }
    vocab_pipeline::output::claim(&args.out)?;
    let collection = Collection::open(&args.input, None)?;
    let tmp = tempfile::tempdir().context("cannot create a temporary folder")?;
    // A model of descriptors made elsewhere scores the photos' own, from --from.
    let foreign = args.from.as_deref().map(Foreign::new).transpose()?;
    if let Some(foreign) = &foreign
        && !enc.parts().any(|p| p.params().foreign)
    {
        bail!(
            "--from {}: model {} was trained on {}, which vocab describes itself",
            foreign.dir.display(),
            args.model.display(),
            described(&enc)
        );
    }
    // A part of descriptors made elsewhere needs their folder: said before any photo is read.
    if foreign.is_none()
        && let Some(part) = enc.parts().find(|p| p.params().foreign)
    {
        bail!(
            "model {} was trained on descriptors made elsewhere ({} values): give the photos' \
             own with --from DIR",
            args.model.display(),
            part.params().dims
        );
    }
    let mut parts = Vec::new();
    for (i, part) in enc.parts().enumerate() {
        let hist = tmp.path().join(format!("part-{i}.bin"));
        let summary = encode_part(args, part, (&collection, foreign.as_ref()), &hist, ui)?;
        parts.push((hist, part.alone(), summary));
    }
    let (hist, summary) = match parts.as_slice() {
        [(hist, _, summary)] => (hist.clone(), *summary),
        _ => {
            let hist = tmp.path().join("joined.bin");
            let records: Vec<(&Path, _)> = (parts.iter())
                .map(|(h, e, _)| (h.as_path(), e.clone()))
                .collect();
            let (summary, _) = vocab_pipeline::join::join(&records, &hist, &|_| {})?;
            (hist, summary)
        }
    };
    let table = read_histograms(&hist)?;
    if let Some(row) = table.rows.first() {
        model.check_len(row.len(), &args.model)?;
    }
    // Real CSV: paths and class names are quoted when they hold commas, quotes or newlines. The
    // score is the decision value that chose the class (its margin from the boundary).
    let mut rows = csv::Writer::from_writer(Vec::new());
    rows.write_record(["picture_id", "path", model.attribute.as_str(), "score"])?;
    for ((id, path), row) in table.ids.iter().zip(&table.paths).zip(&table.rows) {
        let (class, score) = model.scored(row);
        let class = &model.classifier.classes[class];
        rows.write_record([&id.to_string(), path, class, &score.to_string()])?;
    }
    let rows = rows.into_inner().context("cannot format the labels")?;
    // The photos not labelled, with why, beside the labels (as encode writes them).
    let skipped_from = vocab_pipeline::features::manifest_path(&hist, "skipped.csv");
    let skipped = manifest_path(&args.out, "skipped.csv");
    let reasons = std::fs::read(&skipped_from)
        .with_context(|| format!("cannot read {}", skipped_from.display()))?;
    vocab_pipeline::atomic::write(&skipped, &reasons)
        .with_context(|| format!("cannot write {}", skipped.display()))?;
    vocab_pipeline::atomic::write(&args.out, &rows)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "classify: {} photos labelled ({} skipped, reasons in {}) by {:?} -> {}",
        summary.images,
        summary.skipped,
        skipped.display(),
        model.attribute,
        args.out.display()
    );
    Ok(())
}
