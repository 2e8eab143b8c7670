//! The map step's tasks ([`map_tasks`](super::map_tasks)): the step's assignment kernel,
//! resolved once from its [`Mode`]; the pruner's bounds handed to the units; the units dealt
//! round-robin to the tasks; each task's assignment and sums; and the step's partials gathered
//! from the tasks'.

use super::{
    Accumulation, AssignScratch, Centroids, Kernel, Mode, Partial, Pruner, UNIT_ROWS, Unit, approx,
    assign, prune, quant,
};
use crate::partition::Rows;

/// The assignment kernel of a map step, resolved once from its [`Mode`]: at most one of the
/// integer pass's centroids and the approximate search's index is made (neither for the f32
/// pass or the pruned one).
pub(super) struct MapKernel<'a> {
    /// The shards' quantised rows (one per shard, in order), for the integer kernel.
    pub(super) codes: Option<&'a [&'a quant::QuantRows]>,
    /// The centroids of the integer full pass ([`Mode::Quantized`]).
    quantized: Option<quant::QuantCentroids>,
    /// The index of the approximate search and its probes ([`Mode::Approx`]).
    approx: Option<(approx::Index, usize)>,
}

/// Map units a task searches together with the integer kernel's approximate search: a list's
/// codes are then read once for the rows of this many units (about 32 rows a list and unit at
/// `sqrt(k)` lists and 8 probes).
pub(super) const LIST_BATCH: usize = 16;

impl<'a> MapKernel<'a> {
    /// The units a task assigns at once: [`LIST_BATCH`] for the integer kernel's approximate
    /// search, else one.
    fn batch(&self) -> usize {
        match &self.approx {
            Some((index, _)) if index.kernel() == Kernel::Int8 => LIST_BATCH,
            _ => 1,
        }
    }

    /// The kernel of `mode` over `centroids`, with the pruned mode's [`Pruner`] apart (it is
    /// borrowed again once the tasks are done).
    pub(super) fn of(mode: Mode<'a>, centroids: &Centroids) -> (Option<&'a mut Pruner>, Self) {
        let (pruner, codes, quantized, approx) = match mode {
            Mode::Full => (None, None, None, None),
            Mode::Pruned(p, codes) => (Some(p), codes, None, None),
            Mode::Quantized(rows) => (
                None,
                Some(rows),
                Some(quant::QuantCentroids::new(centroids)),
                None,
            ),
            Mode::Approx {
                lists,
                probes,
                kernel,
            } => (
                None,
                None,
                None,
                Some((approx::Index::with_kernel(centroids, lists, kernel), probes)),
            ),
        };
        (
            pruner,
            Self {
                codes,
                quantized,
                approx,
            },
        )
    }
}

/// Readies `pruner` (if any) for a step over `units`: new groups for a new `k`, the bounds of
/// units no longer here dropped and units new here given empty ones. Returns the step's
/// geometry with the groups, and each unit's bounds in unit order (all `None` without a
/// pruner). `int8`: the full passes go through the integer kernel.
pub(super) fn unit_bounds<'p>(
    pruner: Option<&'p mut Pruner>,
    centroids: &Centroids,
    int8: bool,
    units: &[Unit<'_>],
) -> (
    Option<(prune::Geometry, &'p prune::Groups)>,
    Vec<Option<&'p mut prune::UnitBounds>>,
) {
    let Some(p) = pruner else {
        return (None, (0..units.len()).map(|_| None).collect());
    };
    if p.groups.as_ref().is_none_or(|g| g.k() != centroids.k()) {
        // Groups are fixed for a run (Yinyang); a new k starts over.
        p.groups = Some(prune::Groups::new(centroids, int8));
        p.units.clear();
        p.previous = None;
    }
    let groups = p.groups.as_ref().expect("groups were just made");
    let geometry = prune::Geometry::new(centroids, p.previous.as_ref(), groups, int8);
    // Bounds of units no longer here go; units new here start without bounds.
    let keys: std::collections::BTreeSet<u64> = units.iter().map(|u| u.key).collect();
    p.units.retain(|key, _| keys.contains(key));
    for &key in &keys {
        p.units.entry(key).or_default();
    }
    let mut by_key: std::collections::HashMap<u64, &mut prune::UnitBounds> =
        p.units.iter_mut().map(|(&key, b)| (key, b)).collect();
    let bounds: Vec<_> = units.iter().map(|u| by_key.remove(&u.key)).collect();
    (Some((geometry, groups)), bounds)
}

/// A map task's work: its units, each with its bounds (pruned mode).
pub(super) type Work<'u, 'b> = Vec<(Unit<'u>, Option<&'b mut prune::UnitBounds>)>;

/// A task's units (key and rows) with their labels and distances, kept for a shared accumulator.
pub(super) type Labelled<'u> = Vec<(u64, Rows<'u>, Vec<u32>, Vec<f32>)>;

