//! The plan's lines on the encodings and the models: how every photo is encoded, what it holds
//! while encoding, what comes to the driver, and the SVMs trained on the encodings.

use super::cost::RECORD_HEAD;
use crate::config::Config;
use crate::memory::human;
use crate::settings::Backend;

/// The encode lines of the plan.
pub(super) fn print_encode(
    config: &Config,
    engine: &Backend,
    nodes: u64,
    photos: u64,
) -> anyhow::Result<()> {
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
    // `[features] patch`: the photos enlarged (or shrunk) for it, the stride in their pixels.
    let photo = match e.patch {
        Some(patch) => format!(
            "every photo resized {:.3}x ({patch}-px patches)",
            vocab_pipeline::hog::PATCH_SIDE as f64 / patch as f64
        ),
        None => "every photo".to_string(),
    };
    if config.fisher() {
        println!(
            "  encode      {photo}, dense patches every {} px, each projected onto {} \
             principal components and weighed by every Gaussian's posterior;",
            e.stride, config.mixture.pca_dims
        );
    } else {
        println!(
            "  encode      {photo}, dense patches every {} px, each {words} by {search};",
            e.stride
        );
    }
    let pyramid = match e.strips {
        0 => format!("a {}-level pyramid", e.pyramid),
        n => format!("a {}-level pyramid and {n} horizontal strips", e.pyramid),
    };
    match e.method {
        vocab_pipeline::encode::Pooling::Bow => {
            println!("    {pyramid}, {} histograms", e.norm.name())
        }
        vocab_pipeline::encode::Pooling::Vlad => println!(
            "    {pyramid}, VLAD vectors (each word's residual sum, 512 values a word and cell; \
             intra-normalised, signed square root, L2)"
        ),
        vocab_pipeline::encode::Pooling::Fisher => println!(
            "    {pyramid}, Fisher vectors (gradients for each Gaussian's means and variances, 2 \
             d values a Gaussian and cell; signed square root, L2)"
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
    Ok(())
}

/// The svm line of the plan.
pub(super) fn print_svm(config: &Config) {
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
}
