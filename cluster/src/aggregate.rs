//! The aggregation stages' data: centroid ranges, the byte layout of partial sums on the wire,
//! the stage-2 range accumulator and the stage-3 result.
//!
//! Stage 2 (group-by): the centroid ids are cut into one contiguous range per worker; worker `j`
//! receives range `j` of every worker's partial sums and adds them up. The sums are exact
//! fixed-point integers, so chunks are added the moment they arrive, in any order, and the
//! accumulator is the only buffer: a worker's stage-2 memory is its range, not `k x workers`.
//!
//! Wire layout of a range `[start, end)` of `r` centroids from `t` partials: for each partial, `r`
//! counts (`u64`) then `r x dims` sums (`i64`), little-endian. Stage 3 ships a reduced range as
//! `r` counts (`u64`) then `r x dims` means (`f32`).

use std::ops::Range;

use vocab_pipeline::kmeans::Partial;
use vocab_pipeline::kmeans::partial::means;

/// Bytes of partial sums or results that do not fit where they are added or placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggregateError {
    /// A chunk that does not start or end on a value.
    #[error("a chunk of {len} bytes at byte {offset} is not aligned to {align}")]
    Misaligned {
        /// Byte offset of the chunk.
        offset: u64,
        /// Its length.
        len: usize,
        /// The value size it must be a multiple of.
        align: usize,
    },
    /// Data sent for a range of no centroids.
    #[error("data for an empty range")]
    EmptyRange,
    /// A count split between two chunks.
    #[error("a count straddles a chunk at byte {at}")]
    Straddle {
        /// Byte offset.
        at: u64,
    },
    /// Data beyond the range's end.
    #[error("data past the range at byte {at}")]
    PastRange {
        /// Byte offset.
        at: u64,
    },
}

/// The centroid range of worker `j` of `workers`: `[k j / w, k (j + 1) / w)`.
pub fn range_of(k: usize, workers: usize, j: usize) -> Range<usize> {
    (k * j / workers)..(k * (j + 1) / workers)
}

/// Bytes of range `r` of each of `partials`, in the wire layout.
pub fn encode_range(partials: &[Partial], r: Range<usize>) -> Vec<u8> {
    let dims = partials.first().map_or(0, Partial::dims);
    let mut out = Vec::with_capacity(partials.len() * r.len() * (dims + 1) * 8);
    for p in partials {
        for &c in &p.counts[r.clone()] {
            out.extend_from_slice(&c.to_le_bytes());
        }
        for &s in &p.sums[r.start * dims..r.end * dims] {
            out.extend_from_slice(&s.to_le_bytes());
        }
    }
    out
}

/// Length of [`encode_range`]'s output; saturates at `u64::MAX` (sizes announced by a peer
/// are compared with it, so a hostile header cannot make it overflow).
pub fn range_len(tasks: usize, centroids: usize, dims: usize) -> u64 {
    (tasks as u64)
        .saturating_mul(centroids as u64)
        .saturating_mul((dims as u64).saturating_add(1))
        .saturating_mul(8)
}

/// Stage-2 accumulator of one range.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSum {
    /// First centroid.
    pub start: usize,
    /// Values per centroid.
    pub dims: usize,
    /// Counts of the range's centroids.
    pub counts: Vec<u64>,
    /// Sums (`centroids x dims`).
    pub sums: Vec<i64>,
}

impl RangeSum {
    /// An empty accumulator for `r`.
    pub fn new(r: Range<usize>, dims: usize) -> Self {
        Self {
            start: r.start,
            dims,
            counts: vec![0; r.len()],
            sums: vec![0; r.len() * dims],
        }
    }

    /// Centroids in the range.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Adds the range of a partial held in memory (the worker's own contribution).
    pub fn add_partial(&mut self, p: &Partial) {
        let r = self.start..self.start + self.len();
        vocab_pipeline::kmeans::partial::add_sums(&mut self.counts, &p.counts[r.clone()]);
        vocab_pipeline::kmeans::partial::add_sums(
            &mut self.sums,
            &p.sums[r.start * self.dims..r.end * self.dims],
        );
    }

    /// Adds a chunk at byte `offset` of a blob in the wire layout (`offset` and the length must
    /// be multiples of 8).
    pub fn add_chunk(&mut self, offset: u64, data: &[u8]) -> Result<(), AggregateError> {
        if offset % 8 != 0 || data.len() % 8 != 0 {
            return Err(AggregateError::Misaligned {
                offset,
                len: data.len(),
                align: 8,
            });
        }
        let per_task = self.len() * (self.dims + 1);
        if per_task == 0 {
            return Err(AggregateError::EmptyRange);
        }
        let (first, r) = ((offset / 8) as usize, self.len());
        for (i, bytes) in data.chunks_exact(8).enumerate() {
            let at = (first + i) % per_task;
            let word: [u8; 8] = bytes.try_into().map_err(|_| AggregateError::Misaligned {
                offset,
                len: data.len(),
                align: 8,
            })?;
            if at < r {
                self.counts[at] += u64::from_le_bytes(word);
            } else {
                self.sums[at - r] += i64::from_le_bytes(word);
            }
        }
        Ok(())
    }

