//! A model per vocabulary and attribute: the svm step.

use std::io::Write;
use std::path::Path;

use std::cell::OnceCell;

use anyhow::Context;
use serde_json::json;
use vocab_pipeline::classify::{Table, read_histograms};

use crate::classify_cmd::{Confusion, Scores};
use crate::config::Config;
use crate::run::dataset::Dataset;
use crate::run::step::{Stage, digest};
use crate::settings::{EvaluateSettings, Split, TrainSettings};
use vocab_pipeline::kernel_map::Mapping;

/// One vocabulary's histogram files as read, shared by its attributes' SVM steps: each file is
/// read once, by the first step that runs (none when every step is cached).
#[derive(Default)]
pub struct Tables {
    histograms: OnceCell<Table>,
    mirrored: OnceCell<Table>,
    test: OnceCell<Table>,
}

impl Tables {
    /// The table of `path` in `cell`, read on first use.
    fn of<'t>(cell: &'t OnceCell<Table>, path: &Path) -> anyhow::Result<&'t Table> {
        if let Some(table) = cell.get() {
            return Ok(table);
        }
        let table = read_histograms(path)
            .with_context(|| format!("cannot read the histograms {}", path.display()))?;
        Ok(cell.get_or_init(|| table))
    }
}

/// One attribute's SVM over one vocabulary's histograms, scored on the held-out photos.
pub struct Svm<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// Photos and labels.
    pub dataset: &'a Dataset,
    /// Key of the encode step.
    pub encode_key: &'a str,
    /// Key of the features step (which holds the split).
    pub features_key: &'a str,
    /// Vocabulary size (the label).
    pub k: usize,
    /// The attribute.
    pub attribute: &'a str,
    /// The histograms.
    pub histograms: &'a Path,
    /// The training photos' mirror images, encoded alike (`[classify] mirror`), and the key of
    /// their encode step.
    pub mirrored: Option<(&'a str, &'a Path)>,
    /// The split file.
    pub split: &'a Path,
    /// What the step's label ends with (the trial's).
    pub suffix: &'a str,
    /// The split's seed (also the cross-validation folds').
    pub seed: u64,
    /// The test folder, when the run scores one: the model trains on every photo of the
    /// dataset and is scored on every labelled photo there.
    pub test: Option<Test<'a>>,
    /// Progress bars.
    pub ui: &'a crate::progress::Ui,
    /// The vocabulary's histograms, read once for its attributes.
    pub tables: &'a Tables,
}

/// A test folder's photos encoded over the step's vocabulary.
#[derive(Clone, Copy)]
pub struct Test<'a> {
    /// Photos and labels.
    pub dataset: &'a Dataset,
    /// Key of their encode step.
    pub encode_key: &'a str,
    /// Their histograms.
    pub histograms: &'a Path,
}

