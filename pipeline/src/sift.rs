//! Dense SIFT: Lowe's SIFT descriptor (IJCV 2004) at upright keypoints on a grid, as OpenCV's
//! `SIFT::compute` describes a keypoint, RootSIFT-normalised (Arandjelovic and Zisserman 2012).
//!
//! Beside HOG it is the second local descriptor of issue 53: HOG's and SIFT's Fisher vectors
//! joined in one vector gained 3.3 points over HOG's alone on the 15 scenes (windows of 24, 42
//! and 60 px), 3.7 with OpenCV's SIFT (`eval/descriptors/`, both read through `--from`). The
//! photo stages take it as `Descriptor::Sift` ([`crate::features::Descriptor`]: `--descriptor
//! sift`, `[features] descriptor`), through the keypoint path of descriptors made elsewhere
//! ([`crate::descriptors::Origin::Sift`]); the `dense_sift` example writes it for `--from`. The
//! definition, for a luminance image `L` (0-255) and a keypoint of window side `w` (4 x 4 cells
//! of `w / 4` px each) centred on pixel `(x, y)`:
//!
//! * `S` is `L` smoothed by a Gaussian of `sigma = sqrt(1.6^2 - 0.5^2)` (SIFT's base scale over
//!   the camera's assumed blur), `1 + 2 round(4 sigma)` taps: the blur OpenCV gives an image
//!   whose keypoints `compute` is handed at octave 0. OpenCV reflects the image at its edges
//!   (`BORDER_REFLECT_101`); here the edge pixels repeat (`imageproc`'s separable filter), which
//!   changes the 6 px along each edge.
//! * Each pixel inside the border has gradient `dx = S[r][c+1] - S[r][c-1]`, `dy = S[r-1][c] -
//!   S[r+1][c]` (y up), magnitude `m` and angle `a = atan2(dy, dx)` in `[0, 2 pi)` (OpenCV
//!   takes an approximate `fastAtan2`). Its magnitude
//!   goes to orientation bins `floor(8 a / 2 pi)` and the next (cyclically), shared linearly.
//!   Border pixels give nothing.
//! * A pixel `(i, j)` px from the centre (rows down, columns right) lies at `u = j / h`, `v = i /
//!   h` cells (`h = w / 4`); it adds to the cell in row `b`, column `a` (each 0..4) its
//!   orientation bins times `g(u) g(v) t(v + 1.5 - b) t(u + 1.5 - a)`, with `g(t) = exp(-t^2 /
//!   8)` (a Gaussian of half the window) and `t(x) = max(0, 1 - |x|)` (bilinear between cells).
//! * The 128 values (cell row, cell column, orientation) are scaled to unit L2 norm, clipped at
//!   0.2, scaled to unit L2 norm again, then to unit L1 norm and square-rooted (RootSIFT). All
//!   zero stays all zero. OpenCV rounds the unit vector times 512 to bytes before RootSIFT; here
//!   the values stay `f32`.
//!
//! Both factors of a cell's weight are products of a function of `i` and one of `j`, so a
//! photo's descriptors are separable sums: each orientation plane is summed along rows with
//! the four column kernels at the grid's columns, then along columns with the four row kernels
//! at the grid's rows ([`DenseSift::describe`]). That is the per-pixel sum of the definition
//! in another order. Each 1-D sum runs over its kernel's support alone (the tent is zero over
//! more than half the window: those products are exact zeros), and the eight orientations are
//! kept side by side a pixel, so one sum takes them all at once (eight `f32` lanes, each in the
//! scalar sum's order: the same bits as one orientation at a time, 3.3x faster a keypoint on one
//! thread with decoding and file writing included; `eval/descriptors/sift-speed.csv` and its
//! README).

use image::{ImageBuffer, Luma};
use imageproc::filter::separable_filter_equal;
use thiserror::Error;

use crate::image_io::Luminance;

/// Values of one descriptor: 4 x 4 cells x 8 orientations.
pub const SIFT_DIMS: usize = 128;
/// The descriptor's name in summaries.
pub const SIFT_NAME: &str = "dense-rootsift-128";
/// Cells along each side of the window.
const CELLS: usize = 4;
/// Orientation bins.
const ORIENTATIONS: usize = 8;
/// SIFT's base scale, and the blur assumed of the camera.
const BASE_SIGMA: f32 = 1.6;
const CAMERA_SIGMA: f32 = 0.5;
/// Where a normalised descriptor is clipped.
const CLIP: f32 = 0.2;

