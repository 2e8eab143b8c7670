//! The run's photos and labels, and its one seeded stratified split.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use serde_json::json;
use vocab_pipeline::classify::SplitSpec;

use super::step::{Stage, digest, file_fingerprint, folder_fingerprint};
use crate::cli::ExperimentArgs;
use crate::config::Config;
use crate::options::SyntheticOptions;
use crate::settings::PhotoSetSettings;

/// The photo folder and labels file of a run, with their fingerprint.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Photo folder.
    pub photos: PathBuf,
    /// Labels CSV.
    pub labels: PathBuf,
    /// Key of the photos and labels (and of the descriptors made elsewhere, when read).
    pub key: String,
    /// The photos' descriptors made elsewhere, read instead of HOG.
    pub from: Option<PathBuf>,
}

/// What the command line says of the dataset.
pub struct Overrides<'a> {
    /// The config file.
    pub config: &'a Path,
    /// `--dataset`.
    pub dataset: Option<&'a Path>,
    /// `--labels`.
    pub labels: Option<&'a Path>,
    /// `--test`.
    pub test: Option<&'a Path>,
    /// `--test-labels`.
    pub test_labels: Option<&'a Path>,
    /// `--test-from`.
    pub test_from: Option<&'a Path>,
}

impl<'a> Overrides<'a> {
    /// Those of `vocab run` and `vocab config check`.
    pub fn of(args: &'a ExperimentArgs) -> Self {
        Self {
            config: &args.config,
            dataset: args.dataset.as_deref(),
            labels: args.labels.as_deref(),
            test: args.test.as_deref(),
            test_labels: args.test_labels.as_deref(),
            test_from: args.test_from.as_deref(),
        }
    }
}

/// Where the photos come from: a folder (the config's or `--dataset`), or the synthetic set.
pub enum Source {
    /// A folder of photos and a labels file.
    Folder {
        /// Photo folder.
        photos: PathBuf,
        /// Labels CSV.
        labels: PathBuf,
    },
    /// The generated set.
    Synthetic(SyntheticOptions),
}

impl Source {
    /// Resolves the config's `[dataset]` with `--dataset` and `--labels`; a folder that does
    /// not exist is an error saying how to point at one.
    pub fn resolve(config: &Config, base: &Path, args: &Overrides<'_>) -> anyhow::Result<Self> {
        let d = &config.dataset;
        if let (Some(s), None) = (&d.synthetic, &args.dataset) {
            ensure!(
                args.labels.is_none(),
                "--labels names the labels of a photo folder; this config generates its photos \
                 (give --dataset DIR too, or drop --labels)"
            );
            return Ok(Self::Synthetic(s.clone()));
        }
        let photos = match (&args.dataset, &d.path) {
            (Some(p), _) => p.to_path_buf(),
            (None, Some(p)) => base.join(p),
            (None, None) => bail!("the config names no photo folder: give --dataset DIR"),
        };
        ensure!(
            photos.is_dir(),
            "photo folder {} does not exist{}: point at one with --dataset DIR (and --labels \
             FILE if its labels file is elsewhere), or set [dataset] path in {}",
            photos.display(),
            match (&args.dataset, &d.path) {
                (None, Some(p)) => format!(" ([dataset] path = {:?}, relative to the config)", p),
                _ => String::new(),
            },
            args.config.display()
        );
        // An empty folder is named as such before its labels file is looked for.
        vocab_pipeline::image_io::Collection::check_folder(&photos)?;
        let labels = match (&args.labels, &d.labels, &args.dataset) {
            (Some(l), _, _) => l.to_path_buf(),
            (None, Some(l), None) => base.join(l),
            _ => photos.join("labels.csv"),
        };
        ensure!(
            labels.is_file(),
            "labels file {} does not exist: give --labels FILE (or set [dataset] labels)",
            labels.display()
        );
        Ok(Self::Folder { photos, labels })
    }

