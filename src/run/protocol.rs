//! How a run scores what it learned: random splits of the dataset, repeated as trials (the
//! field's protocol for 15 scenes: 10 splits of 100 training photos per class), or a separate
//! test folder.
//!
//! Each trial learns its vocabularies and models from its own training photos only: its sample
//! is cut from them (the features step reads the trial's `train.csv`), and its SVMs train on
//! them (the split file). Trial `t` (from 1) splits with seed `split_seed + t - 1`; with more than
//! one trial every step's label carries `-tT`, so trial 1 is not the cached single split of a run
//! without trials. With a test folder the one "trial" trains on every photo, and `split_seed`
//! seeds its cross-validation folds.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};

pub use super::dataset::SplitRule;
use super::dataset::{Dataset, Overrides, Source};
use crate::config::Config;

/// The run's protocol.
#[derive(Debug, Clone)]
pub enum Protocol {
    /// Random splits stratified by the config's `split_by`.
    Splits {
        /// Which photos of each split train.
        rule: SplitRule,
        /// How many splits.
        trials: usize,
        /// The first split's seed.
        seed: u64,
    },
    /// The whole dataset trains; every labelled photo of this folder is scored.
    TestFolder {
        /// Photo folder.
        photos: PathBuf,
        /// Labels CSV.
        labels: PathBuf,
        /// The photos' descriptors made elsewhere (with `[features] from`).
        from: Option<PathBuf>,
        /// `split_seed`: the seed of the SVMs' cross-validation folds.
        seed: u64,
    },
}

/// One split of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trial {
    /// From 0.
    pub index: usize,
    /// Trials of the run.
    pub of: usize,
    /// The split's seed (also the seed of its cross-validation folds).
    pub seed: u64,
    /// Which photos train.
    pub rule: SplitRule,
}

impl Trial {
    /// What the trial's step labels end with: nothing for a run of one trial, `-t3` for the
    /// third of several.
    pub fn suffix(&self) -> String {
        if self.of > 1 {
            format!("-t{}", self.index + 1)
        } else {
            String::new()
        }
    }
}

impl Protocol {
    /// The config's protocol with the command line's `--test`/`--test-labels`; a test folder
    /// that is not there, or that overlaps the photo folder, is refused.
    pub fn resolve(
        config: &Config,
        base: &Path,
        args: &Overrides<'_>,
        photos: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let c = &config.classify;
        let d = &config.dataset;
        let test = match (args.test, &d.test) {
            (Some(t), _) => Some(t.to_path_buf()),
            (None, Some(t)) => Some(base.join(t)),
            (None, None) => None,
        };
        ensure!(
            args.test_labels.is_none() || test.is_some(),
            "--test-labels names the labels of a test folder: give --test DIR too"
        );
        ensure!(
            args.test_from.is_none() || test.is_some(),
            "--test-from names the descriptors of a test folder's photos: give --test DIR too"
        );
        crate::settings::protocol_rules(c.trials, c.train_per_class, test.is_some()).map_err(
            |e| {
                anyhow::anyhow!(
                    "{}: [classify] {} in {}",
                    if args.test.is_some() {
                        "--test"
                    } else {
                        "[dataset] test"
                    },
                    e,
                    args.config.display()
                )
            },
        )?;
        let Some(test) = test else {
            return Ok(Self::Splits {
                rule: c
                    .train_per_class
                    .map_or(SplitRule::Half, SplitRule::PerClass),
                trials: c.trials,
                seed: c.split_seed,
            });
        };
        ensure!(
            test.is_dir(),
            "test folder {} does not exist: point at one with --test DIR, or set [dataset] test \
             in {}",
            test.display(),
            args.config.display()
        );
        if let Some(photos) = photos {
            ensure!(
                !crate::settings::inside(&test, photos) && !crate::settings::inside(photos, &test),
                "the test folder {} and the photo folder {} overlap: test photos must be photos \
                 the vocabulary and the models never saw",
                test.display(),
                photos.display()
            );
        }
        let labels = match (args.test_labels, &d.test_labels, args.test) {
            (Some(l), _, _) => l.to_path_buf(),
            (None, Some(l), None) => base.join(l),
            _ => test.join("labels.csv"),
        };
        ensure!(
            labels.is_file(),
            "test labels {} do not exist: give --test-labels FILE (or set [dataset] test_labels)",
            labels.display()
        );
        let from = test_descriptors(config, base, args, &test)?;
        Ok(Self::TestFolder {
            photos: test,
            labels,
            from,
            seed: c.split_seed,
        })
    }

    /// The trials, in order.
    pub fn trials(&self) -> Vec<Trial> {
        match *self {
            Self::Splits { rule, trials, seed } => (0..trials)
                .map(|index| Trial {
                    index,
                    of: trials,
                    seed: seed.wrapping_add(index as u64),
                    rule,
                })
                .collect(),
            Self::TestFolder { seed, .. } => vec![Trial {
                index: 0,
                of: 1,
                seed,
                rule: SplitRule::All,
            }],
        }
    }

