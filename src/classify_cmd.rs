//! `vocab train`, `vocab evaluate` and `vocab classify`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::classify::{
    MODEL_VERSION, ModelFile, SplitSpec, Table, labelled, read_histograms, read_labels,
};
use vocab_pipeline::encode::{self, Encoding, Norm};
use vocab_pipeline::features::manifest_path;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kernel_map::KernelMap;
use vocab_pipeline::svm::{Classifier, Labelled, Metrics, Rows, SvmParams, choose_c, metrics};

use crate::progress::Ui;
use crate::settings::{ClassifySettings, EvaluateSettings, Split, TrainSettings};
use crate::tables;

/// C values tried by cross-validation (the scale of scikit-learn's usual grid).
pub(crate) const C_GRID: [f64; 5] = [0.01, 0.1, 1.0, 10.0, 100.0];

/// The encoding recorded beside a histogram file, if any.
pub fn read_encoding(histograms: &Path) -> anyhow::Result<Option<Encoding>> {
    let path = manifest_path(histograms, "encoding.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = vocab_pipeline::input::read_text(&path, vocab_pipeline::input::MAX_ENCODING_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Nothing a file says is trusted: a record is read back checked by the rules of vocab encode.
    let encoding: Encoding =
        serde_json::from_str(&text).with_context(|| format!("invalid {}", path.display()))?;
    Ok(Some(encoding))
}

/// The vocabulary at `words` is the one `enc` was made over, by the SHA-256 of its bytes (a
/// record from before digests were kept is taken at its path's word). `whose` names the record:
/// `model m.json`.
fn same_words(enc: &Encoding, words: &Path, whose: &str) -> anyhow::Result<()> {
    let Some(recorded) = enc.digest() else {
        return Ok(());
    };
    let now = vocab_pipeline::input::digest(words)
        .with_context(|| format!("cannot read the vocabulary {}", words.display()))?;
    ensure!(
        now == recorded,
        "{whose} was made over another vocabulary than {} holds now (SHA-256 {} recorded, {} \
         now): the file was made again since; encode and train again over it, or give the \
         vocabulary it was made over",
        words.display(),
        &recorded[..12],
        &now[..12]
    );
    Ok(())
}

/// The histograms at `path` (their record `theirs`) were encoded over the vocabulary the model's
/// record `ours` names, by digest, with the same settings.
fn same_encoding(
    ours: &Encoding,
    theirs: &Encoding,
    model: &Path,
    path: &Path,
) -> anyhow::Result<()> {
    let record = manifest_path(path, "encoding.json");
    match (ours.digest(), theirs.digest()) {
        (Some(a), Some(b)) => ensure!(
            a == b,
            "--histograms {}: encoded over another vocabulary than model {} was trained over \
             (SHA-256 {} in {}, {} in the model); encode them over the model's vocabulary",
            path.display(),
            model.display(),
            &b[..12],
            record.display(),
            &a[..12]
        ),
        // A record without its digest beside one with it: refused, not compared by path (a
        // record's digest removed would bring the path's word back).
        (Some(_), None) | (None, Some(_)) => bail!(
            "--histograms {}: the record {} and model {} do not both carry their vocabulary's \
             SHA-256, so the histograms cannot be shown to be over the model's vocabulary; \
             encode them again with this build",
            path.display(),
            record.display(),
            model.display()
        ),
        // Records from before digests were kept: the vocabulary's path and size.
        (None, None) => ensure!(
            ours.vocabulary() == theirs.vocabulary() && ours.k() == theirs.k(),
            "--histograms {}: encoded over {} ({} words), model {} over {} ({} words)",
            path.display(),
            theirs.vocabulary(),
            theirs.k(),
            model.display(),
            ours.vocabulary(),
            ours.k()
        ),
    }
    ensure!(
        ours.params() == theirs.params(),
        "--histograms {}: encoded with other settings than model {} was trained on ({}); \
         encode them as the model's photos were",
        path.display(),
        model.display(),
        record.display()
    );
    Ok(())
}

/// `(row index, class index)` pairs of labelled photos.
type Pairs = Vec<(usize, usize)>;

/// Labelled rows of `table` split into (train, test) index lists of `(row, class)`.
fn split_rows(table: &Table, pairs: &[(usize, usize)], split: &SplitSpec) -> (Pairs, Pairs) {
    let paths: Vec<&str> = pairs
        .iter()
        .map(|&(i, _)| table.paths[i].as_str())
        .collect();
    let classes: Vec<usize> = pairs.iter().map(|&(_, c)| c).collect();
    let mut train = Vec::new();
    let mut test = Vec::new();
    for (&pair, is_train) in pairs.iter().zip(split.is_train(&paths, &classes)) {
        if is_train {
            train.push(pair)
        } else {
            test.push(pair)
        }
    }
    (train, test)
}

/// `vocab train`, reporting to `out`; a bar counts the fits (each fold at each C of the grid,
/// then the final model).
pub fn train(
    args: &TrainSettings,
    ui: &crate::progress::Ui,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let table = read_histograms(&args.histograms)?;
    let mirrored = (args.mirrored.as_deref())
        .map(|path| read_histograms(path).with_context(|| format!("--mirrored {}", path.display())))
        .transpose()?;
    train_on(args, (&table, mirrored.as_ref()), ui, out)
}

/// [`train`] on the histograms of `args.histograms` and `args.mirrored` already read (`vocab
/// run` reads them once for every attribute).
pub fn train_on(
    args: &TrainSettings,
    (table, mirror): (&Table, Option<&Table>),
    ui: &crate::progress::Ui,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let labels = read_labels(&args.labels, &args.attribute)?;
    let pairs = labelled(table, &labels);
    ensure!(
        !pairs.is_empty(),
        "no photo of {} has a label for {:?} in {}",
        args.histograms.display(),
        args.attribute,
        args.labels.display()
    );
    let split = match &args.split {
        Split::File(path) => SplitSpec::from_file(path)?,
        &Split::Holdout(holdout) => SplitSpec::Random {
            seed: args.split_seed,
            holdout,
        },
        Split::All => SplitSpec::All,
    };
    let (train, test) = split_rows(table, &pairs, &split);
    ensure!(!train.is_empty(), "the split leaves no training photos");
    let encoding = read_encoding(&args.histograms)?;
    let mirrored = match (&args.mirrored, mirror) {
        (Some(path), Some(mirror)) => Some(mirror_rows(
            (table, mirror),
            &train,
            encoding.as_ref(),
            args,
            path,
        )?),
        (Some(path), None) => bail!("--mirrored {}: not read", path.display()),
        (None, _) => None,
    };
    let kernel_map = match args.kernel_map.kernel() {
        None => None,
        Some(kernel) => {
            if let Some(enc) = encoding
                .as_ref()
                .filter(|e| e.params().method.pooling() != vocab_pipeline::encode::Pooling::Bow)
            {
                bail!(
                    "--kernel-map {}: the map takes histograms, and {} holds {} vectors (signed, \
                     already normalised for a linear SVM); drop the kernel map",
                    kernel.name(),
                    args.histograms.display(),
                    enc.params().method.pooling().name()
                );
            }
            if let Some(enc) = encoding.as_ref().filter(|e| e.params().norm != Norm::L1) {
                bail!(
                    "--kernel-map {}: the map takes L1-normalised histograms, and {} were \
                     encoded with --norm {} (itself a kernel map); encode with --norm l1",
                    kernel.name(),
                    args.histograms.display(),
                    enc.params().norm.name()
                );
            }
            Some(KernelMap::new(kernel, args.map_order).context("--map-order")?)
        }
    };
    // The solver's rows: the training photos', then their mirror images' (copies, in the same
    // folds); mapped straight from the histograms' non-zero bins (the dense mapped vectors never
    // exist), or as they are.
    let copies = mirrored.as_ref().map_or(0, Vec::len);
    let histograms: Vec<&[f32]> = (train.iter())
        .map(|&(i, _)| table.rows[i].as_slice())
        .chain(mirrored.iter().flatten().copied())
        .collect();
    let x = match &kernel_map {
        Some(map) => Rows::mapped(&histograms, map),
        None => Rows::from_dense(&histograms),
    };
    let y: Vec<usize> = (train.iter().map(|&(_, c)| c))
        .chain(train.iter().take(copies).map(|&(_, c)| c))
        .collect();
    let copy_of: Vec<usize> = (0..copies).collect();
    let data = Labelled::with_copies(&x, &y, &copy_of)?;
    let fits = match args.c {
        Some(_) => 1,
        None => args.cv.max(2) * C_GRID.len() + 1,
    };
    let bar = ui.bar(fits as u64, &args.attribute);
    let (c, cv_accuracy, start) = match args.c {
        Some(c) => (c, None, None),
        None => {
            let fitted = |fold: usize, c: f64| {
                bar.set_message(format!("fold {} of {}, C = {c}", fold + 1, args.cv.max(2)));
                bar.inc(1);
            };
            let chosen = choose_c(
                &data,
                &labels.classes,
                &C_GRID,
                args.cv,
                args.split_seed,
                args.solver,
                &fitted,
            )?;
            // The folds' duals at the chosen C start the fit on every training photo.
            (chosen.c, Some(chosen.accuracy), Some(chosen.start))
        }
    };
    bar.set_message(format!("the model, C = {c}"));
    let (classifier, _) = Classifier::fit_rows(
        &x,
        &y,
        &labels.classes,
        &SvmParams {
            c,
            seed: args.split_seed,
            solver: args.solver,
            ..SvmParams::default()
        },
        start.as_deref().filter(|s| !s.is_empty()),
    )?;
    bar.inc(1);
    let model = ModelFile {
        version: MODEL_VERSION,
        attribute: args.attribute.clone(),
        split,
        encoding,
        cv_accuracy,
        kernel_map,
        mirrored: mirrored.is_some(),
        classifier,
    };
    // A weight that is not finite (or a model too large to read back) is said to come from
    // the histograms it was trained on.
    model
        .save(&args.out)
        .with_context(|| format!("training on --histograms {}", args.histograms.display()))?;
    writeln!(
        out,
        "train: {:?} over classes {:?}: {} labelled photos, {} trained on{}, {} held out; {}C = {c}{} ({:.1} s)",
        args.attribute,
        labels.classes,
        pairs.len(),
        train.len(),
        if copies > 0 {
            format!(" (and their {copies} mirror images)")
        } else {
            String::new()
        },
        test.len(),
        kernel_map.map_or(String::new(), |m| format!(
            "{} kernel map of order {}, ",
            m.kernel.name(),
            m.order
        )),
        cv_accuracy.map_or(String::new(), |a| format!(
            " (cv accuracy {a:.4} over {} folds)",
            args.cv
        )),
        started.elapsed().as_secs_f64()
    )?;
    writeln!(out, "  wrote {}", args.out.display())?;
    Ok(())
}

/// The rows of `mirrored` (`vocab train --mirrored`) for the training photos `train` of
/// `table`, in their order: the same encoding of the photos mirrored when both files record one,
/// a row of the same length for every training photo (found by path).
fn mirror_rows<'m>(
    (table, mirror): (&Table, &'m Table),
    train: &[(usize, usize)],
    encoding: Option<&Encoding>,
    args: &TrainSettings,
    path: &Path,
) -> anyhow::Result<Vec<&'m [f32]>> {
    // Both records are needed: they are what says the rows are mirror images of the same
    // photos over the same vocabulary (by its digest), and vocab encode always writes them.
    let record = |histograms: &Path, flag: &str| {
        format!(
            "{flag} {}: has no record {} to show that --mirrored holds the mirror images of \
             --histograms' photos over the same vocabulary; give the histograms of vocab encode \
             (and of vocab encode --mirror) with their records",
            histograms.display(),
            manifest_path(histograms, "encoding.json").display()
        )
    };
    let ours = encoding.with_context(|| record(&args.histograms, "--histograms"))?;
    let theirs = read_encoding(path)?.with_context(|| record(path, "--mirrored"))?;
    ensure!(
        !ours.params().features.mirror,
        "--histograms {}: holds mirrored photos (vocab encode --mirror); give the photos as \
         they are, and their mirror images as --mirrored",
        args.histograms.display()
    );
    ensure!(
        theirs.params().features.mirror,
        "--mirrored {}: holds the photos as they are; give the histograms of `vocab encode \
         --mirror`",
        path.display()
    );
    {
        ensure!(
            theirs == ours.mirror_image(),
            "--mirrored {}: encoded otherwise than --histograms {} ({} against {}); encode both \
             with the same vocabulary and settings",
            path.display(),
            args.histograms.display(),
            manifest_path(path, "encoding.json").display(),
            manifest_path(&args.histograms, "encoding.json").display()
        );
    }
    let by_path: std::collections::HashMap<&str, usize> = (mirror.paths.iter())
        .enumerate()
        .map(|(i, p)| (p.as_str(), i))
        .collect();
    let len = table.rows.first().map_or(0, Vec::len);
    train
        .iter()
        .map(|&(i, _)| {
            let photo = &table.paths[i];
            let row = by_path.get(photo.as_str()).map(|&m| &mirror.rows[m]);
            let row = row.with_context(|| {
                format!(
                    "--mirrored {}: has no row for the training photo {photo}",
                    path.display()
                )
            })?;
            ensure!(
                row.len() == len,
                "--mirrored {}: rows of {} values, --histograms {} rows of {len}",
                path.display(),
                row.len(),
                args.histograms.display()
            );
            Ok(row.as_slice())
        })
        .collect()
}