/// One keypoint: its centre (a pixel) and window side, in pixels of the described image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Keypoint {
    /// Column of the centre.
    pub x: usize,
    /// Row of the centre.
    pub y: usize,
    /// Side of the window (4 cells).
    pub window: f32,
}

/// Smallest window side ([`DenseSift::new`]): cells of 2 px.
pub const MIN_WINDOW: f32 = 8.0;
/// Largest window side.
pub const MAX_WINDOW: f32 = 1024.0;

/// Settings [`DenseSift::new`] refuses.
#[derive(Debug, Error, PartialEq)]
pub enum SiftError {
    /// Keypoints 0 px apart.
    #[error("a dense SIFT's step must be at least 1 px")]
    Step,
    /// No window side.
    #[error("a dense SIFT needs at least one window side")]
    NoWindows,
    /// A window side that is not a number from [`MIN_WINDOW`] to [`MAX_WINDOW`].
    #[error("a dense SIFT window of {0} px: the side must be from {MIN_WINDOW} to {MAX_WINDOW} px")]
    Window(f32),
}

/// Dense SIFT of one image: keypoints every `step` px at each window side.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseSift {
    /// Pixels between neighbouring keypoints, along rows and columns.
    step: usize,
    /// Window sides, in pixels.
    windows: Vec<f32>,
    /// Where the centres lie ([`Grid`]).
    grid: Grid,
}

/// Where a dense SIFT's centres lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    /// Each window side its own grid, the whole window inside the image: the first centre
    /// `ceil(w / 2)` px in, then every `step` px while the window stays inside.
    Inside,
    /// One grid over the whole image for every window side: the first centre `ceil(step / 2)`
    /// px in, then every `step` px while inside the image. A window may reach past the image's
    /// edge, where pixels give nothing (as OpenCV's SIFT treats them).
    Whole,
}

impl DenseSift {
    /// Keypoints every `step` px, described at each of `windows` (px) on `grid`.
    pub fn new(step: usize, windows: Vec<f32>, grid: Grid) -> Result<Self, SiftError> {
        if step == 0 {
            return Err(SiftError::Step);
        }
        if windows.is_empty() {
            return Err(SiftError::NoWindows);
        }
        if let Some(&w) = windows
            .iter()
            .find(|w| !(MIN_WINDOW..=MAX_WINDOW).contains(*w))
        {
            return Err(SiftError::Window(w));
        }
        Ok(Self {
            step,
            windows,
            grid,
        })
    }

    /// The keypoints of a `width` x `height` image, window by window, rows then columns.
    pub fn keypoints(&self, width: usize, height: usize) -> Vec<Keypoint> {
        let mut out = Vec::new();
        for &window in &self.windows {
            let xs = self.centres(width, window);
            let ys = self.centres(height, window);
            for &y in &ys {
                out.extend(xs.iter().map(|&x| Keypoint { x, y, window }));
            }
        }
        out
    }

    /// The keypoints of `lum` and their descriptors ([`SIFT_DIMS`] values each, in the
    /// keypoints' order).
    pub fn describe(&self, lum: &Luminance) -> (Vec<Keypoint>, Vec<f32>) {
        let planes = Planes::of(lum);
        let mut values = Vec::new();
        for &window in &self.windows {
            let xs = self.centres(lum.width, window);
            let ys = self.centres(lum.height, window);
            let start = values.len();
            values.resize(start + xs.len() * ys.len() * SIFT_DIMS, 0.0);
            planes.grid(window, &xs, &ys, &mut values[start..]);
        }
        for d in values.chunks_exact_mut(SIFT_DIMS) {
            normalise(d);
        }
        // The same windows, rows and columns in the same order as the values.
        (self.keypoints(lum.width, lum.height), values)
    }

