//! Where a run errs: for every attribute of more than two classes, at the dictionary size where
//! it scores best, each class's accuracy and the confusion matrix as shares of each class's
//! photos, the mean over the trials (`classes-<attribute>.csv`, `confusion-<attribute>.csv`
//! and `.png`), with their section of `report.md`.

use std::fmt::Write as _;
use std::path::Path;

use super::results::{Dictionaries, Summary, TrialResult, best};
use super::tables::{rate, write_file};
use crate::classify_cmd::Confusion;

/// One class's errors over the trials with photos of it: mean accuracy, its sample deviation
/// (none from fewer than two trials), photos a trial.
type Class = (f64, Option<f64>, f64);

/// One attribute's errors at one dictionary size, over the trials.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Errs {
    /// The attribute.
    pub(super) attribute: String,
    /// The dictionary size.
    pub(super) k: usize,
    /// Its classes.
    pub(super) classes: Vec<String>,
    /// Per class, none when no trial scored a photo of it.
    pub(super) per_class: Vec<Option<Class>>,
    /// `rates[truth][predicted]`: the mean share of the class's photos.
    pub(super) rates: Vec<Vec<f64>>,
    /// Trials it is the mean of.
    pub(super) trials: usize,
}

/// What [`errs`] found: each attribute's errors, and the attributes of more than two classes
/// it could not show, with why.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub(super) errs: Vec<Errs>,
    pub(super) left_out: Vec<(String, &'static str)>,
}

/// Mean of `values` (none of none) and their sample deviation (none from fewer than two).
fn mean_std(values: &[f64]) -> Option<(f64, Option<f64>)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, (values.len() > 1).then(|| var.sqrt())))
}

/// The errors of the attributes of more than two classes in `summaries`, each at its best size
/// ([`best`], the size the report's opening line names), from the trials' confusion matrices;
/// an attribute whose trials did not all keep theirs (steps cached before they were kept) is
/// left out, saying so.
pub(super) fn errs(trials: &[TrialResult], summaries: &[Summary]) -> Found {
    let mut attributes: Vec<&str> = Vec::new();
    for s in summaries {
        if !attributes.contains(&s.attribute.as_str()) {
            attributes.push(&s.attribute);
        }
    }
    let mut found = Found::default();
    for attribute in attributes {
        let Some(best) = best(summaries, attribute) else {
            continue;
        };
        let matrices: Option<Vec<&Confusion>> = (trials.iter())
            .map(|t| {
                (t.outcomes.iter())
                    .find(|o| o.k == best.k && o.attribute == attribute)
                    .and_then(|o| o.scores.confusion.as_ref())
            })
            .collect();
        let Some(matrices) = matrices.filter(|m| !m.is_empty()) else {
            let why = "its svm steps were made before they kept their confusion";
            found.left_out.push((attribute.to_string(), why));
            continue;
        };
        let classes = &matrices[0].classes;
        if classes.len() <= 2 {
            continue;
        }
        if matrices.iter().any(|m| &m.classes != classes) {
            found
                .left_out
                .push((attribute.to_string(), "its trials' classes differ"));
            continue;
        }
        found
            .errs
            .push(of_matrices(attribute, best.k, classes, &matrices));
    }
    found
}

