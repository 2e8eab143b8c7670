//! `vocab classify`: new photos encoded as the model's training photos were, then labelled.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::classify::{ModelFile, read_histograms};
use vocab_pipeline::descriptors::Foreign;
use vocab_pipeline::encode;
use vocab_pipeline::features::manifest_path;
use vocab_pipeline::image_io::Collection;

use super::records::same_words;
use crate::progress::Ui;
use crate::settings::ClassifySettings;

/// `vocab classify`: encodes new photos as the model's training data was encoded, then predicts.
pub fn classify(args: &ClassifySettings, ui: &Ui) -> anyhow::Result<()> {
    let model = ModelFile::load(&args.model)?;
    let enc = model.encoding.clone().with_context(|| {
        format!(
            "model {} records no encoding (train it on histograms from vocab encode)",
            args.model.display()
        )
    })?;
    // The model's encoding was checked by the rules of vocab encode when it was read.
    let words = Path::new(enc.vocabulary());
    // An input like those on the command line: nothing this command writes may replace it.
    vocab_pipeline::output::protect(format!("the model's vocabulary {}", words.display()), words);
    vocab_pipeline::output::claim(&args.out)?;
    same_words(&enc, words, &format!("model {}", args.model.display()))?;
    let vocabulary = crate::encode_cmd::read_words(words, enc.params(), None)
        .with_context(|| format!("the model's vocabulary {}", enc.vocabulary()))?;
    ensure!(
        vocabulary.k() == enc.k(),
        "the model's vocabulary {} holds {} words, the model was trained on {}",
        enc.vocabulary(),
        vocabulary.k(),
        enc.k()
    );
    let collection = Collection::open(&args.input, None)?;
    let params = enc.params();
    let tmp = tempfile::tempdir().context("cannot create a temporary folder")?;
    let hist = tmp.path().join("histograms.bin");
    let bar = ui.bar(collection.photos().len() as u64, "classify");
    let progress = |p: vocab_pipeline::features::Progress| bar.set_position(p.images as u64);
    // A model of descriptors made elsewhere scores the photos' own, from --from.
    let foreign = args.from.as_deref().map(Foreign::new).transpose()?;
    let summary = match (&foreign, !params.foreign) {
        (None, true) => encode::encode(&collection, &vocabulary, params, &hist, &progress)?,
        (Some(foreign), false) => {
            encode::encode_foreign(&collection, &vocabulary, params, foreign, &hist, &progress)?
        }
        (None, false) => bail!(
            "model {} was trained on descriptors made elsewhere ({} values): give the photos' \
             own with --from DIR",
            args.model.display(),
            params.dims
        ),
        (Some(foreign), true) => bail!(
            "--from {}: model {} was trained on HOG patches, which vocab describes itself",
            foreign.dir.display(),
            args.model.display()
        ),
    };
    bar.finish();
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
