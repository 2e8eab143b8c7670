//! The MPI engine, run for real under `mpirun` (Open MPI, `--oversubscribe`): built and run only
//! with `--features mpi` (`.ci/run` installs Open MPI and runs these on every submission);
//! one module per topic, helpers in `util`.
#![cfg(feature = "mpi")]

mod commands;
mod kmeans;
mod run;
mod util;
