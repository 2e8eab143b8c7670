//! Tests of the integer kernels and passes: against brute force, and every build this CPU has
//! against the portable one.

use super::codes::*;
use super::lists::*;
use super::portable::products_portable;
#[cfg(target_arch = "x86_64")]
use super::rows::quantise_row_avx2;
use super::rows::{quantise_row_body, row_range};
use super::search::*;
use crate::kmeans::assign::{Centroids, dist2, dot};
use crate::partition::Matrix;

/// Values in `[-0.5, 0.5) + shift`.
fn values(n: usize, seed: u64, shift: f32) -> Vec<f32> {
    let mut v = crate::kmeans::assign::tests::values(n, seed);
    v.iter_mut().for_each(|x| *x += shift);
    v
}

/// Brute force: the first arg-min of `dist2` and its value.
fn brute(x: &[f32], c: &Centroids) -> (u32, f32) {
    (0..c.k()).fold((0, f32::INFINITY), |(bl, bd), j| {
        let d = dist2(x, c.row(j));
        if d < bd { (j as u32, d) } else { (bl, bd) }
    })
}

fn check(x: Matrix<'_>, centroids: &Centroids, kernel: Isa) {
    check_codes(x, &QuantRows::new(x.into()), centroids, kernel);
}

/// [`check`] with the rows' codes given (`xq`, the rows of `x`).
fn check_codes(x: Matrix<'_>, xq: &QuantRows, centroids: &Centroids, kernel: Isa) {
    let n = x.rows();
    // Every build, the portable one included, through the same walk.
    let cq = QuantCentroids::for_isa(centroids, kernel);
    let (mut labels, mut dist) = (vec![u32::MAX; n], vec![0f32; n]);
    assign_quantized(
        x,
        xq.slice(0, n),
        &cq,
        centroids,
        &mut QuantScratch::default(),
        &mut labels,
        &mut dist,
    );
    for i in 0..n {
        let (label, d) = brute(x.row(i), centroids);
        assert_eq!(
            (labels[i], dist[i]),
            (label, d),
            "row {i} of {n}, k = {}, dims = {}, {kernel:?}",
            centroids.k(),
            x.dims()
        );
    }
}

/// Every build this CPU can run, whatever `VOCAB_MAX_ISA` says.
fn kernels() -> Vec<Isa> {
    use crate::isa::{Level, detected};
    [Level::Portable, Level::Avx2, Level::Avx512]
        .into_iter()
        .filter(|&level| level <= detected())
        .map(Isa::at)
        .collect()
}