    /// The photo folder, unless the set is generated.
    pub fn folder(&self) -> Option<&Path> {
        match self {
            Self::Folder { photos, .. } => Some(photos),
            Self::Synthetic(_) => None,
        }
    }

    /// The labels file's name in messages.
    pub fn labels_name(&self) -> PathBuf {
        match self {
            Self::Folder { labels, .. } => labels.clone(),
            Self::Synthetic(_) => PathBuf::from("labels.csv (synthetic)"),
        }
    }

    /// The labels CSV's text, without generating a synthetic set.
    pub fn labels_text(&self) -> anyhow::Result<String> {
        match self {
            Self::Folder { labels, .. } => {
                vocab_pipeline::input::read_text(labels, vocab_pipeline::input::MAX_LABELS_BYTES)
                    .with_context(|| format!("cannot read labels {}", labels.display()))
            }
            Self::Synthetic(s) => Ok(vocab_pipeline::synth::labels_csv(s.per_kind)),
        }
    }
}

/// The dataset stage of a synthetic set: generates the photos and their labels.
pub struct Generate(pub SyntheticOptions);

impl Stage for Generate {
    type Output = ();

    fn stage(&self) -> &'static str {
        "dataset"
    }

    fn label(&self) -> String {
        "synthetic".into()
    }

    fn key(&self) -> String {
        digest(&json!(["synthetic", self.0.per_kind, self.0.seed]))
    }

    fn run(&self, tmp: &Path, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let settings = PhotoSetSettings::new(&tmp.join("photos"), self.0.per_kind, self.0.seed)?;
        crate::photo_cmd::photos(&settings, out)
    }

    fn cached(&self, _dir: &Path) -> anyhow::Result<()> {
        Ok(())
    }
}

impl Dataset {
    /// The photos of `source`: its folder, or the synthetic set generated by its step.
    pub fn of_source(source: &Source, runner: &mut super::step::Runner) -> anyhow::Result<Self> {
        match source {
            Source::Synthetic(s) => {
                let generate = Generate(s.clone());
                let (dir, ()) = runner.run(&generate)?;
                Ok(Self::generated(&dir, generate.key()))
            }
            Source::Folder { photos, labels } => Self::of_folder(photos, labels),
        }
    }

    /// A folder's dataset: the fingerprint of its files and of the labels.
    pub fn of_folder(photos: &Path, labels: &Path) -> anyhow::Result<Self> {
        let key = digest(&json!([
            folder_fingerprint(photos)?,
            file_fingerprint(labels)?
        ]));
        println!("== dataset {}: fingerprint {key}", photos.display());
        Ok(Self {
            photos: photos.to_path_buf(),
            labels: labels.to_path_buf(),
            key,
            from: None,
        })
    }

    /// The dataset read from the descriptors made elsewhere in `from` (none: HOG), whose
    /// files' names, sizes and times join its key (how the folder's path is spelt does not).
    pub fn reading(self, from: Option<&Path>) -> anyhow::Result<Self> {
        let Some(from) = from else {
            return Ok(self);
        };
        let files = folder_fingerprint(from)
            .with_context(|| format!("descriptors made elsewhere in {}", from.display()))?;
        Ok(Self {
            key: digest(&json!([self.key, "from", files])),
            from: Some(from.to_path_buf()),
            ..self
        })
    }

    /// The generated set in its step folder.
    pub fn generated(dir: &Path, key: String) -> Self {
        Self {
            photos: dir.join("photos"),
            labels: dir.join("photos").join("labels.csv"),
            key,
            from: None,
        }
    }
}

/// Which photos of a split train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitRule {
    /// Half of each stratum (rounded up).
    Half,
    /// This many photos of each stratum; the rest (and photos without a value) are held out.
    PerClass(usize),
    /// Every photo (a test folder is scored).
    All,
}

