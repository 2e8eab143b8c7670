//! The plan's estimate of time: about how long a trial, and the run, take at the measured rates.

use super::calibrate::Calibration;
use super::rates;
use crate::config::Config;

/// What the time estimate takes.
pub(super) struct Estimate<'a> {
    pub(super) photos: u64,
    pub(super) training: u64,
    /// Machines the photo stages and k-means share out to.
    pub(super) machines: u64,
    pub(super) sizes: Option<(f64, f64)>,
    pub(super) classes: &'a [usize],
    /// Seconds per k-means iteration, per vocabulary size.
    pub(super) per_iteration: &'a [(u64, f64)],
    /// This machine's speed against the reference machine's.
    pub(super) calibration: Calibration,
}

/// The plan's last lines: about how long a trial, and the run, take.
pub(super) fn print_time(config: &Config, e: &Estimate<'_>, trials: usize) -> anyhow::Result<()> {
    let machines = e.machines as f64;
    let features =
        e.training as f64 * config.features.per_image as f64 / rates::FEATURE_PATCHES / machines;
    let (mut width, mut height) = e.sizes.unwrap_or(rates::SIZE);
    // Photos are encoded downscaled to `max_side`, as `image_io` fits them.
    if let Some(side) = config.encode.max_side {
        let scale = (side as f64 / width.max(height)).min(1.0);
        (width, height) = (width * scale, height * scale);
    }
    // Then resized for the patch side (`[features] patch`), as the features stage does.
    let zoom = config.encode_params()?.features.zoom();
    (width, height) = (width * zoom, height * zoom);
    let side = vocab_pipeline::hog::PATCH_SIDE as f64;
    let stride = config.encode.stride.max(1) as f64;
    let patches =
        ((width - side) / stride + 1.0).max(0.0) * ((height - side) / stride + 1.0).max(0.0);
    let encoding = config.encode_params()?;
    let fits = (config.classify.cv.max(2) * config.classify.c_grid.len() + 1) as f64;
    let (mut kmeans, mut encode, mut svm) = (0.0, 0.0, 0.0);
    let fisher = config.fisher();
    for &(k, iteration) in e.per_iteration {
        let steps = if fisher {
            config.mixture.iterations
        } else {
            config.kmeans.iterations as usize
        };
        kmeans += iteration * steps as f64;
        let per_patch = if fisher {
            rates::ENCODE_PATCH + rates::FISHER_PATCH * (k * config.mixture.pca_dims as u64) as f64
        } else {
            rates::ENCODE_PATCH + rates::ENCODE_WORD * k as f64
        };
        // `[classify] mirror`: each trial's training photos again, mirrored.
        let mirror = config.classify.mirror;
        let encoded = e.photos + if mirror { e.training } else { 0 };
        let alone = vocab_pipeline::features::each_patch_alone(&encoding.features.sampling);
        let per_patch = per_patch + if alone { rates::UNALIGNED_PATCH } else { 0.0 };
        encode += encoded as f64 * patches * per_patch / machines;
        let values = encoding.len(k as usize) as f64;
        let growth = (values / rates::SVM_VALUES).powf(rates::SVM_EXPONENT);
        let mapped = match config.classify.kernel_map.kernel() {
            Some(_) => values * (2 * config.classify.map_order + 1) as f64,
            None => values,
        };
        // The rows a model trains on: the training photos, and their mirror images.
        let rows = e.training * if mirror { 2 } else { 1 };
        let n = rows as f64;
        for &classes in e.classes {
            let models = if classes > 2 { classes } else { 1 } as f64;
            let primal = rates::SVM_FIT * n * models * fits * growth;
            let kernel = n * n * mapped / 2.0 / rates::GRAM_MULADDS
                + rates::KERNEL_STEP * n * n * models * fits;
            // The form the solver takes by its rule (dense rows: every value stored; sparse
            // histograms: the primal's time as measured on them, whichever is less).
            let dense = encoding.method.pooling().is_dense();
            let kernel_pays = vocab_pipeline::svm::kernel_pays(
                rows as usize,
                mapped as usize,
                (n * mapped) as usize,
                (models * fits) as usize,
            );
            svm += match (dense, kernel_pays) {
                (true, true) => kernel,
                (true, false) => primal,
                (false, _) if rows as usize > vocab_pipeline::svm::KERNEL_ROWS => primal,
                (false, _) => primal.min(kernel),
            };
        }
    }
    // At this machine's rates: the photo stages at its photos', the rest at its kernel's.
    let c = e.calibration;
    let (features, encode) = (features / c.photos, encode / c.photos);
    let (kmeans, svm) = (kmeans / c.math, svm / c.math);
    let trial = features + kmeans + encode + svm;
    let total = if trials > 1 {
        format!(
            ", {} for the {trials} trials",
            duration(trial * trials as f64)
        )
    } else {
        String::new()
    };
    println!(
        "  time        {} a trial{total}: features {}, {} {}, encode {}, svm {}",
        match duration(trial) {
            d if trial < 1.0 => d,
            d => format!("about {d}"),
        },
        duration(features),
        if fisher { "mixture" } else { "k-means" },
        duration(kmeans),
        duration(encode),
        duration(svm)
    );
    print_rates(c, e.sizes);
    Ok(())
}

/// What the times were reckoned at: the reference rates, or this machine's, and its load.
fn print_rates(c: Calibration, sizes: Option<(f64, f64)>) {
    let photos = match sizes {
        Some((w, h)) => format!("photos of {w:.0} x {h:.0} px on average"),
        None => "photos of 15-Scene's size, about 300 x 250 px, assumed".to_string(),
    };
    if c == Calibration::REFERENCE {
        println!(
            "    (rough: at the rates eval/scene15-run measured on 2 AVX2 cores per machine, not \
             measured here ([plan] calibrate = false, or nodes on other machines); {photos})"
        );
    } else {
        println!(
            "    (rough: the rates eval/scene15-run measured on 2 AVX2 cores per machine, scaled \
             by this machine's measured just now: the photo stages {:.2}x, learning and models \
             {:.2}x; {photos})",
            c.photos, c.math
        );
    }
    if let Some((load, cores)) = c.busy {
        println!(
            "    the machine is busy (load {load:.1} on {cores} cores): the rates were measured \
             beside that load, and the times hold only while it lasts"
        );
    }
}

/// Seconds for people: `45 s`, `12 min`, `1.5 h`.
fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        "under 1 s".to_string()
    } else if seconds < 90.0 {
        format!("{seconds:.0} s")
    } else if seconds < 5400.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}
