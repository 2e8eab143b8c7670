//! `vocab run --plan`: the stages, data sizes, memory and per-iteration traffic a config implies,
//! from the cost model of `eval/distributed/` (bytes exact, seconds a link-bound estimate); and
//! the checks that refuse a run up front (`config check`, `--plan` and `vocab run` before its
//! first stage): a vocabulary larger than its sample, a k-means that cannot fit in memory here.

use anyhow::bail;

use vocab_pipeline::kmeans;

use crate::cli::RunArgs;
use crate::config::Config;
use crate::memory::{breakdown, human, memory_here};
use crate::settings::{Backend, NodeCount};

/// HOG values per vector.
const DIMS: u64 = 512;
/// Bytes before the values of a binary feature record.
const RECORD_HEAD: u64 = vocab_pipeline::store::RECORD_HEAD as u64;

// Multiply-adds per second of the assignment on one node like the machine of `eval/paper_scale/`
// (2 cores of an AMD EPYC with AVX2, no AVX-512), measured at k = 1,048,576 on the paper-scale
// vectors.
/// The f32 full pass: 10,000 vectors x 1,048,576 words x 512 dims in 103.2 s (`vocab bench
/// assign`, `eval/paper_scale/results/exact/vocab.csv`).
const F32_RATE: f64 = 52.0e9;
/// The int8 full pass (AVX2 build): the same in 49.8 s.
const INT8_RATE: f64 = 107.8e9;
/// The approximate search: 7,425,000 vectors x (1,024 coarse centres + 8 probed lists of 1,024
/// words) x 512 dims in 1,038.4 s per iteration (`eval/paper_scale/results/kmeans/`).
const APPROX_RATE: f64 = 7_425_000.0 * 9216.0 * 512.0 / 1038.38;

/// The measured rate of `assignment`'s search (pruned runs are counted as full passes: an upper
/// estimate of their time).
fn rate_of(assignment: kmeans::Assignment) -> f64 {
    match assignment {
        kmeans::Assignment::Approx { .. } => APPROX_RATE,
        a if a.kernel() == kmeans::Kernel::Int8 => INT8_RATE,
        _ => F32_RATE,
    }
}

/// What one node holds during a k-means iteration over `n` vectors on `nodes` nodes
/// ([`kmeans::Memory`]): its share of the vectors, the centroids, the sums, and what the
/// assignment adds (int8 codes, pruning bounds, the approximate search's index).
pub fn kmeans_memory(config: &Config, n: u64, k: u64, nodes: u64, tasks: u64) -> kmeans::Memory {
    let assignment = config.kmeans.assignment().unwrap_or_default();
    kmeans::Memory::estimate(
        n.div_ceil(nodes.max(1)),
        k,
        DIMS,
        config.partition.element,
        tasks,
        assignment,
        nodes > 1,
    )
}

/// Refuses a config whose vocabularies cannot be built from `training` photos: a `k` larger
/// than the sample, or a k-means that needs more memory than this machine has (when it runs
/// here).
pub fn check_sizes(config: &Config, engine: &Backend, training: u64) -> anyhow::Result<()> {
    let per_image = config.features.per_image as u64;
    let n = training * per_image;
    let largest = config.sizes().iter().copied().max().unwrap_or(0) as u64;
    if largest > n {
        let (key, what) = if config.fisher() {
            ("[mixture] components", "mixture")
        } else {
            ("[kmeans] k", "vocabulary")
        };
        bail!(
            "{key} = {largest} is larger than the {what}'s sample: {training} training photos x \
             {per_image} patches ([features] per_image) = {n} vectors; lower it or raise \
             per_image"
        );
    }
    if config.fisher() {
        // A mixture's memory is its sums, small beside the sample the partitions hold.
        return Ok(());
    }
    let at = engine.nodes()?;
    if at.here
        && let Some(total) = memory_here()
    {
        let tasks = rayon::current_num_threads() as u64;
        // Loopback workers share this machine.
        let plan = kmeans_memory(config, n, largest, at.nodes, tasks);
        let need = at.nodes.saturating_mul(plan.total());
        if need > total {
            bail!(
                "k-means at k = {largest} needs about {} here ({}; per node {}), and this \
                     machine has {}: lower k, or run on a cluster",
                human(need as f64),
                at.name,
                breakdown(&plan),
                human(total as f64)
            );
        }
    }
    Ok(())
}

