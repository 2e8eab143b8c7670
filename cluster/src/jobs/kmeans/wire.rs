//! The k-means job's words: the root's commands (tagged [`TAG`]) and the members' answers.

use serde::{Deserialize, Serialize};

use super::share::Share;

/// The tag of the k-means job's commands.
pub const TAG: &str = "kmeans";

/// What the root tells the members.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) enum Command {
    /// Cache a share of these partitions.
    Load {
        job: u64,
        dir: String,
        manifest: u32,
        /// Ranks in chain order.
        order: Vec<usize>,
        /// Children of each rank in the `mst` broadcast tree (empty: the binomial tree).
        #[serde(default)]
        broadcast_tree: Vec<Vec<usize>>,
        /// Children of each rank in the stage-3 gather tree (empty: straight to the root).
        #[serde(default)]
        gather_tree: Vec<Vec<usize>>,
        /// Whether the root maps a share (else partitions and ranges go to the others).
        root_maps: bool,
        build: String,
        /// The partitions of each rank, where they lie (empty: even blocks in chain order).
        #[serde(default)]
        deal: Vec<Vec<u32>>,
    },
    /// Run one iteration; the centroids follow as a broadcast.
    Step {
        iteration: u64,
        k: u64,
        dims: u64,
        scale: i32,
        stage1: bool,
        int8: bool,
        /// Pruned assignment (bounds kept at each member across iterations).
        #[serde(default)]
        prune: bool,
        /// Approximate assignment: lists searched per vector (0: exact).
        #[serde(default)]
        approx_probes: u32,
        /// Approximate assignment: lists of the index (0: `sqrt(k)`).
        #[serde(default)]
        approx_lists: u32,
        algorithm: String,
        chunk: u64,
        chains: u64,
    },
    /// Sum a statistic of the mixture or the PCA over every vector (one map step whose sums
    /// aggregate like k-means' partials); its values follow as a broadcast of `f64`s.
    Moments {
        step: u64,
        head: vocab_pipeline::mixture::moments::Head,
        /// The fixed-point scale of each column (`Statistic::scales`).
        scales: Vec<i32>,
        stage1: bool,
        algorithm: String,
        chunk: u64,
        chains: u64,
    },
    /// Say which partitions of the manifest with this digest the member's folder holds.
    Holdings { dir: String, manifest: u32 },
    /// Send the rows of these global indices that the member's share holds (after `Load`).
    Rows { indices: Vec<u64> },
}

/// A member's answer to [`Command::Load`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoadReply {
    pub(super) rows: u64,
    pub(super) max_abs_bits: u32,
    pub(super) magnitudes: Vec<u64>,
    pub(super) error: Option<String>,
}

impl LoadReply {
    /// The answer of a member that opened `share`.
    pub(super) fn of(share: &Share) -> Self {
        Self {
            rows: share.rows(),
            max_abs_bits: share.max_abs().to_bits(),
            magnitudes: share.magnitudes(),
            error: None,
        }
    }

    /// The answer of a member that holds nothing: it maps nothing, or (`error`) it cannot.
    pub(super) fn refused(error: Option<String>) -> Self {
        Self {
            rows: 0,
            max_abs_bits: 0,
            magnitudes: Vec::new(),
            error,
        }
    }
}

/// A member's stage-3 statistics: with its reduced range, the typed piece it gathers to the
/// root ([`StepStats::piece`], [`StepStats::of_piece`]).
#[derive(Debug, Default, PartialEq)]
pub(super) struct StepStats {
    pub(super) broadcast_seconds: f64,
    pub(super) map_seconds: f64,
    pub(super) stage1_seconds: f64,
    pub(super) mapped_at: f64,
    pub(super) reduced_at: f64,
    pub(super) stage2_bytes: u64,
    pub(super) tasks: u64,
    pub(super) kept: u64,
    /// Inertia per map unit: (key, f64 bits).
    pub(super) units: Vec<(u64, u64)>,
}

