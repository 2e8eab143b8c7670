//! Linear SVMs by dual coordinate descent (Hsieh, Chang, Lin, Keerthi and Sundararajan 2008), the
//! solver of liblinear and scikit-learn's `LinearSVC`, with `LinearSVC`'s defaults: L2-regularised
//! squared hinge loss, the intercept learned as the weight of a constant feature 1 (regularised,
//! as liblinear does), one-vs-rest for more than two classes; plus stratified k-fold
//! cross-validation and the metrics (accuracy, balanced accuracy, confusion matrix).
//!
//! The solver is a setting ([`Solver`]): the default is the coordinate descent below; `Linfa` runs
//! linfa-svm's SMO (hinge loss, linear kernel) through linfa's `Dataset` / `Fit` interface and
//! reads the hyperplane back into the same [`LinearModel`], so models, prediction and files are
//! the same whichever solver trained them. linfa-svm builds the dense n x n kernel matrix, so it
//! is for small training sets and cross-checks.
//!
//! The dual of `min 1/2 |w|^2 + C sum max(0, 1 - y w.x)^2` is solved one coordinate at a time:
//! with `D = 1 / (2C)`, `G = y_i w.x_i - 1 + D a_i`, `a_i <- max(a_i - G / (x_i.x_i + D), 0)` and
//! `w += (a_i' - a_i) y_i x_i`, visiting coordinates in a seeded random order each epoch, until the
//! spread of projected gradients over an epoch falls below `tol` (or `max_epochs`). As in
//! liblinear, coordinates stuck at zero are shrunk out of the active set and checked again once
//! the active problem has converged.
//!
//! The model is held in one of two forms ([`Form`]), the same descent either way: the primal
//! keeps `w` (a step is a dot product and an update over the row's stored values); the kernel
//! form keeps every row's decision value `w.x_j + bias` and the rows' inner products
//! `Q = X X^T + 1` (`gram`), so a step reads one number and a move adds one row of `Q`. With far
//! fewer rows than values a row, and one `Q` for every one-vs-rest model, C and fold of a
//! cross-validation, the kernel form is the cheaper; [`kernel_pays`] decides.

mod gram;
mod rows;

pub use self::rows::Rows;

use std::sync::Arc;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use self::gram::Gram;

/// Which solver trains the binary models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Solver {
    /// Dual coordinate descent, squared hinge loss (liblinear / `LinearSVC`).
    #[default]
    Dcd,
    /// linfa-svm's SMO with a linear kernel (hinge loss).
    Linfa,
}

/// How coordinate descent holds the model while it descends; the optimum is the same (to
/// rounding), only the cost of a step differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Form {
    /// The kernel form when it costs less, else the primal (the rule: `kernel_for`).
    #[default]
    Auto,
    /// The weights: a step is a dot product and an update over a row's stored values.
    Primal,
    /// The rows' inner products, computed once for every model, C and fold: a step reads the
    /// row's decision value and a move adds a row of them (n values).
    Kernel,
}

/// Errors of training.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SvmError {
    /// linfa-svm refused the problem.
    #[error("linfa-svm: {0}")]
    Linfa(String),
    /// More copies than rows, or rows and classes of different counts.
    #[error("{copies} copies among {rows} rows of {classes} classes")]
    CopyCount {
        /// Copies.
        copies: usize,
        /// Rows.
        rows: usize,
        /// Class labels given.
        classes: usize,
    },
    /// A copy of a row that is not a photo row of its class.
    #[error("row {row} copies row {of}: not a photo row of its class")]
    NotACopy {
        /// The copy.
        row: usize,
        /// The row it names.
        of: usize,
    },
}

/// Training rows and their classes: the photos' rows first, then copies of some of them (mirror
/// images), each `copy_of` its photo. A cross-validation keeps a copy in its photo's fold (so a
/// photo is never scored by a model that trained on its copy), folds the photos alone (their
/// folds are those without copies), and scores photo rows only.
#[derive(Debug, Clone, Copy)]
pub struct Labelled<'a> {
    rows: &'a Rows,
    y: &'a [usize],
    copy_of: &'a [usize],
}

impl<'a> Labelled<'a> {
    /// Rows `rows` of classes `y`, none a copy.
    pub fn new(rows: &'a Rows, y: &'a [usize]) -> Self {
        Self {
            rows,
            y,
            copy_of: &[],
        }
    }

    /// Rows `rows` of classes `y` whose last `copy_of.len()` rows are copies: row
    /// `n + j` (with `n = y.len() - copy_of.len()` photos) copies photo row `copy_of[j]`, of
    /// the same class.
    pub fn with_copies(
        rows: &'a Rows,
        y: &'a [usize],
        copy_of: &'a [usize],
    ) -> Result<Self, SvmError> {
        let count = SvmError::CopyCount {
            copies: copy_of.len(),
            rows: rows.len(),
            classes: y.len(),
        };
        let n = y.len().checked_sub(copy_of.len()).ok_or(count.clone())?;
        if rows.len() != y.len() {
            return Err(count);
        }
        for (j, &of) in copy_of.iter().enumerate() {
            if of >= n || y[n + j] != y[of] {
                return Err(SvmError::NotACopy { row: n + j, of });
            }
        }
        Ok(Self { rows, y, copy_of })
    }

    /// The photo rows (the rows before the copies).
    fn n_photos(&self) -> usize {
        self.y.len() - self.copy_of.len()
    }

    /// Each row's fold of `folds`: the photos' stratified, seeded folds; a copy its photo's.
    fn folds(&self, folds: usize, seed: u64) -> Vec<usize> {
        let mut fold = stratified_folds(&self.y[..self.n_photos()], folds, seed);
        let copies: Vec<usize> = self.copy_of.iter().map(|&of| fold[of]).collect();
        fold.extend(copies);
        fold
    }
}

/// Settings of the solver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvmParams {
    /// Inverse regularisation strength.
    pub c: f64,
    /// The solver.
    pub solver: Solver,
    /// Stopping tolerance on the projected-gradient spread.
    pub tol: f64,
    /// Epochs at most.
    pub max_epochs: usize,
    /// Seed of the coordinate order.
    pub seed: u64,
    /// How coordinate descent holds the model.
    pub form: Form,
}

impl Default for SvmParams {
    fn default() -> Self {
        Self {
            c: 1.0,
            solver: Solver::Dcd,
            tol: 1e-4,
            max_epochs: 1000,
            seed: 0,
            form: Form::Auto,
        }
    }
}

/// A binary linear classifier: `sign(w.x + bias)`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinearModel {
    /// Weights.
    pub w: Vec<f32>,
    /// Intercept.
    pub bias: f32,
}

impl LinearModel {
    /// The model of solver weights `w` (the constant feature's last: the bias).
    fn of_weights(w: &[f64]) -> Self {
        let (bias, w) = w.split_last().map_or((0.0, w), |(b, w)| (*b, w));
        Self {
            w: w.iter().map(|&v| v as f32).collect(),
            bias: bias as f32,
        }
    }

