//! The run's report (`WORK/report/`: report.md, CSVs, PNG figures) and its one-screen summary.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use vocab_pipeline::kmeans::files::RunMeta;

use super::dataset::Dataset;
use super::protocol::Trial;
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
    /// Its file.
    pub path: std::path::PathBuf,
    /// Its run's record.
    pub meta: RunMeta,
    /// Its run's iterations.
    pub per_iteration: PerIteration,
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

    /// What the size is, in a figure's title, and its axis.
    fn size_names(self) -> (&'static str, &'static str) {
        match self {
            Self::Vocabularies => ("vocabulary size", "vocabulary size K"),
            Self::Mixtures => ("mixture size", "Gaussians G"),
        }
    }
}

/// The accuracy axis: the values with a margin, within [0, 1].
fn accuracy_range(summaries: &[Summary]) -> (f64, f64) {
    let values = summaries.iter().map(|o| o.accuracy);
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
    vocab_pipeline::output::create_dir_all(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let summaries = summarise(run.trials);
    accuracy(dir, &summaries, run.dictionaries)?;
    trials_csv(dir, run.trials)?;
    // The vocabularies of the first trial (every trial's steps are in steps.csv).
    let first: &[Vocabulary] = run.trials.first().map_or(&[], |t| &t.vocabularies);
    let stages = Stages::of(first);
    write_file(dir, "kmeans.csv", &stages.csv)?;
    let (vocab_md, iterations) = vocabularies(first);
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
    let headline = headline(run, &summaries)?;
    let vocab_md = format!("{vocab_md}{}", words(dir, run));
    write_file(
        dir,
        "report.md",
        &markdown(run, &headline, &summaries, &vocab_md, &stages),
    )
}

/// The largest vocabulary of the first trial drawn as patches of its training photos
/// (`words-kK.png` beside `words-kK.png.csv`), as a section of the report; a montage that cannot
/// be drawn is said there (and on stderr) rather than failing the report.
fn words(dir: &Path, run: &Run<'_>) -> String {
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

/// The best result of each attribute and the protocol that produced it, one line each:
/// "class, 15 classes: 80.1 ± 1.2% at K = 1,024 (10 random splits of ...)".
pub fn headline(run: &Run<'_>, summaries: &[Summary]) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    for attribute in run.attributes {
        let best = summaries.iter().filter(|s| s.attribute == *attribute).fold(
            None::<&Summary>,
            |best, s| match best {
                Some(b) if b.accuracy >= s.accuracy => Some(b),
                _ => Some(s),
            },
        );
        let Some(best) = best else { continue };
        let classes = vocab_pipeline::classify::read_labels(&run.dataset.labels, attribute)?
            .classes
            .len();
        let spread = if best.trials > 1 {
            format!(" ± {:.1}", 100.0 * best.std)
        } else {
            String::new()
        };
        lines.push(format!(
            "{attribute}, {classes} classes: {:.1}{spread}% at {} = {} ({})",
            100.0 * best.accuracy,
            run.dictionaries.letter(),
            thousands(best.k),
            run.protocol
        ));
    }
    Ok(lines)
}

/// `1024` as `1,024`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `trials.csv`: every trial's scores.
fn trials_csv(dir: &Path, trials: &[TrialResult]) -> anyhow::Result<()> {
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
                    o.scores.accuracy.to_string(),
                    o.scores.balanced_accuracy.to_string(),
                    o.scores.scored.to_string(),
                ]
            })
        }),
    )?;
    write_file(dir, "trials.csv", &csv)
}