/// What the plan says of the photos: how many, how many train each trial's vocabulary, and the
/// protocol (for people) with its number of trials.
pub struct Photos<'a> {
    /// Photos encoded (with a test folder's).
    pub photos: u64,
    /// Photos whose patches make a trial's vocabulary sample.
    pub training: u64,
    /// The protocol, for people.
    pub protocol: &'a str,
    /// Trials, each learning its own vocabularies and models.
    pub trials: usize,
    /// Mean width and height of a sample of the photos (headers read), when they are here.
    pub sizes: Option<(f64, f64)>,
    /// Classes of each attribute learned (from the labels; `[plan] classes` or 2 without them).
    pub classes: Vec<usize>,
}

/// Prints the plan.
pub fn print(
    config: &Config,
    args: &RunArgs,
    engine: &Backend,
    photos: &Photos<'_>,
) -> anyhow::Result<()> {
    let &Photos {
        photos,
        training,
        protocol,
        trials,
        sizes,
        ref classes,
    } = photos;
    let NodeCount {
        nodes,
        racks,
        name: where_,
        ..
    } = engine.nodes()?;
    let n = training * config.features.per_image as u64;
    let element = config.partition.element;
    let value = element.size() as u64;
    let sample = n * (RECORD_HEAD + DIMS * 4);
    let parts = config.partition.parts as u64;
    let tasks = config.plan.map_tasks_per_node as u64;
    let link = config.plan.link_mbit * 1e6 / 8.0;
    println!("plan for {} ({where_})", args.experiment.config.display());
    println!("  dataset     {photos} photos; {protocol}");
    println!(
        "    {training} photos train {} vocabularies and models",
        if trials > 1 { "each trial's" } else { "the" }
    );
    if trials > 1 {
        println!(
            "    every line below holds for each of the {trials} trials (each has its own \
             sample, vocabularies, encodings and models)"
        );
    }
    println!(
        "  features    {} random patches per photo x {DIMS} dims = {n} vectors, {} on disk",
        config.features.per_image,
        human(sample as f64)
    );
    let per_photo = config.features.params()?.photo_memory();
    println!(
        "    {tasks} photos at once a node, at most {} each ({} Mpix limit: {} bytes a pixel \
         while decoding), {} in all",
        human(per_photo as f64),
        config.features.max_pixels,
        vocab_pipeline::image_io::BYTES_PER_PIXEL,
        human(per_photo.saturating_mul(tasks) as f64)
    );
    let born = config.partition.at == crate::config::PartitionAt::Nodes;
    if engine.distributed() && born {
        // Each boundary between two nodes' shards cuts at most one partition, whose smaller
        // part (at most half of it) travels to the node holding the rest.
        let part = sample / parts.max(1);
        let moved = nodes.saturating_sub(1) * part / 2;
        println!(
            "    described on the {nodes} node{} and kept there as partitions; at most {} of \
             boundary records move between neighbours, nothing to the driver",
            if nodes == 1 { "" } else { "s" },
            human(moved as f64),
        );
    } else if engine.distributed() {
        println!(
            "    described on the {nodes} node{}; the sample comes to the driver: {} ({:.1} s \
             into it at {} Mbit/s)",
            if nodes == 1 { "" } else { "s" },
            human(sample as f64),
            sample as f64 / link,
            config.plan.link_mbit
        );
    }
    println!(
        "  partition   {parts} partitions of ~{} vectors ({} each, {} values)",
        n / parts.max(1),
        human((n / parts.max(1) * (RECORD_HEAD + DIMS * value)) as f64),
        element.name()
    );
    let iterations = if config.fisher() {
        print_mixture(config, n, (nodes, racks), link)
    } else {
        print_kmeans(config, n, (nodes, racks), tasks, link)
    };
    print_encode(config, engine, nodes, photos)?;
    // The photo stages' rates are a whole machine's: loopback workers share its cores. (The
    // k-means rates are a node's, and a 2-core machine running two measured alike.)
    let machines = if engine.nodes_here().is_some() {
        1
    } else {
        nodes.max(1)
    };
    let per_iteration: Vec<(u64, f64)> = (iterations.into_iter())
        .map(|(k, map, comm)| (k, map + comm))
        .collect();
    let estimate = Estimate {
        photos,
        training,
        machines,
        sizes,
        classes,
        per_iteration: &per_iteration,
    };
    print_time(config, &estimate, trials)
}

