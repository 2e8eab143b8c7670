//! What a run's report is made of: each trial's outcomes and vocabularies, the run around them,
//! and the scores summarised over the trials.

use std::path::Path;

use vocab_pipeline::kmeans::files::RunMeta;

use crate::classify_cmd::Scores;
use crate::kmeans_log::PerIteration;
use crate::run::dataset::Dataset;
use crate::run::protocol::Trial;
use crate::run::stages::Sample;
use crate::run::step::Step;

/// One attribute's outcome over one vocabulary.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Vocabulary size.
    pub k: usize,
    /// Attribute.
    pub attribute: String,
    /// Held-out scores.
    pub scores: Scores,
}

/// One vocabulary of the run.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Its size.
    pub k: usize,
    /// Its file.
    pub path: std::path::PathBuf,
    /// Its run's record.
    pub meta: RunMeta,
    /// Its run's iterations.
    pub per_iteration: PerIteration,
}

/// One mixture of the run (Fisher vectors): how its EM went.
#[derive(Debug, Clone)]
pub struct Mixture {
    /// Its Gaussians.
    pub g: usize,
    /// Vectors it learned from.
    pub vectors: u64,
    /// Whether EM stopped on its tolerance.
    pub converged: bool,
    /// The mean log-likelihood per vector before each EM step's M-step.
    pub log_likelihood: Vec<f64>,
    /// Its step's `steps.csv` (the PCA, then each EM step with its seconds), when there.
    pub steps_csv: Option<String>,
}

impl Mixture {
    /// The mixture of `g` Gaussians of `file`, its steps' CSV at `steps` (read if there).
    pub fn of(g: usize, file: &vocab_pipeline::mixture::MixtureFile, steps: &Path) -> Self {
        let steps_csv =
            vocab_pipeline::input::read_text(steps, vocab_pipeline::input::MAX_RECORD_BYTES).ok();
        Self {
            g,
            vectors: file.vectors,
            converged: file.converged,
            log_likelihood: file.log_likelihood.clone(),
            steps_csv,
        }
    }
}

/// What one trial made.
#[derive(Debug, Clone)]
pub struct TrialResult {
    /// The trial.
    pub trial: Trial,
    /// Its split and its vocabularies' sample.
    pub sample: Sample,
    /// Its SVMs' scores.
    pub outcomes: Vec<Outcome>,
    /// Its vocabularies.
    pub vocabularies: Vec<Vocabulary>,
    /// Its mixtures (Fisher vectors).
    pub mixtures: Vec<Mixture>,
    /// Its split (`path,train|test`).
    pub split_csv: std::path::PathBuf,
}

/// One attribute over one vocabulary size, over every trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Vocabulary size.
    pub k: usize,
    /// Attribute.
    pub attribute: String,
    /// Mean accuracy.
    pub accuracy: f64,
    /// Sample standard deviation of the accuracy (0 for one trial).
    pub std: f64,
    /// Mean balanced accuracy.
    pub balanced_accuracy: f64,
    /// Photos scored per trial (the mean, rounded).
    pub held_out: usize,
    /// Trials.
    pub trials: usize,
}

/// The best of `attribute`'s summaries: the highest mean accuracy, the first listed (the
/// config's order of sizes) on a tie.
pub fn best<'a>(summaries: &'a [Summary], attribute: &str) -> Option<&'a Summary> {
    (summaries.iter().filter(|s| s.attribute == attribute)).fold(None, |best, s| match best {
        Some(b) if b.accuracy >= s.accuracy => Some(b),
        _ => Some(s),
    })
}

/// The trials' scores per vocabulary size and attribute, in the order of the first trial.
pub fn summarise(trials: &[TrialResult]) -> Vec<Summary> {
    let Some(first) = trials.first() else {
        return Vec::new();
    };
    first
        .outcomes
        .iter()
        .map(|o| {
            let all: Vec<&Scores> = trials
                .iter()
                .flat_map(|t| &t.outcomes)
                .filter(|x| x.k == o.k && x.attribute == o.attribute)
                .map(|x| &x.scores)
                .collect();
            let n = all.len() as f64;
            let mean = |f: fn(&Scores) -> f64| all.iter().map(|s| f(s)).sum::<f64>() / n;
            let accuracy = mean(|s| s.accuracy);
            let std = if all.len() > 1 {
                (all.iter()
                    .map(|s| (s.accuracy - accuracy).powi(2))
                    .sum::<f64>()
                    / (n - 1.0))
                    .sqrt()
            } else {
                0.0
            };
            Summary {
                k: o.k,
                attribute: o.attribute.clone(),
                accuracy,
                std,
                balanced_accuracy: mean(|s| s.balanced_accuracy),
                held_out: mean(|s| s.scored as f64).round() as usize,
                trials: all.len(),
            }
        })
        .collect()
}

/// What the report is made of.
pub struct Run<'a> {
    /// The config.
    pub config: &'a Path,
    /// Photos and labels.
    pub dataset: &'a Dataset,
    /// The test folder, when the run scores one.
    pub test: Option<&'a Dataset>,
    /// The protocol, for people.
    pub protocol: &'a str,
    /// The attributes learned.
    pub attributes: &'a [String],
    /// Every trial.
    pub trials: &'a [TrialResult],
    /// Every step.
    pub steps: &'a [Step],
    /// What the run learns its encodings from.
    pub dictionaries: Dictionaries,
    /// How the largest vocabulary's montage samples its photos.
    pub words: &'a vocab_pipeline::montage::MontageParams,
    /// Whether the models trained on the training photos' mirror images too.
    pub mirrored: bool,
}

/// What a run learns its encodings from, as the report names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dictionaries {
    /// Vocabularies of K words (bag of words, VLAD).
    Vocabularies,
    /// Mixtures of G Gaussians (Fisher vectors).
    Mixtures,
}

impl Dictionaries {
    /// The letter of a dictionary's size.
    pub fn letter(self) -> &'static str {
        match self {
            Self::Vocabularies => "K",
            Self::Mixtures => "G",
        }
    }
}