    /// Centres along a side of `len` px for windows of `window` px.
    fn centres(&self, len: usize, window: f32) -> Vec<usize> {
        let step = self.step;
        let (first, last) = match self.grid {
            Grid::Inside => {
                let half = (window / 2.0).ceil() as usize;
                (half, len.checked_sub(half))
            }
            Grid::Whole => (step.div_ceil(2), len.checked_sub(1)),
        };
        match last {
            Some(last) if step > 0 && first <= last => (first..=last).step_by(step).collect(),
            _ => Vec::new(),
        }
    }
}

/// The smoothed image's gradient magnitudes, split between orientation bins, interleaved: a
/// pixel's [`ORIENTATIONS`] bins side by side, so the sums below take all of them at once (one
/// SIMD register of `f32`), each bin's sum in the order of the definition.
struct Planes {
    width: usize,
    height: usize,
    /// `width * height` pixels, row-major, of `ORIENTATIONS` values each.
    planes: Vec<f32>,
}

/// One value per orientation.
type Bins = [f32; ORIENTATIONS];

/// `acc += v * w`, bin by bin (a multiply, then an add: the scalar sum's rounding, lane by
/// lane).
#[inline(always)]
fn add_weighted(acc: &mut Bins, v: &[f32], w: f32) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a += x * w;
    }
}

impl Planes {
    fn of(lum: &Luminance) -> Self {
        let (width, height) = (lum.width, lum.height);
        let smooth = smoothed(lum);
        let mut planes = vec![0.0f32; ORIENTATIONS * width * height];
        let per_radian = ORIENTATIONS as f32 / std::f32::consts::TAU;
        for r in 1..height.saturating_sub(1) {
            for c in 1..width.saturating_sub(1) {
                let at = r * width + c;
                let dx = smooth[at + 1] - smooth[at - 1];
                let dy = smooth[at - width] - smooth[at + width];
                let m = (dx * dx + dy * dy).sqrt();
                if m == 0.0 {
                    continue;
                }
                let mut a = dy.atan2(dx);
                if a < 0.0 {
                    a += std::f32::consts::TAU;
                }
                let o = a * per_radian;
                let o0 = o.floor();
                let f = o - o0;
                // atan2 of a hair below zero plus 2 pi can round to 2 pi: bin 8 is bin 0.
                let b0 = (o0 as usize) % ORIENTATIONS;
                let b1 = (b0 + 1) % ORIENTATIONS;
                planes[at * ORIENTATIONS + b0] += m * (1.0 - f);
                planes[at * ORIENTATIONS + b1] += m * f;
            }
        }
        Self {
            width,
            height,
            planes,
        }
    }

    /// Descriptors (not yet normalised) of windows of side `window` centred at every `(xs[k],
    /// ys[l])`, rows of `ys` then columns of `xs`, into `out`. Each sum runs over its kernel's
    /// support alone (the taps where the tent is not zero: the other products are exact zeros,
    /// which change no sum) and takes the orientations side by side.
    fn grid(&self, window: f32, xs: &[usize], ys: &[usize], out: &mut [f32]) {
        let (taps, kernels) = cell_kernels(window);
        let support = supports(&kernels, taps);
        let reach = taps / 2;
        let (width, height, nx) = (self.width, self.height, xs.len());
        const O: usize = ORIENTATIONS;
        // Along rows: for each column kernel, image row and grid column, the orientations'
        // sums. rows[((a * height + r) * nx + k) * O + o].
        let mut rows = vec![0.0f32; CELLS * height * nx * O];
        for r in 0..height {
            let line = &self.planes[r * width * O..(r + 1) * width * O];
            for (k, &x) in xs.iter().enumerate() {
                // Taps `t` read pixel `x - reach + t`, inside the row.
                let (first, end) = (reach - reach.min(x), (width + reach - x).min(taps));
                for (a, &(lo, hi)) in support.iter().enumerate() {
                    let mut acc = [0.0f32; O];
                    for t in lo.max(first)..hi.min(end) {
                        let px = (x + t - reach) * O;
                        add_weighted(&mut acc, &line[px..px + O], kernels[a * taps + t]);
                    }
                    let at = ((a * height + r) * nx + k) * O;
                    rows[at..at + O].copy_from_slice(&acc);
                }
            }
        }
        // Along columns, at the grid's rows.
        for (l, &y) in ys.iter().enumerate() {
            let (first, end) = (reach - reach.min(y), (height + reach - y).min(taps));
            for (k, d) in out[l * nx * SIFT_DIMS..(l + 1) * nx * SIFT_DIMS]
                .chunks_exact_mut(SIFT_DIMS)
                .enumerate()
            {
                for a in 0..CELLS {
                    for (b, &(lo, hi)) in support.iter().enumerate() {
                        let mut acc = [0.0f32; O];
                        for t in lo.max(first)..hi.min(end) {
                            let at = ((a * height + y + t - reach) * nx + k) * O;
                            add_weighted(&mut acc, &rows[at..at + O], kernels[b * taps + t]);
                        }
                        let cell = (b * CELLS + a) * O;
                        d[cell..cell + O].copy_from_slice(&acc);
                    }
                }
            }
        }
    }
}

