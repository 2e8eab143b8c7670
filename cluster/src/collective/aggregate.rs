//! The aggregation stages' data: centroid ranges, the byte layout of partial sums on the wire,
//! the stage-2 range accumulator and the stage-3 result.
//!
//! Stage 2 (group-by): the centroid ids are cut into one contiguous range per worker; worker `j`
//! receives range `j` of every worker's partial sums and adds them up. The sums are exact
//! fixed-point integers, so chunks are added the moment they arrive, in any order, and the
//! accumulator is the only buffer: a worker's stage-2 memory is its range, not `k x workers`.
//!
//! Wire layout of a range `[start, end)` of `r > 0` centroids from `t` partials, little-endian
//! 8-byte words: for each partial a **piece**, dense or sparse, whichever is smaller:
//! - dense: the word [`DENSE`], then `r` counts (`u64`), then `r x dims` sums (`i64`);
//! - sparse: the number `m <= r` of centroids of the range the partial touched (count above
//!   zero), then for each, in increasing order, its index within the range, its count and its
//!   `dims` sums. A centroid with no vectors has zero sums, so leaving it out is exact.
//!
//! A map task of the paper's shape (742 vectors, 1M centroids) touches at most 742 of a range's
//! centroids: its partial is held sparse (`Partial::sparse_of`), its pieces are sparse and stage
//! 2 ships its touched centroids, not the range. An empty range ships nothing. Stage 3 ships a
//! reduced range's counts and means, dense or (when most of its centroids have no vectors, as
//! in the first iterations of a run with far more centroids than fit the data) sparse, again
//! whichever is smaller.

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
    /// A sparse piece naming more centroids than its range holds, or an index outside it.
    #[error("a sparse piece names centroid {index} of a range of {len}")]
    SparseIndex {
        /// The index or count given.
        index: u64,
        /// Centroids in the range.
        len: usize,
    },
    /// A stage-3 range of another length than its header says.
    #[error("a stage-3 range of {len} bytes where {expected} were expected")]
    Length {
        /// Bytes received.
        len: u64,
        /// Bytes its header implies.
        expected: u64,
    },
    /// A sender's bytes ended inside a piece, or held another number of pieces than announced.
    #[error("{pieces} complete pieces received where {announced} were announced")]
    Pieces {
        /// Complete pieces parsed.
        pieces: u64,
        /// Pieces announced.
        announced: u64,
    },
}

/// First word of a dense piece (a sparse piece starts with its entry count, at most `r`).
pub const DENSE: u64 = u64::MAX;

/// The centroid range of worker `j` of `workers`: `[k j / w, k (j + 1) / w)`.
pub fn range_of(k: usize, workers: usize, j: usize) -> Range<usize> {
    (k * j / workers)..(k * (j + 1) / workers)
}