/// Photo paths of a labels CSV with their cell in `column` (an empty cell is a value too).
fn strata(text: &str, source: &Path, column: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .with_context(|| format!("cannot read the header of {}", source.display()))?
        .clone();
    let col = headers
        .iter()
        .position(|h| h == column)
        .filter(|&i| i > 0)
        .with_context(|| format!("{} has no column {column:?} to split by", source.display()))?;
    let mut rows = Vec::new();
    for row in reader.records() {
        let row = row.with_context(|| format!("cannot read {}", source.display()))?;
        let path = row.get(0).unwrap_or("").trim();
        if !path.is_empty() {
            rows.push((
                path.to_string(),
                row.get(col).unwrap_or("").trim().to_string(),
            ));
        }
    }
    Ok(rows)
}

/// A trial's split: seeded, stratified by `column` (photos with an empty cell form a stratum of
/// their own), half of each value held out (the split of `vocab train --holdout 0.5`, one
/// implementation: [`SplitSpec::is_train`]) or `n` of each value training (photos without a
/// value are then held out; a value of `n` photos or fewer leaves none to test and is refused),
/// or every photo training. Returns `(path, trains)` in the file's order.
pub fn split(
    text: &str,
    source: &Path,
    column: &str,
    seed: u64,
    rule: SplitRule,
) -> anyhow::Result<Vec<(String, bool)>> {
    let rows = strata(text, source, column)?;
    let values: BTreeMap<&str, usize> = {
        let mut v: Vec<&str> = rows.iter().map(|(_, s)| s.as_str()).collect();
        v.sort_unstable();
        v.dedup();
        v.into_iter().enumerate().map(|(i, s)| (s, i)).collect()
    };
    let paths: Vec<&str> = rows.iter().map(|(p, _)| p.as_str()).collect();
    let classes: Vec<usize> = rows.iter().map(|(_, s)| values[s.as_str()]).collect();
    let trains = match rule {
        SplitRule::Half => SplitSpec::Random { seed, holdout: 0.5 }.is_train(&paths, &classes),
        SplitRule::All => vec![true; rows.len()],
        SplitRule::PerClass(n) => {
            for (value, &class) in values.iter().filter(|(v, _)| !v.is_empty()) {
                let size = classes.iter().filter(|&&c| c == class).count();
                ensure!(
                    size > n,
                    "{}: {column} {value:?} has {size} photos, and train_per_class = {n} leaves \
                     none of them to test (every value needs more than {n})",
                    source.display()
                );
            }
            let mut trains = SplitSpec::PerClass { seed, train: n }.is_train(&paths, &classes);
            for (t, (_, value)) in trains.iter_mut().zip(&rows) {
                *t &= !value.is_empty();
            }
            trains
        }
    };
    Ok(rows.into_iter().map(|(p, _)| p).zip(trains).collect())
}

/// Writes the split as `split.csv` (path,split) and `train.csv` (path) into `dir`; returns the
/// numbers of training and held-out photos.
pub fn write_split(split: &[(String, bool)], dir: &Path) -> anyhow::Result<(u64, u64)> {
    let (mut all, mut train) = (String::from("path,split\n"), String::from("path\n"));
    let mut n_train = 0;
    for (path, trains) in split {
        let _ = writeln!(all, "{path},{}", if *trains { "train" } else { "test" });
        if *trains {
            let _ = writeln!(train, "{path}");
            n_train += 1;
        }
    }
    for (name, text) in [("split.csv", &all), ("train.csv", &train)] {
        let path = dir.join(name);
        vocab_pipeline::atomic::write(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok((n_train, split.len() as u64 - n_train))
}

/// The photos a labels CSV lists.
pub fn photo_count(text: &str, source: &Path) -> anyhow::Result<u64> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut n = 0;
    for row in reader.records() {
        let row = row.with_context(|| format!("cannot read {}", source.display()))?;
        n += u64::from(row.get(0).is_some_and(|p| !p.trim().is_empty()));
    }
    Ok(n)
}

/// Attribute columns of a labels CSV (all but the first, `path`).
pub fn label_columns(text: &str, source: &Path) -> anyhow::Result<Vec<String>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .with_context(|| format!("cannot read the header of {}", source.display()))?;
    Ok(headers.iter().skip(1).map(str::to_string).collect())
}

