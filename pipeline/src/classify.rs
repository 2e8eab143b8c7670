//! What training, evaluation and classification share: histogram tables, labels, splits, and
//! versioned model files.
//!
//! Labels come from a CSV whose first column is the photo path (relative to the photo folder) and
//! whose other columns are attributes; an empty cell means the photo takes no part in that
//! attribute. Classes are the attribute's distinct values, sorted.
//!
//! A split is either a CSV (`path,split` with `train`/`test`) or a seeded stratified 50/50 split:
//! within each class, photos in sorted path order are shuffled with the seed and the first half
//! (rounded up) is for training. The model records its split, so `evaluate` scores only photos the
//! model never saw.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::encode::Encoding;
use crate::kernel_map::KernelMap;
use crate::store::{FeatureReader, Format, Record, StoreError};
use crate::svm::Classifier;

/// Model file format version written by this build.
pub const MODEL_VERSION: u32 = 1;

/// Errors of the classification stages.
#[derive(Debug, Error)]
pub enum ClassifyError {
    /// A file error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A CSV could not be read.
    #[error("cannot read {path}")]
    Csv {
        /// File.
        path: PathBuf,
        /// Underlying error.
        source: csv::Error,
    },
    /// Something in a file is wrong.
    #[error("{path}: {message}")]
    Invalid {
        /// File.
        path: PathBuf,
        /// What.
        message: String,
    },
}

fn invalid(path: &Path, message: impl Into<String>) -> ClassifyError {
    ClassifyError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Histograms with the photos they belong to.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Picture ids.
    pub ids: Vec<u32>,
    /// Photo paths relative to the photo folder.
    pub paths: Vec<String>,
    /// One histogram per photo.
    pub rows: Vec<Vec<f32>>,
}

/// Reads histograms written by `vocab encode`: CSV (`picture_id,path,h0,...`), or any other
/// feature format with its `.images.csv` manifest (vocab's binary and text formats name each
/// histogram's picture; `.npy`, `.fvecs` and `.bvecs` hold them in the manifest's order).
pub fn read_histograms(path: &Path) -> Result<Table, ClassifyError> {
    let mut reader = HistogramReader::open(path)?;
    let mut table = Table::default();
    while let Some((id, photo, values)) = reader.next_row()? {
        table.ids.push(id);
        table.paths.push(photo);
        table.rows.push(values);
    }
    Ok(table)
}

/// The one reader of histogram files ([`read_histograms`] collects it): a photo's histogram at
/// a time, in the file's order, every row of the first's length.
#[derive(Debug)]
pub struct HistogramReader {
    path: PathBuf,
    rows: Rows,
    /// Values of the first row.
    len: Option<usize>,
}

/// Where a histogram reader's rows come from.
#[derive(Debug)]
enum Rows {
    /// A feature file and its manifest's photos.
    Features(Box<Manifested>),
    /// `vocab encode`'s CSV.
    Csv(Box<csv::Reader<crate::input::Records<std::fs::File>>>),
}

/// A feature file and its manifest's photos: by picture id, and in order (a format whose
/// records do not name their picture).
#[derive(Debug)]
struct Manifested {
    features: FeatureReader,
    named: bool,
    manifest: PathBuf,
    paths: HashMap<u32, String>,
    order: Vec<u32>,
    record: Record,
    read: usize,
}

