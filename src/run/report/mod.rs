//! The run's report (`WORK/report/`: report.md, CSVs, PNG figures) and its one-screen summary.
//!
//! What the report is made of is in `results`; `tables` writes the CSVs, `figures` the PNGs and
//! `markdown` report.md.

mod errs;
mod figures;
mod markdown;
mod results;
mod tables;

use std::path::Path;

use anyhow::Context;

pub use self::markdown::headline;
pub use self::results::{
    Dictionaries, Mixture, Outcome, Run, Summary, TrialResult, Vocabulary, summarise,
};

use self::markdown::markdown;
use self::tables::{
    Stages, accuracy_csv, mixtures, steps_csv, trials_csv, vocabularies, write_file,
};
use super::step::Step;

/// Writes the report as the folder `dir`: whole beside it, then put in its place, so that the
/// files of an earlier report this one does not make (an attribute dropped, vocabularies become
/// mixtures) go with it.
pub fn write(dir: &Path, run: &Run<'_>) -> anyhow::Result<()> {
    let name = dir
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    let (tmp, old) = (
        dir.with_file_name(format!(".tmp-{name}")),
        dir.with_file_name(format!(".old-{name}")),
    );
    // A report killed while it swapped is put right first, as a step is.
    crate::run::step::recover(dir, &old)?;
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("cannot remove {}", tmp.display()))?;
    }
    vocab_pipeline::output::create_dir_all(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    write_into(&tmp, run)?;
    crate::run::step::replace(&tmp, dir, &old)
}

/// The report's files, written into `dir`.
fn write_into(dir: &Path, run: &Run<'_>) -> anyhow::Result<()> {
    let summaries = summarise(run.trials);
    accuracy_csv(dir, &summaries)?;
    figures::accuracy(dir, &summaries, run.dictionaries)?;
    trials_csv(dir, run.trials)?;
    // The vocabularies (or mixtures) of the first trial (every trial's steps are in
    // steps.csv); a run that learns none writes no table of them.
    let first: &[Vocabulary] = run.trials.first().map_or(&[], |t| &t.vocabularies);
    let stages = Stages::of(first);
    let (mut vocab_md, iterations) = vocabularies(first);
    if !first.is_empty() {
        write_file(dir, "kmeans.csv", &stages.csv)?;
        write_file(dir, "kmeans-iterations.csv", &iterations)?;
    }
    figures::kmeans_stages(dir, &stages)?;
    let learned: &[Mixture] = run.trials.first().map_or(&[], |t| &t.mixtures);
    if !learned.is_empty() {
        let (md, summary, steps) = mixtures(learned)?;
        write_file(dir, "mixture.csv", &summary)?;
        write_file(dir, "mixture-steps.csv", &steps)?;
        vocab_md = md;
    }
    steps_csv(dir, run.steps)?;
    let headline = headline(run, &summaries)?;
    let vocab_md = format!("{vocab_md}{}", figures::words(dir, run));
    let errs_md = errs::write(dir, &errs::errs(run.trials, &summaries), run.dictionaries)?;
    let sections = (vocab_md.as_str(), errs_md.as_str());
    write_file(
        dir,
        "report.md",
        &markdown(run, &headline, &summaries, sections, &stages),
    )
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
