//! `vocab config check` and `vocab config show`.

use std::path::Path;

use anyhow::Context;

use crate::config::load;

/// `vocab config check FILE`.
pub fn check(args: &crate::cli::ExperimentArgs) -> anyhow::Result<()> {
    let path = args.config.as_path();
    let config = load(path)?;
    let dataset = match (
        &args.dataset,
        &config.dataset.path,
        &config.dataset.synthetic,
    ) {
        (Some(p), _, _) | (None, Some(p), _) => format!("photos in {}", p.display()),
        (None, None, Some(s)) => format!("synthetic set, {} photos per kind", s.per_kind),
        (None, None, None) => unreachable!("checked by load"),
    };
    // The dataset's checks read the labels; their errors name the config they came from.
    let overrides = super::dataset::Overrides::of(args);
    let data = super::check_dataset(&overrides, &config)
        .with_context(|| format!("invalid config {}", path.display()))?;
    println!(
        "config {}: ok ({dataset}; vocabularies k = {:?}; {}); {data}",
        path.display(),
        config.kmeans.k,
        if config.kmeans.nodes == 0 {
            "k-means in one process".to_string()
        } else {
            format!("k-means on {} loopback workers", config.kmeans.nodes)
        }
    );
    Ok(())
}

/// `vocab config show FILE`: the resolved config, every default filled in.
pub fn show(path: &Path) -> anyhow::Result<()> {
    let mut config = load(path)?;
    let from = super::fill_label_defaults(&mut config, path)
        .with_context(|| format!("invalid config {}", path.display()))?;
    let text = toml::to_string_pretty(&config).context("cannot print the config")?;
    let labels = match from {
        Some(labels) => format!(
            "[classify] attributes and split_by from {}",
            labels.display()
        ),
        None => "the photos are not here: [classify] attributes (every label column but path) \
                 and split_by (the first attribute) come from their labels when it runs"
            .into(),
    };
    println!(
        "# {} with every default filled in ({labels})\n{text}",
        path.display()
    );
    Ok(())
}