/// What an evaluation found.
#[derive(Debug, Clone, Copy)]
pub struct Scores {
    /// Accuracy.
    pub accuracy: f64,
    /// Mean recall over the classes.
    pub balanced_accuracy: f64,
    /// Photos scored.
    pub scored: usize,
}

/// `vocab evaluate`, reporting to `out`.
pub fn evaluate(args: &EvaluateSettings, out: &mut dyn std::io::Write) -> anyhow::Result<Scores> {
    let table = read_histograms(&args.histograms)?;
    evaluate_on(args, &table, out)
}

/// [`evaluate`] on the histograms of `args.histograms` already read.
pub fn evaluate_on(
    args: &EvaluateSettings,
    table: &Table,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<Scores> {
    let model = ModelFile::load(&args.model)?;
    let labels = read_labels(&args.labels, &model.attribute)?;
    if labels.classes != model.classifier.classes {
        bail!(
            "{} gives {:?} the classes {:?}, the model was trained on {:?}",
            args.labels.display(),
            model.attribute,
            labels.classes,
            model.classifier.classes
        );
    }
    if let Some(row) = table.rows.first() {
        model.check_len(row.len(), &args.histograms)?;
    }
    if let (Some(ours), Some(theirs)) = (&model.encoding, read_encoding(&args.histograms)?) {
        same_encoding(ours, &theirs, &args.model, &args.histograms)?;
    }
    let pairs = labelled(table, &labels);
    let (test, scope) = if args.held_out {
        ensure!(
            model.split.holds_out(),
            "--held-out: model {} was trained on {}; score other photos without --held-out, \
             or train with --holdout or --split",
            args.model.display(),
            model.split.describe()
        );
        (split_rows(table, &pairs, &model.split).1, "held-out")
    } else {
        (pairs, "labelled")
    };
    ensure!(
        !test.is_empty(),
        "no {scope} photos with a {:?} label in {} to evaluate on",
        model.attribute,
        args.histograms.display()
    );
    let truth: Vec<usize> = test.iter().map(|&(_, c)| c).collect();
    let predicted: Vec<usize> = test
        .iter()
        .map(|&(i, _)| model.predict(&table.rows[i]))
        .collect();
    let m = metrics(&truth, &predicted, labels.classes.len());
    let classes = &labels.classes;
    let mut matrix = String::new();
    let _ = writeln!(
        matrix,
        "{:>14} {}",
        "true \\ pred",
        classes
            .iter()
            .map(|c| format!("{c:>10}"))
            .collect::<String>()
    );
    for (k, row) in m.confusion.iter().enumerate() {
        let _ = writeln!(
            matrix,
            "{:>14} {}",
            classes[k],
            row.iter().map(|n| format!("{n:>10}")).collect::<String>()
        );
    }
    writeln!(out, "model trained on {}", model.split.describe())?;
    writeln!(out, "accuracy {:.4}", m.accuracy)?;
    writeln!(out, "balanced_accuracy {:.4}", m.balanced_accuracy)?;
    write!(out, "{matrix}")?;
    writeln!(
        out,
        "({} {scope} photos scored, attribute {:?}, C = {})",
        test.len(),
        model.attribute,
        model.classifier.c
    )?;
    let (csv_path, md_path, predictions_path) =
        write_metrics(args, &model, scope, &m, classes, (&test, &predicted), table)?;
    writeln!(
        out,
        "  wrote {}, {} and {}",
        csv_path.display(),
        md_path.display(),
        predictions_path.display()
    )?;
    Ok(Scores {
        accuracy: m.accuracy,
        balanced_accuracy: m.balanced_accuracy,
        scored: test.len(),
    })
}

/// Writes an evaluation's metrics beside the model (`metrics.csv`, `metrics.md`) and every
/// scored photo with its true and predicted class (`predictions.csv`, for error analysis and
/// figures); returns the three paths.
fn write_metrics(
    args: &EvaluateSettings,
    model: &ModelFile,
    scope: &str,
    m: &Metrics,
    classes: &[String],
    (test, predicted): (&Pairs, &[usize]),
    table: &Table,
) -> anyhow::Result<(PathBuf, PathBuf, PathBuf)> {
    let mut metrics = vec![
        ("accuracy".to_string(), m.accuracy.to_string()),
        ("balanced_accuracy".into(), m.balanced_accuracy.to_string()),
        ("scored".into(), test.len().to_string()),
    ];
    if args.held_out {
        metrics.push(("held_out".into(), test.len().to_string()));
    }
    for (k, row) in m.confusion.iter().enumerate() {
        for (j, n) in row.iter().enumerate() {
            let name = format!("confusion {} -> {}", classes[k], classes[j]);
            metrics.push((name, n.to_string()));
        }
    }
    let csv = tables::csv_text(
        &["metric", "value"],
        metrics.iter().map(|(a, b)| vec![a.as_str(), b.as_str()]),
    )?;
    let cells: Vec<String> = classes.iter().map(|c| tables::md_cell(c)).collect();
    let mut md = format!(
        "# {}\n\n| metric | value |\n|---|---|\n| accuracy | {:.4} |\n| balanced accuracy | {:.4} |\n| {scope} photos scored | {} |\n| C | {} |\n\n| true \\ predicted | {} |\n|---|{}\n",
        tables::md_cell(&model.attribute),
        m.accuracy,
        m.balanced_accuracy,
        test.len(),
        model.classifier.c,
        cells.join(" | "),
        "---|".repeat(classes.len())
    );
    for (k, row) in m.confusion.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | {} |",
            cells[k],
            row.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    let (csv_path, md_path) = (
        manifest_path(&args.model, "metrics.csv"),
        manifest_path(&args.model, "metrics.md"),
    );
    vocab_pipeline::atomic::write(&csv_path, csv.as_bytes())
        .with_context(|| format!("cannot write {}", csv_path.display()))?;
    vocab_pipeline::atomic::write(&md_path, md.as_bytes())
        .with_context(|| format!("cannot write {}", md_path.display()))?;
    let mut rows = csv::Writer::from_writer(Vec::new());
    rows.write_record(["path", "truth", "predicted"])?;
    for (&(i, t), &p) in test.iter().zip(predicted) {
        rows.write_record([table.paths[i].as_str(), &classes[t], &classes[p]])?;
    }
    let rows = rows.into_inner().context("cannot format the predictions")?;
    let predictions_path = manifest_path(&args.model, "predictions.csv");
    vocab_pipeline::atomic::write(&predictions_path, &rows)
        .with_context(|| format!("cannot write {}", predictions_path.display()))?;
    Ok((csv_path, md_path, predictions_path))
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
    // The model's encoding was checked by the rules of vocab encode when it was read.
    let words = Path::new(enc.vocabulary());
    // An input like those on the command line: nothing this command writes may replace it.
    vocab_pipeline::output::protect(format!("the model's vocabulary {}", words.display()), words);
    vocab_pipeline::output::claim(&args.out)?;
    same_words(&enc, words, &format!("model {}", args.model.display()))?;
    let vocabulary = crate::photo_cmd::read_words(words, enc.params())
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
    let summary = encode::encode(&collection, &vocabulary, params, &hist, &|p| {
        bar.set_position(p.images as u64)
    })?;
    bar.finish_and_clear();
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
