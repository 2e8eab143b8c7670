//! What the fixture tests share: a little-endian cursor over a fixture file made by a script
//! under `eval/` (`parity.rs`: scikit-image's HOG; `sift_parity.rs`: OpenCV's SIFT).

// Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::path::Path;

/// Little-endian cursor over a fixture file.
pub struct Cursor {
    bytes: Vec<u8>,
    at: usize,
}

impl Cursor {
    /// The whole file at `path`.
    pub fn open(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self { bytes, at: 0 }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        s
    }

    /// The next `u32`, as a count or index.
    pub fn u32(&mut self) -> usize {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes")) as usize
    }

    /// The next `n` `f32`s.
    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.take(4 * n)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4")))
            .collect()
    }

    /// The next `n` `f64`s.
    pub fn f64s(&mut self, n: usize) -> Vec<f64> {
        self.take(8 * n)
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8")))
            .collect()
    }

    /// Whether the whole file has been read.
    pub fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}