/// Bytes of range `r` of each of `partials`, in the wire layout (dense or sparse per piece,
/// whichever is smaller; nothing for an empty range).
pub fn encode_range(partials: &[Partial], r: Range<usize>) -> Vec<u8> {
    let dims = partials.first().map_or(0, Partial::dims);
    let mut out = Vec::new();
    if r.is_empty() {
        return out;
    }
    let word = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
    for p in partials {
        let touched = p.entries(r.clone()).count();
        if touched * (dims + 2) < r.len() * (dims + 1) {
            out.reserve(8 + touched * (dims + 2) * 8);
            word(&mut out, touched as u64);
            for (j, c, sums) in p.entries(r.clone()) {
                word(&mut out, (j - r.start) as u64);
                word(&mut out, c);
                for &s in sums {
                    out.extend_from_slice(&s.to_le_bytes());
                }
            }
        } else {
            let (mut counts, mut sums) = (vec![0u64; r.len()], vec![0i64; r.len() * dims]);
            p.add_range_to(r.clone(), &mut counts, &mut sums);
            out.reserve(8 + r.len() * (dims + 1) * 8);
            word(&mut out, DENSE);
            for c in counts {
                word(&mut out, c);
            }
            for s in sums {
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
    }
    out
}

/// Largest length of [`encode_range`]'s output for `tasks` partials (every piece dense, the
/// bound a peer's announced length is checked against); saturates at `u64::MAX`, so a hostile
/// header cannot make it overflow. Zero for an empty range.
pub fn range_len(tasks: usize, centroids: usize, dims: usize) -> u64 {
    if centroids == 0 {
        return 0;
    }
    (centroids as u64)
        .saturating_mul((dims as u64).saturating_add(1))
        .saturating_add(1)
        .saturating_mul(8)
        .saturating_mul(tasks as u64)
}

/// Where the stage-2 parser is within a sender's pieces.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Parse {
    /// Expecting a piece's first word.
    Header,
    /// In a dense piece, at word `at` after the header.
    Dense { at: usize },
    /// In a sparse piece: `left` entries to go after this one, at word `word` of an entry
    /// (0: index, 1: count, 2..: sums) of centroid `index`.
    Sparse {
        left: u64,
        word: usize,
        index: usize,
    },
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
    /// Position in the current sender's bytes.
    parse: Parse,
    /// Complete pieces of the current sender.
    pieces: u64,
}

impl RangeSum {
    /// An empty accumulator for `r`.
    pub fn new(r: Range<usize>, dims: usize) -> Self {
        Self {
            start: r.start,
            dims,
            counts: vec![0; r.len()],
            sums: vec![0; r.len() * dims],
            parse: Parse::Header,
            pieces: 0,
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
        p.add_range_to(
            self.start..self.start + self.len(),
            &mut self.counts,
            &mut self.sums,
        );
    }

    /// Adds the next chunk of one sender's bytes in the wire layout; `offset` is where it starts
    /// in them (chunks arrive in order; offset and length multiples of 8). After a sender's
    /// last chunk, [`RangeSum::end_sender`] checks that its pieces were whole.
    pub fn add_chunk(&mut self, offset: u64, data: &[u8]) -> Result<(), AggregateError> {
        if !offset.is_multiple_of(8) || !data.len().is_multiple_of(8) {
            return Err(AggregateError::Misaligned {
                offset,
                len: data.len(),
                align: 8,
            });
        }
        let (r, dims) = (self.len(), self.dims);
        if r == 0 && !data.is_empty() {
            return Err(AggregateError::EmptyRange);
        }
        let dense_words = r * (dims + 1);
        for bytes in data.chunks_exact(8) {
            let word =
                u64::from_le_bytes(bytes.try_into().map_err(|_| AggregateError::Misaligned {
                    offset,
                    len: data.len(),
                    align: 8,
                })?);
            self.parse = match self.parse {
                Parse::Header if word == DENSE => Parse::Dense { at: 0 },
                Parse::Header if word > r as u64 => {
                    return Err(AggregateError::SparseIndex {
                        index: word,
                        len: r,
                    });
                }
                Parse::Header if word == 0 => {
                    self.pieces += 1;
                    Parse::Header
                }
                Parse::Header => Parse::Sparse {
                    left: word - 1,
                    word: 0,
                    index: 0,
                },
                Parse::Dense { at: pos } => {
                    if pos < r {
                        self.counts[pos] += word;
                    } else {
                        self.sums[pos - r] += word as i64;
                    }
                    if pos + 1 == dense_words {
                        self.pieces += 1;
                        Parse::Header
                    } else {
                        Parse::Dense { at: pos + 1 }
                    }
                }
                Parse::Sparse {
                    left,
                    word: 0,
                    index: _,
                } => {
                    if word >= r as u64 {
                        return Err(AggregateError::SparseIndex {
                            index: word,
                            len: r,
                        });
                    }
                    Parse::Sparse {
                        left,
                        word: 1,
                        index: word as usize,
                    }
                }
                Parse::Sparse {
                    left,
                    word: pos,
                    index,
                } => {
                    if pos == 1 {
                        self.counts[index] += word;
                    } else {
                        self.sums[index * dims + pos - 2] += word as i64;
                    }
                    match (pos + 1 == dims + 2, left) {
                        (false, _) => Parse::Sparse {
                            left,
                            word: pos + 1,
                            index,
                        },
                        (true, 0) => {
                            self.pieces += 1;
                            Parse::Header
                        }
                        (true, left) => Parse::Sparse {
                            left: left - 1,
                            word: 0,
                            index: 0,
                        },
                    }
                }
            };
        }
        Ok(())
    }

    /// Ends one sender's bytes: they must have held exactly `announced` whole pieces. The
    /// parser is then ready for the next sender.
    pub fn end_sender(&mut self, announced: u64) -> Result<(), AggregateError> {
        let (pieces, whole) = (self.pieces, self.parse == Parse::Header);
        self.parse = Parse::Header;
        self.pieces = 0;
        if whole && pieces == announced {
            Ok(())
        } else {
            Err(AggregateError::Pieces { pieces, announced })
        }
    }

    /// Stage-3 bytes of the exact sums, for the statistics whose root needs them rather than
    /// means (the mixture's and the PCA's map steps): the range's `r` counts (`u64`), then its
    /// `r x dims` sums (`i64`).
    pub fn encode_sums(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity((self.counts.len() + self.sums.len()) * 8);
        for &c in &self.counts {
            out.extend_from_slice(&c.to_le_bytes());
        }
        for &s in &self.sums {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Stage-3 bytes: the range's counts and means, dense or sparse, whichever is smaller:
    /// dense, the word [`DENSE`], then `r` counts (`u64`) and `r x dims` means (`f32`); sparse,
    /// the number `m` of centroids with vectors, then for each in increasing order its index
    /// within the range, its count (`u64` words) and its `dims` means. A centroid without
    /// vectors has zero means either way. An empty range ships nothing.
    pub fn encode_result(&self, scale: i32) -> Vec<u8> {
        let (r, dims) = (self.len(), self.dims);
        if r == 0 {
            return Vec::new();
        }
        let m = means(&self.sums, &self.counts, dims, scale);
        let touched = self.counts.iter().filter(|&&c| c > 0).count();
        let mut out;
        if touched * (16 + 4 * dims) < r * (8 + 4 * dims) {
            out = Vec::with_capacity(8 + touched * (16 + 4 * dims));
            out.extend_from_slice(&(touched as u64).to_le_bytes());
            for (j, &c) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                out.extend_from_slice(&(j as u64).to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
                for v in &m[j * dims..(j + 1) * dims] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        } else {
            out = Vec::with_capacity(8 + r * 8 + m.len() * 4);
            out.extend_from_slice(&DENSE.to_le_bytes());
            for &c in &self.counts {
                out.extend_from_slice(&c.to_le_bytes());
            }
            for v in m {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }
}

/// Largest length of [`RangeSum::encode_sums`]'s output for `centroids` of `dims`: `r`
/// counts and `r x dims` sums, 8 bytes each; saturates.
pub fn sums_len(centroids: usize, dims: usize) -> u64 {
    (centroids as u64)
        .saturating_mul((dims as u64).saturating_add(1))
        .saturating_mul(8)
}

/// Places the stage-3 bytes of [`RangeSum::encode_sums`] for range `[start, start + r)` into
/// the root's `counts` (all rows) and `sums` (`rows x dims`).
pub fn place_sums(
    counts: &mut [u64],
    sums: &mut [i64],
    start: usize,
    r: usize,
    dims: usize,
    data: &[u8],
) -> Result<(), AggregateError> {
    let expected = sums_len(r, dims);
    let fits = start
        .checked_add(r)
        .is_some_and(|end| end <= counts.len() && end.saturating_mul(dims) <= sums.len());
    if data.len() as u64 != expected || !fits {
        return Err(AggregateError::Length {
            len: data.len() as u64,
            expected,
        });
    }
    let mut words = data
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]));
    for (c, w) in counts[start..start + r].iter_mut().zip(words.by_ref()) {
        *c = w;
    }
    for (s, w) in sums[start * dims..(start + r) * dims].iter_mut().zip(words) {
        *s = w as i64;
    }
    Ok(())
}

/// Largest length of [`RangeSum::encode_result`]'s output for `centroids` of `dims` (dense;
/// nothing for an empty range); saturates.
pub fn result_len(centroids: usize, dims: usize) -> u64 {
    if centroids == 0 {
        return 0;
    }
    (centroids as u64)
        .saturating_mul((dims as u64).saturating_mul(4).saturating_add(8))
        .saturating_add(8)
}

/// Places the stage-3 bytes `data` of range `[start, start + r)` (dense or sparse, whole) into
/// the driver's `counts` (all `k`) and `means` (`k x dims`), which hold zeros for the range.
pub fn place_result(
    counts: &mut [u64],
    means: &mut [f32],
    start: usize,
    r: usize,
    dims: usize,
    data: &[u8],
) -> Result<(), AggregateError> {
    let word = |at: usize| -> u64 {
        data.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let place_means = |means: &mut [f32], j: usize, at: usize| {
        for (i, v) in means[(start + j) * dims..][..dims].iter_mut().enumerate() {
            let b = &data[at + 4 * i..at + 4 * i + 4];
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    };
    let length = |expected: u64| {
        if data.len() as u64 == expected {
            Ok(())
        } else {
            Err(AggregateError::Length {
                len: data.len() as u64,
                expected,
            })
        }
    };
    if r == 0 {
        return length(0);
    }
    if data.len() < 8 {
        return length(8);
    }
    let head = word(0);
    if head == DENSE {
        length(result_len(r, dims))?;
        for j in 0..r {
            counts[start + j] = word(8 + 8 * j);
            place_means(means, j, 8 + 8 * r + 4 * dims * j);
        }
        return Ok(());
    }
    if head > r as u64 {
        return Err(AggregateError::SparseIndex {
            index: head,
            len: r,
        });
    }
    let m = head as usize;
    let entry = 16 + 4 * dims;
    length(8 + (m * entry) as u64)?;
    let mut next = 0;
    for e in 0..m {
        let at = 8 + e * entry;
        let j = word(at);
        // Increasing indices inside the range: each centroid placed once.
        if j < next || j >= r as u64 {
            return Err(AggregateError::SparseIndex { index: j, len: r });
        }
        let j = j as usize;
        counts[start + j] = word(at + 8);
        place_means(means, j, at + 16);
        next = j as u64 + 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vocab_pipeline::partition::Rows;

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
        p.accumulate(u64::from(seed), Rows::dense(&x, dims), &labels, &[1.0; 7]);
        p
    }

    #[test]
    fn announced_sizes_saturate_instead_of_overflowing() {
        assert_eq!(range_len(2, 3, 4), 2 * (1 + 3 * 5) * 8);
        assert_eq!(range_len(5, 0, 4), 0);
        assert_eq!(range_len(usize::MAX, 2, 3), u64::MAX);
        assert_eq!(range_len(1, 1, usize::MAX), u64::MAX);
    }

    #[test]
    fn exact_sums_are_placed_where_they_were_reduced_and_bad_lengths_refused() {
        let (k, dims) = (5, 3);
        let p = partial(3, k, dims);
        let (mut counts, mut sums) = (vec![0u64; k], vec![0i64; k * dims]);
        for r in [0..2, 2..2, 2..5] {
            let mut range = RangeSum::new(r.clone(), dims);
            range.add_partial(&p);
            let bytes = range.encode_sums();
            assert_eq!(bytes.len() as u64, sums_len(r.len(), dims));
            place_sums(&mut counts, &mut sums, r.start, r.len(), dims, &bytes).expect("placed");
        }
        assert_eq!(counts, p.counts().into_owned());
        assert_eq!(sums, p.sums().into_owned());
        let mut range = RangeSum::new(0..2, dims);
        range.add_partial(&p);
        let bytes = range.encode_sums();
        assert!(place_sums(&mut counts, &mut sums, 0, 2, dims, &bytes[8..]).is_err());
        assert!(place_sums(&mut counts, &mut sums, 4, 2, dims, &bytes).is_err());
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
                assert!(a.len() as u64 <= range_len(2, r.len(), dims));
                let mut acc = RangeSum::new(r.clone(), dims);
                for chunk in [8usize, 16, 40] {
                    acc = RangeSum::new(r.clone(), dims);
                    for (blob, pieces) in [(&b, 1), (&a, 2)] {
                        for (i, c) in blob.chunks(chunk).enumerate() {
                            acc.add_chunk((i * chunk) as u64, c).expect("add");
                        }
                        acc.end_sender(pieces).expect("whole pieces");
                    }
                }
                assert_eq!(acc.counts, merged.counts()[r.clone()]);
                assert_eq!(acc.sums, merged.sums()[r.start * dims..r.end * dims]);
                // Stage 3 places the range's means where the full update would put them.
                let result = acc.encode_result(30);
                assert!(result.len() as u64 <= result_len(r.len(), dims));
                let (mut counts, mut m) = (vec![0u64; k], vec![0f32; k * dims]);
                place_result(&mut counts, &mut m, r.start, r.len(), dims, &result).expect("place");
                let want = means(&merged.sums(), &merged.counts(), dims, 30);
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

    /// A partial of `k` centroids whose `rows` vectors go to the centroids `labels` gives.
    fn touching(k: usize, dims: usize, labels: &[u32], seed: u32) -> Partial {
        let x: Vec<f32> = (0..labels.len() * dims)
            .map(|i| ((i as u32 * 7 + seed * 13) % 23) as f32 - 11.0)
            .collect();
        let mut p = Partial::new(k, dims, 30);
        p.accumulate(
            u64::from(seed),
            Rows::dense(&x, dims),
            labels,
            &vec![1.0; labels.len()],
        );
        p
    }

    #[test]
    fn sparse_pieces_ship_only_touched_centroids_and_reduce_to_the_dense_sums() {
        let (k, dims) = (1000, 6);
        // Few vectors over many centroids (sparse), and one partial touching every centroid of
        // a range (dense): both in one sender's bytes.
        let few = touching(k, dims, &[3, 3, 17, 640, 999], 1);
        let many = touching(k, dims, &(0..k as u32).collect::<Vec<_>>(), 2);
        let other = touching(k, dims, &[5, 640, 641], 3);
        let mut merged = Partial::new(k, dims, 30);
        for p in [&few, &many, &other] {
            merged.merge(p);
        }
        for workers in [1, 3, 4] {
            for j in 0..workers {
                let r = range_of(k, workers, j);
                let both = encode_range(&[few.clone(), many.clone()], r.clone());
                let alone = encode_range(std::slice::from_ref(&other), r.clone());
                let touched =
                    |p: &Partial| p.counts()[r.clone()].iter().filter(|&&c| c > 0).count();
                // The sparse pieces: a header and (index, count, sums) per touched centroid.
                assert_eq!(
                    alone.len(),
                    8 * (1 + touched(&other) * (dims + 2)),
                    "range {r:?}"
                );
                assert_eq!(
                    both.len(),
                    8 * (2 + touched(&few) * (dims + 2) + r.len() * (dims + 1)),
                    "range {r:?}"
                );
                assert!(both.len() as u64 <= range_len(2, r.len(), dims));
                for chunk in [8usize, 24, 56, 4096] {
                    let mut acc = RangeSum::new(r.clone(), dims);
                    for (blob, pieces) in [(&both, 2), (&alone, 1)] {
                        for (i, c) in blob.chunks(chunk).enumerate() {
                            acc.add_chunk((i * chunk) as u64, c).expect("add");
                        }
                        acc.end_sender(pieces).expect("whole pieces");
                    }
                    assert_eq!(acc.counts, merged.counts()[r.clone()], "range {r:?}");
                    assert_eq!(acc.sums, merged.sums()[r.start * dims..r.end * dims]);
                }
            }
        }
    }

    #[test]
    fn sparse_held_partials_ship_the_bytes_of_dense_held_ones() {
        let (k, dims) = (1000, 4);
        // Held sparse (a map task of few vectors) or dense, the same numbers: the same pieces
        // in every range (sparse where few centroids are touched, dense where most are) and
        // the same own-range sums.
        for labels in [
            vec![3u32, 3, 17, 640, 999],
            (0..600).map(|i| i * 7 % 1000).collect(),
        ] {
            let dense = touching(k, dims, &labels, 5);
            let x: Vec<f32> = (0..labels.len() * dims)
                .map(|i| ((i as u32 * 7 + 5 * 13) % 23) as f32 - 11.0)
                .collect();
            let dist = vec![1.0; labels.len()];
            let sparse = Partial::sparse_of(
                k,
                dims,
                30,
                &[(5, Rows::dense(&x, dims), &labels[..], &dist[..])],
            );
            assert!(sparse.is_sparse() && !dense.is_sparse());
            for workers in [1, 3, 7] {
                for j in 0..workers {
                    let r = range_of(k, workers, j);
                    assert_eq!(
                        encode_range(std::slice::from_ref(&sparse), r.clone()),
                        encode_range(std::slice::from_ref(&dense), r.clone()),
                        "range {r:?}"
                    );
                    let (mut a, mut b) = (RangeSum::new(r.clone(), dims), RangeSum::new(r, dims));
                    a.add_partial(&sparse);
                    b.add_partial(&dense);
                    assert_eq!(a, b);
                }
            }
        }
    }

    #[test]
    fn stage_three_ships_sparse_ranges_and_places_them_as_dense_ones() {
        let (k, dims) = (1000, 6);
        for labels in [vec![3u32, 3, 17, 640, 999], (0..1000).collect::<Vec<_>>()] {
            let p = touching(k, dims, &labels, 4);
            let want = means(&p.sums(), &p.counts(), dims, 30);
            for workers in [1, 3] {
                let (mut counts, mut m) = (vec![0u64; k], vec![0f32; k * dims]);
                for j in 0..workers {
                    let r = range_of(k, workers, j);
                    let mut acc = RangeSum::new(r.clone(), dims);
                    acc.add_partial(&p);
                    let bytes = acc.encode_result(30);
                    let touched = p.entries(r.clone()).count();
                    let expected = if touched < r.len() / 2 {
                        8 + touched * (16 + 4 * dims)
                    } else {
                        result_len(r.len(), dims) as usize
                    };
                    assert_eq!(bytes.len(), expected, "range {r:?}");
                    place_result(&mut counts, &mut m, r.start, r.len(), dims, &bytes)
                        .expect("place");
                }
                assert_eq!(counts, *p.counts());
                assert_eq!(m, want);
            }
        }
    }

    #[test]
    fn malformed_stage_three_bytes_are_errors() {
        let (dims, r) = (2, 0..4);
        let p = touching(4, dims, &[1], 1);
        let mut acc = RangeSum::new(r.clone(), dims);
        acc.add_partial(&p);
        let sparse = acc.encode_result(30);
        assert_eq!(sparse.len(), 8 + 16 + 8);
        let (mut counts, mut m) = (vec![0u64; 4], vec![0f32; 8]);
        let mut place = |data: &[u8]| place_result(&mut counts, &mut m, 0, 4, dims, data);
        place(&sparse).expect("whole");
        // Truncated, trailing bytes, too many entries, an index outside the range or repeated.
        assert!(matches!(
            place(&sparse[..sparse.len() - 4]),
            Err(AggregateError::Length { .. })
        ));
        assert!(matches!(
            place(&[&sparse[..], &[0; 4]].concat()),
            Err(AggregateError::Length { .. })
        ));
        assert!(place(&[]).is_err());
        assert!(matches!(
            place(&5u64.to_le_bytes()),
            Err(AggregateError::SparseIndex { index: 5, .. })
        ));
        let mut outside = sparse.clone();
        outside[8..16].copy_from_slice(&4u64.to_le_bytes());
        assert!(matches!(
            place(&outside),
            Err(AggregateError::SparseIndex { index: 4, .. })
        ));
        let twice = [&2u64.to_le_bytes()[..], &sparse[8..], &sparse[8..]].concat();
        assert!(matches!(
            place(&twice),
            Err(AggregateError::SparseIndex { index: 1, .. })
        ));
        // An empty range (a driver that maps nothing) ships and takes nothing.
        assert!(RangeSum::new(2..2, dims).encode_result(30).is_empty());
        assert!(place_result(&mut [], &mut [], 0, 0, dims, &[]).is_ok());
        assert!(place_result(&mut [], &mut [], 0, 0, dims, &[0; 8]).is_err());
        let dense = [&DENSE.to_le_bytes()[..], &[0; 4 * 8 + 8 * 4]].concat();
        place(&dense).expect("dense");
        assert!(matches!(
            place(&dense[..dense.len() - 4]),
            Err(AggregateError::Length { .. })
        ));
    }

    #[test]
    fn malformed_stage_two_bytes_are_errors() {
        let word = |v: u64| v.to_le_bytes().to_vec();
        let (r, dims) = (0..4, 2);
        // More entries than the range holds, an index outside it.
        let mut acc = RangeSum::new(r.clone(), dims);
        assert!(matches!(
            acc.add_chunk(0, &word(5)),
            Err(AggregateError::SparseIndex { index: 5, len: 4 })
        ));
        let mut acc = RangeSum::new(r.clone(), dims);
        let bad = [word(1), word(4)].concat();
        assert!(matches!(
            acc.add_chunk(0, &bad),
            Err(AggregateError::SparseIndex { index: 4, .. })
        ));
        // Bytes that end inside a piece, or fewer pieces than announced.
        let p = touching(4, dims, &[1], 1);
        let blob = encode_range(std::slice::from_ref(&p), r.clone());
        let mut acc = RangeSum::new(r.clone(), dims);
        acc.add_chunk(0, &blob[..blob.len() - 8]).expect("add");
        assert!(matches!(
            acc.end_sender(1),
            Err(AggregateError::Pieces { pieces: 0, .. })
        ));
        let mut acc = RangeSum::new(r.clone(), dims);
        acc.add_chunk(0, &blob).expect("add");
        assert!(acc.end_sender(2).is_err());
        // An empty range takes no bytes.
        assert!(encode_range(std::slice::from_ref(&p), 2..2).is_empty());
        assert!(matches!(
            RangeSum::new(2..2, dims).add_chunk(0, &word(0)),
            Err(AggregateError::EmptyRange)
        ));
    }
}