#[test]
fn searched_runs_give_the_brute_force_nearest_and_the_full_pass_bounds() {
    // Runs of one, two, four and five panels (the last two calls apart), a short last run,
    // ids in reverse so ties go to the higher column, rows equal to centroids and centroids
    // repeated (exact ties), odd and even quads of dims; every build this CPU has.
    for kernel in kernels() {
        for (n, k, d, size) in [(40, 100, 20, 16), (33, 150, 45, 32), (21, 200, 512, 64)] {
            for size in [size, 80] {
                let mut raw = values(k * d, 3, 0.0);
                // Centroid 1 repeats centroid 0, centroid 17 repeats centroid 5.
                raw.copy_within(0..d, d);
                raw.copy_within(5 * d..6 * d, 17 * d);
                let centroids = Centroids::new(raw, d);
                let mut rows = values(n * d, 4, 0.0);
                rows[..d].copy_from_slice(centroids.row(0));
                rows[2 * d..3 * d].copy_from_slice(centroids.row(5));
                let x = Matrix::dense(&rows, d);
                let xq = QuantRows::new(x.into());
                let cq = QuantCentroids::for_isa(&centroids, kernel);
                let start: Vec<usize> =
                    (0..k.div_ceil(size)).map(|g| g * size).chain([k]).collect();
                let ids: Vec<u32> = (0..k as u32).rev().collect();
                let runs = Runs::new(&start, &ids);
                let count = start.len() - 1;
                // The full pass's bounds of every run, to compare with.
                let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
                let mut full = vec![0f32; n * count];
                assign_quantized_runs(
                    x,
                    xq.slice(0, n),
                    &cq,
                    &centroids,
                    runs,
                    &mut QuantScratch::default(),
                    &mut labels,
                    &mut dist,
                    &mut full,
                );
                // Every other row, each with a pseudo-random set of runs (some with none),
                // starting from column `row % k`.
                let chosen: Vec<usize> = (0..n).step_by(2).collect();
                let mut pairs = Vec::new();
                for r in 0..chosen.len() {
                    pairs.extend(
                        (0..count)
                            .filter(|&g| (r * 7 + g * 3) % 5 < 2 + r % 2)
                            .filter(|_| r % 6 != 5)
                            .map(|g| (r as u32, g as u32)),
                    );
                }
                let mut best: Vec<(u32, f32)> = chosen
                    .iter()
                    .map(|&i| ((i % k) as u32, dist2(x.row(i), centroids.row(i % k))))
                    .collect();
                let entry = best.clone();
                let mut least = vec![0f32; pairs.len()];
                search_runs(
                    x,
                    xq.slice(0, n),
                    &cq,
                    &centroids,
                    runs,
                    &chosen,
                    &pairs,
                    &mut SearchScratch::default(),
                    &mut best,
                    &mut least,
                );
                let case = format!("n {n} k {k} d {d} runs of {size}, {kernel:?}");
                for (r, &i) in chosen.iter().enumerate() {
                    let xi = x.row(i);
                    let mine: Vec<u32> = pairs
                        .iter()
                        .filter(|p| p.0 == r as u32)
                        .map(|p| p.1)
                        .collect();
                    let columns = mine
                        .iter()
                        .flat_map(|&g| start[g as usize]..start[g as usize + 1])
                        .chain([entry[r].0 as usize]);
                    let want = columns
                        .map(|j| (dist2(xi, centroids.row(j)), ids[j], j as u32))
                        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                        .map(|(d, _, j)| (j, d));
                    assert_eq!(Some(best[r]), want, "{case} row {i}");
                    let own = dot(xi, xi);
                    for (&(_, g), &l) in pairs.iter().zip(&least).filter(|(p, _)| p.0 == r as u32) {
                        let (lo, hi) = (start[g as usize], start[g as usize + 1]);
                        let others = (lo..hi).filter(|&j| j != best[r].0 as usize);
                        let truth = others
                            .clone()
                            .map(|j| dist2(xi, centroids.row(j)) - own)
                            .fold(f32::INFINITY, f32::min);
                        let slack = 1e-4
                            * (own
                                + centroids.norms()[lo..hi]
                                    .iter()
                                    .copied()
                                    .fold(0.0, f32::max));
                        assert!(
                            l <= truth + slack,
                            "{case} row {i} run {g}: {l} above {truth}"
                        );
                        let whole = full[i * count + g as usize];
                        if (lo..hi).contains(&(best[r].0 as usize)) {
                            assert!(l >= whole, "{case} row {i} run {g}: {l} below {whole}");
                        } else {
                            assert_eq!(l.to_bits(), whole.to_bits(), "{case} row {i} run {g}");
                        }
                    }
                }
                assert!(
                    best.iter().zip(&entry).any(|(b, e)| b.0 != e.0),
                    "{case}: no row found a nearer centroid"
                );
            }
        }
    }
}

#[test]
fn labels_are_the_brute_force_arg_min_across_block_edges() {
    for kernel in kernels() {
        for (n, k, d, stride, shift) in [
            (1, 1, 3, 3, 0.0),
            (7, 3, 5, 7, 0.0),
            (130, 530, 16, 18, 0.3),
            (67, 40, 512, 514, 0.0),
            (20, 1100, 9, 9, -2.0),
            // Far from the origin, where the f32 expansion misranks near-ties.
            (65, 33, 64, 64, 50.0),
        ] {
            let raw = values(n * stride, 1, shift);
            let x = Matrix::new(&raw, n, d, stride);
            let centroids = Centroids::new(values(k * d, 2, shift), d);
            check(x, &centroids, kernel);
        }
    }
}

