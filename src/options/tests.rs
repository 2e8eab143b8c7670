//! One default per value: a command given only what it requires has exactly the defaults of an
//! empty config section, and those are the library's where the library has them.

use clap::Parser;
use serde::de::DeserializeOwned;

use super::*;
use crate::cli::{Cli, Command, DatasetsCommand};

/// `vocab ARGS...` parsed.
fn parse(args: &[&str]) -> Command {
    let mut all = vec!["vocab"];
    all.extend(args);
    Cli::try_parse_from(all).expect("parses").command
}

/// An empty config section, read as a config would read it.
fn empty<T: DeserializeOwned>() -> T {
    toml::from_str("").expect("an empty section is its defaults")
}

#[test]
fn kmeans_flags_and_section_share_their_defaults() {
    let Command::Kmeans(args) = parse(&["kmeans", "--features", "f", "--k", "4", "--out", "v"])
    else {
        panic!("vocab kmeans");
    };
    assert_eq!(args.options, KmeansOptions::default());
    assert_eq!(empty::<KmeansOptions>(), KmeansOptions::default());
    // The section's keys that are the command's team flags.
    assert_eq!(args.team.broadcast, args.options.broadcast);
    assert_eq!(args.team.order, args.options.order);
    assert_eq!(
        !args.team.no_local_aggregation,
        args.options.local_aggregation
    );
    let library = vocab_pipeline::kmeans::Params::default();
    let o = &args.options;
    assert_eq!(
        (o.iterations, o.tol, o.seed),
        (library.max_iter, library.tol, library.seed)
    );
    assert_eq!(o.assignment().expect("valid"), library.assignment);
}

#[test]
fn mixture_flags_and_section_share_their_defaults() {
    let Command::Mixture(args) = parse(&["mixture", "--features", "f", "--out", "m.json"]) else {
        panic!("vocab mixture");
    };
    assert_eq!(args.options, MixtureOptions::default());
    assert_eq!(empty::<MixtureOptions>(), MixtureOptions::default());
    assert_eq!(args.options.components, vec![args.components]);
    // The mixture `vocab mixture` learns by default is the library's, and a run's.
    let library = vocab_pipeline::mixture::Params::default();
    assert_eq!(args.options.params(args.components), library);
}

#[test]
fn features_flags_and_section_share_their_defaults() {
    let Command::Features(args) = parse(&["features", "--input", "p", "--out", "f.bin"]) else {
        panic!("vocab features");
    };
    assert_eq!(args.sample, FeaturesOptions::default());
    assert_eq!(empty::<FeaturesOptions>(), FeaturesOptions::default());
}

#[test]
fn encode_flags_and_section_share_their_defaults() {
    let Command::Encode(args) =
        parse(&["encode", "--vocabulary", "v", "--input", "p", "--out", "h"])
    else {
        panic!("vocab encode");
    };
    assert_eq!(args.options, EncodeOptions::default());
    assert_eq!(empty::<EncodeOptions>(), EncodeOptions::default());
}

#[test]
fn train_flags_and_section_share_their_defaults() {
    let Command::Train(args) = parse(&[
        "train",
        "--histograms",
        "h",
        "--labels",
        "l.csv",
        "--attribute",
        "a",
        "--out",
        "m",
    ]) else {
        panic!("vocab train");
    };
    assert_eq!(args.options, ClassifyOptions::default());
    assert_eq!(empty::<ClassifyOptions>(), ClassifyOptions::default());
}

#[test]
fn synthetic_flags_and_section_share_their_defaults() {
    let Command::Datasets(DatasetsCommand::Photos(args)) =
        parse(&["datasets", "photos", "--out", "p"])
    else {
        panic!("vocab datasets photos");
    };
    assert_eq!(args.set, SyntheticOptions::default());
    assert_eq!(empty::<SyntheticOptions>(), SyntheticOptions::default());
}

#[test]
fn partition_element_is_one_default() {
    let Command::Partition(args) = parse(&["partition", "--features", "f", "--out", "p"]) else {
        panic!("vocab partition");
    };
    let section: crate::config::PartitionConfig = empty();
    assert_eq!(args.element, section.element);
    // `parts` differs on purpose: the command's follows the machine's cores, a config's is
    // fixed so that its partitions (and cached steps) are the same on every machine.
    assert_eq!(args.parts, None);
}
