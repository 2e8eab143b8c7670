//! The report's figures: accuracy against the vocabulary size (`accuracy.png`), the k-means
//! stages' seconds (`kmeans.png`), and the largest vocabulary's words drawn as patches
//! (`words-kK.png`) with its section of `report.md`.

use std::path::Path;

use anyhow::Context;

use super::markdown::thousands;
use super::results::{Dictionaries, Run, Summary};
use super::tables::Stages;
use crate::figures::{self, Series};

impl Dictionaries {
    /// What the size is, in a figure's title, and its axis.
    fn size_names(self) -> (&'static str, &'static str) {
        match self {
            Self::Vocabularies => ("vocabulary size", "vocabulary size K"),
            Self::Mixtures => ("mixture size", "Gaussians G"),
        }
    }
}

/// The accuracy axis: the values and their deviations with a margin, within [0, 1].
fn accuracy_range(summaries: &[Summary]) -> (f64, f64) {
    let lo = (summaries.iter().map(|o| o.accuracy - o.std)).fold(f64::INFINITY, f64::min);
    let hi = (summaries.iter().map(|o| o.accuracy + o.std)).fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let margin = ((hi - lo) * 0.15).max(0.02);
    ((lo - margin).max(0.0), (hi + margin).min(1.0))
}

/// `accuracy.png`: accuracy per attribute against the vocabulary size (the mean over the trials,
/// plus or minus their deviation); with one size, a bar per attribute.
pub(super) fn accuracy(
    dir: &Path,
    summaries: &[Summary],
    dictionaries: Dictionaries,
) -> anyhow::Result<()> {
    let mut attributes: Vec<&str> = summaries.iter().map(|o| o.attribute.as_str()).collect();
    attributes.sort_unstable();
    attributes.dedup();
    let series: Vec<Series> = attributes
        .iter()
        .map(|a| Series {
            name: (*a).to_string(),
            points: summaries
                .iter()
                .filter(|o| o.attribute == *a)
                .map(|o| (o.k as f64, o.accuracy))
                .collect(),
            errors: (summaries.iter())
                .filter(|o| o.attribute == *a && o.trials > 1)
                .map(|o| o.std)
                .collect(),
        })
        .collect();
    let trials = summaries.first().map_or(1, |s| s.trials);
    let one_size = series.iter().all(|s| s.points.len() == 1);
    if one_size && !series.is_empty() {
        let (what, _) = dictionaries.size_names();
        let k = summaries.first().map_or(0, |s| s.k);
        let bars: Vec<figures::Bar> = (summaries.iter())
            .map(|o| figures::Bar {
                name: o.attribute.clone(),
                value: o.accuracy,
                error: o.std,
            })
            .collect();
        let of = if trials > 1 {
            format!("mean ± std of {trials} trials")
        } else {
            "one trial".to_string()
        };
        let title = format!(
            "Accuracy at {what} {} = {} ({of})",
            dictionaries.letter(),
            thousands(k)
        );
        let range = accuracy_range(summaries);
        figures::bars_with_errors(
            &dir.join("accuracy.png"),
            (&title, "accuracy"),
            range,
            &bars,
        )?;
    } else if !series.is_empty() {
        let (what, axis) = dictionaries.size_names();
        figures::line_chart_log2(
            &dir.join("accuracy.png"),
            &if trials > 1 {
                format!("Accuracy against {what} (mean ± std of {trials} trials)")
            } else {
                format!("Held-out accuracy against {what}")
            },
            axis,
            "accuracy",
            accuracy_range(summaries),
            &series,
        )?;
    }
    Ok(())
}

/// `kmeans.png`: the k-means runs' mean seconds per iteration by stage (runs on a team only).
pub(super) fn kmeans_stages(dir: &Path, stages: &Stages) -> anyhow::Result<()> {
    if !stages.cats.is_empty() {
        figures::grouped_bars_log(
            &dir.join("kmeans.png"),
            "k-means: mean seconds per iteration by stage",
            "seconds (log scale)",
            &stages.cats,
            &stages.groups,
        )?;
    }
    Ok(())
}

/// The largest vocabulary of the first trial drawn as patches of its training photos
/// (`words-kK.png` beside `words-kK.png.csv`), as a section of the report; a montage that cannot
/// be drawn is said there (and on stderr) rather than failing the report.
pub(super) fn words(dir: &Path, run: &Run<'_>) -> String {
    let Some(trial) = run.trials.first() else {
        return String::new();
    };
    let Some(vocabulary) = trial.vocabularies.iter().max_by_key(|v| v.k) else {
        return String::new();
    };
    let k = vocabulary.k;
    let name = format!("words-k{k}.png");
    let drawn = (|| -> anyhow::Result<vocab_pipeline::montage::Montage> {
        let text = vocab_pipeline::input::read_text(&trial.split_csv, 1 << 30)
            .with_context(|| format!("cannot read {}", trial.split_csv.display()))?;
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let mut training = Vec::new();
        for row in reader.records() {
            let row = row.with_context(|| format!("{}", trial.split_csv.display()))?;
            if row.get(1) == Some("train") {
                training.push((row.get(0).unwrap_or_default().to_string(), None));
            }
        }
        let photos = vocab_pipeline::image_io::Collection::listed(&run.dataset.photos, training)?;
        crate::words_cmd::montage(&vocabulary.path, &photos, run.words, &dir.join(&name))
    })();
    let of_trial = if run.trials.len() > 1 {
        ", trial 1"
    } else {
        ""
    };
    match drawn {
        Ok(m) => format!(
            "\n## Visual words (K = {}{of_trial})\n\nThe {} words nearest to the most patches among {} \
             random patches of {} training photos, a row each, most used first; each row its {} \
             patches nearest the word, nearest first (`{name}.csv` names the photo and place of \
             each).\n\n\
             ![visual words]({name})\n",
            thousands(k),
            m.rows.len(),
            thousands(m.patches),
            thousands(m.photos),
            run.words.patches,
        ),
        Err(e) => {
            eprintln!("report: the words of K = {k} were not drawn: {e:#}");
            format!(
                "\n## Visual words (K = {k})\n\nNot drawn: {}\n",
                crate::tables::md_cell(&format!("{e:#}"))
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accuracy_axis_is_scaled_to_the_values() {
        let outcome = |accuracy| Summary {
            k: 4,
            attribute: "a".into(),
            accuracy,
            std: 0.0,
            balanced_accuracy: accuracy,
            held_out: 10,
            trials: 1,
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