/// What a map task returns: its accumulator (none with a shared one), its units' labels (only
/// with a shared accumulator) and how many vectors its bounds kept.
pub(super) type TaskResult<'u> = (Option<Partial>, Labelled<'u>, usize);

/// `units` with their `bounds` dealt round-robin to `threads` map tasks.
pub(super) fn deal_units<'u, 'b>(
    units: &[Unit<'u>],
    bounds: Vec<Option<&'b mut prune::UnitBounds>>,
    threads: usize,
) -> Vec<Work<'u, 'b>> {
    let mut work: Vec<Work<'_, '_>> = (0..threads).map(|_| Vec::new()).collect();
    for (idx, (&unit, b)) in units.iter().zip(bounds).enumerate() {
        work[idx % threads].push((unit, b));
    }
    work
}

/// One map task's scratch space, one per assignment kernel.
#[derive(Default)]
struct TaskScratch {
    assign: AssignScratch,
    prune: prune::PruneScratch,
    quant: quant::QuantScratch,
    approx: approx::SearchScratch,
    /// A u8 unit's rows decoded.
    decoded: Vec<f32>,
    /// The rows of a batch of units (the integer kernel's approximate search).
    batch: Vec<f32>,
}

/// What every map task of a step shares.
pub(super) struct MapTask<'t> {
    pub(super) centroids: &'t Centroids,
    pub(super) kernel: &'t MapKernel<'t>,
    /// The pruned mode's geometry and groups.
    pub(super) geometry: &'t Option<(prune::Geometry, &'t prune::Groups)>,
    pub(super) how: Accumulation,
    pub(super) scale: i32,
}

