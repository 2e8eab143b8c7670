//! The `vocab` binary, run for real in temporary folders; one module per topic, helpers in
//! `util` (as ripgrep's tests are laid out).

mod batch;
mod bound;
mod classify;
mod clean;
mod cluster;
mod datasets;
mod descriptors;
mod encode;
mod features;
mod formats;
mod join;
mod kept_inputs;
mod kmeans;
mod limits;
mod mistakes;
mod mixture;
mod models;
mod network;
mod outputs;
mod placement;
mod plan;
mod protocol;
mod recover;
mod resume;
mod run;
mod secrets;
mod sift;
mod up_front;
mod util;
mod vlad_fisher;
mod walkthrough;
mod words;