/// Words of a stage-3 piece before its units: five times, three counts, the count of units.
const PIECE_HEAD: usize = 9;

impl StepStats {
    /// The member's stage-3 piece, little-endian 8-byte words: the five times (`f64` bits), the
    /// stage-2 bytes, tasks and kept vectors, the count of units and each unit's key and
    /// inertia bits; then its reduced `range`, as [`crate::collective::aggregate`] lays it out.
    pub(super) fn piece(&self, range: &[u8]) -> Vec<u8> {
        let words = PIECE_HEAD + 2 * self.units.len();
        let mut out = Vec::with_capacity(words * 8 + range.len());
        let head = [
            self.broadcast_seconds.to_bits(),
            self.map_seconds.to_bits(),
            self.stage1_seconds.to_bits(),
            self.mapped_at.to_bits(),
            self.reduced_at.to_bits(),
            self.stage2_bytes,
            self.tasks,
            self.kept,
            self.units.len() as u64,
        ];
        let units = self.units.iter().flat_map(|&(key, bits)| [key, bits]);
        for word in head.into_iter().chain(units) {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(range);
        out
    }

    /// A stage-3 piece read back: the statistics and the range's bytes; `None` when the piece
    /// is shorter than its own words say.
    pub(super) fn of_piece(piece: &[u8]) -> Option<(Self, &[u8])> {
        let word = |i: usize| -> Option<u64> {
            let bytes = piece.get(i.checked_mul(8)?..i.checked_add(1)?.checked_mul(8)?)?;
            Some(u64::from_le_bytes(bytes.try_into().ok()?))
        };
        let units = usize::try_from(word(PIECE_HEAD - 1)?).ok()?;
        let words = units.checked_mul(2)?.checked_add(PIECE_HEAD)?;
        let range = piece.get(words.checked_mul(8)?..)?;
        let stats = Self {
            broadcast_seconds: f64::from_bits(word(0)?),
            map_seconds: f64::from_bits(word(1)?),
            stage1_seconds: f64::from_bits(word(2)?),
            mapped_at: f64::from_bits(word(3)?),
            reduced_at: f64::from_bits(word(4)?),
            stage2_bytes: word(5)?,
            tasks: word(6)?,
            kept: word(7)?,
            units: (0..units)
                .map(|u| Some((word(PIECE_HEAD + 2 * u)?, word(PIECE_HEAD + 2 * u + 1)?)))
                .collect::<Option<_>>()?,
        };
        Some((stats, range))
    }
}

/// Largest centroid set or stage-3 piece a member accepts (bytes).
pub(super) const MAX_STEP_BYTES: u64 = crate::collective::MAX_DATA;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage3_piece_reads_back_and_a_short_one_is_refused() {
        let stats = StepStats {
            broadcast_seconds: 0.25,
            map_seconds: 1.5,
            stage1_seconds: f64::MIN_POSITIVE,
            mapped_at: 2.0,
            reduced_at: 3.0,
            stage2_bytes: 1 << 40,
            tasks: 7,
            kept: u64::MAX,
            units: vec![(3, 1.0f64.to_bits()), (u64::MAX, 0)],
        };
        let range = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        let piece = stats.piece(&range);
        let (back, blob) = StepStats::of_piece(&piece).expect("reads back");
        assert_eq!((back, blob), (stats, &range[..]));
        let empty = StepStats::default().piece(&[]);
        assert_eq!(empty.len(), PIECE_HEAD * 8);
        assert_eq!(
            StepStats::of_piece(&empty),
            Some((StepStats::default(), &[][..]))
        );
        // Cut anywhere inside its words, or claiming more units than it holds: refused.
        for cut in 0..piece.len() - range.len() {
            assert_eq!(StepStats::of_piece(&piece[..cut]), None, "cut at {cut}");
        }
        let mut lying = empty.clone();
        lying[64..72].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(StepStats::of_piece(&lying), None);
    }
}