#[test]
fn centroids_drawn_from_the_rows_and_exact_ties_resolve_to_the_lowest_index() {
    for kernel in kernels() {
        let d = 24;
        let raw = values(90 * d, 5, 0.1);
        // Every row is also a centroid (distance 0), some twice (exact ties), plus a
        // constant row and an all-zero centroid (degenerate quantisation steps).
        let mut cents: Vec<f32> = raw[..40 * d].to_vec();
        cents.extend_from_slice(&raw[..10 * d]);
        cents.extend(std::iter::repeat_n(0.0, d));
        let mut rows = raw.clone();
        rows.extend(std::iter::repeat_n(0.25, d));
        let centroids = Centroids::new(cents, d);
        check(Matrix::dense(&rows, d), &centroids, kernel);
    }
}

/// [`nearest_few_quantized`] against the first `r` of all centroids sorted by (`dist2`,
/// index), for several `r` (including `r > k`).
fn check_few(x: Matrix<'_>, centroids: &Centroids, kernel: Isa) {
    check_few_biased(x, centroids, kernel, &vec![0.0; centroids.k()]);
}

/// [`check_few`] with `bias[j]` added to centroid `j`'s distances (no bias when all are 0).
fn check_few_biased(x: Matrix<'_>, centroids: &Centroids, kernel: Isa, bias: &[f32]) {
    let n = x.rows();
    let xq = QuantRows::new(x.into());
    let mut cq = QuantCentroids::for_isa(centroids, kernel);
    if bias.iter().any(|&b| b != 0.0) {
        cq = cq.with_bias(bias);
    }
    let mut scratch = FewScratch::default();
    for r in [1, 2, 5, 8, 9, centroids.k() + 2] {
        let (mut words, mut dists) = (vec![7u32; n * r], vec![0f32; n * r]);
        let xs = xq.slice(0, n);
        nearest_few_quantized(
            x,
            xs,
            &cq,
            centroids,
            &mut scratch,
            r,
            &mut words,
            &mut dists,
        );
        for i in 0..n {
            let mut all: Vec<(f32, u32)> = (0..centroids.k())
                .map(|j| (dist2(x.row(i), centroids.row(j)) + bias[j], j as u32))
                .collect();
            all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            all.resize(r.max(all.len()), (f32::INFINITY, u32::MAX));
            let want: Vec<(f32, u32)> = all[..r].to_vec();
            let got: Vec<(f32, u32)> = (0..r)
                .map(|s| (dists[i * r + s], words[i * r + s]))
                .collect();
            assert_eq!(
                got,
                want,
                "row {i}, r = {r}, k = {}, {kernel:?}",
                centroids.k()
            );
        }
    }
}

#[test]
fn nearest_few_are_the_brute_force_first_r_with_ties_to_the_lower_index() {
    for kernel in kernels() {
        for (n, k, d, shift) in [
            (1, 1, 3, 0.0),
            (7, 3, 5, 0.0),
            (130, 530, 16, 0.3),
            (67, 1100, 512, 0.0),
            (65, 33, 64, 50.0),
        ] {
            let x = values(n * d, 1, shift);
            let centroids = Centroids::new(values(k * d, 2, shift), d);
            check_few(Matrix::dense(&x, d), &centroids, kernel);
        }
        // Rows that are centroids, duplicated centroids (exact ties) and a zero centroid.
        let d = 24;
        let raw = values(90 * d, 5, 0.1);
        let mut cents: Vec<f32> = raw[..40 * d].to_vec();
        cents.extend_from_slice(&raw[..10 * d]);
        cents.extend(std::iter::repeat_n(0.0, d));
        check_few(Matrix::dense(&raw, d), &Centroids::new(cents, d), kernel);
    }
}

#[test]
fn biased_nearest_few_are_the_brute_force_first_r_of_distance_plus_bias() {
    // Biases of both signs and zero, larger than many distances' gaps; duplicated centroids
    // with the same bias (exact ties go to the lower index); rows that are centroids.
    let d = 24;
    let raw = values(90 * d, 5, 0.1);
    let mut cents: Vec<f32> = raw[..40 * d].to_vec();
    cents.extend_from_slice(&raw[..10 * d]);
    let centroids = Centroids::new(cents, d);
    let bias: Vec<f32> = (0..50).map(|j| 0.3 * ((j % 40 % 7) as f32 - 3.0)).collect();
    assert!(bias.iter().any(|&b| b < 0.0) && bias.iter().any(|&b| b > 0.0));
    for kernel in kernels() {
        check_few_biased(Matrix::dense(&raw, d), &centroids, kernel, &bias);
    }
}