impl HistogramReader {
    /// Opens the histograms at `path` (and its manifest, for a feature file).
    pub fn open(path: &Path) -> Result<Self, ClassifyError> {
        let csv_err = |source| ClassifyError::Csv {
            path: path.to_path_buf(),
            source,
        };
        let format = Format::detect(path)?;
        // CSV is `vocab encode`'s own (`picture_id,path,h0,...`) or any other vector CSV.
        let header: Vec<String> = if format == Format::Csv {
            let mut reader = crate::input::csv(csv::ReaderBuilder::new().has_headers(false), path)
                .map_err(csv_err)?;
            let mut first = csv::StringRecord::new();
            reader.read_record(&mut first).map_err(csv_err)?;
            first.iter().take(2).map(|f| f.trim().to_string()).collect()
        } else {
            Vec::new()
        };
        let rows = if header.get(1).is_some_and(|h| h == "path") {
            let reader = crate::input::csv(&csv::ReaderBuilder::new(), path).map_err(csv_err)?;
            Rows::Csv(Box::new(reader))
        } else {
            let manifest = crate::features::manifest_path(path, "images.csv");
            let manifest_err = |source| ClassifyError::Csv {
                path: manifest.clone(),
                source,
            };
            let mut reader =
                crate::input::csv(&csv::ReaderBuilder::new(), &manifest).map_err(manifest_err)?;
            let mut paths = HashMap::new();
            let mut order = Vec::new();
            for row in reader.records() {
                let row = row.map_err(manifest_err)?;
                let id: u32 = row
                    .get(0)
                    .unwrap_or("")
                    .parse()
                    .map_err(|_| invalid(&manifest, "bad picture_id"))?;
                paths.insert(id, row.get(1).unwrap_or("").to_string());
                order.push(id);
            }
            let features = FeatureReader::open(path)?;
            // Rows that name their picture (the reader says which), or that hold the
            // manifest's photos in order.
            let named = features.names_pictures();
            Rows::Features(Box::new(Manifested {
                features,
                named,
                manifest,
                paths,
                order,
                record: Record::default(),
                read: 0,
            }))
        };
        Ok(Self {
            path: path.to_path_buf(),
            rows,
            len: None,
        })
    }

    /// The next photo's picture id, path and histogram, or `None` after the last.
    pub fn next_row(&mut self) -> Result<Option<(u32, String, Vec<f32>)>, ClassifyError> {
        let path = &self.path;
        let row = match &mut self.rows {
            Rows::Features(rows) => {
                let Manifested {
                    features,
                    named,
                    manifest,
                    paths,
                    order,
                    record,
                    read,
                } = &mut **rows;
                if !features.next_into(record)? {
                    if !*named && *read != order.len() {
                        let message = format!(
                            "lists {} photos, {} holds {read} histograms",
                            order.len(),
                            path.display(),
                        );
                        return Err(invalid(manifest, message));
                    }
                    return Ok(None);
                }
                if !*named {
                    // Row i is the manifest's photo i.
                    record.picture_id = *order.get(*read).ok_or_else(|| {
                        invalid(
                            manifest,
                            format!(
                                "lists {} photos, {} holds more histograms",
                                order.len(),
                                path.display()
                            ),
                        )
                    })?;
                }
                *read += 1;
                let p = paths.get(&record.picture_id).ok_or_else(|| {
                    invalid(
                        manifest,
                        format!("has no row for picture {}", record.picture_id),
                    )
                })?;
                (record.picture_id, p.clone(), record.values.clone())
            }
            Rows::Csv(reader) => {
                let csv_err = |source| ClassifyError::Csv {
                    path: path.clone(),
                    source,
                };
                let mut row = csv::StringRecord::new();
                if !reader.read_record(&mut row).map_err(csv_err)? {
                    return Ok(None);
                }
                let line = row.position().map_or(0, |p| p.line());
                let bad = |m: &str| invalid(path, format!("line {line}: {m}"));
                let id = (row.get(0).unwrap_or("").parse()).map_err(|_| bad("bad picture_id"))?;
                let photo = row.get(1).ok_or_else(|| bad("missing path"))?.to_string();
                let values: Result<Vec<f32>, _> =
                    row.iter().skip(2).map(str::parse::<f32>).collect();
                let values = values.map_err(|_| bad("a value is not a number"))?;
                if let Some(message) = crate::store::out_of_bounds(&values) {
                    return Err(bad(&message));
                }
                (id, photo, values)
            }
        };
        if *self.len.get_or_insert(row.2.len()) != row.2.len() {
            return Err(invalid(path, "histograms of different lengths"));
        }
        Ok(Some(row))
    }
}

/// One attribute's labels.
#[derive(Debug, Clone)]
pub struct Labels {
    /// Class names, sorted.
    pub classes: Vec<String>,
    /// Class index of each labelled path.
    pub by_path: HashMap<String, usize>,
}