/// Seconds the photo stages and SVMs take on a machine like the one `eval/scene15-run`
/// measured (2 AVX2 cores; `vocab run configs/scene15-dev.toml`, trial 1, and one trial of
/// `configs/scene15.toml` on a stand-in of 4,485 photos).
mod rates {
    /// Random patches described a second, photos decoded included (200 a photo: 150,000 in
    /// 2.0 s on the development set, 300,000 in 5.3 s on the stand-in).
    pub const FEATURE_PATCHES: f64 = 60_000.0;
    /// Seconds per dense patch encoded: a fixed part and a part per word (stride 8, soft
    /// assignment over 5 words, int8 kernel, 3-level pyramid: 4.3 s at k = 256 and 7.6 s at
    /// k = 1,024 for 3.5M patches).
    pub const ENCODE_PATCH: f64 = 0.92e-6;
    pub const ENCODE_WORD: f64 = 1.22e-9;
    /// Seconds per (training photo x one-vs-rest model x fit) at 5,376 histogram values (k =
    /// 256, 3-level pyramid), chi-squared map: 26.5 s for 750 photos of the development set, 15
    /// models, 26 fits. (The stand-in's duplicated photos took three times as long per photo.)
    pub const SVM_FIT: f64 = 26.5 / (750.0 * 15.0 * 26.0);
    /// Histogram values of that measurement, and how the time grows with them (k = 1,024,
    /// four times the values, took 1.9 times as long: sparse rows).
    pub const SVM_VALUES: f64 = 5376.0;
    pub const SVM_EXPONENT: f64 = 0.47;
    /// The solver's kernel form (taken when it costs less, as it does for dense encodings and
    /// few photos): the rows' inner products at this many multiply-adds a second (timed once
    /// around the computation on `eval/svm_bench/today.sh`'s features, not a committed
    /// benchmark: 750 photos' Fisher vectors in 0.24 s, K = 4,096's chi2-mapped histograms in
    /// 3.5 s; the committed `today.csv` has the whole processes, 1.3 s and 6.9 s) ...
    pub const GRAM_MULADDS: f64 = 48e9;
    /// ... then seconds per (training photo squared x model x fit) of descent: about 0.5 s for
    /// 15 models x 26 fits on 750 photos (Fisher vectors and VLAD, the same runs).
    pub const KERNEL_STEP: f64 = 0.5 / (750.0 * 750.0 * 15.0 * 26.0);
    /// Photo size assumed when the photos are not here: 15-Scene's, about 300 x 250.
    pub const SIZE: (f64, f64) = (300.0, 250.0);
    /// Seconds of an EM step per vector and (component x projected dim): 65 steps of 64
    /// Gaussians over 64 dims on 150,000 patches took 14.7 s after the PCA (2.6 s), one
    /// process, 2 cores (`eval/svm_bench/today.sh`'s mixture; `eval/accuracy/
    /// encodings-timings.csv`: 17.0-17.1 s for the same learning, PCA included).
    pub const EM_VECTOR_SECONDS: f64 = 14.7 / 65.0 / 150_000.0 / 4096.0;
    /// Seconds per dense patch of a Fisher encoding per (component x projected dim), on top of
    /// [`ENCODE_PATCH`]: 64 Gaussians x 64 dims encoded the 1,500 development photos (about 1.37M
    /// patches at stride 8) in 3.5-3.6 s, 128 x 64 in 5.6 s (`eval/accuracy/
    /// encodings-timings.csv`): 2.6e-6 and 4.1e-6 s a patch.
    /// (Fine strides off the HOG cell grid cost the same a patch: one trial of
    /// `configs/scene15.toml` on its stand-in encoded 4,485 photos at stride 4 in 63.7 s, where
    /// these rates give 68 s; `eval/scene15-run/field-protocol.md`, `eval/encode_bench/fisher.md`.)
    pub const FISHER_PATCH: f64 = 1.7e-6 / 4096.0;
    /// Seconds per dense patch on top for coarse strides off the cell grid (from
    /// [`vocab_pipeline::hog::PLANES_BELOW_STRIDE`] px), each patch described anew: measured
    /// when stride 4 was described so (4,485 photos, about 15.8M patches, 107.5 s against the
    /// aligned rates' 68 s).
    pub const UNALIGNED_PATCH: f64 = 2.5e-6;
}

