//! Explicit feature maps for additive homogeneous kernels (Vedaldi and Zisserman, "Efficient
//! Additive Kernels via Explicit Feature Maps", PAMI 2012), so that a linear SVM on the mapped
//! histograms approximates the kernel SVM.
//!
//! A homogeneous kernel on non-negative numbers is `k(x, y) = sqrt(x y) K(log y - log x)` with a
//! spectrum `kappa(w)` (the Fourier transform of `K`): `sech(pi w)` for chi-squared
//! `2 x y / (x + y)`, `2 / (pi (1 + 4 w^2))` for the intersection `min(x, y)`, and
//! `2 / (ln 4 cosh(pi w) (1 + 4 w^2))` for Jensen-Shannon. Sampling the spectrum at `j L`,
//! `j = 0..=n`, with `L = 2 pi / period` gives `2 n + 1` numbers per value:
//!
//! ```text
//! psi(x) = [ sqrt(x L kappa(0)),
//!            sqrt(2 x L kappa(j L)) cos(j L ln x), sqrt(2 x L kappa(j L)) sin(j L ln x) ... ]
//! ```
//!
//! and `psi(x) . psi(y)` approximates `k(x, y)` (`psi(0) = 0`; a negative `x` maps to
//! `-psi(-x)`). The default period for an order is the paper's fit for the uniform window
//! (chi-squared `5.86 sqrt(n) + 3.65`, intersection `2.38 ln(n + 0.8) + 5.6`, JS
//! `6.64 sqrt(n) + 7.24`). A mapped histogram has `2 n + 1` values per bin, the bin's first.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The kernel map before a linear SVM, if any (the command line's and configs' choice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mapping {
    /// The histograms as they are (a linear kernel on them).
    #[default]
    None,
    /// Chi-squared, `2xy / (x + y)` per bin.
    Chi2,
    /// Histogram intersection, `min(x, y)` per bin.
    Intersection,
    /// Jensen-Shannon.
    Js,
}

impl Mapping {
    /// The kernel mapped (none for `none`).
    pub fn kernel(self) -> Option<Kernel> {
        match self {
            Self::None => None,
            Self::Chi2 => Some(Kernel::Chi2),
            Self::Intersection => Some(Kernel::Intersection),
            Self::Js => Some(Kernel::Js),
        }
    }
}

/// The additive kernels with a map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// Chi-squared, `2 x y / (x + y)`.
    Chi2,
    /// Histogram intersection, `min(x, y)`.
    Intersection,
    /// Jensen-Shannon.
    Js,
}

impl Kernel {
    /// Parses `chi2`, `intersection` or `js`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "chi2" => Some(Self::Chi2),
            "intersection" => Some(Self::Intersection),
            "js" => Some(Self::Js),
            _ => None,
        }
    }

    /// The name [`Kernel::from_name`] parses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chi2 => "chi2",
            Self::Intersection => "intersection",
            Self::Js => "js",
        }
    }

    /// The kernel's spectrum at `w`.
    fn spectrum(self, w: f64) -> f64 {
        use std::f64::consts::PI;
        match self {
            Self::Chi2 => 1.0 / (PI * w).cosh(),
            Self::Intersection => 2.0 / (PI * (1.0 + 4.0 * w * w)),
            Self::Js => 2.0 / (4f64.ln() * (PI * w).cosh() * (1.0 + 4.0 * w * w)),
        }
    }

    /// The kernel itself, for checks.
    pub fn eval(self, x: f64, y: f64) -> f64 {
        if x <= 0.0 || y <= 0.0 {
            return 0.0;
        }
        match self {
            Self::Chi2 => 2.0 * x * y / (x + y),
            Self::Intersection => x.min(y),
            Self::Js => {
                let s = x + y;
                0.5 * (x * (s / x).log2() + y * (s / y).log2())
            }
        }
    }
}

/// A map that cannot be built.
#[derive(Debug, Error, PartialEq)]
pub enum KernelMapError {
    /// An order outside 1..=10.
    #[error("kernel map order {0}: use 1 to 10 (3 approximates the kernel closely)")]
    Order(usize),
    /// A period that is not a positive number.
    #[error("kernel map period {0}: must be a positive number")]
    Period(f64),
}

/// The map of `kernel` with `order` frequencies after the first (`2 order + 1` values per
/// input value) and sampling `period`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelMap {
    /// The kernel approximated.
    pub kernel: Kernel,
    /// Frequencies after the first.
    pub order: usize,
    /// Sampling period of the spectrum.
    pub period: f64,
}

impl KernelMap {
    /// The map of `kernel` at `order` with the default period.
    pub fn new(kernel: Kernel, order: usize) -> Result<Self, KernelMapError> {
        if !(1..=10).contains(&order) {
            return Err(KernelMapError::Order(order));
        }
        let n = order as f64;
        let period = match kernel {
            Kernel::Chi2 => 5.86 * n.sqrt() + 3.65,
            Kernel::Intersection => 2.38 * (n + 0.8).ln() + 5.6,
            Kernel::Js => 6.64 * n.sqrt() + 7.24,
        };
        Ok(Self {
            kernel,
            order,
            period: period.max(1.0),
        })
    }

    /// Checks a map read from a file.
    pub fn check(&self) -> Result<(), KernelMapError> {
        if !(1..=10).contains(&self.order) {
            return Err(KernelMapError::Order(self.order));
        }
        if !(self.period.is_finite() && self.period > 0.0) {
            return Err(KernelMapError::Period(self.period));
        }
        Ok(())
    }

    /// Values per input value.
    pub fn width(&self) -> usize {
        2 * self.order + 1
    }