    /// The decision value of `x`.
    pub fn decision(&self, x: &[f32]) -> f64 {
        self.w
            .iter()
            .zip(x)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum::<f64>()
            + f64::from(self.bias)
    }
}

/// Trains a binary model on rows `x` with labels `y` (`true` = positive class).
///
/// # Panics
/// If `x` and `y` differ in length or rows differ in length.
pub fn train_binary(x: &[&[f32]], y: &[bool], params: &SvmParams) -> Result<LinearModel, SvmError> {
    match params.solver {
        Solver::Dcd => {
            let rows = Rows::from_dense(x);
            let gram = kernel_for(&rows, params.form, 1);
            Ok(solve_in(&rows, gram.as_deref(), y, params, None).0)
        }
        Solver::Linfa => solve_linfa(x, y, params),
    }
}

/// linfa-svm's C-SVC with a linear kernel; the hyperplane is read back as `w_j = f(e_j)` (its
/// decision function without the offset, on the unit vectors) and `bias = -rho`.
fn solve_linfa(x: &[&[f32]], y: &[bool], params: &SvmParams) -> Result<LinearModel, SvmError> {
    use linfa::prelude::*;
    use ndarray::{Array1, Array2};
    let d = x.first().map_or(0, |r| r.len());
    let records = Array2::from_shape_fn((x.len(), d), |(i, j)| f64::from(x[i][j]));
    let targets = Array1::from_iter(y.iter().copied());
    let dataset = Dataset::new(records, targets);
    let model = linfa_svm::Svm::<f64, bool>::params()
        .pos_neg_weights(params.c, params.c)
        .linear_kernel()
        .fit(&dataset)
        .map_err(|e| SvmError::Linfa(e.to_string()))?;
    let mut unit = Array1::<f64>::zeros(d);
    let mut w = Vec::with_capacity(d);
    for j in 0..d {
        unit[j] = 1.0;
        w.push(model.weighted_sum(&unit) as f32);
        unit[j] = 0.0;
    }
    Ok(LinearModel {
        w,
        bias: -model.rho as f32,
    })
}

/// What a coordinate step needs of the model: a row's decision value `w.x_i + bias`, and the
/// model moved by `step` times row `i` (with its constant feature).
trait State {
    fn decision(&self, i: usize) -> f64;
    fn add(&mut self, i: usize, step: f64);
}

/// The primal form: the weights, the constant feature's last.
struct Weights<'a> {
    rows: &'a Rows,
    w: Vec<f64>,
}

impl State for Weights<'_> {
    #[inline(always)]
    fn decision(&self, i: usize) -> f64 {
        self.rows.dot(i, &self.w) + self.w[self.rows.dims()]
    }

    #[inline(always)]
    fn add(&mut self, i: usize, step: f64) {
        self.rows.add_to(i, step, &mut self.w);
        self.w[self.rows.dims()] += step;
    }
}

/// The kernel form: every row's decision value, moved by a row of `Q` (`n x n`).
struct Decisions<'a> {
    q: &'a [f64],
    f: Vec<f64>,
}

impl State for Decisions<'_> {
    #[inline(always)]
    fn decision(&self, i: usize) -> f64 {
        self.f[i]
    }

    #[inline(always)]
    fn add(&mut self, i: usize, step: f64) {
        let n = self.f.len();
        for (f, &q) in self.f.iter_mut().zip(&self.q[i * n..(i + 1) * n]) {
            *f += step * q;
        }
    }
}

/// One binary problem of coordinate descent: the rows' signs, `Q_ii` and the diagonal.
struct Problem<'a> {
    sign: &'a [f64],
    qii: &'a [f64],
    diag: f64,
}

impl Problem<'_> {
    /// One epoch over the first `active` coordinates of `order` (shrinking those at 0 whose
    /// gradient exceeds `pg_max_old`); returns the active count and the largest and least
    /// projected gradients. The body is compiled twice, portable and for AVX2 (chosen by
    /// [`crate::isa::level`]); both give the same bits (the rows' sums run in a fixed order,
    /// without fused multiply-adds).
    fn sweep<S: State>(
        &self,
        state: &mut S,
        alpha: &mut [f64],
        order: &mut [usize],
        active: usize,
        pg_max_old: f64,
    ) -> (usize, f64, f64) {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::level() >= crate::isa::Level::Avx2 {
            // SAFETY: the CPU has AVX2 (`isa::level` never exceeds what it detected).
            return unsafe { self.sweep_avx2(state, alpha, order, active, pg_max_old) };
        }
        self.sweep_body(state, alpha, order, active, pg_max_old)
    }

    /// [`Problem::sweep`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sweep_avx2<S: State>(
        &self,
        state: &mut S,
        alpha: &mut [f64],
        order: &mut [usize],
        active: usize,
        pg_max_old: f64,
    ) -> (usize, f64, f64) {
        self.sweep_body(state, alpha, order, active, pg_max_old)
    }

    /// The epoch itself (inlined into both builds of [`Problem::sweep`]).
    #[inline(always)]
    fn sweep_body<S: State>(
        &self,
        state: &mut S,
        alpha: &mut [f64],
        order: &mut [usize],
        mut active: usize,
        pg_max_old: f64,
    ) -> (usize, f64, f64) {
        let (sign, qii, diag) = (self.sign, self.qii, self.diag);
        let (mut pg_max, mut pg_min) = (f64::NEG_INFINITY, f64::INFINITY);
        let mut s = 0;
        while s < active {
            let i = order[s];
            let g = sign[i] * state.decision(i) - 1.0 + diag * alpha[i];
            let pg = if alpha[i] == 0.0 {
                if g > pg_max_old {
                    active -= 1;
                    order.swap(s, active);
                    continue;
                }
                g.min(0.0)
            } else {
                g
            };
            pg_max = pg_max.max(pg);
            pg_min = pg_min.min(pg);
            if pg.abs() > 1e-12 {
                let old = alpha[i];
                alpha[i] = (old - g / qii[i]).max(0.0);
                state.add(i, (alpha[i] - old) * sign[i]);
            }
            s += 1;
        }
        (active, pg_max, pg_min)
    }
}