/// What the time estimate takes.
struct Estimate<'a> {
    photos: u64,
    training: u64,
    /// Machines the photo stages and k-means share out to.
    machines: u64,
    sizes: Option<(f64, f64)>,
    classes: &'a [usize],
    /// Seconds per k-means iteration, per vocabulary size.
    per_iteration: &'a [(u64, f64)],
}

/// The plan's last lines: about how long a trial, and the run, take.
fn print_time(config: &Config, e: &Estimate<'_>, trials: usize) -> anyhow::Result<()> {
    let machines = e.machines as f64;
    let features =
        e.training as f64 * config.features.per_image as f64 / rates::FEATURE_PATCHES / machines;
    let (mut width, mut height) = e.sizes.unwrap_or(rates::SIZE);
    // Photos are encoded downscaled to `max_side`, as `image_io` fits them.
    if let Some(side) = config.encode.max_side {
        let scale = (side as f64 / width.max(height)).min(1.0);
        (width, height) = (width * scale, height * scale);
    }
    let side = vocab_pipeline::hog::PATCH_SIDE as f64;
    let stride = config.encode.stride.max(1) as f64;
    let patches =
        ((width - side) / stride + 1.0).max(0.0) * ((height - side) / stride + 1.0).max(0.0);
    let encoding = config.encode_params()?;
    let fits = (config.classify.cv.max(2) * crate::classify_cmd::C_GRID.len() + 1) as f64;
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
        "  time        about {} a trial{total}: features {}, {} {}, encode {}, svm {}",
        duration(trial),
        duration(features),
        if fisher { "mixture" } else { "k-means" },
        duration(kmeans),
        duration(encode),
        duration(svm)
    );
    println!(
        "    (rough: at the rates eval/scene15-run measured on 2 AVX2 cores per machine; {})",
        match e.sizes {
            Some((w, h)) => format!("photos of {w:.0} x {h:.0} px on average"),
            None => "photos of 15-Scene's size, about 300 x 250 px, assumed".to_string(),
        }
    );
    Ok(())
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

/// Mean width and height of up to 64 of `paths` (relative to `folder`), spread over them,
/// from their headers; `None` when none can be read.
pub fn photo_sizes(folder: &std::path::Path, paths: &[String]) -> Option<(f64, f64)> {
    let step = paths.len().div_ceil(64).max(1);
    let sizes: Vec<(u32, u32)> = (paths.iter().step_by(step))
        .filter_map(|p| image::image_dimensions(folder.join(p)).ok())
        .collect();
    let n = sizes.len() as f64;
    (n > 0.0).then(|| {
        let (w, h) = sizes.iter().fold((0.0, 0.0), |(w, h), &(a, b)| {
            (w + f64::from(a), h + f64::from(b))
        });
        (w / n, h / n)
    })
}

