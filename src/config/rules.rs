//! The rules of a config that span keys and sections, each naming the key and its line.

use vocab_pipeline::features::Descriptor;

use super::*;

/// One patch side (`[features] patch`) and one descriptor (`[features] descriptor`) for the
/// sample and the encoding alike (`[encode]`'s only as `config show` says them).
pub(super) fn described_alike(config: &mut Config, at: &ConfigText) -> anyhow::Result<()> {
    let why = |key: &str| {
        format!("the encoding describes photos as the sample did: set {key} in [features] alone")
    };
    if config.encode.patch.is_some() && config.encode.patch != config.features.patch {
        return Err(at.fail("encode", "patch", &why("patch")));
    }
    config.encode.patch = config.features.patch;
    if config.encode.descriptor != Descriptor::Hog
        && config.encode.descriptor != config.features.descriptor
    {
        return Err(at.fail("encode", "descriptor", &why("descriptor")));
    }
    config.encode.descriptor = config.features.descriptor;
    Ok(())
}

/// `[dataset]`: a photo folder or the synthetic set, not both, and the synthetic set's own
/// rules.
pub(super) fn dataset_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let d = &config.dataset;
    match (&d.path, &d.synthetic) {
        (Some(_), Some(_)) => {
            return Err(at.fail(
                "dataset",
                "synthetic",
                "`path` and `synthetic` both given; choose one",
            ));
        }
        (None, None) => bail!(
            "invalid config {}: [dataset] needs `path` (a photo folder) or `synthetic`",
            at.path.display()
        ),
        _ => {}
    }
    if let Some(s) = &d.synthetic {
        settings::PhotoSetSettings::new(Path::new(""), s.per_kind, s.seed)
            .map_err(|e| at.invalid("dataset", e))?;
    }
    Ok(())
}

/// `[features]` and `[partition]`: the patch sample's and its partitions' own rules.
pub(super) fn sample_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    config
        .features
        .params()
        .map_err(|e| at.invalid("features", e))?;
    settings::PartitionSettings::new(
        Path::new(""),
        Path::new(""),
        Some(config.partition.parts),
        config.partition.element,
    )
    .map_err(|e| at.invalid("partition", e))?;
    // vocab mirrors a photo before describing it; descriptors made elsewhere would need files
    // of the mirrored photos.
    if config.features.from.is_some() && config.classify.mirror {
        return Err(at.fail(
            "features",
            "from",
            "no mirror images of descriptors made elsewhere (their files describe the photos as \
             they are): drop [classify] mirror",
        ));
    }
    Ok(())
}

/// `[kmeans] nodes`, then the dictionaries the run learns: `[mixture] components` for Fisher
/// vectors, else `[kmeans] k`, at least one size and every size by its stage's rules.
pub(super) fn dictionary_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let km = &config.kmeans;
    if km.nodes > 0 {
        settings::Backend::of(None, None, Some(km.nodes)).map_err(|e| {
            // `--local-nodes` on the command line, `nodes` here.
            at.invalid("kmeans", settings::Invalid { key: "nodes", ..e })
        })?;
    }
    if config.fisher() {
        let m = &config.mixture;
        if m.components.is_empty() {
            return Err(at.fail("mixture", "components", "list mixture sizes of at least 1"));
        }
        for &g in &m.components {
            // The photos' descriptors: no more principal components than a descriptor's
            // values (the count of vectors is known only when the sample is).
            // Descriptors made elsewhere: their dimension is known when their files are read.
            let dims = match config.features.from {
                Some(_) => vocab_pipeline::descriptors::MAX_DIMS,
                None => config.features.descriptor.dims(),
            };
            m.params(g)
                .check_for(u64::MAX, dims)
                .map_err(|e| at.invalid("mixture", settings::Invalid::from(e)))?;
        }
    } else {
        if km.k.is_empty() {
            return Err(at.fail("kmeans", "k", "list vocabulary sizes of at least 1"));
        }
        let assignment = km.assignment().map_err(|e| at.invalid("kmeans", e))?;
        for &k in &km.k {
            settings::kmeans_rules(k, (km.iterations, km.tol), Some(km.init), assignment)
                .map_err(|e| at.invalid("kmeans", e))?;
        }
    }
    Ok(())
}