    /// The mapped length of `d` values.
    pub fn mapped_len(&self, d: usize) -> usize {
        d * self.width()
    }

    /// Maps `x` (each value to [`KernelMap::width`] values, in order).
    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        let scale = self.scales();
        let mut out = vec![0f32; self.mapped_len(x.len())];
        for (&v, slot) in x.iter().zip(out.chunks_exact_mut(self.width())) {
            self.map_value(v, &scale, slot);
        }
        out
    }

    /// Calls `each(bin, values)` for every bin of `x` whose mapped values are not all zero (a
    /// value of 0, or not finite, maps to zeros), in bin order: the non-zero blocks of
    /// [`KernelMap::apply`]'s output, the same values, without the zeros between them.
    pub fn apply_sparse(&self, x: &[f32], mut each: impl FnMut(usize, &[f32])) {
        let scale = self.scales();
        let mut slot = vec![0f32; self.width()];
        for (bin, &v) in x.iter().enumerate() {
            if v != 0.0 && v.is_finite() {
                self.map_value(v, &scale, &mut slot);
                each(bin, &slot);
            }
        }
    }

    /// `sqrt(c_j L kappa(j L))` for `j = 0..=order` (`c_0 = 1`, else 2).
    fn scales(&self) -> Vec<f64> {
        let l = 2.0 * std::f64::consts::PI / self.period;
        (0..=self.order)
            .map(|j| {
                let twice = if j == 0 { 1.0 } else { 2.0 };
                (twice * l * self.kernel.spectrum(j as f64 * l)).sqrt()
            })
            .collect()
    }

    /// The [`KernelMap::width`] values of `v` into `slot` (zeros for 0 or a value not finite).
    fn map_value(&self, v: f32, scale: &[f64], slot: &mut [f32]) {
        let v = f64::from(v);
        if v == 0.0 || !v.is_finite() {
            slot.fill(0.0);
            return;
        }
        let l = 2.0 * std::f64::consts::PI / self.period;
        let (sign, a) = (v.signum(), v.abs());
        let root = a.sqrt();
        let log = a.ln();
        slot[0] = (sign * root * scale[0]) as f32;
        for j in 1..=self.order {
            let (s, c) = (j as f64 * l * log).sin_cos();
            slot[2 * j - 1] = (sign * root * scale[j] * c) as f32;
            slot[2 * j] = (sign * root * scale[j] * s) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum()
    }

    #[test]
    fn the_map_approximates_each_kernel() {
        // Values of a normalised histogram's bins, over three decades.
        let values = [0.002f32, 0.01, 0.03, 0.1, 0.25, 0.6];
        for kernel in [Kernel::Chi2, Kernel::Intersection, Kernel::Js] {
            let map = KernelMap::new(kernel, 3).expect("map");
            assert_eq!(map.width(), 7);
            let mut worst = 0f64;
            for &x in &values {
                for &y in &values {
                    let approx = dot(&map.apply(&[x]), &map.apply(&[y]));
                    let exact = kernel.eval(f64::from(x), f64::from(y));
                    // Relative to the geometric mean, the kernel's own scale.
                    let err = (approx - exact).abs() / (f64::from(x) * f64::from(y)).sqrt();
                    worst = worst.max(err);
                }
            }
            // Over a 300x range of values the periodic sampling aliases at the extreme ratios;
            // the intersection's slowly decaying spectrum is cut hardest at order 3.
            let (bound, same) = match kernel {
                Kernel::Chi2 => (0.05, 0.01),
                Kernel::Js => (0.03, 0.01),
                Kernel::Intersection => (0.3, 0.12),
            };
            assert!(worst < bound, "{kernel:?}: worst relative error {worst}");
            // Where x = y the kernel is x itself.
            let m = map.apply(&[0.2]);
            let err = (dot(&m, &m) - 0.2).abs() / 0.2;
            assert!(err < same, "{kernel:?}: k(x, x) off by {err}");
        }
    }

    #[test]
    fn zeros_stay_zeros_signs_carry_and_additivity_holds() {
        let map = KernelMap::new(Kernel::Chi2, 2).expect("map");
        let m = map.apply(&[0.0, 0.5, -0.5]);
        assert_eq!(m.len(), 15);
        assert!(m[..5].iter().all(|&v| v == 0.0));
        for i in 0..5 {
            assert_eq!(m[5 + i], -m[10 + i]);
        }
        // The kernel of two vectors is the sum of the bins' kernels.
        let (x, y) = ([0.2f32, 0.3, 0.5], [0.1f32, 0.6, 0.3]);
        let whole = dot(&map.apply(&x), &map.apply(&y));
        let by_bin: f64 = (0..3)
            .map(|i| dot(&map.apply(&x[i..=i]), &map.apply(&y[i..=i])))
            .sum();
        assert!((whole - by_bin).abs() < 1e-9);
    }

    #[test]
    fn orders_and_periods_are_checked() {
        assert_eq!(
            KernelMap::new(Kernel::Chi2, 0),
            Err(KernelMapError::Order(0))
        );
        assert!(KernelMap::new(Kernel::Js, 11).is_err());
        let mut map = KernelMap::new(Kernel::Intersection, 1).expect("map");
        assert!(map.check().is_ok());
        map.period = f64::NAN;
        assert!(map.check().is_err());
        assert_eq!(Kernel::from_name("chi2"), Some(Kernel::Chi2));
        assert_eq!(Kernel::from_name(Kernel::Js.name()), Some(Kernel::Js));
        assert_eq!(Kernel::from_name("rbf"), None);
    }
}