/// The mixture lines of the plan (Fisher vectors): per mixture, what a step moves and computes;
/// returns, per mixture, the seconds of an EM step (map and communication).
fn print_mixture(
    config: &Config,
    n: u64,
    (nodes, racks): (u64, usize),
    link: f64,
) -> Vec<(u64, f64, f64)> {
    let m = &config.mixture;
    let d = m.pca_dims as u64;
    println!(
        "  mixture     {nodes} node{} on {racks} rack{}: the covariance ({DIMS} x {DIMS} sums), \
         the PCA to {d} dims, then at most {} EM steps (tol {}), each a map over the partitions",
        if nodes == 1 { "" } else { "s" },
        if racks == 1 { "" } else { "s" },
        m.iterations,
        m.tol
    );
    println!(
        "    {:<8} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "G", "broadcast", "sums", "map flop", "map s", "comm s"
    );
    let mut steps = Vec::new();
    for &g in &m.components {
        let g = g as u64;
        // The projection and the mixture go down; a component's weight and moments come back.
        let bcast = (DIMS * d + DIMS + d + 1 + g * (2 * d + 1)) * 8;
        let sums = g * (2 * d + 1) * 8;
        // Per vector: the projection, the log densities, the moments.
        let flops = 2.0 * n as f64 * (DIMS * d + 4 * g * d) as f64;
        let map_seconds =
            n as f64 * rates::EM_VECTOR_SECONDS * (g * d) as f64 / nodes.max(1) as f64;
        let seconds = (bcast as f64 + sums as f64 * nodes as f64) / link;
        steps.push((g, map_seconds, seconds));
        println!(
            "    {g:<8} {:>9} {:>9} {:>9.2e} {:>7.2} {:>7.2}",
            human(bcast as f64),
            human(sums as f64),
            flops,
            map_seconds,
            seconds
        );
    }
    steps
}

/// The k-means lines of the plan: per vocabulary size, what an iteration moves, computes and
/// holds on `nodes` nodes (on `racks` racks) of `tasks` map tasks, over links of `link` bytes/s.
/// Returns, per vocabulary size, the map and communication seconds of an iteration.
fn print_kmeans(
    config: &Config,
    n: u64,
    (nodes, racks): (u64, usize),
    tasks: u64,
    link: f64,
) -> Vec<(u64, f64, f64)> {
    let mut iterations = Vec::new();
    let km = &config.kmeans;
    println!(
        "  kmeans      {nodes} node{} on {racks} rack{}, {tasks} map tasks per node, up to {} \
         iterations",
        if nodes == 1 { "" } else { "s" },
        if racks == 1 { "" } else { "s" },
        km.iterations
    );
    println!(
        "    per iteration: bytes summed over the nodes (stage 2 with / without stage-1 \
         aggregation,\n    sparse pieces where a partial touches few centroids: an upper \
         estimate);\n    memory and partial sums per node"
    );
    println!(
        "    {:<8} {:>9} {:>21} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9}",
        "k",
        "broadcast",
        "stage 2 on / off",
        "stage 3",
        "map flop",
        "map s",
        "comm s",
        "memory",
        "partials"
    );
    let rate = rate_of(config.kmeans.assignment().unwrap_or_default());
    for &k in &km.k {
        let k = k as u64;
        let bcast = k * DIMS * 4;
        let per_node = n.div_ceil(nodes.max(1));
        let stage2_on = stage2_bytes(k, per_node, nodes, 1);
        let stage2_off = stage2_bytes(k, per_node.div_ceil(tasks.max(1)), nodes, tasks);
        let stage3 = k * (4 * DIMS + 8);
        // Distances per vector: every centroid, or (approximate) the coarse centres and the
        // members of the probed lists.
        let searched = match config
            .kmeans
            .assignment()
            .ok()
            .and_then(|a| a.approx(k as usize))
        {
            Some((lists, probes)) => {
                lists as f64 + probes.min(lists) as f64 * k as f64 / lists.max(1) as f64
            }
            None => k as f64,
        };
        let flops = 2.0 * n as f64 * searched * DIMS as f64;
        let memory = kmeans_memory(config, n, k, nodes, tasks);
        let seconds = (bcast as f64 + (nodes - 1) as f64 * 65536.0) / link
            + stage2_on as f64 / nodes.max(1) as f64 / link
            + stage3 as f64 / link;
        let map_seconds = flops / 2.0 / (nodes.max(1) as f64 * rate);
        iterations.push((k, map_seconds, seconds));
        println!(
            "    {k:<8} {:>9} {:>21} {:>9} {:>9.2e} {:>6.1} {:>6.1} {:>9} {:>9}",
            human(bcast as f64),
            format!("{} / {}", human(stage2_on as f64), human(stage2_off as f64)),
            human(stage3 as f64),
            flops,
            map_seconds,
            seconds,
            human(memory.total() as f64),
            human(memory.sums as f64)
        );
    }
    if let Some(&k) = km.k.iter().max() {
        let memory = kmeans_memory(config, n, k as u64, nodes, tasks);
        println!("    memory per node at k = {k}: {}", breakdown(&memory));
    }
    iterations
}