impl Stage for Svm<'_> {
    type Output = Scores;

    fn stage(&self) -> &'static str {
        "svm"
    }

    fn label(&self) -> String {
        format!(
            "{}{}{}-{}",
            super::words::size_prefix(self.config),
            self.k,
            self.suffix,
            self.attribute
        )
    }

    fn key(&self) -> String {
        let c = &self.config.classify;
        let mut key = vec![
            json!(self.encode_key),
            json!(self.features_key),
            json!(self.attribute),
            json!(c.cv),
            json!(self.seed),
            json!(c.solver),
        ];
        // Keys of runs without a kernel map, a test folder or another C grid stay what they
        // were.
        if c.c_grid.as_slice() != crate::options::DEFAULT_C_GRID {
            key.push(json!(["c_grid", c.c_grid]));
        }
        if c.kernel_map != Mapping::None {
            key.push(json!([c.kernel_map, c.map_order]));
        }
        if let Some(test) = &self.test {
            key.push(json!(["test", test.encode_key]));
        }
        if let Some((mirrored, _)) = self.mirrored {
            key.push(json!(["mirrored", mirrored]));
        }
        digest(&json!(key))
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<Scores> {
        let c = &self.config.classify;
        let model = tmp.join("model.json");
        let settings = TrainSettings {
            histograms: self.histograms.to_path_buf(),
            mirrored: self.mirrored.map(|(_, path)| path.to_path_buf()),
            labels: self.dataset.labels.clone(),
            attribute: self.attribute.to_string(),
            c: None,
            cv: c.cv,
            c_grid: c.c_grid.clone(),
            solver: c.solver,
            split: match self.test {
                Some(_) => Split::All,
                None => Split::File(self.split.to_path_buf()),
            },
            split_seed: self.seed,
            kernel_map: c.kernel_map,
            map_order: c.map_order,
            out: model.clone(),
        };
        let tables = self.tables;
        let table = Tables::of(&tables.histograms, self.histograms)?;
        let mirror = match self.mirrored {
            Some((_, path)) => Some(Tables::of(&tables.mirrored, path)?),
            None => None,
        };
        crate::classify_cmd::train_on(&settings, (table, mirror), self.ui, out)?;
        let (histograms, labels, held_out, scope, table) = match &self.test {
            Some(test) => {
                let table = Tables::of(&tables.test, test.histograms)?;
                (test.histograms, &test.dataset.labels, false, "test", table)
            }
            None => (
                self.histograms,
                &self.dataset.labels,
                true,
                "held-out",
                table,
            ),
        };
        let scores = crate::classify_cmd::evaluate_on(
            &EvaluateSettings {
                model,
                histograms: histograms.to_path_buf(),
                labels: labels.clone(),
                held_out,
                mirrored: None,
            },
            (table, None),
            &mut std::io::sink(),
        )?;
        writeln!(
            out,
            "  {}: accuracy {:.4}, balanced {:.4} on {} {scope} photos",
            self.attribute, scores.accuracy, scores.balanced_accuracy, scores.scored
        )?;
        Ok(scores)
    }

    fn cached(&self, dir: &Path) -> anyhow::Result<Scores> {
        let path = dir.join("model.json.metrics.csv");
        let text = vocab_pipeline::input::read_text(&path, vocab_pipeline::input::MAX_RECORD_BYTES)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let get = |name: &str| -> anyhow::Result<f64> {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name},")))
                .and_then(|v| v.trim().parse().ok())
                .with_context(|| format!("{} has no {name}", path.display()))
        };
        // Steps made before `scored` was written have `held_out`, the same count.
        let scored = get("scored").or_else(|_| get("held_out"))? as usize;
        Ok(Scores {
            accuracy: get("accuracy")?,
            balanced_accuracy: get("balanced_accuracy")?,
            scored,
            confusion: confusion_of(dir, (get("accuracy")?, scored))?,
        })
    }
}

/// The confusion a cached svm step kept beside its model (none from a step made before it was
/// kept), checked against the step's metrics: it counts the `scored` photos, and its diagonal
/// gives the `accuracy`.
fn confusion_of(dir: &Path, (accuracy, scored): (f64, usize)) -> anyhow::Result<Option<Confusion>> {
    let path = vocab_pipeline::features::manifest_path(&dir.join("model.json"), "confusion.csv");
    if !path.is_file() {
        return Ok(None);
    }
    let confusion = Confusion::read(&path)?;
    let total: f64 = confusion.counts.iter().flatten().map(|&c| c as f64).sum();
    let right: f64 = (confusion.counts.iter().enumerate())
        .map(|(i, row)| row.get(i).map_or(0.0, |&c| c as f64))
        .sum();
    anyhow::ensure!(
        total == scored as f64 && (right / total.max(1.0) - accuracy).abs() < 1e-9,
        "{} counts {total} photos, {right} right; its metrics say {scored} scored, accuracy \
         {accuracy} (the step was changed since it ran: run again with --force svm)",
        path.display()
    );
    Ok(Some(confusion))
}