/// Dual coordinate descent from `start` (the duals of a solve on the same rows with another C:
/// any `alpha >= 0` is a feasible start; `state` is the zero model and moves to it first, so the
/// result meets the same stopping rule as a cold start). `norms[i]` is `x_i . x_i + 1`. Returns
/// the duals, `state` the model they make.
fn descend<S: State>(
    state: &mut S,
    sign: &[f64],
    norms: impl Fn(usize) -> f64,
    params: &SvmParams,
    start: Option<&[f64]>,
) -> Vec<f64> {
    let n = sign.len();
    let mut alpha = match start {
        Some(start) => {
            assert_eq!(start.len(), n, "one start value per row");
            start.to_vec()
        }
        None => vec![0f64; n],
    };
    for (i, &a) in alpha.iter().enumerate().filter(|(_, a)| **a != 0.0) {
        state.add(i, a * sign[i]);
    }
    let diag = 1.0 / (2.0 * params.c);
    let qii: Vec<f64> = (0..n).map(|i| norms(i) + diag).collect();
    let problem = Problem {
        sign,
        qii: &qii,
        diag,
    };
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    // Shrinking (liblinear): a coordinate at alpha = 0 whose gradient exceeds the largest
    // projected gradient of the previous epoch will stay at 0; it leaves the active set until
    // the active problem has converged, then everything is checked once more.
    let mut active = n;
    let mut pg_max_old = f64::INFINITY;
    for _ in 0..params.max_epochs {
        order[..active].shuffle(&mut rng);
        let (pg_max, pg_min);
        (active, pg_max, pg_min) = problem.sweep(state, &mut alpha, &mut order, active, pg_max_old);
        if pg_max - pg_min < params.tol || active == 0 {
            if active == n {
                break;
            }
            // Converged on the active set: check every coordinate again.
            active = n;
            pg_max_old = f64::INFINITY;
            continue;
        }
        pg_max_old = if pg_max <= 0.0 { f64::INFINITY } else { pg_max };
    }
    alpha
}

/// The signs of labels `y` (`true` = positive class).
fn signs(y: &[bool]) -> Vec<f64> {
    y.iter().map(|&p| if p { 1.0 } else { -1.0 }).collect()
}

/// Solves one binary problem in the primal form; returns the model and its duals.
fn solve(
    rows: &Rows,
    y: &[bool],
    params: &SvmParams,
    start: Option<&[f64]>,
) -> (LinearModel, Vec<f64>) {
    assert_eq!(rows.len(), y.len(), "one label per row");
    let mut state = Weights {
        rows,
        w: vec![0f64; rows.dims() + 1],
    };
    let alpha = descend(
        &mut state,
        &signs(y),
        |i| rows.sum_squares(i) + 1.0,
        params,
        start,
    );
    (LinearModel::of_weights(&state.w), alpha)
}

/// Solves one binary problem in the kernel form over `q` (`n x n`, the rows' inner products
/// plus one); returns the duals.
fn solve_kernel(q: &[f64], y: &[bool], params: &SvmParams, start: Option<&[f64]>) -> Vec<f64> {
    let n = y.len();
    assert_eq!(q.len(), n * n, "an inner product per pair of rows");
    let mut state = Decisions {
        q,
        f: vec![0f64; n],
    };
    descend(&mut state, &signs(y), |i| q[i * n + i], params, start)
}

/// The model of duals `alpha` on `rows` with labels `y`: `w = sum alpha_i y_i x_i`, the bias
/// likewise over the constant feature.
fn model_of_duals(rows: &Rows, y: &[bool], alpha: &[f64]) -> LinearModel {
    let sign = signs(y);
    let mut state = Weights {
        rows,
        w: vec![0f64; rows.dims() + 1],
    };
    for (i, &a) in alpha.iter().enumerate().filter(|(_, a)| **a != 0.0) {
        state.add(i, a * sign[i]);
    }
    LinearModel::of_weights(&state.w)
}

/// Solves one binary problem on `rows` in the form `gram` says (the rows' inner products: the
/// kernel form; none: the primal); returns the model and its duals.
fn solve_in(
    rows: &Rows,
    gram: Option<&Gram>,
    y: &[bool],
    params: &SvmParams,
    start: Option<&[f64]>,
) -> (LinearModel, Vec<f64>) {
    match gram {
        Some(gram) => {
            assert_eq!(gram.len(), rows.len(), "the rows' own inner products");
            let alpha = solve_kernel(gram.all(), y, params, start);
            (model_of_duals(rows, y, &alpha), alpha)
        }
        None => solve(rows, y, params, start),
    }
}

/// Rows at most for the kernel form on its own choice ([`Form::Auto`]). Its memory: `Q` (`8 n^2`
/// bytes) and, while cross-validating, each fold's blocks of it (`8 n^2 (k - 1) / k` bytes a
/// fold, the folds at once): about `5 x 8 n^2` bytes for 5 folds, 640 MiB here.
pub const KERNEL_ROWS: usize = 4096;

/// Epochs a fit is reckoned to take, weighing the kernel form's one-off cost against the primal.
const EPOCHS_A_FIT: f64 = 20.0;

/// Whether the kernel form costs less than the primal for `fits` fits on `n` rows of `dims`
/// values that store `stored` values in all (`n x dims` for dense rows), in multiply-adds: the
/// inner products (`n^2 dims / 2`) and a row of them a coordinate an epoch (`n^2`), against a
/// dot product and an update over the stored values an epoch, [`EPOCHS_A_FIT`] epochs a fit;
/// never for more than [`KERNEL_ROWS`] rows.
pub fn kernel_pays(n: usize, dims: usize, stored: usize, fits: usize) -> bool {
    let (n_f, epochs) = (n as f64, fits as f64 * EPOCHS_A_FIT);
    let kernel = n_f * n_f * dims as f64 / 2.0 + epochs * n_f * n_f;
    let primal = epochs * 2.0 * stored as f64;
    n > 0 && n <= KERNEL_ROWS && kernel <= primal
}

/// The rows' inner products if `form` (for `fits` fits on `rows`) solves in the kernel form:
/// [`Form::Auto`] takes it when it is already computed or when [`kernel_pays`].
fn kernel_for(rows: &Rows, form: Form, fits: usize) -> Option<Arc<Gram>> {
    let pays = match form {
        Form::Primal => false,
        Form::Kernel => true,
        Form::Auto => rows.has_gram() || kernel_pays(rows.len(), rows.dims(), rows.stored(), fits),
    };
    pays.then(|| rows.gram())
}

/// Models for `classes` classes: one for two, else one per class.
fn models(classes: usize) -> usize {
    if classes == 2 { 1 } else { classes }
}

/// One fit per model, in class order: one model for two classes (`fit(0, 1)`: class 1 against
/// class 0), else one per class against the rest (`fit(k, k)`, in parallel).
fn per_model<T: Send>(classes: usize, fit: impl Fn(usize, usize) -> T + Sync) -> Vec<T> {
    use rayon::prelude::*;
    if classes == 2 {
        vec![fit(0, 1)]
    } else {
        (0..classes).into_par_iter().map(|k| fit(k, k)).collect()
    }
}

/// The class the models' decision values choose, and the value: for one model, class 1 when
/// positive; for more, the largest (the first on ties).
fn winner(values: impl Iterator<Item = f64>, models: usize) -> (usize, f64) {
    if models == 1 {
        let v = values.into_iter().next().unwrap_or(f64::NAN);
        return (usize::from(v > 0.0), v);
    }
    values
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (k, v)| {
            if v > best.1 { (k, v) } else { best }
        })
}

/// A trained classifier over two or more classes (one model per class for more than two).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Classifier {
    /// Class names, sorted; for two classes the model scores `classes[1]` against `classes[0]`.
    pub classes: Vec<String>,
    /// One model (two classes) or one per class (one-vs-rest).
    pub models: Vec<LinearModel>,
    /// The C it was trained with.
    pub c: f64,
}

