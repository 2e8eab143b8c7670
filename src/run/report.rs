//! The run's report (`WORK/report/`: report.md, CSVs, PNG figures) and its one-screen summary.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use vocab_pipeline::kmeans::files::RunMeta;

use super::dataset::Dataset;
use super::stages::Sample;
use super::step::Step;
use crate::classify_cmd::Scores;
use crate::figures::{self, Series};
use crate::kmeans_log::{PerIteration, STAGE_SECONDS};

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
    /// Its run's record.
    pub meta: RunMeta,
    /// Its run's iterations.
    pub per_iteration: PerIteration,
}

/// What the report is made of.
pub struct Run<'a> {
    /// The config.
    pub config: &'a Path,
    /// Photos and labels.
    pub dataset: &'a Dataset,
    /// The split and the vocabulary's sample.
    pub sample: Sample,
    /// Every SVM's scores.
    pub outcomes: &'a [Outcome],
    /// Every vocabulary.
    pub vocabularies: &'a [Vocabulary],
    /// Every step.
    pub steps: &'a [Step],
}

/// The accuracy axis: the values with a margin, within [0, 1].
fn accuracy_range(outcomes: &[Outcome]) -> (f64, f64) {
    let values = outcomes.iter().map(|o| o.scores.accuracy);
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let margin = ((hi - lo) * 0.15).max(0.02);
    ((lo - margin).max(0.0), (hi + margin).min(1.0))
}

/// Writes `text` to `dir/name`, whole or not at all.
fn write_file(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    vocab_pipeline::atomic::write(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the report into `dir`.
pub fn write(dir: &Path, run: &Run<'_>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    accuracy(dir, run.outcomes)?;
    let stages = Stages::of(run.vocabularies);
    write_file(dir, "kmeans.csv", &stages.csv)?;
    let (vocab_md, iterations) = vocabularies(run.vocabularies);
    write_file(dir, "kmeans-iterations.csv", &iterations)?;
    if !stages.cats.is_empty() {
        figures::grouped_bars_log(
            &dir.join("kmeans.png"),
            "k-means: mean seconds per iteration by stage",
            "seconds (log scale)",
            &stages.cats,
            &stages.groups,
        )?;
    }
    let mut scsv = String::from("stage,step,key,seconds,cached\n");
    for s in run.steps {
        let _ = writeln!(
            scsv,
            "{},{},{},{},{}",
            s.stage, s.label, s.key, s.seconds, s.cached
        );
    }
    write_file(dir, "steps.csv", &scsv)?;
    write_file(dir, "report.md", &markdown(run, &vocab_md, &stages))
}

/// `accuracy.csv` and its figure: accuracy per attribute and vocabulary size.
fn accuracy(dir: &Path, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let csv = crate::tables::csv_text(
        &[
            "k",
            "attribute",
            "accuracy",
            "balanced_accuracy",
            "held_out",
        ],
        outcomes.iter().map(|o| {
            vec![
                o.k.to_string(),
                o.attribute.clone(),
                o.scores.accuracy.to_string(),
                o.scores.balanced_accuracy.to_string(),
                o.scores.scored.to_string(),
            ]
        }),
    )?;
    write_file(dir, "accuracy.csv", &csv)?;
    let mut attributes: Vec<&str> = outcomes.iter().map(|o| o.attribute.as_str()).collect();
    attributes.sort_unstable();
    attributes.dedup();
    let series: Vec<Series> = attributes
        .iter()
        .map(|a| Series {
            name: (*a).to_string(),
            points: outcomes
                .iter()
                .filter(|o| o.attribute == *a)
                .map(|o| (o.k as f64, o.scores.accuracy))
                .collect(),
        })
        .collect();
    if !series.is_empty() {
        figures::line_chart_log2(
            &dir.join("accuracy.png"),
            "Held-out accuracy against vocabulary size",
            "vocabulary size k",
            "accuracy",
            accuracy_range(outcomes),
            &series,
        )?;
    }
    Ok(())
}

/// The k-means runs' mean seconds per stage (runs on a team only): `kmeans.csv`, and the
/// figure's categories and groups.
struct Stages {
    csv: String,
    cats: Vec<String>,
    groups: Vec<(String, Vec<f64>)>,
}

impl Stages {
    fn of(vocabularies: &[Vocabulary]) -> Self {
        let mut csv = format!("k,{}\n", STAGE_SECONDS.join(","));
        let names = ["broadcast", "map", "stage 1", "stage 2", "stage 3"];
        let mut cats = Vec::new();
        let mut groups: Vec<(String, Vec<f64>)> = names
            .iter()
            .map(|n| ((*n).to_string(), Vec::new()))
            .collect();
        for v in vocabularies {
            if let Some(means) = v.per_iteration.stage_means() {
                let shown: Vec<String> = means.iter().map(f64::to_string).collect();
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
fn vocabularies(vocabularies: &[Vocabulary]) -> (String, String) {
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

/// `report.md`.
fn markdown(run: &Run<'_>, vocab_md: &str, stages: &Stages) -> String {
    let Sample {
        train,
        test,
        described,
    } = run.sample;
    let mut md = format!(
        "# Run report: {}\n\n## Dataset\n\n- photos: {} (labels {})\n- split: {train} training, {test} held out\n- vocabulary sample: random patches of {described} training photos\n\n",
        run.config.display(),
        run.dataset.photos.display(),
        run.dataset.labels.display(),
    );
    md.push_str("## Accuracy (held-out half)\n\n| k | attribute | accuracy | balanced accuracy | held out |\n|---|---|---|---|---|\n");
    for o in run.outcomes {
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} | {:.4} | {} |",
            o.k,
            crate::tables::md_cell(&o.attribute),
            o.scores.accuracy,
            o.scores.balanced_accuracy,
            o.scores.scored
        );
    }
    md.push_str("\n![accuracy](accuracy.png)\n\n## Vocabularies\n\n");
    md.push_str(vocab_md);
    md.push_str("\n## k-means per iteration (mean seconds by stage; every iteration in kmeans-iterations.csv)\n\n| k | broadcast | map | stage 1 | stage 2 | stage 3 |\n|---|---|---|---|---|---|\n");
    for line in stages.csv.lines().skip(1) {
        let cols: Vec<String> = line
            .split(',')
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    c.to_string()
                } else {
                    c.parse::<f64>()
                        .map_or(c.to_string(), |v| format!("{v:.3}"))
                }
            })
            .collect();
        let _ = writeln!(md, "| {} |", cols.join(" | "));
    }
    if !stages.cats.is_empty() {
        md.push_str("\n![k-means stages](kmeans.png)\n");
    }
    md.push_str("\n## Steps (seconds of cached steps: when they ran)\n\n| stage | step | seconds | status |\n|---|---|---|---|\n");
    for s in run.steps {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} |",
            s.stage,
            s.label,
            s.seconds,
            if s.cached { "cached" } else { "ran" }
        );
    }
    md
}