/// The encode and svm lines of the plan.
fn print_encode(config: &Config, engine: &Backend, nodes: u64, photos: u64) -> anyhow::Result<()> {
    let e = &config.encode;
    let words = if e.soft > 0 {
        format!(
            "toward its {} nearest words, weighted by distance (sharpness {})",
            e.soft, e.sharpness
        )
    } else {
        "to its nearest word".to_string()
    };
    let search = match e.assign {
        vocab_pipeline::kmeans::Search::Approx => "an inverted file over the words".to_string(),
        vocab_pipeline::kmeans::Search::Exact => format!("the {} kernel", e.kernel.name()),
    };
    if config.fisher() {
        println!(
            "  encode      every photo, dense patches every {} px, each projected onto {} \
             principal components and weighed by every Gaussian's posterior;",
            e.stride, config.mixture.pca_dims
        );
    } else {
        println!(
            "  encode      every photo, dense patches every {} px, each {words} by {search};",
            e.stride
        );
    }
    match e.method {
        vocab_pipeline::encode::Pooling::Bow => {
            println!(
                "    a {}-level pyramid, {} histograms",
                e.pyramid,
                e.norm.name()
            )
        }
        vocab_pipeline::encode::Pooling::Vlad => println!(
            "    a {}-level pyramid, VLAD vectors (each word's residual sum, 512 values a word and \
             cell; intra-normalised, signed square root, L2)",
            e.pyramid
        ),
        vocab_pipeline::encode::Pooling::Fisher => println!(
            "    a {}-level pyramid, Fisher vectors (gradients for each Gaussian's means and \
             variances, 2 d values a Gaussian and cell; signed square root, L2)",
            e.pyramid
        ),
    }
    if config.classify.mirror {
        println!("    and each trial's training photos mirrored left to right, alike");
    }
    let tasks = config.plan.map_tasks_per_node as u64;
    // (VLAD's sums grow with the words: the largest vocabulary's.)
    let largest = config.sizes().iter().copied().max().unwrap_or(0);
    let per_photo = config.encode_params()?.photo_memory_at(largest);
    println!(
        "    {tasks} photos at once a node, at most {} each, {} in all (described {} patches \
         at a time)",
        human(per_photo as f64),
        human(per_photo.saturating_mul(tasks) as f64),
        vocab_pipeline::features::STRIP
    );
    if engine.distributed() {
        // Binary histograms: a record head and a value per bin, per photo and vocabulary.
        let encoding = config.encode_params()?;
        let sizes: Vec<String> = (config.sizes().iter())
            .map(|&k| {
                let values = encoding.len(k);
                let bytes = photos * (RECORD_HEAD + 4 * values as u64);
                format!(
                    "{} at {} = {k}",
                    human(bytes as f64),
                    if config.fisher() { "G" } else { "k" }
                )
            })
            .collect();
        println!(
            "    on the {nodes} node{}; histograms come to the driver: {}",
            if nodes == 1 { "" } else { "s" },
            sizes.join(", ")
        );
    }
    let c = &config.classify;
    let map = match c.kernel_map.kernel() {
        Some(kernel) => format!(
            " through the {} kernel map (order {})",
            kernel.name(),
            c.map_order
        ),
        None => String::new(),
    };
    println!(
        "  svm         per vocabulary and attribute: linear SVMs ({}){map}, C from {} folds x \
         5 values on the training photos{}",
        match c.solver {
            vocab_pipeline::svm::Solver::Dcd => "dual coordinate descent",
            vocab_pipeline::svm::Solver::Linfa => "linfa-svm",
        },
        c.cv,
        if c.mirror {
            " and their mirror images (each in its photo's fold)"
        } else {
            ""
        }
    );
    println!(
        "  (comm s: link-bound seconds per iteration at {} Mbit/s per node, both directions at \
         once;\n   map flop: 2 x multiply-adds of the assignment, all nodes; map s: their seconds \
         on nodes\n   as fast as eval/paper_scale's 2 AVX2 cores: f32 {:.0}, int8 {:.0}, approximate \
         {:.0} G multiply-adds/s;\n   an iteration takes about map s + comm s)",
        config.plan.link_mbit,
        F32_RATE / 1e9,
        INT8_RATE / 1e9,
        APPROX_RATE / 1e9
    );
    Ok(())
}

