//! The measured rates the plan's seconds are reckoned at: the k-means assignment's multiply-adds a
//! second on a node like the machine of `eval/paper_scale/`, and the seconds the photo stages and
//! SVMs take on a machine like the one `eval/scene15-run` measured (2 AVX2 cores; `vocab run
//! configs/scene15-dev.toml`, trial 1, and one trial of `configs/scene15.toml` on a stand-in of
//! 4,485 photos).

use vocab_pipeline::kmeans;

// Multiply-adds per second of the assignment on one node like the machine of `eval/paper_scale/`
// (2 cores of an AMD EPYC with AVX2, no AVX-512), measured at k = 1,048,576 on the paper-scale
// vectors.
/// The f32 full pass: 10,000 vectors x 1,048,576 words x 512 dims in 103.2 s (`vocab bench
/// assign`, `eval/paper_scale/results/exact/vocab.csv`).
pub(super) const F32_RATE: f64 = 52.0e9;
/// The int8 full pass (AVX2 build): the same in 49.8 s.
pub(super) const INT8_RATE: f64 = 107.8e9;
/// The approximate search: 7,425,000 vectors x (1,024 coarse centres + 8 probed lists of 1,024
/// words) x 512 dims in 1,038.4 s per iteration (`eval/paper_scale/results/kmeans/`).
pub(super) const APPROX_RATE: f64 = 7_425_000.0 * 9216.0 * 512.0 / 1038.38;

/// The approximate search with the lists and the coarse centres searched by the integer
/// kernel: [`APPROX_RATE`] scaled by the speedups of its AVX2 build, each measured side by side
/// on one machine at the same shape (`eval/paper_scale/results/lists/`): the int8 lists over
/// the f32 ones (`paper.csv`: 694.5 and 331.9 s per iteration), the integer coarse search
/// (`coarse.csv`: 380.4 and 328.3 s), the kernel's two quads a widening (`pair.csv`: 338.1
/// and 322.8 s), and even lists (`balance-paper.csv`: 300.2 s at 8 probes and 304.1 s at 10,
/// which count 11,264 / 9,216 times the multiply-adds at 1,024 lists; measured on u8
/// partitions, a ratio of work that does not depend on the element). Not u8 rows as their own
/// codes (`bytes.csv`, 1.03x), which holds for u8 partitions only.
///
/// The f32 search's rate ([`APPROX_RATE`]) was measured with the lists before they were
/// evened out (a vector then met lists 1.37x the mean size there), so it overstates that
/// search's seconds.
pub(super) const APPROX_INT8_RATE: f64 = APPROX_RATE
    * (694.5 / 331.9)
    * (380.4 / 328.3)
    * (338.1 / 322.8)
    * (300.2 / 304.1)
    * (11_264.0 / 9_216.0);

/// The measured rate of `assignment`'s search (pruned runs are counted as full passes: an upper
/// estimate of their time).
pub(super) fn rate_of(assignment: kmeans::Assignment) -> f64 {
    match assignment {
        kmeans::Assignment::Approx {
            kernel: kmeans::Kernel::Int8,
            ..
        } => APPROX_INT8_RATE,
        kmeans::Assignment::Approx { .. } => APPROX_RATE,
        a if a.kernel() == kmeans::Kernel::Int8 => INT8_RATE,
        _ => F32_RATE,
    }
}