/// Reads `attribute` from a labels CSV (first column: path).
pub fn read_labels(path: &Path, attribute: &str) -> Result<Labels, ClassifyError> {
    let csv_err = |source| ClassifyError::Csv {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = crate::input::csv(&csv::ReaderBuilder::new(), path).map_err(csv_err)?;
    let headers = reader.headers().map_err(csv_err)?.clone();
    let column = headers
        .iter()
        .position(|h| h == attribute)
        .filter(|&i| i > 0)
        .ok_or_else(|| {
            let names: Vec<&str> = headers.iter().skip(1).collect();
            invalid(
                path,
                format!("has no attribute column {attribute:?} (columns: {names:?})"),
            )
        })?;
    let mut raw = Vec::new();
    for row in reader.records() {
        let row = row.map_err(csv_err)?;
        let value = row.get(column).unwrap_or("").trim();
        if !value.is_empty() {
            raw.push((
                row.get(0).unwrap_or("").trim().to_string(),
                value.to_string(),
            ));
        }
    }
    let classes: Vec<String> = raw
        .iter()
        .map(|(_, v)| v.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if classes.len() < 2 {
        return Err(invalid(
            path,
            format!(
                "attribute {attribute:?} has {} value(s); need two or more",
                classes.len()
            ),
        ));
    }
    let mut by_path = HashMap::new();
    for (p, v) in raw {
        let class = classes.iter().position(|c| *c == v).unwrap_or(0);
        if by_path.insert(p.clone(), class).is_some() {
            return Err(invalid(path, format!("path {p:?} is listed twice")));
        }
    }
    Ok(Labels { classes, by_path })
}

/// How photos are split into training and test parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SplitSpec {
    /// Every labelled photo is in the training part (nothing held out).
    All,
    /// Seeded and stratified: of each class, `holdout` (rounded down) is held out. Models
    /// written before the fraction existed held out half.
    Random {
        /// Seed.
        seed: u64,
        /// Fraction of each class held out.
        #[serde(default = "half")]
        holdout: f64,
    },
    /// Seeded and stratified: `train` photos of each class train (the field's protocol for
    /// 15 scenes: 100), the rest are held out; a class of `train` photos or fewer trains whole.
    #[serde(rename = "per_class")]
    PerClass {
        /// Seed.
        seed: u64,
        /// Training photos per class.
        train: usize,
    },
    /// Given by a CSV (`path,split`), recorded with its training paths.
    File {
        /// The split file.
        path: String,
        /// Paths in the training part.
        train: Vec<String>,
    },
}

fn half() -> f64 {
    0.5
}

impl SplitSpec {
    /// What the split is, for people: `every labelled photo`, `a seeded stratified split ...`.
    pub fn describe(&self) -> String {
        match self {
            Self::All => "every labelled photo (nothing held out)".into(),
            Self::Random { seed, holdout } => format!(
                "a seeded stratified split (seed {seed}, {:.0}% of each class held out)",
                holdout * 100.0
            ),
            Self::PerClass { seed, train } => format!(
                "a seeded stratified split (seed {seed}, {train} training photos of each class)"
            ),
            Self::File { path, train } => {
                format!("the split file {path} ({} training paths)", train.len())
            }
        }
    }

    /// Whether the split holds photos out at all.
    pub fn holds_out(&self) -> bool {
        !matches!(self, Self::All)
    }

    /// Reads a split CSV (`path,split`, split = `train` or `test`).
    pub fn from_file(path: &Path) -> Result<Self, ClassifyError> {
        let csv_err = |source| ClassifyError::Csv {
            path: path.to_path_buf(),
            source,
        };
        let mut reader = crate::input::csv(&csv::ReaderBuilder::new(), path).map_err(csv_err)?;
        let mut train = Vec::new();
        for row in reader.records() {
            let row = row.map_err(csv_err)?;
            match row.get(1).map(str::trim) {
                Some("train") => train.push(row.get(0).unwrap_or("").trim().to_string()),
                Some("test") => {}
                other => {
                    return Err(invalid(
                        path,
                        format!("split must be train or test, found {other:?}"),
                    ));
                }
            }
        }
        Ok(Self::File {
            path: path.display().to_string(),
            train,
        })
    }

    /// Whether each of `paths` (labelled with `classes`) is in the training part.
    pub fn is_train(&self, paths: &[&str], classes: &[usize]) -> Vec<bool> {
        match self {
            Self::All => vec![true; paths.len()],
            Self::File { train, .. } => {
                let set: BTreeSet<&str> = train.iter().map(String::as_str).collect();
                paths.iter().map(|p| set.contains(p)).collect()
            }
            // Held out: the fraction, rounded down (so 0.5 of 5 trains 3, as always).
            Self::Random { seed, holdout } => shuffled(paths, classes, *seed, |n| {
                n - (n as f64 * holdout.clamp(0.0, 1.0)).floor() as usize
            }),
            Self::PerClass { seed, train } => shuffled(paths, classes, *seed, |n| n.min(*train)),
        }
    }
}

/// Of each class, in a seeded order, the first `trains(class size)` photos train.
fn shuffled(
    paths: &[&str],
    classes: &[usize],
    seed: u64,
    trains: impl Fn(usize) -> usize,
) -> Vec<bool> {
    let mut out = vec![false; paths.len()];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n_classes = classes.iter().copied().max().map_or(0, |m| m + 1);
    for class in 0..n_classes {
        let mut members: Vec<usize> = (0..paths.len()).filter(|&i| classes[i] == class).collect();
        members.sort_by_key(|&i| paths[i]);
        members.shuffle(&mut rng);
        for &i in &members[..trains(members.len()).min(members.len())] {
            out[i] = true;
        }
    }
    out
}

/// The labelled rows of a table: `(row index, class)` for photos that have the attribute.
pub fn labelled(table: &Table, labels: &Labels) -> Vec<(usize, usize)> {
    table
        .paths
        .iter()
        .enumerate()
        .filter_map(|(i, p)| labels.by_path.get(p).map(|&c| (i, c)))
        .collect()
}

/// A saved model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFile {
    /// Format version.
    pub version: u32,
    /// The attribute it predicts.
    pub attribute: String,
    /// Which photos it was trained on.
    pub split: SplitSpec,
    /// How photos were encoded (to classify new ones), when known.
    pub encoding: Option<Encoding>,
    /// Cross-validated accuracy of the chosen C on the training part, when C was chosen by CV.
    pub cv_accuracy: Option<f64>,
    /// The explicit kernel map applied to every histogram before the classifier (none: the
    /// linear kernel on the histograms as they are).
    #[serde(default)]
    pub kernel_map: Option<KernelMap>,
    /// Whether each training photo's mirror image trained too (`vocab train --mirrored`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mirrored: bool,
    /// The classifier.
    pub classifier: Classifier,
}

