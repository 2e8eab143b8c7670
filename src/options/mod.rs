//! One options type per stage, shared by the command line and the configs: each is a clap
//! `Args` (flattened into its command, beside what only the command takes) and a config section
//! (`deny_unknown_fields`), and its `Default` is the one place its defaults are written, taken
//! from the library's `Params::default()` where the library has one. Keys a config has and the
//! command does not (a list of sizes, where the run's nodes are) are `#[arg(skip)]`; flags only
//! the command has are `#[serde(skip)]`. `crate::settings` checks them into the library's
//! parameters, once. The choices themselves (norm, kernel, search, element, ...) are the
//! libraries' enums, clap value enums and TOML values both (their `clap` feature). Imports
//! nothing of the binary, so `cli`, `config` and `settings` can all lean on it.

mod classify;
mod dataset;
mod encode;
mod features;
mod kmeans;
mod mixture;
mod values;

pub use classify::{ClassifyOptions, DEFAULT_C_GRID};
pub use dataset::SyntheticOptions;
pub use encode::EncodeOptions;
pub use features::FeaturesOptions;
pub use kmeans::KmeansOptions;
pub use mixture::MixtureOptions;
pub use values::parse_seed;

/// Default pixel limit of the photo stages, in megapixels.
pub const DEFAULT_MAX_MPIX: u64 = vocab_pipeline::image_io::MAX_PIXELS / 1_000_000;

/// Lists the approximate search visits per vector unless told.
pub const DEFAULT_PROBES: u32 = vocab_pipeline::kmeans::approx::DEFAULT_PROBES;

/// Whether `probes` is the default (left out of serialized settings, so keys stay the same).
pub(crate) fn is_default_probes(probes: &u32) -> bool {
    *probes == DEFAULT_PROBES
}

pub(crate) fn is_default_mpix(v: &u64) -> bool {
    *v == DEFAULT_MAX_MPIX
}

/// Whether `v` is its type's default (left out of serialized settings).
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

#[cfg(test)]
mod tests;
