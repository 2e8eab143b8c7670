//! The synchronous stages of vocab: photo collections, patch sampling, the 512-d HOG descriptor and
//! feature files.
//!
//! Nothing here knows about sockets or async runtimes; the `cluster` crate calls into this crate
//! for the math, and the `vocab` binary wires stages to the command line.

#![deny(missing_docs)]

pub mod atomic;
pub mod classify;
pub mod encode;
pub mod features;
pub mod hog;
pub mod image_io;
pub mod kernel_map;
pub mod kmeans;
pub mod partition;
pub mod patch;
pub mod store;
pub mod svm;
pub mod synth;