impl ModelFile {
    /// Writes the model as JSON, atomically, checked as a read checks its classifier: a model
    /// no reader would take (a weight that is not finite) is never written.
    pub fn save(&self, path: &Path) -> Result<(), ClassifyError> {
        self.check_classifier(path)?;
        let text = serde_json::to_string(self).map_err(|e| invalid(path, e.to_string()))?;
        // Never a model its reader would refuse by its size.
        if text.len() as u64 > crate::input::MAX_MODEL_BYTES {
            return Err(invalid(
                path,
                format!(
                    "would hold {} bytes, more than the {} a model may (fewer classes, words or \
                     pyramid levels make it smaller)",
                    text.len(),
                    crate::input::MAX_MODEL_BYTES
                ),
            ));
        }
        crate::atomic::write(path, text.as_bytes()).map_err(|source| {
            ClassifyError::Store(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        })
    }

    /// Reads a model, refusing other versions.
    pub fn load(path: &Path) -> Result<Self, ClassifyError> {
        let text =
            crate::input::read_text(path, crate::input::MAX_MODEL_BYTES).map_err(|source| {
                ClassifyError::Store(StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            })?;
        let model: Self = serde_json::from_str(&text)
            .map_err(|e| invalid(path, format!("not a vocab model: {e}")))?;
        if model.version != MODEL_VERSION {
            return Err(invalid(
                path,
                format!(
                    "model version {}, this build reads {MODEL_VERSION}",
                    model.version
                ),
            ));
        }
        if let Some(map) = &model.kernel_map {
            map.check().map_err(|e| invalid(path, e.to_string()))?;
        }
        model.check_classifier(path)?;
        Ok(model)
    }

    /// The classifier's own rules, and its agreement with the encoding: two or more distinct
    /// classes in order, one model for two classes or one per class, weights of one length (what
    /// the encoding and the kernel map make of a histogram) and finite, C a positive number.
    fn check_classifier(&self, path: &Path) -> Result<(), ClassifyError> {
        let c = &self.classifier;
        let bad = |message: String| Err(invalid(path, format!("classifier: {message}")));
        if c.classes.len() < 2 {
            return bad(format!(
                "{} classes; a model tells two or more apart",
                c.classes.len()
            ));
        }
        if let Some(pair) = c.classes.windows(2).find(|p| p[0] >= p[1]) {
            return bad(format!(
                "classes {:?} and {:?} are not distinct and in order",
                pair[0], pair[1]
            ));
        }
        let models = if c.classes.len() == 2 {
            1
        } else {
            c.classes.len()
        };
        if c.models.len() != models {
            return bad(format!(
                "{} models for {} classes (one for two classes, one per class otherwise)",
                c.models.len(),
                c.classes.len()
            ));
        }
        if !(c.c.is_finite() && c.c > 0.0) {
            return bad(format!("C = {} is not a positive number", c.c));
        }
        let len = c.models[0].w.len();
        let want = self.encoding.as_ref().map(|e| {
            let map = self.kernel_map.map_or(1, |m| m.mapped_len(1));
            e.checked_len().and_then(|h| h.checked_mul(map))
        });
        if let Some(want) = want
            && want != Some(len)
        {
            return bad(format!(
                "weights of {len} values, the model's encoding makes {}",
                want.map_or("more than any memory holds".into(), |w| format!("{w}"))
            ));
        }
        for (m, model) in c.models.iter().enumerate() {
            if model.w.len() != len {
                return bad(format!(
                    "model {m} has {} weights, model 0 {len}",
                    model.w.len()
                ));
            }
            if let Some(i) = model.w.iter().position(|w| !w.is_finite()) {
                return bad(format!("model {m}'s weight {i} is not finite"));
            }
            if !model.bias.is_finite() {
                return bad(format!("model {m}'s bias is not finite"));
            }
        }
        Ok(())
    }

    /// Checks that histograms of `len` values fit the classifier; names `what` they are.
    pub fn check_len(&self, len: usize, what: &Path) -> Result<(), ClassifyError> {
        let mapped = self.kernel_map.map_or(len, |m| m.mapped_len(len));
        let want = self.classifier.models.first().map_or(mapped, |m| m.w.len());
        if mapped != want {
            return Err(invalid(
                what,
                format!(
                    "histograms of {len} values{}, the model takes {want}",
                    self.kernel_map.map_or(String::new(), |m| format!(
                        " ({mapped} through the model's {} map)",
                        m.kernel.name()
                    ))
                ),
            ));
        }
        Ok(())
    }

    /// The predicted class index of a histogram.
    pub fn predict(&self, histogram: &[f32]) -> usize {
        self.scored(histogram).0
    }

    /// The predicted class index of a histogram and its score ([`Classifier::scored`]).
    pub fn scored(&self, histogram: &[f32]) -> (usize, f64) {
        self.classifier.choose(&self.decisions(histogram))
    }

    /// Every model's decision value for a histogram ([`Classifier::decisions`]), through the
    /// model's kernel map when it has one.
    pub fn decisions(&self, histogram: &[f32]) -> Vec<f64> {
        match &self.kernel_map {
            // The map of the non-zero bins only: no dense mapped vector per photo.
            Some(map) => {
                let rows = crate::svm::Rows::mapped(&[histogram], map);
                self.classifier.decisions_row(&rows, 0)
            }
            None => self.classifier.decisions(histogram),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_histograms_hold_only_values_within_bounds() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("h.csv");
        for (bad, want) in [
            ("inf", "value 2 is not finite"),
            ("1e23", "value 2 (1e23) exceeds"),
        ] {
            std::fs::write(
                &path,
                format!("picture_id,path,h0,h1\n0,a.jpg,0.5,0.5\n1,b.jpg,0.1,{bad}\n"),
            )
            .expect("write");
            let err = read_histograms(&path).expect_err(bad).to_string();
            assert!(
                err.contains("h.csv") && err.contains("line 3") && err.contains(want),
                "{err}"
            );
        }
    }

    #[test]
    fn random_split_is_stratified_half_and_seeded() {
        let paths: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let classes: Vec<usize> = (0..40).map(|i| usize::from(i >= 30)).collect();
        let split = SplitSpec::Random {
            seed: 3,
            holdout: 0.5,
        };
        let train = split.is_train(&refs, &classes);
        assert_eq!(train.iter().filter(|&&t| t).count(), 15 + 5);
        assert_eq!((30..40).filter(|&i| train[i]).count(), 5);
        assert_eq!(train, split.is_train(&refs, &classes));
        assert_ne!(
            train,
            SplitSpec::Random {
                seed: 4,
                holdout: 0.5
            }
            .is_train(&refs, &classes)
        );
    }

    #[test]
    fn holdout_fractions_all_and_models_of_the_old_format() {
        let paths: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let classes: Vec<usize> = (0..40).map(|i| usize::from(i >= 30)).collect();
        // 20% of 30 and of 10 held out.
        let fifth = SplitSpec::Random {
            seed: 3,
            holdout: 0.2,
        }
        .is_train(&refs, &classes);
        assert_eq!(fifth.iter().filter(|&&t| !t).count(), 6 + 2);
        assert!(SplitSpec::All.is_train(&refs, &classes).iter().all(|&t| t));
        assert!(!SplitSpec::All.holds_out());
        // A model file of the old format (no fraction) reads as the 50/50 split it was.
        let old: SplitSpec = serde_json::from_str(r#"{"kind":"random","seed":7}"#).expect("old");
        assert_eq!(
            old,
            SplitSpec::Random {
                seed: 7,
                holdout: 0.5
            }
        );
        assert!(
            old.describe().contains("50% of each class held out"),
            "{}",
            old.describe()
        );
        let all: SplitSpec = serde_json::from_str(r#"{"kind":"all"}"#).expect("all");
        assert_eq!(all, SplitSpec::All);
    }

    #[test]
    fn a_per_class_split_trains_that_many_of_each_class() {
        let paths: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let classes: Vec<usize> = (0..40).map(|i| usize::from(i >= 30)).collect();
        let split = |seed| SplitSpec::PerClass { seed, train: 7 }.is_train(&refs, &classes);
        let train = split(3);
        assert_eq!((0..30).filter(|&i| train[i]).count(), 7);
        assert_eq!((30..40).filter(|&i| train[i]).count(), 7);
        assert_eq!(split(3), train);
        assert_ne!(split(4), train);
        // A class smaller than the number trains whole.
        let whole = SplitSpec::PerClass { seed: 3, train: 12 }.is_train(&refs, &classes);
        assert_eq!((30..40).filter(|&i| whole[i]).count(), 10);
        let json = serde_json::to_string(&SplitSpec::PerClass { seed: 3, train: 7 }).expect("json");
        assert_eq!(json, r#"{"kind":"per_class","seed":3,"train":7}"#);
        assert!(
            (SplitSpec::PerClass { seed: 3, train: 7 })
                .describe()
                .contains("7 training photos of each class")
        );
    }

    #[test]
    fn labels_skip_empty_cells_and_name_missing_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("labels.csv");
        std::fs::write(
            &path,
            "path,kind,urban\na.jpg,x,yes\nb.jpg,y,\nc.jpg,x,no\n",
        )
        .expect("write");
        let labels = read_labels(&path, "urban").expect("urban");
        assert_eq!(labels.classes, vec!["no", "yes"]);
        assert_eq!(labels.by_path.len(), 2);
        let msg = read_labels(&path, "hilly")
            .expect_err("missing")
            .to_string();
        assert!(
            msg.contains("no attribute column \"hilly\"") && msg.contains("urban"),
            "{msg}"
        );
    }
}