/// The errors of `matrices` (one a trial, over `classes`).
fn of_matrices(attribute: &str, k: usize, classes: &[String], matrices: &[&Confusion]) -> Errs {
    let n = classes.len();
    let mut rates = vec![vec![0.0; n]; n];
    let mut per_class = Vec::with_capacity(n);
    let count = |row: &[usize], j: usize| row.get(j).map_or(0.0, |&c| c as f64);
    for (i, shares) in rates.iter_mut().enumerate() {
        // A trial with no photo of the class says nothing of it. (Counts summed as f64: a file
        // could hold any.)
        let rows: Vec<(&Vec<usize>, f64)> = (matrices.iter())
            .filter_map(|m| m.counts.get(i))
            .map(|r| (r, r.iter().map(|&c| c as f64).sum::<f64>()))
            .filter(|&(_, total)| total > 0.0)
            .collect();
        for (j, cell) in shares.iter_mut().enumerate() {
            let of_trials: Vec<f64> = rows.iter().map(|(r, total)| count(r, j) / total).collect();
            *cell = mean_std(&of_trials).map_or(0.0, |(mean, _)| mean);
        }
        let right: Vec<f64> = rows.iter().map(|(r, total)| count(r, i) / total).collect();
        let photos = rows.iter().map(|(_, total)| total).sum::<f64>() / matrices.len() as f64;
        per_class.push(mean_std(&right).map(|(mean, std)| (mean, std, photos)));
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

/// An attribute's name in a file name: letters, digits, `-` and `_` kept, the rest `_`; a name
/// `taken` already (two attributes alike but for such characters, or but for case) gets `-2`,
/// `-3`, ...
fn file_name(attribute: &str, taken: &mut Vec<String>) -> String {
    let base: String = (attribute.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = base.clone();
    let mut n = 1;
    while taken.iter().any(|t| t.eq_ignore_ascii_case(&name)) {
        n += 1;
        name = format!("{base}-{n}");
    }
    taken.push(name.clone());
    name
}

/// Most classes a confusion's heatmap draws (its CSV has them all).
const MOST_DRAWN: usize = 40;

/// A class's line of the per-class CSV: accuracy, deviation, photos a trial (empty cells for
/// what there is none of).
fn class_row(class: &str, of: Option<Class>) -> Vec<String> {
    match of {
        Some((mean, std, photos)) => vec![
            class.to_string(),
            rate(mean),
            std.map(rate).unwrap_or_default(),
            format!("{photos:.1}"),
        ],
        None => vec![class.to_string(), String::new(), String::new(), "0".into()],
    }
}

/// Writes each attribute's CSVs and heatmap into `dir`; returns their section of report.md.
pub(super) fn write(
    dir: &Path,
    found: &Found,
    dictionaries: Dictionaries,
) -> anyhow::Result<String> {
    let mut md = String::new();
    let mut taken = Vec::new();
    for e in &found.errs {
        let name = file_name(&e.attribute, &mut taken);
        let rows = (e.classes.iter().zip(&e.per_class)).map(|(c, &of)| class_row(c, of));
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
        let csv = crate::tables::csv_text(&header, rows)?;
        write_file(dir, &format!("confusion-{name}.csv"), &csv)?;
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
        let drawn = e.classes.len() <= MOST_DRAWN;
        if drawn {
            let title = format!("{}: confusion at {size} ({mean})", e.attribute);
            let png = dir.join(format!("confusion-{name}.png"));
            crate::figures::heatmap(&png, &title, &e.classes, &e.rates)?;
        }
        let _ = write!(
            md,
            "\n## Where it errs: {} at {size} ({mean})\n\n| class | accuracy | std | photos a trial |\n|---|---|---|---|\n",
            crate::tables::md_cell(&e.attribute)
        );
        for (c, of) in e.classes.iter().zip(&e.per_class) {
            let cells = match of {
                Some((mean, std, photos)) => format!(
                    "{:.1}% | {} | {photos:.1}",
                    100.0 * mean,
                    std.map_or("-".into(), |s| format!("{:.1}", 100.0 * s))
                ),
                None => "no photos | - | 0".into(),
            };
            let _ = writeln!(md, "| {} | {cells} |", crate::tables::md_cell(c));
        }
        if drawn {
            let _ = writeln!(
                md,
                "\n![confusion of {}](confusion-{name}.png)",
                crate::tables::md_cell(&e.attribute)
            );
        }
        let _ = writeln!(
            md,
            "\n(Each class's accuracy and confusion as shares of its photos: classes-{name}.csv, \
             confusion-{name}.csv{}.)",
            if drawn {
                ""
            } else {
                "; too many classes to draw"
            }
        );
    }
    for (attribute, why) in &found.left_out {
        let _ = writeln!(
            md,
            "\n(Where {} errs is not shown: {why}.)",
            crate::tables::md_cell(attribute)
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
        let (mean, std, photos) = e.per_class[0].expect("photos of a");
        let std = std.expect("two trials");
        assert!((mean - 0.75).abs() < 1e-12 && (std - 0.5f64.sqrt() / 2.0).abs() < 1e-12);
        assert_eq!(photos, 2.0);
        // One trial's photos: no deviation; none at all: no accuracy, empty cells.
        assert_eq!(e.per_class[2], Some((0.5, None, 1.0)));
        let none = Confusion {
            classes: classes.clone(),
            counts: vec![vec![1, 0, 0], vec![0, 1, 0], vec![0, 0, 0]],
        };
        let e = of_matrices("kind", 8, &classes, &[&none]);
        assert_eq!(e.per_class[2], None);
        assert_eq!(e.rates[2], [0.0, 0.0, 0.0]);
        assert_eq!(class_row("c", None), ["c", "", "", "0"]);
        let mut taken = Vec::new();
        assert_eq!(file_name("elevation (m)", &mut taken), "elevation__m_");
        assert_eq!(file_name("elevation [m]", &mut taken), "elevation__m_-2");
        assert_eq!(file_name("Elevation (m)", &mut taken), "Elevation__m_-3");
    }
}
