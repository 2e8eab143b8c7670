//! `report.md`: the best results, then the dataset, accuracy, vocabularies and steps sections;
//! and the best-result lines the one-screen summary ends with.

use std::fmt::Write as _;

use super::results::{Run, Summary};
use super::tables::Stages;
use crate::run::stages::Sample;
use crate::run::step::Step;

/// The best result of each attribute and the protocol that produced it, one line each:
/// "class, 15 classes: 80.1 ± 1.2% at K = 1,024 (10 random splits of ...)".
pub fn headline(run: &Run<'_>, summaries: &[Summary]) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    for attribute in run.attributes {
        let Some(best) = super::results::best(summaries, attribute) else {
            continue;
        };
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
pub(super) fn thousands(n: usize) -> String {
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

/// `report.md`.
pub(super) fn markdown(
    run: &Run<'_>,
    headline: &[String],
    summaries: &[Summary],
    (vocab_md, errs_md): (&str, &str),
    stages: &Stages,
) -> String {
    let mut md = format!("# Run report: {}\n\n", run.config.display());
    for line in headline {
        let _ = writeln!(md, "- {}", crate::tables::md_cell(line));
    }
    dataset_section(&mut md, run);
    accuracy_section(&mut md, run, summaries);
    md.push_str(errs_md);
    vocabularies_section(&mut md, run, vocab_md, stages);
    steps_section(&mut md, run.steps);
    md
}

/// The dataset section: the photos and labels, the protocol, the split and the vocabulary sample.
fn dataset_section(md: &mut String, run: &Run<'_>) {
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
}

/// The accuracy section: per vocabulary size and attribute (over the trials), and its figure.
fn accuracy_section(md: &mut String, run: &Run<'_>, summaries: &[Summary]) {
    let trials = run.trials.len();
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
}

/// The first trial's vocabularies (`vocab_md`: their table and drawn words) and their k-means'
/// mean seconds by stage, when the run learns vocabularies.
fn vocabularies_section(md: &mut String, run: &Run<'_>, vocab_md: &str, stages: &Stages) {
    let trials = run.trials.len();
    let of_first = if trials > 1 { " (trial 1)" } else { "" };
    // Mixtures and their EM (Fisher vectors).
    if run.trials.first().is_some_and(|t| !t.mixtures.is_empty()) {
        let _ = write!(
            md,
            "\n## Mixtures{of_first} (every EM step in mixture-steps.csv)\n\n{vocab_md}"
        );
        return;
    }
    // Vocabularies and their k-means.
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
}

/// The steps section: each step's seconds, and whether it ran or was cached.
fn steps_section(md: &mut String, steps: &[Step]) {
    md.push_str("\n## Steps (seconds of cached steps: when they ran)\n\n| stage | step | seconds | status |\n|---|---|---|---|\n");
    for s in steps {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} |",
            s.stage,
            s.label,
            s.seconds,
            if s.cached { "cached" } else { "ran" }
        );
    }
}
