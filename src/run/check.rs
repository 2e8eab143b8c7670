//! `vocab config check` and `vocab config show`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::dataset::{Overrides, Source};
use super::protocol::Protocol;
use crate::config::{Config, load};

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
    let data = check_dataset(&overrides, &config)
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
    let from = fill_label_defaults(&mut config, path)
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

/// `vocab config check`'s look at the data: the sizes of the config's dataset checked, when it
/// is at hand here; what was checked, for people.
pub fn check_dataset(overrides: &Overrides<'_>, config: &Config) -> anyhow::Result<String> {
    let base = overrides.config.parent().unwrap_or(Path::new("."));
    let source = match Source::resolve(config, base, overrides) {
        Ok(source) => source,
        // Photos named on the command line must be there; the config's may be elsewhere.
        Err(e)
            if overrides.dataset.is_some()
                || overrides.labels.is_some()
                || overrides.test.is_some() =>
        {
            return Err(e);
        }
        Err(e) => return Ok(format!("photos not checked: {e:#}")),
    };
    let protocol = Protocol::resolve(config, base, overrides, source.folder())?;
    let engine = super::engine(config, base, None, None, None)?;
    let labels_text = source.labels_text()?;
    let counted = super::protocol::count(config, &source, &labels_text, &protocol)?;
    if let (Some((test, test_labels)), Source::Folder { labels, .. }) =
        (protocol.test_folder(), &source)
    {
        super::protocol::check_test_labels(&counted.attributes, labels, test_labels)?;
        // Its photos as a run would find them: paths inside the test folder only.
        vocab_pipeline::image_io::Collection::open(test, Some(test_labels))
            .context("checking the test folder's labels before the first stage")?;
    }
    crate::plan::check_sizes(config, &engine, counted.training)?;
    Ok(format!(
        "{} photos, {} train the vocabulary; {}",
        counted.photos,
        counted.training,
        protocol.describe(
            &counted.split_by,
            source.folder().unwrap_or(Path::new("the synthetic set"))
        )
    ))
}

/// Fills in the defaults of `config` that its labels decide (`[classify] attributes`: every
/// column but `path`; `split_by`: the first attribute) as `vocab run` would; returns the labels
/// read, or `None` when the config's photos are not at hand.
pub fn fill_label_defaults(config: &mut Config, path: &Path) -> anyhow::Result<Option<PathBuf>> {
    let base = path.parent().unwrap_or(Path::new("."));
    let overrides = Overrides {
        config: path,
        dataset: None,
        labels: None,
        test: None,
        test_labels: None,
        test_from: None,
    };
    let Ok(source) = Source::resolve(config, base, &overrides) else {
        return Ok(None);
    };
    let (attributes, split_by) =
        super::protocol::columns(config, &source.labels_name(), &source.labels_text()?)?;
    config.classify.attributes = attributes;
    config.classify.split_by = Some(split_by);
    Ok(Some(match &source {
        Source::Folder { labels, .. } => labels.clone(),
        Source::Synthetic(_) => PathBuf::from("the synthetic set's labels.csv"),
    }))
}
