//! Where a run errs: for every attribute of more than two classes, at the dictionary size where
//! it scores best, each class's accuracy and the confusion matrix as shares of each class's
//! photos, the mean over the trials (`classes-<attribute>.csv`, `confusion-<attribute>.csv`
//! and `.png`), with their section of `report.md`.

use std::fmt::Write as _;
use std::path::Path;

use super::results::{Dictionaries, Summary, TrialResult};
use super::tables::{rate, write_file};
use crate::classify_cmd::Confusion;

/// One attribute's errors at one dictionary size, over the trials.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Errs {
    /// The attribute.
    pub(super) attribute: String,
    /// The dictionary size.
    pub(super) k: usize,
    /// Its classes.
    pub(super) classes: Vec<String>,
    /// Per class: mean accuracy, its sample deviation over the trials, photos a trial.
    pub(super) per_class: Vec<(f64, f64, f64)>,
    /// `rates[truth][predicted]`: the mean share of the class's photos.
    pub(super) rates: Vec<Vec<f64>>,
    /// Trials it is the mean of.
    pub(super) trials: usize,
}

/// Mean and sample deviation of `values` (0 for one).
fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n.max(1.0);
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

/// The errors of the attributes of more than two classes in `summaries`, each at its best size
/// (the smaller on a tie), from the trials' confusion matrices; an attribute whose trials did
/// not all keep theirs (steps cached before they were kept) is left out.
pub(super) fn errs(trials: &[TrialResult], summaries: &[Summary]) -> Vec<Errs> {
    let mut attributes: Vec<&str> = Vec::new();
    for s in summaries {
        if !attributes.contains(&s.attribute.as_str()) {
            attributes.push(&s.attribute);
        }
    }
    let mut all = Vec::new();
    for attribute in attributes {
        let best = (summaries.iter().filter(|s| s.attribute == attribute)).fold(
            None::<&Summary>,
            |b, s| match b {
                Some(b) if b.accuracy >= s.accuracy => Some(b),
                _ => Some(s),
            },
        );
        let Some(best) = best else { continue };
        let matrices: Option<Vec<&Confusion>> = (trials.iter())
            .map(|t| {
                (t.outcomes.iter())
                    .find(|o| o.k == best.k && o.attribute == attribute)
                    .and_then(|o| o.scores.confusion.as_ref())
            })
            .collect();
        let Some(matrices) = matrices.filter(|m| !m.is_empty()) else {
            continue;
        };
        let classes = &matrices[0].classes;
        if classes.len() <= 2 || matrices.iter().any(|m| &m.classes != classes) {
            continue;
        }
        all.push(of_matrices(attribute, best.k, classes, &matrices));
    }
    all
}

/// The errors of `matrices` (one a trial, over `classes`).
fn of_matrices(attribute: &str, k: usize, classes: &[String], matrices: &[&Confusion]) -> Errs {
    let n = classes.len();
    let mut rates = vec![vec![0.0; n]; n];
    let mut per_class = Vec::with_capacity(n);
    for i in 0..n {
        // A trial with no photo of the class says nothing of it.
        let rows: Vec<(&Vec<usize>, f64)> = (matrices.iter())
            .map(|m| (&m.counts[i], m.counts[i].iter().sum::<usize>() as f64))
            .filter(|&(_, total)| total > 0.0)
            .collect();
        for (j, cell) in rates[i].iter_mut().enumerate() {
            let shares: Vec<f64> = rows.iter().map(|(r, total)| r[j] as f64 / total).collect();
            *cell = mean_std(&shares).0;
        }
        let right: Vec<f64> = rows.iter().map(|(r, total)| r[i] as f64 / total).collect();
        let (mean, std) = mean_std(&right);
        let photos = rows.iter().map(|(_, total)| total).sum::<f64>() / matrices.len() as f64;
        per_class.push((mean, std, photos));
    }
    Errs {
        attribute: attribute.to_string(),
        k,
        classes: classes.to_vec(),
        per_class,
        rates,
        trials: matrices.len(),
    }
}