#[test]
fn each_error_term_is_needed_and_enough() {
    // One side exactly on its code grid (no quantisation error), the other with a coarse
    // step (values of -5 and 5 widen its range): only that side's error term separates
    // the candidates, so dropping either term fails one of the two cases.
    let d = 32;
    // Rows: codes 0..=127 with lo = 0 and step 1/127; centroids: -L..=L with t = 1/L, L the
    // build's centroid levels.
    let on_grid = |n: usize, seed: u64, levels: Option<f32>| -> Vec<f32> {
        let (signed, levels) = (levels.is_some(), levels.unwrap_or(127.0));
        let mut v: Vec<f32> = values(n * d, seed, 0.0)
            .iter()
            .map(|x| {
                let q = (x * 2.0 * levels).round();
                (if signed { q } else { q.abs().min(levels) }) / levels
            })
            .collect();
        for row in v.chunks_exact_mut(d) {
            (row[0], row[1]) = (if signed { -1.0 } else { 0.0 }, 1.0);
        }
        v
    };
    let coarse = |n: usize, seed: u64| -> Vec<f32> {
        let mut v: Vec<f32> = values(n * d, seed, 0.0).iter().map(|x| x * 0.4).collect();
        for row in v.chunks_exact_mut(d) {
            (row[0], row[1]) = (5.0, -5.0);
        }
        v
    };
    for kernel in kernels() {
        let levels = kernel.centroid_levels();
        for (rows, cents) in [
            (coarse(300, 7), on_grid(800, 8, Some(levels))),
            (on_grid(300, 7, None), coarse(800, 8)),
        ] {
            let centroids = Centroids::new(cents, d);
            check(Matrix::dense(&rows, d), &centroids, kernel);
        }
    }
}

#[test]
fn u8_rows_that_fit_are_their_own_codes_and_pieces_quantise_as_alone() {
    use crate::partition::{Codes, Rows};
    let (n, d, fit) = (9, 21, 5);
    // Bytes up to 127 in the first `fit` rows (their own codes), up to 255 in the others.
    let bytes: Vec<u8> = (0..n * d)
        .map(|i| ((i * 37 + i / d * 11) % if i < fit * d { 128 } else { 256 }) as u8)
        .collect();
    let codes = Codes::new(&bytes, n, d, d);
    let held = QuantRows::new(Rows::U8(codes));
    let mut buf = Vec::new();
    let decoded = Rows::U8(codes).to_f32(&mut buf);
    let wide = QuantRows::new(decoded.into());
    let row = |q: &QuantRows, r: usize| q.codes[r * q.width..][..d].to_vec();
    let terms = |q: &QuantRows, r: usize| {
        [q.lo[r], q.step[r], q.length[r], q.error[r], q.slack[r]].map(f32::to_bits)
    };
    for r in 0..n {
        if r < fit {
            assert_eq!(row(&held, r), codes.row(r), "row {r}");
            assert_eq!((held.lo[r], held.step[r]), (0.0, 1.0 / 255.0), "row {r}");
            // Only the floats' rounding and the scan's slack are left of the row's error.
            assert!(held.error[r] * 10.0 < wide.error[r], "row {r}");
        } else {
            assert_eq!(
                (row(&held, r), terms(&held, r)),
                (row(&wide, r), terms(&wide, r))
            );
        }
    }
    // Pieces of both kinds, one after another: each row as it is quantised alone.
    let stacked = QuantRows::stacked(&[Rows::U8(codes.slice(0, 4)), decoded.slice(4, n).into()]);
    for r in 0..n {
        let alone = if r < 4 { &held } else { &wide };
        assert_eq!(
            (row(&stacked, r), terms(&stacked, r)),
            (row(alone, r), terms(alone, r))
        );
    }
    // The searches on the bytes' codes are exact on every build.
    let centroids = Centroids::new(values(40 * d, 5, 0.3), d);
    for kernel in kernels() {
        check_codes(decoded, &held, &centroids, kernel);
    }
}

