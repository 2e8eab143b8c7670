//! The dense `f64` products the mixture's map step and the Fisher encoding are made of, through
//! the `gemm` crate on one thread (a map unit is one thread's work), behind a checked view.

/// A matrix in a slice: element `(r, c)` at `r * row_stride + c * col_stride`.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    data: &'a [f64],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> View<'a> {
    /// `rows x cols` values stored row after row.
    ///
    /// # Panics
    /// If `data` is shorter than that.
    pub fn rows(data: &'a [f64], rows: usize, cols: usize) -> Self {
        assert!(data.len() >= rows * cols, "a view past its data");
        Self {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose (no copy).
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }
}

/// `out = a . b` (`out` row-major, `a.rows x b.cols`), or `out += a . b` with `add`.
///
/// # Panics
/// If the shapes disagree or `out` is too short.
pub fn mul(a: View<'_>, b: View<'_>, out: &mut [f64], add: bool) {
    assert_eq!(a.cols, b.rows, "product of mismatched shapes");
    let (m, n, k) = (a.rows, b.cols, a.cols);
    assert!(out.len() >= m * n, "product output too short");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !add {
            out[..m * n].fill(0.0);
        }
        return;
    }
    // SAFETY: `out` holds m x n values row-major (checked above); `a` and `b` are views whose
    // largest index, (rows - 1) * row_stride + (cols - 1) * col_stride, lies inside their data
    // (`View::rows` checks rows * cols values and `t` only swaps the strides).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            add,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_and_transposes_are_the_schoolbook_ones() {
        let a: Vec<f64> = (0..6).map(f64::from).collect(); // 2 x 3
        let b: Vec<f64> = (0..12).map(|v| f64::from(v) * 0.5).collect(); // 3 x 4
        let mut out = vec![0.0; 8];
        mul(View::rows(&a, 2, 3), View::rows(&b, 3, 4), &mut out, false);
        for r in 0..2 {
            for c in 0..4 {
                let want: f64 = (0..3).map(|j| a[r * 3 + j] * b[j * 4 + c]).sum();
                assert_eq!(out[r * 4 + c], want);
            }
        }
        // a^T a, added twice.
        let mut gram = vec![0.0; 9];
        mul(
            View::rows(&a, 2, 3).t(),
            View::rows(&a, 2, 3),
            &mut gram,
            false,
        );
        mul(
            View::rows(&a, 2, 3).t(),
            View::rows(&a, 2, 3),
            &mut gram,
            true,
        );
        for i in 0..3 {
            for j in 0..3 {
                let want: f64 = (0..2).map(|r| a[r * 3 + i] * a[r * 3 + j]).sum();
                assert_eq!(gram[i * 3 + j], 2.0 * want);
            }
        }
    }
}