// Seconds the photo stages and SVMs take on a machine like the one `eval/scene15-run` measured.
/// Random patches described a second, photos decoded included (200 a photo: 150,000 in
/// 2.0 s on the development set, 300,000 in 5.3 s on the stand-in).
pub(super) const FEATURE_PATCHES: f64 = 60_000.0;
/// Seconds per dense patch encoded: a fixed part and a part per word (stride 8, soft
/// assignment over 5 words, int8 kernel, 3-level pyramid: 4.3 s at k = 256 and 7.6 s at
/// k = 1,024 for 3.5M patches).
pub(super) const ENCODE_PATCH: f64 = 0.92e-6;
pub(super) const ENCODE_WORD: f64 = 1.22e-9;
/// Seconds per (training photo x one-vs-rest model x fit) at 5,376 histogram values (k =
/// 256, 3-level pyramid), chi-squared map: 26.5 s for 750 photos of the development set, 15
/// models, 26 fits. (The stand-in's duplicated photos took three times as long per photo.)
pub(super) const SVM_FIT: f64 = 26.5 / (750.0 * 15.0 * 26.0);
/// Histogram values of that measurement, and how the time grows with them (k = 1,024,
/// four times the values, took 1.9 times as long: sparse rows).
pub(super) const SVM_VALUES: f64 = 5376.0;
pub(super) const SVM_EXPONENT: f64 = 0.47;
/// The solver's kernel form (taken when it costs less, as it does for dense encodings and
/// few photos): the rows' inner products at this many multiply-adds a second (timed once
/// around the computation on `eval/svm_bench/today.sh`'s features, not a committed
/// benchmark: 750 photos' Fisher vectors in 0.24 s, K = 4,096's chi2-mapped histograms in
/// 3.5 s; the committed `today.csv` has the whole processes, 1.3 s and 6.9 s) ...
pub(super) const GRAM_MULADDS: f64 = 48e9;
/// ... then seconds per (training photo squared x model x fit) of descent: about 0.5 s for
/// 15 models x 26 fits on 750 photos (Fisher vectors and VLAD, the same runs).
pub(super) const KERNEL_STEP: f64 = 0.5 / (750.0 * 750.0 * 15.0 * 26.0);
/// Photo size assumed when the photos are not here: 15-Scene's, about 300 x 250.
pub(super) const SIZE: (f64, f64) = (300.0, 250.0);
/// Seconds of an EM step per vector and (component x projected dim): 65 steps of 64
/// Gaussians over 64 dims on 150,000 patches took 14.7 s after the PCA (2.6 s), one
/// process, 2 cores (`eval/svm_bench/today.sh`'s mixture; `eval/accuracy/
/// encodings-timings.csv`: 17.0-17.1 s for the same learning, PCA included).
pub(super) const EM_VECTOR_SECONDS: f64 = 14.7 / 65.0 / 150_000.0 / 4096.0;
/// Seconds per dense patch of a Fisher encoding per (component x projected dim), on top of
/// [`ENCODE_PATCH`]: 64 Gaussians x 64 dims encoded the 1,500 development photos (about 1.37M
/// patches at stride 8) in 3.5-3.6 s, 128 x 64 in 5.6 s (`eval/accuracy/
/// encodings-timings.csv`): 2.6e-6 and 4.1e-6 s a patch.
/// (Fine strides off the HOG cell grid cost the same a patch: one trial of
/// `configs/scene15.toml` on its stand-in encoded 4,485 photos at stride 4 in 63.7 s, where
/// these rates give 68 s; `eval/scene15-run/field-protocol.md`, `eval/encode_bench/fisher.md`.)
pub(super) const FISHER_PATCH: f64 = 1.7e-6 / 4096.0;
/// Seconds per dense patch on top for coarse strides off the cell grid (from
/// [`vocab_pipeline::hog::PLANES_BELOW_STRIDE`] px), each patch described anew: measured
/// when stride 4 was described so (4,485 photos, about 15.8M patches, 107.5 s against the
/// aligned rates' 68 s).
pub(super) const UNALIGNED_PATCH: f64 = 2.5e-6;

#[cfg(test)]
mod tests {
    use super::*;
    use kmeans::{Assignment, Kernel};

    #[test]
    fn each_search_is_reckoned_at_its_own_measured_rate() {
        let approx = |kernel| Assignment::Approx {
            lists: 0,
            probes: 8,
            kernel,
        };
        assert_eq!(rate_of(approx(Kernel::F32)), APPROX_RATE);
        assert_eq!(rate_of(approx(Kernel::Int8)), APPROX_INT8_RATE);
        // At the paper's shape the integer lists measured 2.09x the f32 lists' speed, then the
        // integer coarse search 1.16x and the AVX2 kernel's two quads a widening 1.05x: 2.54x;
        // even lists at 10 probes 0.99x the time of 8 uneven ones for 1.22x the nominal work.
        let speedup = APPROX_INT8_RATE / APPROX_RATE;
        assert!((3.0..3.1).contains(&speedup), "{speedup}");
        assert_eq!(rate_of(Assignment::Full(Kernel::Int8)), INT8_RATE);
        assert_eq!(rate_of(Assignment::Pruned(Kernel::F32)), F32_RATE);
    }
}