#[test]
fn slices_of_the_quantised_rows_match_their_rows() {
    let d = 40;
    let raw = values(101 * d, 3, 0.0);
    let x = Matrix::dense(&raw, d);
    let centroids = Centroids::new(values(70 * d, 4, 0.0), d);
    let xq = QuantRows::new(x.into());
    let cq = QuantCentroids::new(&centroids);
    let (start, end) = (37, 101);
    let n = end - start;
    let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
    assign_quantized(
        x.slice(start, end),
        xq.slice(start, end),
        &cq,
        &centroids,
        &mut QuantScratch::default(),
        &mut labels,
        &mut dist,
    );
    for (i, &label) in labels.iter().enumerate() {
        assert_eq!(label, brute(x.row(start + i), &centroids).0, "row {i}");
    }
}

#[test]
fn the_avx2_build_of_row_quantisation_gives_the_same_codes_and_terms() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let mut rows: Vec<Vec<f32>> = [(512, 3, 0.0), (37, 4, 9.0), (8, 5, -1.0), (5, 6, 0.0)]
            .into_iter()
            .map(|(dims, seed, shift)| values(dims, seed, shift))
            .collect();
        // Constant, huge, tiny and non-finite values follow the scalar code's rules too.
        rows.push(vec![0.25; 24]);
        rows.push(
            (0..40)
                .map(|i| if i % 3 == 0 { 1e30 } else { -1e-30 })
                .collect(),
        );
        let mut odd = values(29, 7, 0.0);
        (odd[3], odd[11], odd[20]) = (f32::NAN, f32::INFINITY, f32::NEG_INFINITY);
        rows.push(odd);
        for row in rows {
            let dims = row.len();
            let (mut a, mut b) = (vec![0u8; width(dims)], vec![0u8; width(dims)]);
            let slack = rounding(dims);
            let range = row_range(&row);
            let plain = quantise_row_body(&row, range, slack, &mut a);
            // SAFETY: AVX2 was detected.
            let simd = unsafe { quantise_row_avx2(&row, range, slack, &mut b) };
            assert_eq!((plain.map(f32::to_bits), &a), (simd.map(f32::to_bits), &b));
        }
    }
}

#[test]
fn least_of_is_the_minimum_at_every_length() {
    let v: Vec<f32> = (0..40)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.5)
        .collect();
    for start in 0..5 {
        for end in start..v.len() {
            let want = v[start..end].iter().copied().fold(f32::INFINITY, f32::min);
            assert_eq!(least_of(&v[start..end]), want, "{start}..{end}");
        }
    }
}

#[test]
fn every_build_of_the_direct_distances_is_dist2_bit_for_bit() {
    for kernel in kernels() {
        for dims in [1, 7, 8, 13, 512, 515] {
            let a = values(dims, 1, 0.0);
            let centroids = Centroids::new(values(5 * dims, 2, 0.3), dims);
            for columns in [&[0u32, 1, 2, 3][..], &[4, 2], &[3]] {
                let got = kernel.dists(&a, &centroids, columns);
                for (&j, got) in columns.iter().zip(got) {
                    let want = dist2(&a, centroids.row(j as usize));
                    assert_eq!(got.to_bits(), want.to_bits(), "{kernel:?}, {dims} dims");
                }
            }
        }
    }
}

