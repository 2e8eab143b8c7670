//! How a mixture is learned ([`Params`]) and its rules ([`Params::check`]).

use serde::{Deserialize, Serialize};

use crate::params::Broken;

/// Components above which a mixture is refused: a photo's Fisher vector has `2 k d` values
/// per pyramid cell.
pub const MAX_COMPONENTS: usize = 4096;

/// How a mixture is learned: `components` Gaussians over the vectors projected onto their
/// `pca_dims` principal components, EM from `seed` until the mean log-likelihood gains less
/// than `tol` or `max_iter` steps, `reg` added to every variance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Gaussians.
    pub components: usize,
    /// Principal components kept.
    pub pca_dims: usize,
    /// Most EM steps.
    pub max_iter: usize,
    /// Smallest gain of the mean log-likelihood that goes on (scikit-learn's `tol`).
    pub tol: f64,
    /// Seed of the first means (random vectors).
    pub seed: u64,
    /// Added to every variance (scikit-learn's `reg_covar`).
    pub reg: f64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            components: 64,
            pca_dims: 64,
            max_iter: 100,
            tol: 1e-3,
            seed: 1,
            reg: 1e-6,
        }
    }
}

impl Params {
    /// Checks the rules: 1 to [`MAX_COMPONENTS`] components, at least one principal component,
    /// one step, a tolerance of 0 or more, a positive finite `reg`.
    pub fn check(&self) -> Result<(), ParamsError> {
        if self.components == 0 || self.components > MAX_COMPONENTS {
            return Err(ParamsError::Components(self.components));
        }
        if self.pca_dims == 0 {
            return Err(ParamsError::PcaDims(0));
        }
        if self.max_iter == 0 {
            return Err(ParamsError::Iterations);
        }
        if self.tol.is_nan() || self.tol < 0.0 {
            return Err(ParamsError::Tol(self.tol));
        }
        if !(self.reg.is_finite() && self.reg > 0.0) {
            return Err(ParamsError::Reg(self.reg));
        }
        Ok(())
    }

    /// Checks the rules against the data: no more components than vectors, no more
    /// principal components than values per vector.
    pub fn check_for(&self, vectors: u64, dims: usize) -> Result<(), ParamsError> {
        self.check()?;
        if self.components as u64 > vectors {
            return Err(ParamsError::MoreThanVectors {
                components: self.components,
                vectors,
            });
        }
        if self.pca_dims > dims {
            return Err(ParamsError::PcaPastDims {
                pca_dims: self.pca_dims,
                dims,
            });
        }
        Ok(())
    }
}

/// A rule [`Params`] break.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamsError {
    /// No component, or too many.
    Components(usize),
    /// No principal component.
    PcaDims(usize),
    /// No step.
    Iterations,
    /// A tolerance below 0, or NaN.
    Tol(f64),
    /// A regularisation that is not positive and finite.
    Reg(f64),
    /// More components than vectors.
    MoreThanVectors {
        /// Components asked for.
        components: usize,
        /// Vectors there are.
        vectors: u64,
    },
    /// More principal components than values per vector.
    PcaPastDims {
        /// Principal components asked for.
        pca_dims: usize,
        /// Values per vector.
        dims: usize,
    },
}

impl Broken for ParamsError {
    fn key(&self) -> &'static str {
        match self {
            Self::Components(_) | Self::MoreThanVectors { .. } => "components",
            Self::PcaDims(_) | Self::PcaPastDims { .. } => "pca_dims",
            Self::Iterations => "iterations",
            Self::Tol(_) => "tol",
            Self::Reg(_) => "reg",
        }
    }

    fn value(&self) -> String {
        match self {
            Self::Components(v) | Self::PcaDims(v) => v.to_string(),
            Self::MoreThanVectors { components, .. } => components.to_string(),
            Self::PcaPastDims { pca_dims, .. } => pca_dims.to_string(),
            Self::Iterations => "0".into(),
            Self::Tol(v) | Self::Reg(v) => v.to_string(),
        }
    }

    fn rule(&self) -> String {
        match self {
            Self::Components(_) => format!("must be 1 to {MAX_COMPONENTS}"),
            Self::PcaDims(_) | Self::Iterations => "must be at least 1".into(),
            Self::Tol(_) => "must be 0 or more".into(),
            Self::Reg(_) => "must be above 0".into(),
            Self::MoreThanVectors { vectors, .. } => {
                format!("must be at most the vectors there are ({vectors})")
            }
            Self::PcaPastDims { dims, .. } => {
                format!("must be at most the values per vector ({dims})")
            }
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

    #[test]
    fn every_rule_names_its_key_and_value() {
        let ok = Params::default();
        assert_eq!(ok.check(), Ok(()));
        let cases = [
            (
                Params {
                    components: 0,
                    ..ok.clone()
                },
                "components = 0: must be 1 to 4096",
            ),
            (
                Params {
                    pca_dims: 0,
                    ..ok.clone()
                },
                "pca_dims = 0: must be at least 1",
            ),
            (
                Params {
                    max_iter: 0,
                    ..ok.clone()
                },
                "iterations = 0: must be at least 1",
            ),
            (
                Params {
                    tol: -1.0,
                    ..ok.clone()
                },
                "tol = -1: must be 0 or more",
            ),
            (
                Params {
                    reg: 0.0,
                    ..ok.clone()
                },
                "reg = 0: must be above 0",
            ),
        ];
        for (params, text) in cases {
            assert_eq!(params.check().map_err(|e| e.to_string()), Err(text.into()));
        }
        assert_eq!(
            ok.check_for(10, 512).map_err(|e| e.to_string()),
            Err("components = 64: must be at most the vectors there are (10)".into())
        );
        assert_eq!(
            ok.check_for(1000, 32).map_err(|e| e.to_string()),
            Err("pca_dims = 64: must be at most the values per vector (32)".into())
        );
    }
}