/// An attribute's name in a file name: letters, digits, `-` and `_` kept, the rest `_`.
fn file_name(attribute: &str) -> String {
    (attribute.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes each attribute's CSVs and heatmap into `dir`; returns their section of report.md.
pub(super) fn write(
    dir: &Path,
    errs: &[Errs],
    dictionaries: Dictionaries,
) -> anyhow::Result<String> {
    let mut md = String::new();
    for e in errs {
        let name = file_name(&e.attribute);
        let rows = e
            .classes
            .iter()
            .zip(&e.per_class)
            .map(|(c, &(mean, std, photos))| {
                vec![c.clone(), rate(mean), rate(std), format!("{photos:.1}")]
            });
        let csv = crate::tables::csv_text(&["class", "accuracy", "std", "photos"], rows)?;
        write_file(dir, &format!("classes-{name}.csv"), &csv)?;
        let header: Vec<&str> = std::iter::once("truth")
            .chain(e.classes.iter().map(String::as_str))
            .collect();
        let rows = e.classes.iter().zip(&e.rates).map(|(c, row)| {
            std::iter::once(c.clone())
                .chain(row.iter().map(|&v| rate(v)))
                .collect::<Vec<_>>()
        });
        write_file(
            dir,
            &format!("confusion-{name}.csv"),
            &crate::tables::csv_text(&header, rows)?,
        )?;
        let size = format!(
            "{} = {}",
            dictionaries.letter(),
            super::markdown::thousands(e.k)
        );
        let mean = if e.trials > 1 {
            format!("mean of {} trials", e.trials)
        } else {
            "one trial".to_string()
        };
        let title = format!("{}: confusion at {size} ({mean})", e.attribute);
        crate::figures::heatmap(
            &dir.join(format!("confusion-{name}.png")),
            &title,
            &e.classes,
            &e.rates,
        )?;
        let _ = write!(
            md,
            "\n## Where it errs: {} at {size} ({mean})\n\n| class | accuracy | std | photos a trial |\n|---|---|---|---|\n",
            crate::tables::md_cell(&e.attribute)
        );
        for (c, &(mean, std, photos)) in e.classes.iter().zip(&e.per_class) {
            let _ = writeln!(
                md,
                "| {} | {:.1}% | {:.1} | {photos:.1} |",
                crate::tables::md_cell(c),
                100.0 * mean,
                100.0 * std
            );
        }
        let _ = writeln!(
            md,
            "\n![confusion of {0}](confusion-{1}.png)\n\n(Each class's accuracy and confusion as shares of its photos: classes-{1}.csv, confusion-{1}.csv.)",
            crate::tables::md_cell(&e.attribute),
            name
        );
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_the_mean_shares_of_each_class_s_photos() {
        let classes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let one = Confusion {
            classes: classes.clone(),
            counts: vec![vec![2, 0, 0], vec![1, 3, 0], vec![0, 0, 0]],
        };
        let two = Confusion {
            classes: classes.clone(),
            counts: vec![vec![1, 1, 0], vec![0, 4, 0], vec![0, 1, 1]],
        };
        let e = of_matrices("kind", 8, &classes, &[&one, &two]);
        // Class a: 100% then 50%; b: 75% then 100%; c: only the second trial has photos.
        assert_eq!(e.rates[0], [0.75, 0.25, 0.0]);
        assert_eq!(e.rates[1], [0.125, 0.875, 0.0]);
        assert_eq!(e.rates[2], [0.0, 0.5, 0.5]);
        let (mean, std, photos) = e.per_class[0];
        assert!((mean - 0.75).abs() < 1e-12 && (std - 0.5f64.sqrt() / 2.0).abs() < 1e-12);
        assert_eq!(photos, 2.0);
        assert_eq!(e.per_class[2], (0.5, 0.0, 1.0));
        assert_eq!(file_name("elevation (m)"), "elevation__m_");
    }
}
