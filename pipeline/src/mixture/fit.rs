//! The one mixture loop every engine runs ([`fit_with`]): a covariance step and the PCA, the
//! first mixture (means at random vectors projected, every variance the PCA's, equal
//! weights), then EM steps ([`em`]) as scikit-learn's `GaussianMixture` takes them: each
//! step's log-likelihood is the mixture's before its M-step, and the loop stops after the
//! step whose mean log-likelihood moved less than `tol` from the one before, or after
//! `max_iter` steps.

use std::time::Instant;

use rand::SeedableRng;
use rand::seq::index;
use rand_chacha::ChaCha8Rng;

use super::error::MixtureError;
use super::gmm::Gmm;
use super::moments::{Engine, Statistic};
use super::params::Params;
use super::pca::Pca;
use crate::kmeans::engine::StepReport;

/// One step of a run: the covariance (`iteration` 0) or an EM step.
#[derive(Debug, Clone)]
pub struct StepLog {
    /// 0 for the covariance, then EM steps from 1.
    pub iteration: usize,
    /// Mean log-likelihood per vector of the mixture before the step's M-step (0 for the
    /// covariance).
    pub log_likelihood: f64,
    /// Wall time of the step.
    pub seconds: f64,
    /// Time and traffic on a distributed engine.
    pub report: StepReport,
}

/// A learned projection and mixture.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The projection.
    pub pca: Pca,
    /// The mixture over projected vectors.
    pub gmm: Gmm,
    /// Every step (the covariance first).
    pub steps: Vec<StepLog>,
    /// Whether EM stopped on `tol` rather than `max_iter`.
    pub converged: bool,
}

/// Where a run takes up an earlier one (a checkpoint's): its projection, its mixture after its
/// last EM step, and its steps (the covariance first).
#[derive(Debug, Clone)]
pub struct Resumed {
    /// The projection.
    pub pca: Pca,
    /// The mixture after the last step.
    pub gmm: Gmm,
    /// The steps done, the covariance first.
    pub steps: Vec<StepLog>,
}

/// What a step's callback sees: the step, the projection, and the mixture after it (none after
/// the covariance).
pub type OnStep<'a, E> = dyn FnMut(&StepLog, &Pca, Option<&Gmm>) -> Result<(), E> + 'a;

/// Learns the PCA and the mixture of `params` over the vectors of `engine`. `on_step` sees
/// every step as it ends (to log it); an error from it stops the run.
pub fn fit_with<En, E>(
    engine: &mut En,
    params: &Params,
    on_step: &mut dyn FnMut(&StepLog) -> Result<(), E>,
) -> Result<Fitted, E>
where
    En: Engine + ?Sized,
    E: From<En::Error> + From<MixtureError>,
{
    fit_from(engine, params, None, &mut |step, _, _| on_step(step))
}

/// [`fit_with`], taking up `from` when given (its EM steps are not done again: the result is
/// the uninterrupted run's bit for bit), and showing `on_step` the mixture after each step (to
/// checkpoint it).
pub fn fit_from<En, E>(
    engine: &mut En,
    params: &Params,
    from: Option<Resumed>,
    on_step: &mut OnStep<'_, E>,
) -> Result<Fitted, E>
where
    En: Engine + ?Sized,
    E: From<En::Error> + From<MixtureError>,
{
    let (n, dims) = engine.shape();
    if let Err(e) = params.check_for(n, dims) {
        return Err(E::from(MixtureError::Params(e)));
    }
    let (pca, first, done) = match from {
        Some(Resumed { pca, gmm, steps }) => (pca, gmm, steps),
        None => {
            let started = Instant::now();
            let covariance = engine.moments(1, &Statistic::Covariance { dims })?;
            let pca = Pca::from_moments(&covariance, params.pca_dims).map_err(E::from)?;
            let log = StepLog {
                iteration: 0,
                log_likelihood: 0.0,
                seconds: started.elapsed().as_secs_f64(),
                report: covariance.report,
            };
            on_step(&log, &pca, None)?;
            let first = initial::<En, E>(engine, &pca, params)?;
            (pca, first, vec![log])
        }
    };
    let (gmm, steps, converged) = em::<En, E>(engine, &pca, (first, done), params, on_step)?;
    Ok(Fitted {
        pca,
        gmm,
        steps,
        converged,
    })
}