    /// Stage-3 bytes: counts then the means of the range.
    pub fn encode_result(&self, scale: i32) -> Vec<u8> {
        let m = means(&self.sums, &self.counts, self.dims, scale);
        let mut out = Vec::with_capacity(self.len() * 8 + m.len() * 4);
        for &c in &self.counts {
            out.extend_from_slice(&c.to_le_bytes());
        }
        for v in m {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// Length of [`RangeSum::encode_result`]'s output for `centroids` of `dims`.
pub fn result_len(centroids: usize, dims: usize) -> u64 {
    (centroids * 8 + centroids * dims * 4) as u64
}

/// Writes a stage-3 chunk at byte `offset` of the result of range `[start, start + r)` into the
/// driver's `counts` (all `k`) and `means` (`k x dims`).
pub fn place_result(
    counts: &mut [u64],
    means: &mut [f32],
    start: usize,
    r: usize,
    dims: usize,
    offset: u64,
    data: &[u8],
) -> Result<(), AggregateError> {
    let misaligned = || AggregateError::Misaligned {
        offset,
        len: data.len(),
        align: 4,
    };
    if offset % 4 != 0 || data.len() % 4 != 0 {
        return Err(misaligned());
    }
    let mut at = offset as usize;
    let mut rest = data;
    let count_bytes = r * 8;
    while !rest.is_empty() {
        if at < count_bytes {
            let take = 8.min(rest.len());
            if take < 8 || at % 8 != 0 {
                return Err(AggregateError::Straddle { at: at as u64 });
            }
            let word: [u8; 8] = rest[..8].try_into().map_err(|_| misaligned())?;
            counts[start + at / 8] = u64::from_le_bytes(word);
            rest = &rest[8..];
            at += 8;
        } else {
            let idx = (at - count_bytes) / 4;
            if idx >= r * dims {
                return Err(AggregateError::PastRange { at: at as u64 });
            }
            let word: [u8; 4] = rest[..4].try_into().map_err(|_| misaligned())?;
            means[start * dims + idx] = f32::from_le_bytes(word);
            rest = &rest[4..];
            at += 4;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vocab_pipeline::partition::Matrix;

    fn partial(seed: u32, k: usize, dims: usize) -> Partial {
        let rows = 7;
        let x: Vec<f32> = (0..rows * dims)
            .map(|i| {
                (((i as u32).wrapping_mul(2_654_435_761u32) ^ seed) % 1000) as f32 / 97.0 - 5.0
            })
            .collect();
        let labels: Vec<u32> = (0..rows as u32)
            .map(|i| (i * 3 + seed) % k as u32)
            .collect();
        let mut p = Partial::new(k, dims, 30);
        p.accumulate(u64::from(seed), Matrix::dense(&x, dims), &labels, &[1.0; 7]);
        p
    }

    #[test]
    fn announced_sizes_saturate_instead_of_overflowing() {
        assert_eq!(range_len(2, 3, 4), 2 * 3 * 5 * 8);
        assert_eq!(range_len(usize::MAX, 2, 3), u64::MAX);
        assert_eq!(range_len(1, 1, usize::MAX), u64::MAX);
    }

    #[test]
    fn ranges_tile_the_centroids() {
        for (k, w) in [(1, 1), (10, 3), (3, 4), (1000, 7)] {
            let mut next = 0;
            for j in 0..w {
                let r = range_of(k, w, j);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, k);
        }
    }

    #[test]
    fn chunked_stage_two_equals_the_merge_in_any_chunking() {
        let (k, dims) = (9, 3);
        let partials: Vec<Partial> = (0..4).map(|s| partial(s, k, dims)).collect();
        let mut merged = Partial::new(k, dims, 30);
        partials.iter().for_each(|p| merged.merge(p));
        for workers in [1, 2, 4] {
            for j in 0..workers {
                let r = range_of(k, workers, j);
                // Two senders: one ships its partials unmerged (stage 1 off), one merged.
                let mut first_two = Partial::new(k, dims, 30);
                partials[..2].iter().for_each(|p| first_two.merge(p));
                let a = encode_range(&partials[2..], r.clone());
                let b = encode_range(std::slice::from_ref(&first_two), r.clone());
                assert_eq!(a.len() as u64, range_len(2, r.len(), dims));
                let mut acc = RangeSum::new(r.clone(), dims);
                for chunk in [8usize, 16, 40] {
                    acc = RangeSum::new(r.clone(), dims);
                    for blob in [&b, &a] {
                        for (i, c) in blob.chunks(chunk).enumerate() {
                            acc.add_chunk((i * chunk) as u64, c).expect("add");
                        }
                    }
                }
                assert_eq!(acc.counts, merged.counts[r.clone()]);
                assert_eq!(acc.sums, merged.sums[r.start * dims..r.end * dims]);
                // Stage 3 places the range's means where the full update would put them.
                let result = acc.encode_result(30);
                assert_eq!(result.len() as u64, result_len(r.len(), dims));
                let (mut counts, mut m) = (vec![0u64; k], vec![0f32; k * dims]);
                for (i, c) in result.chunks(16).enumerate() {
                    place_result(
                        &mut counts,
                        &mut m,
                        r.start,
                        r.len(),
                        dims,
                        (i * 16) as u64,
                        c,
                    )
                    .expect("place");
                }
                let want = means(&merged.sums, &merged.counts, dims, 30);
                assert_eq!(
                    &m[r.start * dims..r.end * dims],
                    &want[r.start * dims..r.end * dims]
                );
            }
        }
        assert!(matches!(
            RangeSum::new(0..2, 3).add_chunk(4, &[0; 8]),
            Err(AggregateError::Misaligned { offset: 4, .. })
        ));
    }
}
