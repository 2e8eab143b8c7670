//! `vocab evaluate`: a model scored on labelled photos, its metrics and predictions written
//! beside it.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::classify::{ModelFile, Table, labelled, read_histograms, read_labels};
use vocab_pipeline::features::manifest_path;
use vocab_pipeline::svm::{Metrics, metrics};

use super::confusion::Confusion;
use super::records::{mirror_rows, read_encoding, same_encoding};
use super::split::{Pairs, split_rows};
use crate::settings::EvaluateSettings;
use crate::tables;

/// What an evaluation found.
#[derive(Debug, Clone)]
pub struct Scores {
    /// Accuracy.
    pub accuracy: f64,
    /// Mean recall over the classes.
    pub balanced_accuracy: f64,
    /// Photos scored.
    pub scored: usize,
    /// Photos by true and predicted class (none from a model evaluated before it was kept).
    pub confusion: Option<Confusion>,
}

/// `vocab evaluate`, reporting to `out`.
pub fn evaluate(args: &EvaluateSettings, out: &mut dyn std::io::Write) -> anyhow::Result<Scores> {
    let table = read_histograms(&args.histograms)?;
    let mirrored = (args.mirrored.as_deref())
        .map(|path| read_histograms(path).with_context(|| format!("--mirrored {}", path.display())))
        .transpose()?;
    evaluate_on(args, (&table, mirrored.as_ref()), out)
}

/// [`evaluate`] on the histograms of `args.histograms` and `args.mirrored` already read.
pub fn evaluate_on(
    args: &EvaluateSettings,
    (table, mirror): (&Table, Option<&Table>),
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
    let encoding = read_encoding(&args.histograms)?;
    if let (Some(ours), Some(theirs)) = (&model.encoding, &encoding) {
        same_encoding(ours, theirs, &args.model, &args.histograms)?;
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
    let mirrors = mirrors_of(args, (table, mirror), &test, encoding.as_ref())?;
    let truth: Vec<usize> = test.iter().map(|&(_, c)| c).collect();
    let decisions = decisions(&model, table, &test, mirrors.as_deref());
    let predicted: Vec<usize> = (decisions.iter())
        .map(|v| model.classifier.choose(v).0)
        .collect();
    let m = metrics(&truth, &predicted, labels.classes.len());
    let classes = &labels.classes;
    let matrix = matrix_text(classes, &m);
    writeln!(out, "model trained on {}", model.split.describe())?;
    writeln!(out, "accuracy {:.4}", m.accuracy)?;
    writeln!(out, "balanced_accuracy {:.4}", m.balanced_accuracy)?;
    write!(out, "{matrix}")?;
    writeln!(
        out,
        "({} {scope} photos scored{}, attribute {:?}, C = {})",
        test.len(),
        if mirrors.is_some() {
            " with their mirror images"
        } else {
            ""
        },
        model.attribute,
        model.classifier.c
    )?;
    let (csv_path, md_path, predictions_path) = write_metrics(
        args,
        &model,
        (scope, &m, classes),
        (&test, &predicted, &decisions),
        table,
    )?;
    let confusion = Confusion {
        classes: classes.clone(),
        counts: m.confusion,
    };
    let confusion_path = manifest_path(&args.model, "confusion.csv");
    confusion.write(&confusion_path)?;
    writeln!(
        out,
        "  wrote {}, {}, {} and {}",
        csv_path.display(),
        md_path.display(),
        predictions_path.display(),
        confusion_path.display()
    )?;
    Ok(Scores {
        accuracy: m.accuracy,
        balanced_accuracy: m.balanced_accuracy,
        scored: test.len(),
        confusion: Some(confusion),
    })
}

/// The rows of `--mirrored` for the photos of `test`, in its order (none without the flag).
fn mirrors_of<'m>(
    args: &EvaluateSettings,
    (table, mirror): (&Table, Option<&'m Table>),
    test: &Pairs,
    encoding: Option<&vocab_pipeline::encode::Encoding>,
) -> anyhow::Result<Option<Vec<&'m [f32]>>> {
    Ok(match (&args.mirrored, mirror) {
        (Some(path), Some(mirror)) => Some(mirror_rows(
            (&args.histograms, table),
            (path, mirror),
            test,
            encoding,
            "scored",
        )?),
        (Some(path), None) => bail!("--mirrored {}: not read", path.display()),
        (None, _) => None,
    })
}

/// Every model's decision values for each photo of `test`: a photo with its mirror image
/// (`mirrors`, in `test`'s order) by the mean of the two views' values.
fn decisions(
    model: &ModelFile,
    table: &Table,
    test: &Pairs,
    mirrors: Option<&[&[f32]]>,
) -> Vec<Vec<f64>> {
    (test.iter().enumerate())
        .map(|(n, &(i, _))| {
            let mut values = model.decisions(&table.rows[i]);
            if let Some(row) = mirrors.and_then(|m| m.get(n)) {
                for (v, w) in values.iter_mut().zip(model.decisions(row)) {
                    *v = (*v + w) / 2.0;
                }
            }
            values
        })
        .collect()
}

/// The confusion matrix as text: a row a true class, a column a predicted one.
fn matrix_text(classes: &[String], m: &Metrics) -> String {
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
    matrix
}

/// Writes an evaluation's metrics beside the model (`metrics.csv`, `metrics.md`) and every
/// scored photo with its true and predicted class and every model's decision value
/// (`predictions.csv`, for error analysis, figures and fusing models); returns the three paths.
fn write_metrics(
    args: &EvaluateSettings,
    model: &ModelFile,
    (scope, m, classes): (&str, &Metrics, &[String]),
    (test, predicted, decisions): (&Pairs, &[usize], &[Vec<f64>]),
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
    let header = ["path", "truth", "predicted"].map(String::from).into_iter();
    let scores = (model.classifier.scored_classes().iter()).map(|c| format!("score {c}"));
    rows.write_record(header.chain(scores))?;
    for ((&(i, t), &p), values) in test.iter().zip(predicted).zip(decisions) {
        let row = [table.paths[i].as_str(), &classes[t], &classes[p]].map(String::from);
        // Six decimals: a decision value's ranks and margins (of order 1), not its last bits.
        let values = values.iter().map(|v| format!("{v:.6}"));
        rows.write_record(row.into_iter().chain(values))?;
    }
    let rows = rows.into_inner().context("cannot format the predictions")?;
    let predictions_path = manifest_path(&args.model, "predictions.csv");
    vocab_pipeline::atomic::write(&predictions_path, &rows)
        .with_context(|| format!("cannot write {}", predictions_path.display()))?;
    Ok((csv_path, md_path, predictions_path))
}