/// The attributes a run learns: the config's, each checked to be a column, or every column.
pub fn attributes(config: &Config, text: &str, source: &Path) -> anyhow::Result<Vec<String>> {
    let columns = label_columns(text, source)?;
    let attributes = if config.classify.attributes.is_empty() {
        columns.clone()
    } else {
        for a in &config.classify.attributes {
            ensure!(
                columns.contains(a),
                "[classify] attributes: {} has no column {a:?} (columns: {columns:?})",
                source.display()
            );
        }
        config.classify.attributes.clone()
    };
    ensure!(
        !attributes.is_empty(),
        "{} has no attribute columns",
        source.display()
    );
    Ok(attributes)
}

/// The photos a labels CSV lists (first column) and how many classes each of `attributes` has
/// among them (empty cells are no class).
pub fn paths_and_classes(
    text: &str,
    attributes: &[String],
) -> anyhow::Result<(Vec<String>, Vec<usize>)> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().context("labels: no header")?.clone();
    let columns: Vec<Option<usize>> = (attributes.iter())
        .map(|a| headers.iter().position(|h| h == a))
        .collect();
    let mut values = vec![std::collections::BTreeSet::new(); attributes.len()];
    let mut paths = Vec::new();
    for row in reader.records() {
        let row = row.context("labels")?;
        paths.push(row.get(0).unwrap_or_default().to_string());
        for (column, seen) in columns.iter().zip(values.iter_mut()) {
            if let Some(value) = column.and_then(|c| row.get(c)).filter(|v| !v.is_empty()) {
                seen.insert(value.to_string());
            }
        }
    }
    Ok((paths, values.iter().map(|v| v.len()).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_stratified_seeded_and_complete() {
        let mut text = String::from("path,class,x\n");
        for i in 0..7 {
            let _ = writeln!(text, "a{i}.jpg,a,");
        }
        for i in 0..4 {
            let _ = writeln!(text, "b{i}.jpg,b,1");
        }
        text.push_str("u.jpg,,\n");
        let source = Path::new("labels.csv");
        let split_of = |seed| split(&text, source, "class", seed, SplitRule::Half).expect("split");
        let first = split_of(3);
        let trains = |c: char| first.iter().filter(|(p, t)| *t && p.starts_with(c)).count();
        // Half of each stratum (rounded up) trains; the unlabelled photo is a stratum.
        assert_eq!((trains('a'), trains('b'), trains('u')), (4, 2, 1));
        assert_eq!(first.len(), 12);
        assert_eq!(split_of(3), first);
        assert_ne!(split_of(4), first);
        let err = split(&text, source, "nope", 3, SplitRule::Half).expect_err("no column");
        assert!(err.to_string().contains("\"nope\""), "{err}");
        let dir = tempfile::tempdir().expect("tmp");
        assert_eq!(write_split(&first, dir.path()).expect("write"), (7, 5));
        // Three of each class; the unlabelled photo is held out.
        let per_class =
            split(&text, source, "class", 3, SplitRule::PerClass(3)).expect("per class");
        let n = |c: char| {
            per_class
                .iter()
                .filter(|(p, t)| *t && p.starts_with(c))
                .count()
        };
        assert_eq!((n('a'), n('b'), n('u')), (3, 3, 0));
        assert_ne!(
            split(&text, source, "class", 4, SplitRule::PerClass(3)).expect("seed 4"),
            per_class
        );
        // Four photos of b leave none to test.
        let err =
            split(&text, source, "class", 3, SplitRule::PerClass(4)).expect_err("b is too small");
        assert!(
            err.to_string().contains("class \"b\" has 4 photos"),
            "{err}"
        );
        let all = split(&text, source, "class", 3, SplitRule::All).expect("all");
        assert!(all.iter().all(|(_, t)| *t));
    }
}