/// Each cell kernel's support: the taps `lo..hi` outside which its weights are zero.
fn supports(kernels: &[f32], taps: usize) -> [(usize, usize); CELLS] {
    std::array::from_fn(|a| {
        let kernel = &kernels[a * taps..(a + 1) * taps];
        let lo = kernel.iter().position(|&w| w != 0.0).unwrap_or(0);
        let hi = kernel.iter().rposition(|&w| w != 0.0).map_or(0, |i| i + 1);
        (lo, hi.max(lo))
    })
}

/// The four cells' 1-D weights over the window's pixels: `taps` offsets from `-reach` to
/// `reach`, kernel `a` at `a * taps..`, `g(u) t(u + 1.5 - a)` with `u` the offset in cells.
fn cell_kernels(window: f32) -> (usize, Vec<f32>) {
    let cell = window / CELLS as f32;
    // A pixel weighs something while |u| < 2.5 cells.
    let reach = (2.5 * cell).ceil() as usize;
    let taps = 2 * reach + 1;
    let mut kernels = vec![0.0f32; CELLS * taps];
    for a in 0..CELLS {
        for (t, w) in kernels[a * taps..(a + 1) * taps].iter_mut().enumerate() {
            let u = (t as f32 - reach as f32) / cell;
            let gauss = (-u * u / 8.0).exp();
            let tent = (1.0 - (u + 1.5 - a as f32).abs()).max(0.0);
            *w = gauss * tent;
        }
    }
    (taps, kernels)
}

/// `lum` smoothed to SIFT's base scale.
fn smoothed(lum: &Luminance) -> Vec<f32> {
    let sigma = (BASE_SIGMA * BASE_SIGMA - CAMERA_SIGMA * CAMERA_SIGMA).sqrt();
    let reach = (4.0 * sigma).round() as usize;
    let mut kernel: Vec<f32> = (0..=2 * reach)
        .map(|t| {
            let x = t as f32 - reach as f32;
            (-x * x / (2.0 * sigma * sigma)).exp()
        })
        .collect();
    let sum: f32 = kernel.iter().sum();
    kernel.iter_mut().for_each(|w| *w /= sum);
    let image: ImageBuffer<Luma<f32>, Vec<f32>> =
        ImageBuffer::from_raw(lum.width as u32, lum.height as u32, lum.data.clone())
            .expect("a luminance image holds width x height values");
    separable_filter_equal(&image, &kernel).into_raw()
}

