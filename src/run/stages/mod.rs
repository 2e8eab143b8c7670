//! The stages of `vocab run` behind `Stage` (`super::step`): each takes its settings from the config and its
//! inputs from the stages before it, and calls the command that runs it alone.
//!
//! Files: `sample` (features, partition), `words` (kmeans, encode), `join` (the parts'
//! encodings joined), `models` (svm).

mod join;
mod models;
mod sample;
mod words;

pub use self::join::*;
pub use self::models::*;
pub use self::sample::*;
pub use self::words::*;