/// The one-screen end of a run: steps with their times, then accuracies.
pub fn summary(steps: &[Step], outcomes: &[Outcome]) {
    println!("\nstage       step                  seconds  status");
    for s in steps {
        println!(
            "{:<11} {:<21} {:>7.1}  {}",
            s.stage,
            s.label,
            s.seconds,
            if s.cached { "cached" } else { "ran" }
        );
    }
    if !outcomes.is_empty() {
        println!(
            "\n{:>7}  {:<14} {:>9} {:>9}",
            "k", "attribute", "accuracy", "balanced"
        );
        for o in outcomes {
            println!(
                "{:>7}  {:<14} {:>9.4} {:>9.4}",
                o.k, o.attribute, o.scores.accuracy, o.scores.balanced_accuracy
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accuracy_axis_is_scaled_to_the_values() {
        let outcome = |accuracy| Outcome {
            k: 4,
            attribute: "a".into(),
            scores: Scores {
                accuracy,
                balanced_accuracy: accuracy,
                scored: 10,
            },
        };
        let (lo, hi) = accuracy_range(&[outcome(0.7), outcome(0.9)]);
        assert!(
            (lo - 0.67).abs() < 1e-9 && (hi - 0.93).abs() < 1e-9,
            "{lo} {hi}"
        );
        assert_eq!(accuracy_range(&[outcome(1.0)]), (0.98, 1.0));
        assert_eq!(accuracy_range(&[]), (0.0, 1.0));
    }
}