impl Classifier {
    /// Trains on rows `x` labelled with class indices `y` into `classes`.
    pub fn fit(
        x: &[&[f32]],
        y: &[usize],
        classes: &[String],
        params: &SvmParams,
    ) -> Result<Self, SvmError> {
        Ok(Self::fit_rows(&Rows::from_dense(x), y, classes, params, None)?.0)
    }

    /// [`Classifier::fit`] on [`Rows`], optionally warm-started from duals (one list per model,
    /// a value per row: any values of 0 or more are a feasible start, e.g. a fit's with another
    /// C, or [`Chosen::start`]); returns the duals too (empty for linfa-svm, which starts cold
    /// from the rows made dense).
    pub fn fit_rows(
        rows: &Rows,
        y: &[usize],
        classes: &[String],
        params: &SvmParams,
        start: Option<&[Vec<f64>]>,
    ) -> Result<(Self, Vec<Vec<f64>>), SvmError> {
        let dense: Vec<Vec<f32>> = match params.solver {
            Solver::Linfa => (0..rows.len()).map(|i| rows.dense(i)).collect(),
            Solver::Dcd => Vec::new(),
        };
        let x: Vec<&[f32]> = dense.iter().map(Vec::as_slice).collect();
        let gram = match params.solver {
            Solver::Dcd => kernel_for(rows, params.form, models(classes.len())),
            Solver::Linfa => None,
        };
        let fitted = per_model(classes.len(), |model, positive| {
            let labels: Vec<bool> = y.iter().map(|&c| c == positive).collect();
            match params.solver {
                Solver::Dcd => Ok(solve_in(
                    rows,
                    gram.as_deref(),
                    &labels,
                    params,
                    start.and_then(|s| s.get(model)).map(Vec::as_slice),
                )),
                Solver::Linfa => solve_linfa(&x, &labels, params).map(|m| (m, Vec::new())),
            }
        });
        let (models, duals) = fitted
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        let classifier = Self {
            classes: classes.to_vec(),
            models,
            c: params.c,
        };
        Ok((classifier, duals))
    }

    /// The predicted class index of row `i` of `rows`.
    pub fn predict_row(&self, rows: &Rows, i: usize) -> usize {
        self.scored_row(rows, i).0
    }

    /// [`Classifier::scored`] of row `i` of `rows`, over its non-zero blocks only.
    pub fn scored_row(&self, rows: &Rows, i: usize) -> (usize, f64) {
        self.choose(&self.decisions_row(rows, i))
    }

    /// The predicted class index of `x`.
    pub fn predict(&self, x: &[f32]) -> usize {
        self.scored(x).0
    }

    /// The predicted class index of `x` and its score: the decision value that chose it (two
    /// classes: the model's value, positive for `classes[1]`; more: the winning one-vs-rest
    /// model's value).
    pub fn scored(&self, x: &[f32]) -> (usize, f64) {
        self.choose(&self.decisions(x))
    }

    /// Every model's decision value for `x`, in model order (one value for two classes).
    pub fn decisions(&self, x: &[f32]) -> Vec<f64> {
        self.models.iter().map(|m| m.decision(x)).collect()
    }

    /// [`Classifier::decisions`] of row `i` of `rows`, over its non-zero blocks only.
    pub fn decisions_row(&self, rows: &Rows, i: usize) -> Vec<f64> {
        (self.models.iter())
            .map(|m| rows.decision(i, &m.w, m.bias))
            .collect()
    }

    /// The class and score that decision values (one per model, e.g. a mean over views of a
    /// photo) choose, by [`Classifier::scored`]'s rule.
    pub fn choose(&self, values: &[f64]) -> (usize, f64) {
        winner(values.iter().copied(), self.models.len())
    }

    /// The class each model's decision value scores, in model order: `classes[1]` for two
    /// classes, else each class against the rest.
    pub fn scored_classes(&self) -> &[String] {
        if self.models.len() == 1 {
            self.classes.get(1..).unwrap_or_default()
        } else {
            &self.classes
        }
    }
}

/// Accuracy, balanced accuracy and the confusion matrix (`[true][predicted]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Fraction correct.
    pub accuracy: f64,
    /// Mean per-class recall.
    pub balanced_accuracy: f64,
    /// Counts by true class (rows) and predicted class (columns).
    pub confusion: Vec<Vec<usize>>,
}

/// Metrics of predictions against truth over `classes` classes.
pub fn metrics(truth: &[usize], predicted: &[usize], classes: usize) -> Metrics {
    let mut confusion = vec![vec![0usize; classes]; classes];
    for (&t, &p) in truth.iter().zip(predicted) {
        confusion[t][p] += 1;
    }
    let correct: usize = (0..classes).map(|k| confusion[k][k]).sum();
    let recalls: Vec<f64> = (0..classes)
        .filter_map(|k| {
            let n: usize = confusion[k].iter().sum();
            (n > 0).then(|| confusion[k][k] as f64 / n as f64)
        })
        .collect();
    Metrics {
        accuracy: correct as f64 / truth.len().max(1) as f64,
        balanced_accuracy: recalls.iter().sum::<f64>() / recalls.len().max(1) as f64,
        confusion,
    }
}

/// Stratified k-fold assignment: `fold[i]` for each row, classes spread evenly, seeded.
pub fn stratified_folds(y: &[usize], folds: usize, seed: u64) -> Vec<usize> {
    let folds = folds.max(2);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut fold = vec![0usize; y.len()];
    let classes = y.iter().copied().max().map_or(0, |m| m + 1);
    let mut next = 0;
    for class in 0..classes {
        let mut members: Vec<usize> = (0..y.len()).filter(|&i| y[i] == class).collect();
        members.shuffle(&mut rng);
        for i in members {
            fold[i] = next % folds;
            next += 1;
        }
    }
    fold
}

/// Mean cross-validated accuracy of `params` on rows `x` with class indices `y`.
pub fn cross_validate(
    x: &[&[f32]],
    y: &[usize],
    classes: &[String],
    params: &SvmParams,
    folds: usize,
    seed: u64,
) -> Result<f64, SvmError> {
    let rows = Rows::from_dense(x);
    let path = cross_validate_path(
        &Labelled::new(&rows, y),
        classes,
        &[params.c],
        params,
        folds,
        seed,
        &|_, _| {},
    )?;
    Ok(path.scores[0])
}

/// What a cross-validation over a grid of C found.
#[derive(Debug, Clone)]
pub struct CvPath {
    /// Mean held-out accuracy for each C of the grid, in grid order.
    pub scores: Vec<f64>,
    /// For each C of the grid, a warm start for a fit on all the rows: per model, each row's
    /// dual averaged over the folds that trained on it (empty for linfa-svm).
    pub starts: Vec<Vec<Vec<f64>>>,
}