/// `[encode]`: the encoding's rules, with those that need the dictionary's size (VLAD's and
/// Fisher vectors' lengths) for every size, before any is learned.
pub(super) fn encode_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let encoding = config
        .encode_params()
        .map_err(|err| at.invalid("encode", err))?;
    for &k in config.sizes() {
        encoding
            .check(Some(k))
            .map_err(|err| at.invalid("encode", settings::Invalid::from(err)))?;
    }
    Ok(())
}

/// `[classify]`: the SVMs' and the protocol's rules (and `[dataset] test_labels` only with the
/// test folder the protocol scores), a kernel map only over L1-normalised histograms, and no
/// attribute named `path`.
pub(super) fn classify_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let (d, e) = (&config.dataset, &config.encode);
    let cv = (config.classify.cv, config.classify.c_grid.as_slice());
    settings::svm_rules(None, cv, config.classify.map_order)
        .map_err(|e| at.invalid("classify", e))?;
    let c = &config.classify;
    settings::protocol_rules(c.trials, c.train_per_class, d.test.is_some())
        .map_err(|e| at.invalid("classify", e))?;
    if d.test_labels.is_some() && d.test.is_none() {
        return Err(at.fail(
            "dataset",
            "test_labels",
            "names the labels of a test folder: set `test` too",
        ));
    }
    if config.classify.kernel_map != Mapping::None && e.norm != Norm::L1 {
        return Err(at.fail(
            "classify",
            "kernel_map",
            "takes L1-normalised histograms: set [encode] norm = \"l1\"",
        ));
    }
    if config.classify.kernel_map != Mapping::None
        && e.method != vocab_pipeline::encode::Pooling::Bow
    {
        return Err(at.fail(
            "classify",
            "kernel_map",
            &format!(
                "takes histograms, and [encode] method = \"{}\" makes signed vectors normalised \
                 for a linear SVM: drop the kernel map",
                e.method.name()
            ),
        ));
    }
    if config.classify.attributes.iter().any(|a| a == "path") {
        return Err(at.fail(
            "classify",
            "attributes",
            "`path` is the photo column, not an attribute",
        ));
    }
    Ok(())
}

/// `[plan]`: a positive link rate, and map tasks per node from 1 to the threads a node runs.
pub(super) fn plan_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    if config.plan.link_mbit.is_nan()
        || config.plan.link_mbit <= 0.0
        || config.plan.map_tasks_per_node == 0
    {
        return Err(at.fail(
            "plan",
            "link_mbit",
            "link_mbit and map_tasks_per_node must be positive",
        ));
    }
    if config.plan.map_tasks_per_node > settings::MAX_THREADS {
        return Err(at.fail(
            "plan",
            "map_tasks_per_node",
            &format!(
                "must be at most {} (threads a node runs)",
                settings::MAX_THREADS
            ),
        ));
    }
    Ok(())
}

/// `[[join]]`: up to [`vocab_pipeline::encode::MAX_PARTS`] parts in all, none beside
/// descriptors made elsewhere, each part's sample and encoding by their own rules.
pub(super) fn join_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    if config.join.is_empty() {
        return Ok(());
    }
    let most = vocab_pipeline::encode::MAX_PARTS;
    if config.join.len() + 1 > most {
        let why = format!("at most {} parts joined with the run's own", most - 1);
        return Err(at.fail("join", "descriptor", &why));
    }
    if config.features.from.is_some() {
        let why = "descriptors made elsewhere are not joined with others: drop [[join]] or from";
        return Err(at.fail("features", "from", why));
    }
    for part in config.parts().iter().skip(1) {
        let checked = part
            .features
            .params()
            .map(drop)
            .and_then(|()| part.encode_params().map(drop));
        if let Err(e) = checked {
            return Err(at.fail("join", e.key, &e.to_string()));
        }
        // Its dictionaries' rules over its own descriptor (a mixture's principal components).
        dictionary_rules(part, at).map_err(|e| {
            let descriptor = part.features.descriptor.name();
            e.context(format!("the [[join]] part of {descriptor}"))
        })?;
    }
    Ok(())
}