    /// What the protocol is, for people: "10 random splits of 100 training photos per class".
    pub fn describe(&self, split_by: &str, photos: &Path) -> String {
        match self {
            Self::Splits { rule, trials, seed } => {
                let seeds = if *trials > 1 {
                    format!("seeds {seed} to {}", seed.wrapping_add(*trials as u64 - 1))
                } else {
                    format!("seed {seed}")
                };
                let what = match rule {
                    SplitRule::PerClass(n) => {
                        format!("of {n} training photos per {split_by}")
                    }
                    _ => format!("50/50 stratified by {split_by}"),
                };
                match trials {
                    1 => format!("one random split {what}, {seeds}"),
                    n => format!("{n} random splits {what}, {seeds}"),
                }
            }
            Self::TestFolder { photos: test, .. } => format!(
                "every photo of {} trains, every labelled photo of the test folder {} is scored",
                photos.display(),
                test.display()
            ),
        }
    }

    /// The test folder, if the run scores one.
    pub fn test_folder(&self) -> Option<(&Path, &Path)> {
        match self {
            Self::TestFolder { photos, labels, .. } => Some((photos, labels)),
            Self::Splits { .. } => None,
        }
    }

    /// The test folder's descriptors made elsewhere, when the run reads such.
    pub fn test_descriptors(&self) -> Option<&Path> {
        match self {
            Self::TestFolder { from, .. } => from.as_deref(),
            Self::Splits { .. } => None,
        }
    }
}

/// The descriptors made elsewhere of the test folder `test`'s photos (`--test-from`, or the
/// config's `[dataset] test_from` with its test folder): there exactly when the run reads
/// descriptors made elsewhere (`[features] from`), and a folder.
fn test_descriptors(
    config: &Config,
    base: &Path,
    args: &Overrides<'_>,
    test: &Path,
) -> anyhow::Result<Option<PathBuf>> {
    let from = match (args.test_from, &config.dataset.test_from, args.test) {
        (Some(f), _, _) => Some(f.to_path_buf()),
        (None, Some(f), None) => Some(base.join(f)),
        _ => None,
    };
    match (&config.features.from, &from) {
        (Some(_), None) => bail!(
            "the run reads descriptors made elsewhere ([features] from in {}): the test folder \
             {}'s photos need theirs too, in a folder mirroring it (give --test-from DIR, or \
             set [dataset] test_from)",
            args.config.display(),
            test.display()
        ),
        (None, Some(f)) => bail!(
            "{} holds descriptors of the test folder's photos, but the run describes its photos \
             with HOG: set [features] from in {} too, or drop {}",
            f.display(),
            args.config.display(),
            if args.test_from.is_some() {
                "--test-from"
            } else {
                "[dataset] test_from"
            }
        ),
        _ => {}
    }
    if let Some(f) = &from {
        ensure!(
            f.is_dir(),
            "descriptor folder {} of the test folder's photos does not exist",
            f.display()
        );
    }
    Ok(from)
}

/// Checks, before any stage, that the test folder's labels give every attribute the classes
/// the dataset's give (a model scores only the classes it learned).
pub fn check_test_labels(
    attributes: &[String],
    labels: &Path,
    test_labels: &Path,
) -> anyhow::Result<()> {
    use vocab_pipeline::classify::read_labels;
    for a in attributes {
        let train = read_labels(labels, a).context("checking the labels before the first stage")?;
        let test = read_labels(test_labels, a)
            .context("checking the test folder's labels before the first stage")?;
        ensure!(
            train.classes == test.classes,
            "the test labels {} give {a:?} the classes {:?}; the dataset's {} give {:?}: a model \
             scores the classes it learned",
            test_labels.display(),
            test.classes,
            labels.display(),
            train.classes
        );
    }
    Ok(())
}

