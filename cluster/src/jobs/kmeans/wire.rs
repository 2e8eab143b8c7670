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

/// A member's stage-3 statistics (its reduced range follows in the same gathered piece).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

/// Largest centroid set or stage-3 piece a member accepts (bytes).
pub(super) const MAX_STEP_BYTES: u64 = crate::collective::MAX_DATA;
