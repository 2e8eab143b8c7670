//! The synchronous stages and math of vocab: photo collections, patch sampling, the 512-d HOG
//! descriptor, feature files and partitions, k-means (its kernels, pruning, approximate search
//! and the one fit loop every engine runs), encodings (bag of words behind the method seam),
//! kernel maps and the linear SVMs.
//!
//! Nothing here knows about sockets or async runtimes; the `cluster` crate calls into this crate
//! for the math, and the `vocab` binary wires stages to the command line (the value enums carry
//! `clap::ValueEnum` behind the `clap` feature).

#![deny(missing_docs)]

pub mod atomic;
pub mod classify;
pub mod describe;
pub mod descriptors;
pub mod encode;
pub mod features;
pub mod hog;
pub mod image_io;
pub mod input;
pub mod isa;
pub mod join;
pub mod kernel_map;
pub mod kmeans;
pub mod mixture;
pub mod montage;
pub mod output;
pub mod params;
pub mod partition;
pub mod patch;
pub mod scene15;
pub mod sift;
pub mod store;
pub mod svm;
pub mod synth;

/// An error and its causes on one line (`cannot read x.bin: No such file or directory`), for
/// errors that travel as text (over the wire, into logs). Error messages here name their own
/// subject and leave the cause to `source()`, so printing the chain says each thing once.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chain_names_each_cause_once() {
        let err = crate::store::StoreError::Io {
            path: "x.bin".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file"),
        };
        assert_eq!(super::chain(&err), "x.bin: No such file");
    }
}