/// A test folder shares no photo with the dataset: not the same file (a link, a hard link) and
/// not the same bytes, or the run would score photos it trained on. The first photo found on
/// both sides is named. Only photos of equal size are read and hashed.
pub fn check_test_apart(dataset: &Dataset, test: &Dataset) -> anyhow::Result<()> {
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;
    use vocab_pipeline::image_io::Collection;
    let open = |d: &Dataset| -> anyhow::Result<Vec<(PathBuf, std::fs::Metadata)>> {
        let collection = Collection::open(&d.photos, Some(&d.labels))?;
        Ok((collection.photos().iter())
            .map(|p| collection.path_of(p))
            .filter_map(|path| std::fs::metadata(&path).ok().map(|m| (path, m)))
            .filter(|(_, m)| m.is_file())
            .collect())
    };
    let ours = open(dataset)?;
    let by_id: HashMap<(u64, u64), &Path> = (ours.iter())
        .map(|(p, m)| ((m.dev(), m.ino()), p.as_path()))
        .collect();
    let mut by_len: HashMap<u64, Vec<&Path>> = HashMap::new();
    for (p, m) in &ours {
        by_len.entry(m.len()).or_default().push(p);
    }
    let mut digests: HashMap<PathBuf, String> = HashMap::new();
    let mut digest = |path: &Path| -> anyhow::Result<String> {
        if let Some(d) = digests.get(path) {
            return Ok(d.clone());
        }
        let d = vocab_pipeline::input::digest(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        digests.insert(path.to_path_buf(), d.clone());
        Ok(d)
    };
    let both = |theirs: &Path, ours: &Path, how: &str| {
        anyhow::anyhow!(
            "the test folder {} reaches the dataset's own photos: {} is {how} {}; a run would \
             score photos it trained on. Give a test folder of other photos",
            test.photos.display(),
            theirs.display(),
            ours.display()
        )
    };
    for (path, meta) in open(test)? {
        if let Some(ours) = by_id.get(&(meta.dev(), meta.ino())) {
            return Err(both(&path, ours, "the same file as"));
        }
        for ours in by_len.get(&meta.len()).into_iter().flatten() {
            if digest(&path)? == digest(ours)? {
                return Err(both(&path, ours, "the same bytes as"));
            }
        }
    }
    Ok(())
}

/// A dataset's attributes, split column and sizes.
pub(super) struct Counted {
    /// The attributes learned.
    pub(super) attributes: Vec<String>,
    /// The column the splits are stratified by.
    pub(super) split_by: String,
    /// Photos, the test folder's labelled ones among them.
    pub(super) photos: u64,
    /// Photos that train the vocabulary.
    pub(super) training: u64,
}

/// The sizes of the protocol's first trial (every trial's are alike), with the test folder's
/// labelled photos among the photos.
pub(super) fn count(
    config: &Config,
    source: &Source,
    labels_text: &str,
    protocol: &Protocol,
) -> anyhow::Result<Counted> {
    let source_path = source.labels_name();
    let (attributes, split_by) = columns(config, &source_path, labels_text)?;
    let first = protocol.trials()[0];
    let split =
        super::dataset::split(labels_text, &source_path, &split_by, first.seed, first.rule)?;
    let tested = match protocol.test_folder() {
        Some((_, labels)) => {
            let text =
                vocab_pipeline::input::read_text(labels, vocab_pipeline::input::MAX_LABELS_BYTES)
                    .with_context(|| format!("cannot read test labels {}", labels.display()))?;
            super::dataset::photo_count(&text, labels)?
        }
        None => 0,
    };
    Ok(Counted {
        attributes,
        split_by,
        photos: split.len() as u64 + tested,
        training: split.iter().filter(|(_, t)| *t).count() as u64,
    })
}

/// The attributes a run learns and the column its splits are stratified by.
pub(super) fn columns(
    config: &Config,
    labels: &Path,
    text: &str,
) -> anyhow::Result<(Vec<String>, String)> {
    let attributes = super::dataset::attributes(config, text, labels)?;
    let split_by = config
        .classify
        .split_by
        .clone()
        .unwrap_or_else(|| attributes[0].clone());
    Ok((attributes, split_by))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trials_take_consecutive_seeds_and_describe_themselves() {
        let p = Protocol::Splits {
            rule: SplitRule::PerClass(100),
            trials: 10,
            seed: 1,
        };
        let trials = p.trials();
        assert_eq!(trials.len(), 10);
        assert_eq!((trials[0].seed, trials[9].seed), (1, 10));
        assert_eq!(
            (trials[0].suffix(), trials[9].suffix()),
            ("-t1".into(), "-t10".into())
        );
        assert_eq!(
            p.describe("class", Path::new("d")),
            "10 random splits of 100 training photos per class, seeds 1 to 10"
        );
        let one = Protocol::Splits {
            rule: SplitRule::Half,
            trials: 1,
            seed: 7,
        };
        assert_eq!(one.trials()[0].suffix(), "");
        assert_eq!(
            one.describe("kind", Path::new("d")),
            "one random split 50/50 stratified by kind, seed 7"
        );
        // A test folder's one trial trains on everything; split_seed seeds its CV folds.
        let test = Protocol::TestFolder {
            photos: "t".into(),
            labels: "t/labels.csv".into(),
            from: None,
            seed: 5,
        };
        let trials = test.trials();
        assert_eq!(
            (
                trials.len(),
                trials[0].seed,
                trials[0].rule,
                trials[0].suffix()
            ),
            (1, 5, SplitRule::All, String::new())
        );
    }
}