/// Mean cross-validated accuracy for every C of `grid` (in grid order), with `params`' other
/// settings, and the folds' duals as warm starts. Folds run in parallel; within a fold the Cs
/// are fitted from the smallest up, each coordinate-descent fit starting from the duals of the
/// previous one (a regularisation path: the solution moves little between neighbouring Cs, so
/// the large-C fits, which take the most epochs from zero, converge in far fewer). Every fit
/// still meets the same stopping rule. `fitted(fold, c)` is called after each fit (from the
/// fold's thread), for progress.
#[allow(clippy::too_many_arguments)]
pub fn cross_validate_path(
    data: &Labelled,
    classes: &[String],
    grid: &[f64],
    params: &SvmParams,
    folds: usize,
    seed: u64,
    fitted: &(dyn Fn(usize, f64) + Sync),
) -> Result<CvPath, SvmError> {
    use rayon::prelude::*;
    let (rows, y) = (data.rows, data.y);
    let folds = folds.max(2);
    let fold = data.folds(folds, seed);
    let photos = data.n_photos();
    let mut ascending: Vec<usize> = (0..grid.len()).collect();
    ascending.sort_by(|&a, &b| grid[a].total_cmp(&grid[b]));
    // Every fold at every C, and the final fit, for each model: one kernel form serves them all.
    let gram = match params.solver {
        Solver::Dcd => {
            let fits = models(classes.len()) * (folds * grid.len() + 1);
            kernel_for(rows, params.form, fits)
        }
        Solver::Linfa => None,
    };
    let per_fold: Vec<Option<FoldFit>> = (0..folds)
        .into_par_iter()
        .map(|f| {
            let train: Vec<usize> = (0..y.len()).filter(|&i| fold[i] != f).collect();
            // Photos only: a copy is scored as its photo is.
            let test: Vec<usize> = (0..photos).filter(|&i| fold[i] == f).collect();
            if test.is_empty() {
                return Ok(None);
            }
            let data = match &gram {
                Some(gram) => Fold::Kernel {
                    q: gram.block(&train, &train),
                    cross: gram.block(&test, &train),
                },
                None => Fold::Primal(rows.select(&train)),
            };
            let train_y: Vec<usize> = train.iter().map(|&i| y[i]).collect();
            let mut accuracy = vec![0.0; grid.len()];
            let mut duals_at = vec![Vec::new(); grid.len()];
            let mut start: Option<Vec<Vec<f64>>> = None;
            for &g in &ascending {
                let params = SvmParams {
                    c: grid[g],
                    ..*params
                };
                let (predicted, duals) =
                    data.fit(rows, &test, &train_y, classes, &params, start.as_deref())?;
                let correct = (test.iter().zip(&predicted))
                    .filter(|&(&i, &p)| p == y[i])
                    .count();
                accuracy[g] = correct as f64 / test.len() as f64;
                duals_at[g] = duals.clone();
                start = (params.solver == Solver::Dcd).then_some(duals);
                fitted(f, grid[g]);
            }
            Ok(Some(FoldFit {
                train,
                accuracy,
                duals: duals_at,
            }))
        })
        .collect::<Result<_, SvmError>>()?;
    let scored: Vec<&FoldFit> = per_fold.iter().flatten().collect();
    let scores = (0..grid.len())
        .map(|g| scored.iter().map(|s| s.accuracy[g]).sum::<f64>() / scored.len().max(1) as f64)
        .collect();
    // Each row's duals averaged over the folds that trained on it.
    let models = scored
        .first()
        .map_or(0, |s| s.duals.first().map_or(0, Vec::len));
    let starts = (0..grid.len())
        .map(|g| {
            (0..models)
                .map(|m| {
                    let (mut sum, mut count) = (vec![0f64; y.len()], vec![0u32; y.len()]);
                    for fit in &scored {
                        for (&i, &a) in fit.train.iter().zip(&fit.duals[g][m]) {
                            sum[i] += a;
                            count[i] += 1;
                        }
                    }
                    (sum.iter().zip(&count))
                        .map(|(&s, &n)| if n > 0 { s / f64::from(n) } else { 0.0 })
                        .collect()
                })
                .collect()
        })
        .collect();
    Ok(CvPath { scores, starts })
}

/// A fold's training rows as the solver sees them.
enum Fold {
    /// The rows themselves.
    Primal(Rows),
    /// Their inner products (`q`, training x training) and the held-out rows' with them
    /// (`cross`, held-out x training), each plus one.
    Kernel { q: Vec<f64>, cross: Vec<f64> },
}

impl Fold {
    /// Fits the models from `start` with labels `train_y`; returns the predicted class of each
    /// row `test` of `rows` (held out) and the duals.
    fn fit(
        &self,
        rows: &Rows,
        test: &[usize],
        train_y: &[usize],
        classes: &[String],
        params: &SvmParams,
        start: Option<&[Vec<f64>]>,
    ) -> Result<(Vec<usize>, Vec<Vec<f64>>), SvmError> {
        match self {
            Fold::Primal(train) => {
                let params = SvmParams {
                    form: Form::Primal,
                    ..*params
                };
                let (model, duals) = Classifier::fit_rows(train, train_y, classes, &params, start)?;
                let predicted = test.iter().map(|&i| model.predict_row(rows, i)).collect();
                Ok((predicted, duals))
            }
            Fold::Kernel { q, cross } => {
                let labels: Vec<Vec<bool>> = per_model(classes.len(), |_, positive| {
                    train_y.iter().map(|&c| c == positive).collect()
                });
                let duals = per_model(classes.len(), |model, _| {
                    let start = start.and_then(|s| s.get(model)).map(Vec::as_slice);
                    solve_kernel(q, &labels[model], params, start)
                });
                // Decision values of the held-out rows, sum_j alpha_j y_j Q_tj (in f64: the
                // primal form scores the model as stored, in f32, so a value on the boundary
                // may fall either side).
                let n = train_y.len();
                let predicted = (0..test.len())
                    .map(|t| {
                        let row = &cross[t * n..(t + 1) * n];
                        let values = duals.iter().zip(&labels).map(|(alpha, labels)| {
                            (alpha.iter().zip(labels).zip(row))
                                .filter(|((a, _), _)| **a != 0.0)
                                .map(|((a, &p), q)| if p { a * q } else { -a * q })
                                .sum()
                        });
                        winner(values, duals.len()).0
                    })
                    .collect();
                Ok((predicted, duals))
            }
        }
    }
}

/// One fold's part of a cross-validation: its training rows, the held-out accuracy and the
/// duals (per model) at each C of the grid.
struct FoldFit {
    train: Vec<usize>,
    accuracy: Vec<f64>,
    duals: Vec<Vec<Vec<f64>>>,
}

/// The C [`choose_c`] chose, its cross-validated accuracy, and a warm start for the fit at it.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The C.
    pub c: f64,
    /// Its mean held-out accuracy over the folds.
    pub accuracy: f64,
    /// Per model, each row's dual at that C averaged over the folds that trained on it: a
    /// feasible start for [`Classifier::fit_rows`] on all the rows, near the optimum.
    pub start: Vec<Vec<f64>>,
}

