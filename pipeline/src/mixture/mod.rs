//! A Gaussian mixture over PCA-reduced vectors, learned by EM on any engine: the vocabulary of
//! improved Fisher vectors.
//!
//! Both the PCA and every EM step are map steps over the cached partitions whose outputs add
//! up like k-means' partial sums ([`moments`]: per component the weight, first and second
//! moments; per input dimension the first and second moments for the covariance), so one
//! process ([`moments::Local`]), the MPI ranks and the TCP workers (the cluster crate's k-means
//! job, which runs them through the same broadcast, map and three-stage aggregation) give the
//! same mixture bit for bit. [`fit::fit_with`] is the one loop; [`pca`] and [`gmm`] the math
//! (scikit-learn's formulas, checked against it on `eval/mixture/`'s fixture); [`params`] the
//! rules; [`linalg`] the products.

pub mod checkpoint;
pub mod error;
pub mod file;
pub mod fit;
pub mod gmm;
pub mod linalg;
pub mod moments;
pub mod params;
pub mod pca;
pub mod sums;

pub use self::checkpoint::{Checkpoint, Identity, checkpoint_path};
pub use self::error::MixtureError;
pub use self::file::MixtureFile;
pub use self::fit::{Fitted, Resumed, StepLog, fit_from, fit_with};
pub use self::gmm::Gmm;
pub use self::moments::{Engine, Local, Statistic};
pub use self::params::{Params, ParamsError};
pub use self::pca::Pca;
pub use self::sums::Moments;

#[cfg(test)]
mod tests;