/// A descriptor's normalisation: unit L2, clipped at [`CLIP`], unit L2, unit L1, square root.
fn normalise(d: &mut [f32]) {
    let norm = d.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm <= 0.0 {
        d.fill(0.0);
        return;
    }
    let clip = CLIP * norm;
    d.iter_mut().for_each(|v| *v = v.min(clip));
    let sum: f32 = d.iter().sum();
    // The L2 step before L1 only rescales: unit L1 of the clipped values is the same vector.
    d.iter_mut().for_each(|v| *v = (*v / sum).sqrt());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(width: usize, height: usize, f: impl Fn(usize, usize) -> f32) -> Luminance {
        let data = (0..height)
            .flat_map(|r| (0..width).map(move |c| (r, c)))
            .map(|(r, c)| f(r, c))
            .collect();
        Luminance {
            width,
            height,
            data,
        }
    }

    fn textured(width: usize, height: usize) -> Luminance {
        image(width, height, |r, c| {
            let (x, y) = (c as f32, r as f32);
            128.0
                + 60.0 * (x * 0.31 + y * 0.07).sin()
                + 40.0 * (y * 0.23 - x * 0.11).cos()
                + if (r / 9 + c / 13) % 3 == 0 { 30.0 } else { 0.0 }
        })
    }

    /// The definition summed pixel by pixel, for one keypoint (before normalisation).
    fn direct(lum: &Luminance, k: Keypoint) -> Vec<f32> {
        let planes = Planes::of(lum);
        let h = k.window / CELLS as f32;
        let mut d = vec![0.0f32; SIFT_DIMS];
        for r in 0..lum.height {
            for c in 0..lum.width {
                let v = (r as f32 - k.y as f32) / h;
                let u = (c as f32 - k.x as f32) / h;
                for b in 0..CELLS {
                    for a in 0..CELLS {
                        let w = (-u * u / 8.0).exp()
                            * (-v * v / 8.0).exp()
                            * (1.0 - (v + 1.5 - b as f32).abs()).max(0.0)
                            * (1.0 - (u + 1.5 - a as f32).abs()).max(0.0);
                        if w == 0.0 {
                            continue;
                        }
                        for o in 0..ORIENTATIONS {
                            d[(b * CELLS + a) * ORIENTATIONS + o] +=
                                w * planes.planes[(r * lum.width + c) * ORIENTATIONS + o];
                        }
                    }
                }
            }
        }
        d
    }

    #[test]
    fn the_separable_sums_are_the_definitions_per_pixel_sums() {
        let lum = textured(61, 47);
        let planes = Planes::of(&lum);
        let mut checked = 0;
        for grid in [Grid::Inside, Grid::Whole] {
            let sift = DenseSift {
                step: 7,
                windows: vec![16.0, 24.0, 42.0],
                grid,
            };
            for &window in &sift.windows {
                let xs = sift.centres(lum.width, window);
                let ys = sift.centres(lum.height, window);
                let mut out = vec![0.0; xs.len() * ys.len() * SIFT_DIMS];
                planes.grid(window, &xs, &ys, &mut out);
                for (l, &y) in ys.iter().enumerate() {
                    for (k, &x) in xs.iter().enumerate() {
                        let want = direct(&lum, Keypoint { x, y, window });
                        let got = &out[(l * xs.len() + k) * SIFT_DIMS..][..SIFT_DIMS];
                        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                        assert!(scale > 0.0);
                        for (g, w) in got.iter().zip(&want) {
                            assert!(
                                (g - w).abs() <= 1e-4 * scale,
                                "window {window} at ({x}, {y})"
                            );
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 60, "{checked} keypoints");
    }

    #[test]
    fn the_grids_lay_out_their_centres() {
        let sift = DenseSift {
            step: 6,
            windows: vec![24.0, 42.0],
            grid: Grid::Inside,
        };
        let (keypoints, values) = sift.describe(&textured(100, 60));
        assert_eq!(values.len(), keypoints.len() * SIFT_DIMS);
        assert_eq!(
            &keypoints[..2],
            &[
                Keypoint {
                    x: 12,
                    y: 12,
                    window: 24.0
                },
                Keypoint {
                    x: 18,
                    y: 12,
                    window: 24.0
                }
            ]
        );
        for k in &keypoints {
            let half = (k.window / 2.0).ceil() as usize;
            assert!(k.x >= half && k.x + half <= 100 && k.y >= half && k.y + half <= 60);
        }
        // 24 px: columns 12..=88 every 6 (13), rows 12..=48 (7); 42 px: 21..=79 (10), 21..=39 (4).
        assert_eq!(keypoints.len(), 13 * 7 + 10 * 4);
        assert_eq!(sift.keypoints(100, 60), keypoints);
        let wide = DenseSift {
            windows: vec![80.0],
            ..sift.clone()
        };
        assert!(wide.keypoints(100, 60).is_empty());
        // The whole grid: centres 3..=99 and 3..=57 every 6 px (17 x 10), for each window.
        let whole = DenseSift {
            grid: Grid::Whole,
            ..sift
        };
        let keypoints = whole.keypoints(100, 60);
        assert_eq!(keypoints.len(), 2 * 17 * 10);
        assert_eq!(
            keypoints[0],
            Keypoint {
                x: 3,
                y: 3,
                window: 24.0
            }
        );
        assert_eq!(
            keypoints[17 * 10 - 1],
            Keypoint {
                x: 99,
                y: 57,
                window: 24.0
            }
        );
    }

    #[test]
    fn descriptors_are_normalised_as_the_definition_says_and_flat_images_give_zeros() {
        let lum = textured(64, 64);
        let sift = DenseSift::new(8, vec![24.0], Grid::Whole).expect("valid settings");
        let (keys, values) = sift.describe(&lum);
        let mut clipped = 0;
        for (k, d) in keys.iter().zip(values.chunks_exact(SIFT_DIMS)) {
            // The definition step by step: unit L2, clip at 0.2, unit L2, unit L1, square root.
            let raw = direct(&lum, *k);
            let unit = |v: Vec<f32>| {
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.into_iter().map(|x| x / n).collect::<Vec<_>>()
            };
            let first = unit(raw);
            clipped += first.iter().filter(|&&x| x > CLIP).count();
            let second = unit(first.into_iter().map(|x| x.min(CLIP)).collect());
            let sum: f32 = second.iter().sum();
            for (got, want) in d.iter().zip(second.iter().map(|x| (x / sum).sqrt())) {
                assert!((got - want).abs() < 1e-4, "{got} against {want} at {k:?}");
            }
        }
        assert!(
            clipped > 0,
            "no value reached the clip: the clip was not exercised"
        );
        let (_, flat) = sift.describe(&image(64, 64, |_, _| 77.0));
        assert!(!flat.is_empty() && flat.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        assert_eq!(
            DenseSift::new(0, vec![24.0], Grid::Inside),
            Err(SiftError::Step)
        );
        assert_eq!(
            DenseSift::new(6, vec![], Grid::Inside),
            Err(SiftError::NoWindows)
        );
        for w in [0.0, -24.0, 4.0, f32::INFINITY, 2048.0] {
            assert_eq!(
                DenseSift::new(6, vec![24.0, w], Grid::Whole),
                Err(SiftError::Window(w))
            );
        }
        assert!(matches!(
            DenseSift::new(6, vec![f32::NAN], Grid::Whole),
            Err(SiftError::Window(w)) if w.is_nan()
        ));
        assert!(DenseSift::new(1, vec![MIN_WINDOW, MAX_WINDOW], Grid::Inside).is_ok());
    }

    #[test]
    fn a_mirrored_image_gives_each_descriptor_mirrored() {
        // Mirroring left to right maps a gradient's angle a to pi - a, so a magnitude shared
        // linearly between bins around 8 a / 2 pi goes to bins around 4 - 8 a / 2 pi: bin o to
        // bin 4 - o mod 8. Cell column a goes to 3 - a. The grid mirrors onto itself when the
        // image's width leaves equal margins (61 px: centres 12..=48, 60 - 12 = 48).
        let lum = textured(61, 40);
        let mut mirrored = lum.clone();
        mirrored.mirror();
        let sift = DenseSift {
            step: 6,
            windows: vec![24.0],
            grid: Grid::Inside,
        };
        let (keys, values) = sift.describe(&lum);
        let (mkeys, mvalues) = sift.describe(&mirrored);
        assert_eq!(keys.len(), mkeys.len());
        let mut compared = 0;
        for (k, d) in keys.iter().zip(values.chunks_exact(SIFT_DIMS)) {
            let Some(m) = mkeys.iter().position(|m| m.y == k.y && m.x == 61 - 1 - k.x) else {
                continue;
            };
            let md = &mvalues[m * SIFT_DIMS..(m + 1) * SIFT_DIMS];
            for b in 0..CELLS {
                for a in 0..CELLS {
                    for o in 0..ORIENTATIONS {
                        let want = d[(b * CELLS + a) * ORIENTATIONS + o];
                        let mo = (ORIENTATIONS + 4 - o) % ORIENTATIONS;
                        let got = md[(b * CELLS + (CELLS - 1 - a)) * ORIENTATIONS + mo];
                        assert!((got - want).abs() < 2e-3, "{got} against {want}");
                    }
                }
            }
            compared += 1;
        }
        assert!(compared >= 6, "{compared} mirrored keypoints");
    }
}
