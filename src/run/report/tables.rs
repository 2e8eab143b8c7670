//! The report's tables: the CSVs (`trials.csv`, `accuracy.csv`, `kmeans.csv`,
//! `kmeans-iterations.csv`, `steps.csv`) and the vocabularies' table of `report.md`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use super::results::{Mixture, Summary, TrialResult, Vocabulary};
use crate::kmeans_log::STAGE_SECONDS;
use crate::run::step::Step;

/// Writes `text` to `dir/name`, whole or not at all.
pub(super) fn write_file(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    vocab_pipeline::atomic::write(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A rate (an accuracy, its deviation) in a CSV: 4 decimals, what a few thousand photos can
/// tell apart (0.9789999999999999 is 0.9790).
pub(super) fn rate(v: f64) -> String {
    format!("{v:.4}")
}

/// `trials.csv`: every trial's scores.
pub(super) fn trials_csv(dir: &Path, trials: &[TrialResult]) -> anyhow::Result<()> {
    let csv = crate::tables::csv_text(
        &[
            "trial",
            "seed",
            "k",
            "attribute",
            "accuracy",
            "balanced_accuracy",
            "held_out",
        ],
        trials.iter().flat_map(|t| {
            t.outcomes.iter().map(|o| {
                vec![
                    (t.trial.index + 1).to_string(),
                    t.trial.seed.to_string(),
                    o.k.to_string(),
                    o.attribute.clone(),
                    rate(o.scores.accuracy),
                    rate(o.scores.balanced_accuracy),
                    o.scores.scored.to_string(),
                ]
            })
        }),
    )?;
    write_file(dir, "trials.csv", &csv)
}

/// `accuracy.csv`: accuracy per attribute and vocabulary size (the mean over the trials, with
/// their standard deviation).
pub(super) fn accuracy_csv(dir: &Path, summaries: &[Summary]) -> anyhow::Result<()> {
    let csv = crate::tables::csv_text(
        &[
            "k",
            "attribute",
            "accuracy",
            "balanced_accuracy",
            "held_out",
            "std",
            "trials",
        ],
        summaries.iter().map(|o| {
            vec![
                o.k.to_string(),
                o.attribute.clone(),
                rate(o.accuracy),
                rate(o.balanced_accuracy),
                o.held_out.to_string(),
                rate(o.std),
                o.trials.to_string(),
            ]
        }),
    )?;
    write_file(dir, "accuracy.csv", &csv)
}

/// `steps.csv`: every step of the run, with its key and seconds, and whether it was cached.
pub(super) fn steps_csv(dir: &Path, steps: &[Step]) -> anyhow::Result<()> {
    let mut scsv = String::from("stage,step,key,seconds,cached\n");
    for s in steps {
        let _ = writeln!(
            scsv,
            "{},{},{},{:.2},{}",
            s.stage, s.label, s.key, s.seconds, s.cached
        );
    }
    write_file(dir, "steps.csv", &scsv)
}

/// The k-means runs' mean seconds per stage (runs on a team only): `kmeans.csv`, and the
/// figure's categories and groups.
pub(super) struct Stages {
    /// `kmeans.csv`: a row of mean seconds per stage for each vocabulary size.
    pub(super) csv: String,
    /// The figure's categories, `k=K` for each such vocabulary.
    pub(super) cats: Vec<String>,
    /// The figure's groups: each stage's name and its mean seconds in each category.
    pub(super) groups: Vec<(String, Vec<f64>)>,
}

impl Stages {
    /// The stages of the runs of `vocabularies` that timed them.
    pub(super) fn of(vocabularies: &[Vocabulary]) -> Self {
        let mut csv = format!("k,{}\n", STAGE_SECONDS.join(","));
        let names = ["broadcast", "map", "stage 1", "stage 2", "stage 3"];
        let mut cats = Vec::new();
        let mut groups: Vec<(String, Vec<f64>)> = names
            .iter()
            .map(|n| ((*n).to_string(), Vec::new()))
            .collect();
        for v in vocabularies {
            if let Some(means) = v.per_iteration.stage_means() {
                // Seconds to the microsecond: the stages of a small run take milliseconds.
                let shown: Vec<String> = means.iter().map(|m| format!("{m:.6}")).collect();
                let _ = writeln!(csv, "{},{}", v.k, shown.join(","));
                cats.push(format!("k={}", v.k));
                for (s, m) in groups.iter_mut().zip(&means) {
                    s.1.push(*m);
                }
            }
        }
        Self { csv, cats, groups }
    }
}

/// The vocabularies' table (markdown) and every iteration of every run (`kmeans-iterations.csv`).
pub(super) fn vocabularies(vocabularies: &[Vocabulary]) -> (String, String) {
    let mut vocab_md = String::from(
        "| k | vectors | iterations | converged | final inertia | seconds |\n|---|---|---|---|---|---|\n",
    );
    let mut iterations = String::new();
    for v in vocabularies {
        let m = &v.meta;
        let _ = writeln!(
            vocab_md,
            "| {} | {} | {} | {} | {:.6e} | {:.1} |",
            v.k, m.n, m.iterations, m.converged, m.final_inertia, m.seconds
        );
        let mut lines = v.per_iteration.csv.lines();
        if let Some(header) = lines.next() {
            if iterations.is_empty() {
                let _ = writeln!(iterations, "k,{header}");
            }
            for line in lines {
                let _ = writeln!(iterations, "{},{line}", v.k);
            }
        }
    }
    (vocab_md, iterations)
}

/// The mixtures' table (markdown), `mixture.csv` (a row per mixture: its EM steps, whether it
/// converged, its last mean log-likelihood) and `mixture-steps.csv` (every step of every fit,
/// the PCA first, as each step wrote it).
pub(super) fn mixtures(mixtures: &[Mixture]) -> anyhow::Result<(String, String, String)> {
    let mut md = String::from(
        "| G | vectors | EM steps | converged | mean log-likelihood |\n|---|---|---|---|---|\n",
    );
    let mut steps = String::new();
    let rows: Vec<Vec<String>> = (mixtures.iter())
        .map(|m| {
            let last = m.log_likelihood.last().copied();
            let shown = |places: usize| last.map_or(String::new(), |v| format!("{v:.places$}"));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                m.g,
                m.vectors,
                m.log_likelihood.len(),
                m.converged,
                shown(4)
            );
            let mut lines = m.steps_csv.as_deref().unwrap_or_default().lines();
            if let Some(header) = lines.next() {
                if steps.is_empty() {
                    let _ = writeln!(steps, "g,{header}");
                }
                for line in lines {
                    let _ = writeln!(steps, "{},{line}", m.g);
                }
            }
            vec![
                m.g.to_string(),
                m.vectors.to_string(),
                m.log_likelihood.len().to_string(),
                m.converged.to_string(),
                shown(6),
            ]
        })
        .collect();
    let summary = crate::tables::csv_text(
        &[
            "g",
            "vectors",
            "em_steps",
            "converged",
            "mean_log_likelihood",
        ],
        rows,
    )?;
    Ok((md, summary, steps))
}
