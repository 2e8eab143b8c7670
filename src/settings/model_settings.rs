//! Settings of train, evaluate and classify.

use std::path::PathBuf;
use vocab_pipeline::kernel_map::Mapping;
use vocab_pipeline::svm::Solver;

use super::rules::{Invalid, Kind, apart, at_least, output};

/// Frequencies of a kernel map at most.
pub const MAX_MAP_ORDER: usize = 10;

/// Random splits of one run at most.
pub const MAX_TRIALS: usize = 1000;

/// The evaluation protocol's rules: `trials` random splits (of `train_per_class` photos per
/// class when given), or a test folder (`test`), which is scored once and whole.
pub fn protocol_rules(
    trials: usize,
    train_per_class: Option<usize>,
    test: bool,
) -> Result<(), Invalid> {
    if !(1..=MAX_TRIALS).contains(&trials) {
        return Err(Invalid::new(
            "trials",
            trials,
            format!("must be 1 to {MAX_TRIALS} random splits"),
        ));
    }
    if let Some(n) = train_per_class {
        at_least("train_per_class", n, 1, " photo")?;
    }
    if test && trials > 1 {
        return Err(Invalid::new(
            "trials",
            trials,
            "a test folder is scored once (the whole dataset trains, nothing is drawn at \
             random): drop trials or the test folder",
        ));
    }
    if let (true, Some(n)) = (test, train_per_class) {
        return Err(Invalid::new(
            "train_per_class",
            n,
            "a test folder is scored whole and every photo of the dataset trains: drop \
             train_per_class or the test folder",
        ));
    }
    Ok(())
}

/// Settings of `vocab train` and of the run's svm stage.
#[derive(Debug, Clone)]
pub struct TrainSettings {
    /// Histogram file.
    pub histograms: PathBuf,
    /// The same photos' histograms mirrored, whose training photos train too.
    pub mirrored: Option<PathBuf>,
    /// Labels CSV.
    pub labels: PathBuf,
    /// Attribute column.
    pub attribute: String,
    /// Fixed C (`None`: chosen by cross-validation).
    pub c: Option<f64>,
    /// Folds of the cross-validation.
    pub cv: usize,
    /// The C values it chooses among.
    pub c_grid: Vec<f64>,
    /// Solver.
    pub solver: Solver,
    /// Which photos train.
    pub split: Split,
    /// Seed of the split and of cross-validation.
    pub split_seed: u64,
    /// Explicit kernel map.
    pub kernel_map: Mapping,
    /// Frequencies of the kernel map.
    pub map_order: usize,
    /// Model file.
    pub out: PathBuf,
}

/// Which photos a model trains on.
#[derive(Debug, Clone, PartialEq)]
pub enum Split {
    /// Every labelled photo.
    All,
    /// A seeded stratified split holding out this fraction of each class.
    Holdout(f64),
    /// A split file.
    File(PathBuf),
}

/// Most C values a cross-validation chooses among.
pub const MAX_C_GRID: usize = 16;

/// The SVM rules a config can break (`c = None`: chosen by cross-validation over `cv` folds
/// among `c_grid`, 1 to [`MAX_C_GRID`] distinct positive numbers).
pub fn svm_rules(
    c: Option<f64>,
    (cv, c_grid): (usize, &[f64]),
    map_order: usize,
) -> Result<(), Invalid> {
    let shown = || {
        let values: Vec<String> = c_grid.iter().map(f64::to_string).collect();
        values.join(",")
    };
    if c_grid.is_empty() || c_grid.len() > MAX_C_GRID {
        let rule = format!("must be 1 to {MAX_C_GRID} values");
        return Err(Invalid::new("c_grid", shown(), rule));
    }
    let positive = c_grid.iter().all(|c| c.is_finite() && *c > 0.0);
    let distinct = (c_grid.iter().enumerate()).all(|(i, a)| !c_grid[..i].contains(a));
    if !positive || !distinct {
        let rule = "must be distinct positive numbers";
        return Err(Invalid::new("c_grid", shown(), rule));
    }
    match c {
        Some(c) if !(c.is_finite() && c > 0.0) => {
            return Err(Invalid::new("c", c, "must be a positive number"));
        }
        Some(_) => {}
        None => at_least("cv", cv, 2, " folds")?,
    }
    if !(1..=MAX_MAP_ORDER).contains(&map_order) {
        return Err(Invalid::new(
            "map_order",
            map_order,
            format!("must be 1 to {MAX_MAP_ORDER}"),
        ));
    }
    Ok(())
}

