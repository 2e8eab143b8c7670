//! The rules of a k-means run's [`Params`], checked before anything runs ([`Params::check`]).

use super::{Assignment, Init, Params};
use crate::params::Broken;

/// k above which k-means++ is refused: its sample of `2k` vectors against `k` centroids costs
/// `2 k^2 d` (a million words: 10^15 multiply-adds); random initialisation is linear.
pub const PLUS_PLUS_MAX_K: usize = 65_536;

impl Params {
    /// Checks the rules of the run: at least one word and one iteration, a tolerance of 0 or
    /// more, k-means++ only up to [`PLUS_PLUS_MAX_K`] words, an approximate search that visits
    /// at least one list.
    pub fn check(&self) -> Result<(), ParamsError> {
        if self.k == 0 {
            return Err(ParamsError::K);
        }
        if self.max_iter == 0 {
            return Err(ParamsError::Iterations);
        }
        if self.tol.is_nan() || self.tol < 0.0 {
            return Err(ParamsError::Tol(self.tol));
        }
        if matches!(self.init, Init::PlusPlus { .. }) && self.k > PLUS_PLUS_MAX_K {
            return Err(ParamsError::PlusPlus(self.k));
        }
        if let Assignment::Approx { probes: 0, .. } = self.assignment {
            return Err(ParamsError::Probes);
        }
        Ok(())
    }
}

/// A rule [`Params`] break.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamsError {
    /// No word.
    K,
    /// No iteration.
    Iterations,
    /// A tolerance below 0, or NaN.
    Tol(f64),
    /// k-means++ over more than [`PLUS_PLUS_MAX_K`] words.
    PlusPlus(usize),
    /// An approximate search that visits no list.
    Probes,
}

impl Broken for ParamsError {
    fn key(&self) -> &'static str {
        match self {
            Self::K => "k",
            Self::Iterations => "iterations",
            Self::Tol(_) => "tol",
            Self::PlusPlus(_) => "init",
            Self::Probes => "probes",
        }
    }

    fn value(&self) -> String {
        match self {
            Self::K | Self::Iterations | Self::Probes => "0".into(),
            Self::Tol(t) => t.to_string(),
            Self::PlusPlus(_) => "kmeans++".into(),
        }
    }

    fn rule(&self) -> String {
        match self {
            Self::K => "must be at least 1 word".into(),
            Self::Iterations => "must be at least 1".into(),
            Self::Tol(_) => "must be 0 or more".into(),
            Self::PlusPlus(k) => format!(
                "costs a sample of 2k vectors times k centroids, quadratic in k: above k = \
                 {PLUS_PLUS_MAX_K} use random (k = {k})"
            ),
            Self::Probes => "must be at least 1 list".into(),
        }
    }
}

impl std::fmt::Display for ParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::params::show(self, f)
    }
}

impl std::error::Error for ParamsError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmeans::Kernel;

    #[test]
    fn every_rule_of_a_run_is_its_own_error() {
        let plain = Params {
            k: 8,
            max_iter: 10,
            tol: 0.0,
            seed: 1,
            init: Init::Random,
            threads: 0,
            assignment: Assignment::new(false, Kernel::F32),
        };
        let check = |change: &dyn Fn(&mut Params), want: Option<&str>| {
            let mut p = plain.clone();
            change(&mut p);
            assert_eq!(p.check().err().map(|e| e.to_string()).as_deref(), want);
        };
        check(&|_| {}, None);
        check(&|p| p.k = 0, Some("k = 0: must be at least 1 word"));
        check(
            &|p| p.max_iter = 0,
            Some("iterations = 0: must be at least 1"),
        );
        check(&|p| p.tol = -1.0, Some("tol = -1: must be 0 or more"));
        check(&|p| p.tol = f64::NAN, Some("tol = NaN: must be 0 or more"));
        let plus = |k| move |p: &mut Params| (p.k, p.init) = (k, Init::PlusPlus { sample: None });
        check(&plus(PLUS_PLUS_MAX_K), None);
        check(
            &plus(PLUS_PLUS_MAX_K + 1),
            Some(
                "init = kmeans++: costs a sample of 2k vectors times k centroids, quadratic in \
                 k: above k = 65536 use random (k = 65537)",
            ),
        );
        let approx = |probes| {
            move |p: &mut Params| {
                p.assignment = Assignment::Approx {
                    lists: 0,
                    probes,
                    kernel: Kernel::Int8,
                }
            }
        };
        check(&approx(1), None);
        check(&approx(0), Some("probes = 0: must be at least 1 list"));
    }
}
