//! Which labelled photos a model trains on and which it is tested on.

use vocab_pipeline::classify::{SplitSpec, Table};

use crate::settings::{Split, TrainSettings};

/// `(row index, class index)` pairs of labelled photos.
pub(super) type Pairs = Vec<(usize, usize)>;

/// Labelled rows of `table` split into (train, test) index lists of `(row, class)`.
pub(super) fn split_rows(
    table: &Table,
    pairs: &[(usize, usize)],
    split: &SplitSpec,
) -> (Pairs, Pairs) {
    let paths: Vec<&str> = pairs
        .iter()
        .map(|&(i, _)| table.paths[i].as_str())
        .collect();
    let classes: Vec<usize> = pairs.iter().map(|&(_, c)| c).collect();
    let mut train = Vec::new();
    let mut test = Vec::new();
    for (&pair, is_train) in pairs.iter().zip(split.is_train(&paths, &classes)) {
        if is_train {
            train.push(pair)
        } else {
            test.push(pair)
        }
    }
    (train, test)
}

/// The split `vocab train` is asked for: a split file, a random holdout drawn with
/// `--split-seed`, or every photo.
pub(super) fn spec_of(args: &TrainSettings) -> anyhow::Result<SplitSpec> {
    Ok(match &args.split {
        Split::File(path) => SplitSpec::from_file(path)?,
        &Split::Holdout(holdout) => SplitSpec::Random {
            seed: args.split_seed,
            holdout,
        },
        Split::All => SplitSpec::All,
    })
}