/// The first mixture: the means at `params.components` distinct vectors drawn from
/// `params.seed` and projected, every component's variances the PCA's (plus `reg`), equal
/// weights.
pub fn initial<En, E>(engine: &mut En, pca: &Pca, params: &Params) -> Result<Gmm, E>
where
    En: Engine + ?Sized,
    E: From<En::Error> + From<MixtureError>,
{
    let (n, dims) = engine.shape();
    let n = usize::try_from(n).map_err(|_| E::from(MixtureError::Empty))?;
    let k = params.components;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let indices = index::sample(&mut rng, n, k).into_vec();
    let rows = engine.rows(&indices)?;
    if rows.len() != k * dims || !rows.iter().all(|v| v.is_finite()) {
        return Err(E::from(MixtureError::NonFinite));
    }
    let mut x: Vec<f64> = rows.iter().map(|&v| f64::from(v)).collect();
    let mut means = Vec::new();
    pca.project_into(&mut x, k, &mut means);
    let variances = (0..k)
        .flat_map(|_| pca.variances.iter().map(|v| v + params.reg))
        .collect();
    Gmm::new(vec![1.0 / k as f64; k], means, variances).map_err(E::from)
}

/// EM steps from `gmm` over the vectors of `engine` projected by `pca`, after the steps `done`
/// (the covariance's and any EM steps of an earlier run, which `gmm` is the mixture after):
/// the mixture, the log of every step, and whether it stopped on `tol`.
pub fn em<En, E>(
    engine: &mut En,
    pca: &Pca,
    (mut gmm, mut steps): (Gmm, Vec<StepLog>),
    params: &Params,
    on_step: &mut OnStep<'_, E>,
) -> Result<(Gmm, Vec<StepLog>, bool), E>
where
    En: Engine + ?Sized,
    E: From<En::Error> + From<MixtureError>,
{
    let (n, _) = engine.shape();
    let ems = |steps: &[StepLog]| -> Vec<f64> {
        (steps.iter().filter(|s| s.iteration > 0))
            .map(|s| s.log_likelihood)
            .collect()
    };
    // An earlier run that had already met `tol` is done.
    if let [.., a, b] = ems(&steps)[..]
        && (b - a).abs() < params.tol
    {
        return Ok((gmm, steps, true));
    }
    let first = steps.iter().map(|s| s.iteration).max().unwrap_or(0) + 1;
    for iteration in first..=params.max_iter {
        let started = Instant::now();
        let statistic = Statistic::Mixture {
            pca: pca.clone(),
            gmm,
        };
        let moments = engine.moments(iteration as u64 + 1, &statistic)?;
        let total: u64 = moments.counts.iter().sum();
        if total != n {
            return Err(E::from(MixtureError::Counted {
                got: total,
                want: n,
            }));
        }
        gmm = Gmm::m_step(&moments, params.reg).map_err(E::from)?;
        let log = StepLog {
            iteration,
            log_likelihood: moments.log_likelihood / n.max(1) as f64,
            seconds: started.elapsed().as_secs_f64(),
            report: moments.report,
        };
        on_step(&log, pca, Some(&gmm))?;
        let before = ems(&steps).last().copied();
        let moved = before.map(|b| (log.log_likelihood - b).abs());
        steps.push(log);
        if moved.is_some_and(|m| m < params.tol) {
            return Ok((gmm, steps, true));
        }
    }
    Ok((gmm, steps, false))
}