#[test]
fn portable_and_simd_products_agree() {
    for kernel in kernels() {
        // Codes over the build's whole range.
        let levels = kernel.centroid_levels() as i32;
        // Odd and even quad counts, every number of panels a call takes.
        for (width, count) in [(64, 1), (60, 2), (4, 3), (512, 4)] {
            let count = count.min(kernel.panels_per_call());
            let x: Vec<u8> = (0..MR * width).map(|i| (i * 37 % 128) as u8).collect();
            let panels: Vec<u8> = (0..count * NR * width)
                .map(|i| ((i as i32 * 53) % (2 * levels + 1) - levels) as i8 as u8)
                .collect();
            let mut want = vec![0i32; (MR - 1) * CENTROID_BLOCK + count * NR];
            for p in 0..count {
                let panel = &panels[p * NR * width..];
                products_portable(&x, width, panel, &mut want[p * NR..]);
            }
            let mut got = vec![0i32; want.len()];
            kernel.products(&x, width, &panels, count, &mut got);
            assert_eq!(got, want, "{kernel:?}, width {width}, {count} panels");
        }
        // The extremes of the codes do not saturate the i16 pair sums, nor the AVX2 build's
        // sums of two quads'.
        let width = 64;
        let mut got = vec![0i32; (MR - 1) * CENTROID_BLOCK + NR];
        let x = vec![127u8; MR * width];
        for code in [levels as i8, -levels as i8] {
            let panel = vec![code as u8; NR * width];
            kernel.products(&x, width, &panel, 1, &mut got);
            assert_eq!(got[0], 127 * i32::from(code) * width as i32, "{kernel:?}");
        }
    }
}

#[test]
fn searched_lists_give_the_brute_force_nearest_of_their_columns_on_every_build() {
    // Lists of one, two, four and five panels (the last two calls apart), an empty one and one
    // longer than a block (38 panels),
    // ids in reverse with repeats (ties go to the lowest id, not the lowest column), rows equal
    // to centroids; odd and even quads of dims; every build this CPU has.
    for dims in [36, 40] {
        let start = [0, 16, 48, 48, 112, 192, 800];
        let k = start[start.len() - 1];
        let centroids = Centroids::new(values(k * dims, 21, 0.1), dims);
        let ids: Vec<u32> = (0..k as u32).map(|j| (k as u32 - 1 - j) / 2).collect();
        let mut rows = values(300 * dims, 22, 0.1);
        rows[..dims].copy_from_slice(centroids.row(5));
        let x = Matrix::dense(&rows, dims);
        let xq = QuantRows::new(x.into());
        let lists = Lists {
            start: &start,
            ids: &ids,
        };
        // Row i probes lists (i, i + 1, ...) cyclically, two or three of them.
        for probes in [2, 3] {
            let probed: Vec<u32> = (0..300 * probes)
                .map(|at| ((at / probes + at % probes) % (start.len() - 1)) as u32)
                .collect();
            for kernel in kernels() {
                let cq = QuantCentroids::for_isa(&centroids, kernel);
                let (mut labels, mut dist) = (vec![u32::MAX; 300], vec![0f32; 300]);
                search_lists(
                    x,
                    xq.slice(0, 300),
                    &cq,
                    &centroids,
                    lists,
                    &probed,
                    &mut ListScratch::default(),
                    &mut labels,
                    &mut dist,
                );
                for i in 0..300 {
                    let mut best = (f32::INFINITY, u32::MAX);
                    for &l in &probed[i * probes..][..probes] {
                        let columns = start[l as usize]..start[l as usize + 1];
                        for (j, &id) in ids.iter().enumerate().take(columns.end).skip(columns.start)
                        {
                            let d = dist2(x.row(i), centroids.row(j));
                            if d < best.0 || (d == best.0 && id < best.1) {
                                best = (d, id);
                            }
                        }
                    }
                    assert_eq!(
                        (labels[i], dist[i].to_bits()),
                        (best.1, best.0.to_bits()),
                        "row {i}, {probes} probes, {dims} dims, {kernel:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn least_dist2_is_the_least_dist2_over_any_count_of_columns() {
    // 0 to 9 columns: none, partial batches of four and whole ones; dims not a multiple of 8.
    let (k, d) = (12, 37);
    let centroids = Centroids::new(values(k * d, 3, 0.0), d);
    let x = values(d, 4, 0.1);
    for count in 0..=9u32 {
        let columns: Vec<u32> = (0..count).map(|j| (j * 5 + 2) % k as u32).collect();
        let want = columns
            .iter()
            .map(|&j| dist2(&x, centroids.row(j as usize)))
            .fold(f32::INFINITY, f32::min);
        let got = least_dist2(&x, &centroids, columns.iter().copied());
        assert_eq!(got.to_bits(), want.to_bits(), "{count} columns");
    }
}