/// `accuracy.csv` and its figure: accuracy per attribute and vocabulary size (the mean over the
/// trials, with their standard deviation).
fn accuracy(dir: &Path, summaries: &[Summary], dictionaries: Dictionaries) -> anyhow::Result<()> {
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
                o.accuracy.to_string(),
                o.balanced_accuracy.to_string(),
                o.held_out.to_string(),
                o.std.to_string(),
                o.trials.to_string(),
            ]
        }),
    )?;
    write_file(dir, "accuracy.csv", &csv)?;
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
        })
        .collect();
    let trials = summaries.first().map_or(1, |s| s.trials);
    if !series.is_empty() {
        let (what, axis) = dictionaries.size_names();
        figures::line_chart_log2(
            &dir.join("accuracy.png"),
            &if trials > 1 {
                format!("Accuracy against {what} (mean of {trials} trials)")
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
fn markdown(
    run: &Run<'_>,
    headline: &[String],
    summaries: &[Summary],
    vocab_md: &str,
    stages: &Stages,
) -> String {
    let mut md = format!("# Run report: {}\n\n", run.config.display());
    for line in headline {
        let _ = writeln!(md, "- {}", crate::tables::md_cell(line));
    }
    let trials = run.trials.len();
    let _ = write!(
        md,
        "\n## Dataset\n\n- photos: {} (labels {})\n- protocol: {}\n",
        run.dataset.photos.display(),
        run.dataset.labels.display(),
        run.protocol
    );
    if let Some(first) = run.trials.first() {
        let Sample {
            train,
            test,
            described,
        } = first.sample;
        match run.test {
            Some(t) => {
                let _ = writeln!(
                    md,
                    "- training: all {train} photos; test folder {} (labels {})",
                    t.photos.display(),
                    t.labels.display()
                );
            }
            None => {
                let each = if trials > 1 { " (each trial)" } else { "" };
                let _ = writeln!(md, "- split{each}: {train} training, {test} held out");
            }
        }
        let _ = writeln!(
            md,
            "- vocabulary sample: random patches of {described} training photos{}",
            if trials > 1 { " (trial 1)" } else { "" }
        );
        if run.mirrored {
            md.push_str(
                "- models train on the training photos and their mirror images (left to \
                 right, each in its photo's cross-validation fold)\n",
            );
        }
    }
    let scope = match (run.test, trials) {
        (Some(_), _) => "the test folder".to_string(),
        (None, 1) => "held-out photos".to_string(),
        (None, n) => format!("mean and standard deviation over {n} trials; each in trials.csv"),
    };
    let _ = write!(md, "\n## Accuracy ({scope})\n\n");
    if trials > 1 {
        let _ = write!(
            md,
            "| {} | attribute | accuracy | std | balanced accuracy | held out |\n|---|---|---|---|---|---|\n",
            run.dictionaries.letter()
        );
    } else {
        let _ = write!(
            md,
            "| {} | attribute | accuracy | balanced accuracy | held out |\n|---|---|---|---|---|\n",
            run.dictionaries.letter()
        );
    }
    for o in summaries {
        let std = if trials > 1 {
            format!(" {:.4} |", o.std)
        } else {
            String::new()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} |{std} {:.4} | {} |",
            o.k,
            crate::tables::md_cell(&o.attribute),
            o.accuracy,
            o.balanced_accuracy,
            o.held_out
        );
    }
    md.push_str("\n![accuracy](accuracy.png)\n");
    // Vocabularies and their k-means (a Fisher-vector run learns mixtures: its steps say when).
    if run
        .trials
        .first()
        .is_some_and(|t| !t.vocabularies.is_empty())
    {
        if trials > 1 {
            md.push_str("\n## Vocabularies (trial 1)\n\n");
        } else {
            md.push_str("\n## Vocabularies\n\n");
        }
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

/// The one-screen end of a run: steps with their times, then accuracies and the best result of
/// each attribute with the protocol that produced it.
pub fn summary(
    steps: &[Step],
    summaries: &[Summary],
    headline: &[String],
    dictionaries: Dictionaries,
) {
    let size = dictionaries.letter();
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
    if !summaries.is_empty() {
        let trials = summaries[0].trials;
        if trials > 1 {
            println!(
                "\n{:>7}  {:<14} {:>9} {:>7} {:>9}",
                size, "attribute", "accuracy", "std", "balanced"
            );
        } else {
            println!(
                "\n{:>7}  {:<14} {:>9} {:>9}",
                size, "attribute", "accuracy", "balanced"
            );
        }
        for o in summaries {
            if trials > 1 {
                println!(
                    "{:>7}  {:<14} {:>9.4} {:>7.4} {:>9.4}",
                    o.k, o.attribute, o.accuracy, o.std, o.balanced_accuracy
                );
            } else {
                println!(
                    "{:>7}  {:<14} {:>9.4} {:>9.4}",
                    o.k, o.attribute, o.accuracy, o.balanced_accuracy
                );
            }
        }
    }
    if !headline.is_empty() {
        println!();
        for line in headline {
            println!("{line}");
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