impl TrainSettings {
    /// From `vocab train`.
    pub fn from_args(args: &crate::cli::TrainArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        let mut inputs = vec![
            ("histograms", args.histograms.as_path()),
            ("labels", args.labels.as_path()),
        ];
        inputs.extend(args.split.as_deref().map(|s| ("split", s)));
        inputs.extend(args.mirrored.as_deref().map(|m| ("mirrored", m)));
        apart("out", &args.out, Kind::File, &inputs)?;
        if let Some(mirrored) = args.mirrored.as_deref()
            && super::rules::same_file(mirrored, &args.histograms)
        {
            return Err(Invalid::new(
                "mirrored",
                mirrored.display(),
                "is the --histograms file; give the histograms of `vocab encode --mirror`",
            ));
        }
        let cv = (args.options.cv, args.options.c_grid.as_slice());
        svm_rules(args.c, cv, args.options.map_order)?;
        let split = match (&args.split, args.holdout) {
            (Some(path), _) => Split::File(path.clone()),
            (None, Some(h)) if h > 0.0 && h < 1.0 => Split::Holdout(h),
            (None, Some(h)) => {
                return Err(Invalid::new(
                    "holdout",
                    h,
                    "a fraction between 0 and 1 (0.5 holds out half)",
                ));
            }
            (None, None) => Split::All,
        };
        Ok(Self {
            histograms: args.histograms.clone(),
            mirrored: args.mirrored.clone(),
            labels: args.labels.clone(),
            attribute: args.attribute.clone(),
            c: args.c,
            cv: args.options.cv,
            c_grid: args.options.c_grid.clone(),
            solver: args.options.solver,
            split,
            split_seed: args.options.split_seed,
            kernel_map: args.options.kernel_map,
            map_order: args.options.map_order,
            out: args.out.clone(),
        })
    }
}

/// Settings of `vocab evaluate` and of the run's scoring.
#[derive(Debug, Clone)]
pub struct EvaluateSettings {
    /// Model file.
    pub model: PathBuf,
    /// Histogram file.
    pub histograms: PathBuf,
    /// Labels CSV.
    pub labels: PathBuf,
    /// Score only the photos the model held out.
    pub held_out: bool,
    /// Histograms of the same photos mirrored: each photo scored by the mean of its two views'
    /// decision values.
    pub mirrored: Option<PathBuf>,
}

impl EvaluateSettings {
    /// From `vocab evaluate`.
    pub fn from_args(args: &crate::cli::EvaluateArgs) -> Self {
        Self {
            model: args.model.clone(),
            histograms: args.histograms.clone(),
            labels: args.labels.clone(),
            held_out: args.held_out,
            mirrored: args.mirrored.clone(),
        }
    }
}

/// Settings of `vocab classify`.
#[derive(Debug, Clone)]
pub struct ClassifySettings {
    /// Model file.
    pub model: PathBuf,
    /// Photos to label.
    pub input: PathBuf,
    /// CSV to write.
    pub out: PathBuf,
    /// The photos' descriptors made elsewhere (a model trained on such).
    pub from: Option<PathBuf>,
}

impl ClassifySettings {
    /// From `vocab classify`.
    pub fn from_args(args: &crate::cli::ClassifyArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        let mut inputs = vec![
            ("model", args.model.as_path()),
            ("input", args.input.as_path()),
        ];
        inputs.extend(args.from.as_deref().map(|f| ("from", f)));
        apart("out", &args.out, Kind::File, &inputs)?;
        Ok(Self {
            model: args.model.clone(),
            input: args.input.clone(),
            out: args.out.clone(),
            from: args.from.clone(),
        })
    }
}
