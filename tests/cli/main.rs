//! The `vocab` binary, run for real in temporary folders; one module per topic, helpers in
//! `util` (as ripgrep's tests are laid out).

mod bound;
mod classify;
mod cluster;
mod datasets;
mod encode;
mod features;
mod formats;
mod hardening;
mod kmeans;
mod mixture;
mod network;
mod outputs;
mod placement;
mod protocol;
mod recover;
mod run;
mod util;
mod walkthrough;
mod words;