/// Stage-2 bytes of one iteration, summed over `nodes` nodes that each ship `partials`
/// partials of `vectors` vectors: each partial sends a piece of every other node's range of
/// `k / nodes` centroids, dense or sparse, whichever is smaller (the wire layout of
/// `vocab_cluster::collective::aggregate`). The centroids a partial touches are estimated as if its vectors
/// fell uniformly on the `k` centroids, `k (1 - (1 - 1/k)^vectors)`: clustered data touches
/// fewer, so this is an upper estimate.
pub fn stage2_bytes(k: u64, vectors: u64, nodes: u64, partials: u64) -> u64 {
    if nodes < 2 || k == 0 {
        return 0;
    }
    let touched = k as f64 * (1.0 - (1.0 - 1.0 / k as f64).powf(vectors as f64));
    let range = k as f64 / nodes as f64;
    let dense = range * (DIMS + 1) as f64;
    let sparse = touched / nodes as f64 * (DIMS + 2) as f64;
    let piece = 8.0 * (1.0 + dense.min(sparse));
    (piece * (nodes * (nodes - 1) * partials) as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_two_counts_sparse_pieces_at_the_papers_shape() {
        // 742 vectors per map task and 1M centroids: a task touches at most 742 of them.
        let (k, nodes) = (1 << 20, 125);
        let dense = stage2_bytes(k, 1 << 30, nodes, 1);
        let sparse = stage2_bytes(k, 742, nodes, 1);
        let full = (nodes * (nodes - 1)) as f64 * 8.0 * (1.0 + (k * (DIMS + 1)) as f64 / 125.0);
        assert!(
            (dense as f64 - full).abs() < 1e-6 * full,
            "{dense} vs {full}"
        );
        assert!(
            sparse * 500 < dense,
            "sparse {sparse} is not 2.5 orders below dense {dense}"
        );
        // Few centroids, many vectors: every piece dense.
        assert_eq!(
            stage2_bytes(20, 1000, 4, 1),
            4 * 3 * 8 * (1 + 5 * (DIMS + 1))
        );
        assert_eq!(stage2_bytes(20, 1000, 1, 1), 0);
    }
}