impl MapTask<'_> {
    /// Runs one task: assigns its units in order and keeps their sums as `how` says.
    pub(super) fn run<'u>(&self, items: Work<'u, '_>) -> TaskResult<'u> {
        let (k, dims, scale) = (self.centroids.k(), self.centroids.dims(), self.scale);
        let mut partial = (self.how == Accumulation::PerTask).then(|| Partial::new(k, dims, scale));
        let mut labelled = Vec::new();
        let mut scratch = TaskScratch::default();
        let batch = self.kernel.batch();
        let (mut labels, mut dist) = (vec![0u32; batch * UNIT_ROWS], vec![0f32; batch * UNIT_ROWS]);
        let mut kept = 0;
        let mut items = items.into_iter();
        loop {
            let mut group: Work<'u, '_> = items.by_ref().take(batch).collect();
            let rows: usize = group.iter().map(|(unit, _)| unit.rows.rows()).sum();
            let (labels, dist) = (&mut labels[..rows], &mut dist[..rows]);
            match &mut group[..] {
                [] => break,
                [(unit, bounds)] if batch == 1 => {
                    kept +=
                        self.assign_unit(*unit, bounds.as_deref_mut(), &mut scratch, labels, dist);
                }
                units => self.search_units(units, &mut scratch, labels, dist),
            }
            let mut at = 0;
            for (unit, _) in group {
                let (key, unit, n) = (unit.key, unit.rows, unit.rows.rows());
                let (labels, dist) = (&labels[at..at + n], &dist[at..at + n]);
                match partial.as_mut() {
                    Some(p) => p.accumulate(key, unit, labels, dist),
                    None => labelled.push((key, unit, labels.to_vec(), dist.to_vec())),
                }
                at += n;
            }
        }
        if self.how == Accumulation::Sparse {
            let units: Vec<_> = labelled
                .iter()
                .map(|(key, x, labels, dist)| (*key, *x, &labels[..], &dist[..]))
                .collect();
            partial = Some(Partial::sparse_of(k, dims, scale, &units));
            labelled.clear();
        }
        (partial, labelled, kept)
    }

    /// Labels and distances of one unit's rows by the step's kernel: its bounds with the pruned
    /// mode, else the integer pass, the approximate search or the f32 pass. Returns how many
    /// vectors the bounds kept (0 without bounds).
    #[inline]
    fn assign_unit(
        &self,
        unit: Unit<'_>,
        bounds: Option<&mut prune::UnitBounds>,
        scratch: &mut TaskScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) -> usize {
        let (centroids, kernel) = (self.centroids, self.kernel);
        let Unit {
            shard,
            start,
            rows: unit,
            ..
        } = unit;
        let n = unit.rows();
        let unit_codes = kernel.codes.map(|rows| rows[shard].slice(start, start + n));
        if let (Some(b), Some((geometry, groups))) = (bounds, self.geometry) {
            // The bounds decode a u8 unit only if they search some row of it.
            return b.step(
                unit,
                &mut scratch.decoded,
                unit_codes,
                centroids,
                groups,
                geometry,
                &mut scratch.prune,
                labels,
                dist,
            );
        }
        let unit = unit.to_f32(&mut scratch.decoded);
        match (&kernel.quantized, &kernel.approx) {
            (Some(cq), _) => quant::assign_quantized(
                unit,
                unit_codes.expect("the integer pass has the rows' codes"),
                cq,
                centroids,
                &mut scratch.quant,
                labels,
                dist,
            ),
            (_, Some((index, probes))) => {
                index.search(unit, *probes, &mut scratch.approx, labels, dist)
            }
            _ => assign(unit, centroids, &mut scratch.assign, labels, dist),
        }
        0
    }

    /// Labels and distances of the rows of `units`, in order, by the integer kernel's
    /// approximate search: all rows probed and searched together, list by list
    /// ([`approx::Index::search_int8`]).
    fn search_units(
        &self,
        units: &[(Unit<'_>, Option<&mut prune::UnitBounds>)],
        scratch: &mut TaskScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) {
        let (index, probes) =
            (self.kernel.approx.as_ref()).expect("the approximate search's index");
        let dims = self.centroids.dims();
        scratch.batch.clear();
        for (unit, _) in units.iter() {
            for r in 0..unit.rows.rows() {
                unit.rows.extend_row(r, &mut scratch.batch);
            }
        }
        let x = crate::partition::Matrix::dense(&scratch.batch, dims);
        // Quantised from their source: u8 rows keep their bytes as codes where they fit.
        let pieces: Vec<_> = units.iter().map(|(unit, _)| unit.rows).collect();
        let xq = quant::QuantRows::stacked(&pieces);
        let xq = xq.slice(0, x.rows());
        index.search_quantized(x, xq, *probes, &mut scratch.approx, labels, dist);
    }
}

/// The step's partials from its tasks' `results`: their own accumulators, or with a shared
/// accumulator one filled from all tasks' labels (in task order).
pub(super) fn gather_partials(
    results: Vec<TaskResult<'_>>,
    how: Accumulation,
    k: usize,
    dims: usize,
    scale: i32,
) -> Vec<Partial> {
    if how != Accumulation::Shared {
        results.into_iter().filter_map(|r| r.0).collect()
    } else {
        let labelled: Vec<_> = results.into_iter().flat_map(|r| r.1).collect();
        let units: Vec<_> = labelled
            .iter()
            .map(|(key, x, labels, dist)| (*key, *x, &labels[..], &dist[..]))
            .collect();
        let mut shared = Partial::new(k, dims, scale);
        shared.accumulate_units(&units);
        vec![shared]
    }
}
