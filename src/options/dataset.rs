//! `[dataset.synthetic]` and `vocab datasets photos`: the generated photo set.

use serde::{Deserialize, Serialize};

/// The synthetic photo set: `vocab datasets photos`' options and a config's
/// `[dataset.synthetic]`, the same type.
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticOptions {
    /// Photos per scene kind.
    #[arg(long, value_name = "N", default_value_t = SyntheticOptions::default().per_kind)]
    pub per_kind: usize,
    /// Seed of the generator.
    #[arg(long, value_name = "S", default_value_t = SyntheticOptions::default().seed,
          value_parser = super::parse_seed)]
    pub seed: u64,
}

impl Default for SyntheticOptions {
    fn default() -> Self {
        Self {
            per_kind: 10,
            seed: 7,
        }
    }
}
