//! `[classify]` and `vocab train`: the SVMs, their cross-validation and the split.

use serde::{Deserialize, Serialize};
use vocab_pipeline::kernel_map::Mapping;
use vocab_pipeline::svm::Solver;

/// The C values tried by cross-validation unless told (the scale of scikit-learn's usual grid).
pub const DEFAULT_C_GRID: [f64; 5] = [0.01, 0.1, 1.0, 10.0, 100.0];

/// Whether `grid` is [`DEFAULT_C_GRID`] (left out of serialized settings, so keys stay the same).
fn is_default_grid(grid: &Vec<f64>) -> bool {
    grid.as_slice() == DEFAULT_C_GRID
}

/// How the SVMs are trained and scored: `vocab train`'s options and a config's `[classify]`,
/// the same type. The config's protocol (attributes, split, trials, mirror images) is its own.
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyOptions {
    /// Attributes (label columns) to learn [default: every column but `path`].
    #[arg(skip = ClassifyOptions::default().attributes)]
    pub attributes: Vec<String>,
    /// Column the split is stratified by [default: the first attribute].
    #[arg(skip = ClassifyOptions::default().split_by)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_by: Option<String>,
    /// Seed of the split and of the cross-validation folds (a run's trial t, from 1, splits with
    /// seed + t - 1).
    #[arg(long, value_name = "S", default_value_t = ClassifyOptions::default().split_seed,
          value_parser = super::parse_seed)]
    pub split_seed: u64,
    /// Training photos of each `split_by` value, the rest held out [default: half of each
    /// value trains]. The field's protocol for 15 scenes: 100.
    #[arg(skip = ClassifyOptions::default().train_per_class)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_per_class: Option<usize>,
    /// Random splits, each learning its own vocabularies and models from its own training
    /// photos; the report gives the mean and standard deviation over them.
    #[arg(skip = ClassifyOptions::default().trials)]
    pub trials: usize,
    /// Folds of the cross-validation that chooses C on the training photos.
    #[arg(long, value_name = "FOLDS", default_value_t = ClassifyOptions::default().cv)]
    pub cv: usize,
    /// The C values the cross-validation chooses among (1 to 16, positive).
    #[arg(long, value_name = "C,C", value_delimiter = ',',
          default_values_t = ClassifyOptions::default().c_grid)]
    #[serde(skip_serializing_if = "is_default_grid")]
    pub c_grid: Vec<f64>,
    /// Solver: dcd (dual coordinate descent, liblinear's; fast) or linfa (linfa-svm's SMO;
    /// builds an n x n kernel matrix, for small sets and cross-checks).
    #[arg(long, value_enum, default_value_t = ClassifyOptions::default().solver)]
    pub solver: Solver,
    /// An explicit feature map of an additive kernel (none, chi2, intersection or js) on the
    /// histograms, so that the linear SVM approximates that kernel's SVM (Vedaldi and
    /// Zisserman's homogeneous kernel maps; for L1-normalised histograms: `vocab encode --norm
    /// l1`, `[encode] norm = "l1"`); the model keeps it and applies it to every photo it scores.
    #[arg(long, value_enum, default_value_t = ClassifyOptions::default().kernel_map)]
    pub kernel_map: Mapping,
    /// Frequencies of the kernel map after the first: 2 N + 1 values per histogram bin.
    #[arg(long, value_name = "N", default_value_t = ClassifyOptions::default().map_order)]
    pub map_order: usize,
    /// Train on each training photo's mirror image too (left to right): the run encodes the
    /// training photos mirrored as well, and each mirror image trains in its photo's
    /// cross-validation fold (`vocab train --mirrored`).
    #[arg(skip = ClassifyOptions::default().mirror)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mirror: bool,
}

impl Default for ClassifyOptions {
    fn default() -> Self {
        Self {
            attributes: Vec::new(),
            split_by: None,
            split_seed: 1,
            train_per_class: None,
            trials: 1,
            cv: 5,
            c_grid: DEFAULT_C_GRID.to_vec(),
            solver: Solver::Dcd,
            kernel_map: Mapping::None,
            map_order: 3,
            mirror: false,
        }
    }
}