/// The C of `grid` with the best cross-validated accuracy (the first in grid order on ties), and
/// that accuracy; `fitted(fold, c)` after each of the `folds x grid` fits.
#[allow(clippy::too_many_arguments)]
pub fn choose_c(
    data: &Labelled,
    classes: &[String],
    grid: &[f64],
    folds: usize,
    seed: u64,
    solver: Solver,
    fitted: &(dyn Fn(usize, f64) + Sync),
) -> Result<Chosen, SvmError> {
    let params = SvmParams {
        seed,
        solver,
        ..SvmParams::default()
    };
    let path = cross_validate_path(data, classes, grid, &params, folds, seed, fitted)?;
    let (best, accuracy) =
        (path.scores.iter().enumerate()).fold((0, f64::NEG_INFINITY), |best, (g, &acc)| {
            if acc > best.1 { (g, acc) } else { best }
        });
    Ok(Chosen {
        c: grid.get(best).copied().unwrap_or(f64::NAN),
        accuracy,
        start: path.starts.into_iter().nth(best).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two Gaussian-ish clouds in `d` dims, separated along the first axis by `gap`.
    fn clouds(n: usize, d: usize, gap: f32, seed: u64) -> (Vec<Vec<f32>>, Vec<usize>) {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let class = i % 2;
            let mut row: Vec<f32> = (0..d).map(|_| next()).collect();
            row[0] += if class == 1 { gap } else { -gap };
            x.push(row);
            y.push(class);
        }
        (x, y)
    }

    #[test]
    fn separable_data_is_separated_and_the_solution_satisfies_the_dual_conditions() {
        let (x, y) = clouds(200, 5, 1.0, 3);
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let classes = vec!["a".to_string(), "b".to_string()];
        let model = Classifier::fit(&rows, &y, &classes, &SvmParams::default()).expect("fit");
        let predicted: Vec<usize> = rows.iter().map(|r| model.predict(r)).collect();
        assert_eq!(metrics(&y, &predicted, 2).accuracy, 1.0);
        // Margin: every point on the right side with y (w.x + b) close to or above 1 at C = 1.
        let m = &model.models[0];
        let worst = rows
            .iter()
            .zip(&y)
            .map(|(r, &c)| {
                if c == 1 {
                    m.decision(r)
                } else {
                    -m.decision(r)
                }
            })
            .fold(f64::INFINITY, f64::min);
        assert!(worst > 0.5, "worst margin {worst}");
    }

    #[test]
    fn one_vs_rest_and_cv_pick_a_sensible_c() {
        // Three classes along the first axis.
        let mut x = Vec::new();
        let mut y = Vec::new();
        let (base, _) = clouds(300, 3, 0.0, 9);
        for (i, mut row) in base.into_iter().enumerate() {
            let class = i % 3;
            row[0] += class as f32 * 2.0;
            x.push(row);
            y.push(class);
        }
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let classes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let chosen = choose_c(
            &Labelled::new(&Rows::from_dense(&rows), &y),
            &classes,
            &[0.01, 1.0, 100.0],
            5,
            1,
            Solver::Dcd,
            &|_, _| {},
        )
        .expect("cv");
        let (c, acc) = (chosen.c, chosen.accuracy);
        assert!(acc > 0.95, "cv accuracy {acc} at C = {c}");
        let model = Classifier::fit(
            &rows,
            &y,
            &classes,
            &SvmParams {
                c,
                ..SvmParams::default()
            },
        )
        .expect("fit");
        assert_eq!(model.models.len(), 3);
        let predicted: Vec<usize> = rows.iter().map(|r| model.predict(r)).collect();
        let m = metrics(&y, &predicted, 3);
        assert!(m.accuracy > 0.95 && m.balanced_accuracy > 0.95, "{m:?}");
        assert_eq!(m.confusion.iter().flatten().sum::<usize>(), 300);
    }

    #[test]
    fn the_linfa_solver_behind_the_same_interface_agrees_with_coordinate_descent() {
        let (x, y) = clouds(120, 4, 0.6, 5);
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let classes = vec!["a".to_string(), "b".to_string()];
        let fit = |solver| {
            Classifier::fit(
                &rows,
                &y,
                &classes,
                &SvmParams {
                    solver,
                    ..SvmParams::default()
                },
            )
            .expect("fit")
        };
        let (dcd, linfa) = (fit(Solver::Dcd), fit(Solver::Linfa));
        let agree = rows
            .iter()
            .filter(|r| dcd.predict(r) == linfa.predict(r))
            .count();
        assert!(agree >= 114, "only {agree} of 120 predictions agree");
        let accuracy = |m: &Classifier| {
            let p: Vec<usize> = rows.iter().map(|r| m.predict(r)).collect();
            metrics(&y, &p, 2).accuracy
        };
        assert!(
            accuracy(&linfa) > 0.9,
            "linfa accuracy {}",
            accuracy(&linfa)
        );
        // The hyperplane read back from linfa points the same way as the descent's.
        let cos = {
            let (a, b) = (&dcd.models[0].w, &linfa.models[0].w);
            let dot: f32 = a.iter().zip(b).map(|(p, q)| p * q).sum();
            let norm = |v: &[f32]| v.iter().map(|p| p * p).sum::<f32>().sqrt();
            dot / (norm(a) * norm(b))
        };
        assert!(cos > 0.95, "cosine between the hyperplanes {cos}");
    }

    #[test]
    fn shrinking_reaches_the_optimum_of_the_primal() {
        // Overlapping clouds: many coordinates at zero (shrunk) and many support vectors.
        let (x, y) = clouds(400, 6, 0.3, 11);
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let labels: Vec<bool> = y.iter().map(|&c| c == 1).collect();
        let primal = |m: &LinearModel, c: f64| {
            let reg: f64 =
                m.w.iter()
                    .map(|&v| f64::from(v) * f64::from(v))
                    .sum::<f64>()
                    + f64::from(m.bias) * f64::from(m.bias);
            let loss: f64 = rows
                .iter()
                .zip(&labels)
                .map(|(r, &p)| {
                    let margin = if p { m.decision(r) } else { -m.decision(r) };
                    (1.0 - margin).max(0.0).powi(2)
                })
                .sum();
            0.5 * reg + c * loss
        };
        for c in [0.1, 1.0, 10.0] {
            let loose = train_binary(
                &rows,
                &labels,
                &SvmParams {
                    c,
                    ..SvmParams::default()
                },
            )
            .expect("fit");
            let tight = train_binary(
                &rows,
                &labels,
                &SvmParams {
                    c,
                    tol: 1e-9,
                    max_epochs: 100_000,
                    ..SvmParams::default()
                },
            )
            .expect("fit");
            let (a, b) = (primal(&loose, c), primal(&tight, c));
            assert!(
                (a - b).abs() <= 1e-3 * b,
                "C = {c}: objective {a} vs optimum {b}"
            );
            // Warm-started from the duals of C / 10 (as along the C grid): the same optimum.
            let sparse = Rows::from_dense(&rows);
            let smaller = SvmParams {
                c: c / 10.0,
                ..SvmParams::default()
            };
            let (_, duals) = solve(&sparse, &labels, &smaller, None);
            let params = SvmParams {
                c,
                ..SvmParams::default()
            };
            let (warm, _) = solve(&sparse, &labels, &params, Some(&duals));
            let w = primal(&warm, c);
            assert!(
                (w - b).abs() <= 1e-3 * b,
                "C = {c} warm: objective {w} vs optimum {b}"
            );
        }
    }

    #[test]
    fn the_c_path_scores_each_c_like_a_cold_cross_validation() {
        let (x, y) = clouds(300, 5, 0.6, 5);
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let classes = ["a".to_string(), "b".to_string()];
        let grid = [10.0, 0.01, 1.0];
        let params = SvmParams::default();
        let dense = Rows::from_dense(&rows);
        let labelled = Labelled::new(&dense, &y);
        let path =
            cross_validate_path(&labelled, &classes, &grid, &params, 4, 3, &|_, _| {}).expect("cv");
        for (&c, &warm) in grid.iter().zip(&path.scores) {
            let cold =
                cross_validate(&rows, &y, &classes, &SvmParams { c, ..params }, 4, 3).expect("cv");
            // Same folds, fits within the stopping tolerance of each other: at most one of the
            // 75 test rows of a fold may fall on the other side.
            assert!(
                (warm - cold).abs() <= 1.0 / 75.0 + 1e-12,
                "C = {c}: path {warm} vs cold {cold}"
            );
        }
    }

    /// Rows `x` in each layout: dense; their values above 0.1 as sparse histograms; those
    /// through the chi2 kernel map.
    fn layouts(x: &[Vec<f32>]) -> [Rows; 3] {
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let histograms: Vec<Vec<f32>> = x
            .iter()
            .map(|r| r.iter().map(|v| if *v > 0.1 { *v } else { 0.0 }).collect())
            .collect();
        let h: Vec<&[f32]> = histograms.iter().map(Vec::as_slice).collect();
        let map =
            crate::kernel_map::KernelMap::new(crate::kernel_map::Kernel::Chi2, 3).expect("map");
        [
            Rows::from_dense(&rows),
            Rows::from_dense(&h),
            Rows::mapped(&h, &map),
        ]
    }

    /// The sweep compiled for AVX2 gives the portable build's bits (fixed sums, no fused
    /// multiply-add), on every layout of the rows.
    #[test]
    fn both_builds_of_the_sweep_give_the_same_bits() {
        let (x, y) = clouds(120, 12, 0.3, 8);
        for layout in layouts(&x) {
            let sign: Vec<f64> = y.iter().map(|&c| if c == 1 { 1.0 } else { -1.0 }).collect();
            let qii: Vec<f64> = (0..y.len()).map(|i| layout.sum_squares(i) + 1.5).collect();
            let problem = Problem {
                sign: &sign,
                qii: &qii,
                diag: 0.5,
            };
            fn run<S: State>(
                problem: &Problem,
                state: &mut S,
                n: usize,
                avx2: bool,
            ) -> Vec<(usize, u64, u64)> {
                let mut alpha = vec![0f64; n];
                let mut order: Vec<usize> = (0..n).collect();
                let mut out = Vec::new();
                for _ in 0..5 {
                    let r = if avx2 {
                        problem.sweep(state, &mut alpha, &mut order, n, f64::INFINITY)
                    } else {
                        problem.sweep_body(state, &mut alpha, &mut order, n, f64::INFINITY)
                    };
                    out.push((r.0, r.1.to_bits(), r.2.to_bits()));
                }
                out.extend(alpha.iter().map(|a| (0, a.to_bits(), 0)));
                out
            }
            let primal = |avx2: bool| {
                let mut state = Weights {
                    rows: &layout,
                    w: vec![0f64; layout.dims() + 1],
                };
                let out = run(&problem, &mut state, y.len(), avx2);
                (out, state.w.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            };
            assert_eq!(primal(true), primal(false), "width {}", layout.width());
            let gram = layout.gram();
            let kernel = |avx2: bool| {
                let mut state = Decisions {
                    q: gram.all(),
                    f: vec![0f64; y.len()],
                };
                let out = run(&problem, &mut state, y.len(), avx2);
                (out, state.f.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            };
            assert_eq!(kernel(true), kernel(false), "width {}", layout.width());
        }
    }

    /// The kernel form reaches the primal form's optimum on every layout (one-vs-rest, from cold
    /// and warm starts), and its cross-validation scores every C alike.
    #[test]
    fn the_kernel_form_reaches_the_primal_optimum() {
        let (x, y3) = {
            let (a, ya) = clouds(90, 20, 0.3, 21);
            let (b, yb) = clouds(60, 20, 0.2, 22);
            let mut x = a;
            let mut y: Vec<usize> = ya;
            x.extend(b.into_iter().map(|mut r| {
                r[1] += 0.8;
                r
            }));
            y.extend(yb.iter().map(|&c| c * 2));
            (x, y)
        };
        let names = |k: usize| {
            (0..k)
                .map(|c| format!("class {c}"))
                .collect::<Vec<String>>()
        };
        // Three classes (one-vs-rest) and two (one model).
        let y2: Vec<usize> = y3.iter().map(|&c| c.min(1)).collect();
        for (y, classes) in [(&y3, names(3)), (&y2, names(2))] {
            for layout in layouts(&x) {
                let fit = |form: Form, c: f64, start: Option<&[Vec<f64>]>| {
                    let params = SvmParams {
                        c,
                        tol: 1e-9,
                        form,
                        ..SvmParams::default()
                    };
                    Classifier::fit_rows(&layout, y, &classes, &params, start).expect("fit")
                };
                let (primal, duals) = fit(Form::Primal, 2.0, None);
                let (kernel, kernel_duals) = fit(Form::Kernel, 2.0, None);
                let (warm, _) = fit(Form::Kernel, 2.0, Some(&fit(Form::Kernel, 0.5, None).1));
                for (p, k) in duals.iter().flatten().zip(kernel_duals.iter().flatten()) {
                    assert!((p - k).abs() < 1e-5 * p.abs().max(1.0), "{p} vs {k}");
                }
                for other in [&kernel, &warm] {
                    for (p, k) in primal.models.iter().zip(&other.models) {
                        let (a, b) = (p.w.iter().chain([&p.bias]), k.w.iter().chain([&k.bias]));
                        for (a, b) in a.zip(b) {
                            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
                        }
                    }
                }
                let cv = |form: Form| {
                    let params = SvmParams {
                        form,
                        tol: 1e-9,
                        ..SvmParams::default()
                    };
                    let grid = [0.1, 1.0, 10.0];
                    let labelled = Labelled::new(&layout, y);
                    cross_validate_path(&labelled, &classes, &grid, &params, 3, 4, &|_, _| {})
                        .expect("cv")
                };
                let (p, k) = (cv(Form::Primal), cv(Form::Kernel));
                for (a, b) in p.scores.iter().zip(&k.scores) {
                    // 3 folds of 50 held-out rows: at most three may fall on the other side.
                    assert!((a - b).abs() <= 3.0 / 150.0 + 1e-12, "{a} vs {b}");
                }
                let starts = |path: &CvPath| -> Vec<f64> {
                    path.starts.iter().flatten().flatten().copied().collect()
                };
                for (a, b) in starts(&p).iter().zip(&starts(&k)) {
                    assert!((a - b).abs() < 1e-5 * a.abs().max(1.0), "{a} vs {b}");
                }
            }
        }
    }

    /// The automatic choice takes the kernel form for few dense rows fitted many times, the
    /// primal for one fit or for sparse rows with many values, and the kernel form once computed.
    #[test]
    fn the_form_follows_the_cost() {
        let dense: Vec<Vec<f32>> = (0..200)
            .map(|r| (0..400).map(|c| ((r + c) % 7) as f32 + 1.0).collect())
            .collect();
        let sparse: Vec<Vec<f32>> = (0..200)
            .map(|r| (0..4000).map(|c| f32::from(u8::from(c == r))).collect())
            .collect();
        let as_rows =
            |x: &[Vec<f32>]| Rows::from_dense(&x.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let (dense, sparse) = (as_rows(&dense), as_rows(&sparse));
        assert!(kernel_for(&dense, Form::Auto, 1).is_none());
        assert!(kernel_for(&dense, Form::Auto, 100).is_some());
        assert!(kernel_for(&sparse, Form::Auto, 100).is_none());
        assert!(kernel_for(&sparse, Form::Primal, 100).is_none());
        assert!(kernel_for(&sparse, Form::Kernel, 1).is_some());
        // Computed now: taken from here on.
        assert!(kernel_for(&sparse, Form::Auto, 1).is_some());
    }

    /// Copies keep the photos' folds and stay in their photo's fold: identical copies of every
    /// photo train like the photos alone at twice the C (the same squared-hinge objective), and
    /// a copy never lets its photo be scored by a model that saw it.
    #[test]
    fn copies_train_in_their_photos_folds_and_are_never_scored() {
        let (x, y) = clouds(120, 4, 0.5, 21);
        let n = y.len();
        let doubled: Vec<&[f32]> = x.iter().chain(&x).map(Vec::as_slice).collect();
        let photos = Rows::from_dense(&doubled[..n]);
        let with_copies = Rows::from_dense(&doubled);
        let copy_of: Vec<usize> = (0..n).collect();
        let yy: Vec<usize> = y.iter().chain(&y).copied().collect();
        let copied = Labelled::with_copies(&with_copies, &yy, &copy_of).expect("copies");
        let fold = copied.folds(5, 3);
        assert_eq!(fold[..n], stratified_folds(&y, 5, 3)[..]);
        assert_eq!(fold[n..], fold[..n]);
        let classes = ["a".to_string(), "b".to_string()];
        let params = SvmParams {
            tol: 1e-9,
            ..SvmParams::default()
        };
        let grid = [0.01, 0.1, 1.0];
        let twice: Vec<f64> = grid.iter().map(|c| 2.0 * c).collect();
        let cv = |data: &Labelled, grid: &[f64]| {
            cross_validate_path(data, &classes, grid, &params, 5, 3, &|_, _| {}).expect("cv")
        };
        let with = cv(&copied, &grid);
        let alone = cv(&Labelled::new(&photos, &y), &twice);
        for (a, b) in with.scores.iter().zip(&alone.scores) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
        assert_eq!(with.starts[0][0].len(), 2 * n);
        // Labels without signal on rows that can be shattered: scoring a photo whose copy trained
        // would be right nearly every time; scored only by models that never saw it, chance.
        let mut state = 5u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            (state >> 33) as f32 / (1u64 << 31) as f32
        };
        let n = 60;
        let noise: Vec<Vec<f32>> = (0..n).map(|_| (0..200).map(|_| next()).collect()).collect();
        let y: Vec<usize> = (0..n).map(|_| usize::from(next() < 0.5)).collect();
        let rows: Vec<&[f32]> = noise.iter().chain(&noise).map(Vec::as_slice).collect();
        let rows = Rows::from_dense(&rows);
        let yy: Vec<usize> = y.iter().chain(&y).copied().collect();
        let copy_of: Vec<usize> = (0..n).collect();
        let copied = Labelled::with_copies(&rows, &yy, &copy_of).expect("copies");
        let score = cv(&copied, &[100.0]).scores[0];
        assert!(score < 0.75, "{score}");
        // Not copies: one of another class, a copy of a copy, more copies than rows.
        let three: Vec<&[f32]> = noise[..3].iter().map(Vec::as_slice).collect();
        let three = Rows::from_dense(&three);
        for (y, copy_of) in [(&[0, 1, 1][..], &[0][..]), (&[0, 0, 0], &[0, 1])] {
            let err = Labelled::with_copies(&three, y, copy_of).expect_err("refused");
            assert!(
                err.to_string().contains("not a photo row of its class"),
                "{err}"
            );
        }
        let err = Labelled::with_copies(&three, &[0, 0, 0], &[0, 0, 0, 0]).expect_err("refused");
        assert!(
            err.to_string()
                .contains("4 copies among 3 rows of 3 classes"),
            "{err}"
        );
    }

    /// The fit on all the rows from the folds' averaged duals reaches the cold fit's optimum.
    #[test]
    fn the_chosen_start_reaches_the_cold_optimum() {
        let (x, y) = clouds(300, 6, 0.4, 12);
        let rows: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let dense = Rows::from_dense(&rows);
        let classes = ["a".to_string(), "b".to_string()];
        let chosen = choose_c(
            &Labelled::new(&dense, &y),
            &classes,
            &[0.1, 10.0],
            5,
            2,
            Solver::Dcd,
            &|_, _| {},
        )
        .expect("cv");
        assert_eq!(chosen.start.len(), 1);
        assert_eq!(chosen.start[0].len(), y.len());
        assert!(chosen.start[0].iter().all(|&a| a >= 0.0));
        let params = SvmParams {
            c: chosen.c,
            tol: 1e-8,
            ..SvmParams::default()
        };
        let (warm, _) =
            Classifier::fit_rows(&dense, &y, &classes, &params, Some(&chosen.start)).expect("warm");
        let (cold, _) = Classifier::fit_rows(&dense, &y, &classes, &params, None).expect("cold");
        for (a, b) in warm.models[0].w.iter().zip(&cold.models[0].w) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }

    #[test]
    fn folds_are_stratified_and_seeded() {
        let y: Vec<usize> = (0..100).map(|i| usize::from(i < 30)).collect();
        let folds = stratified_folds(&y, 5, 7);
        for f in 0..5 {
            let positives = (0..100).filter(|&i| folds[i] == f && y[i] == 1).count();
            assert_eq!(positives, 6, "fold {f}");
        }
        assert_eq!(folds, stratified_folds(&y, 5, 7));
        assert_ne!(folds, stratified_folds(&y, 5, 8));
    }

    #[test]
    fn metrics_of_a_known_confusion() {
        let m = metrics(&[0, 0, 0, 1], &[0, 0, 1, 1], 2);
        assert_eq!(m.accuracy, 0.75);
        assert!((m.balanced_accuracy - (2.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
        assert_eq!(m.confusion, vec![vec![2, 1], vec![0, 1]]);
    }
}
