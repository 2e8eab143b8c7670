//! Memory in figures for people: sizes in units, a k-means memory plan's parts, and this
//! machine's total memory (the plan, `vocab kmeans` and `config check` use them).

use anyhow::ensure;
use vocab_pipeline::kmeans;

pub fn human(bytes: f64) -> String {
    for (unit, size) in [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)] {
        if bytes >= size {
            return format!("{:.2} {unit}", bytes / size);
        }
    }
    format!("{bytes:.0} B")
}

/// `vectors 2.4 GB, centroids 4.3 GB, ...`: the parts of a memory plan that are not zero.
pub fn breakdown(m: &kmeans::Memory) -> String {
    [
        ("vectors", m.vectors),
        ("centroids", m.centroids),
        ("sums", m.sums),
        ("int8 codes", m.codes),
        ("bounds", m.bounds),
        ("index", m.index),
    ]
    .iter()
    .filter(|(_, b)| *b > 0)
    .map(|(what, b)| format!("{what} {}", human(*b as f64)))
    .collect::<Vec<_>>()
    .join(", ")
}

/// Total memory of this machine, from `/proc/meminfo`.
pub fn memory_here() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// Whether `nodes` nodes of `plan` fit in `total` bytes; the error gives the figures.
pub fn fits(plan: &kmeans::Memory, nodes: u64, total: u64, k: usize) -> anyhow::Result<()> {
    let need = plan.total().saturating_mul(nodes);
    ensure!(
        need <= total,
        "k-means at k = {k} needs about {} here ({}{}), and this machine has {}: lower k{}, or \
         run on a cluster",
        human(need as f64),
        breakdown(plan),
        if nodes > 1 {
            format!(" per node, {nodes} nodes")
        } else {
            String::new()
        },
        human(total as f64),
        if plan.bounds > 0 {
            ", drop the bounds (prune false)"
        } else {
            ""
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use vocab_pipeline::kmeans::{Assignment, Kernel};
    use vocab_pipeline::store::Element;

    use super::*;

    #[test]
    fn a_run_that_cannot_fit_is_refused_with_its_figures() {
        // The million-word run of eval/million: 1.17M HOG vectors, 2 threads.
        let approx = Assignment::Approx {
            lists: 0,
            probes: 8,
            kernel: Kernel::F32,
        };
        let plan =
            kmeans::Memory::estimate(1_172_113, 1 << 20, 512, Element::F32, 2, approx, false);
        assert!(fits(&plan, 1, 16_000_000_000, 1 << 20).is_ok(), "{plan:?}");
        let err = format!(
            "{:#}",
            fits(&plan, 1, 8_000_000_000, 1 << 20).expect_err("8 GB")
        );
        assert!(
            err.contains("k = 1048576 needs about 13.")
                && err.contains("vectors 2.41 GB, centroids 4.29 GB, sums 4.30 GB, index 2.15 GB")
                && err.contains("this machine has 8.00 GB"),
            "{err}"
        );
        let err = format!(
            "{:#}",
            fits(&plan, 2, 16_000_000_000, 1 << 20).expect_err("2 nodes")
        );
        assert!(err.contains("per node, 2 nodes"), "{err}");
        assert!(!err.contains("bounds"), "{err}");
        // A pruned run's refusal names its bounds, and how to run without them.
        let pruned = Assignment::exact(None, Kernel::Int8);
        let plan = kmeans::Memory::estimate(7_420_000, 16_384, 512, Element::F32, 2, pruned, false);
        let err = format!(
            "{:#}",
            fits(&plan, 1, 24_000_000_000, 16_384).expect_err("24 GB")
        );
        assert!(
            err.contains("bounds 15.") && err.contains("drop the bounds (prune false)"),
            "{err}"
        );
    }

    #[test]
    fn u8_partitions_are_planned_at_the_size_of_their_codes() {
        // The paper's shape: 7.42M HOG vectors into a million words.
        let approx = Assignment::Approx {
            lists: 0,
            probes: 8,
            kernel: Kernel::F32,
        };
        let plan =
            |element| kmeans::Memory::estimate(7_420_000, 1 << 20, 512, element, 2, approx, false);
        let (wide, codes) = (plan(Element::F32), plan(Element::U8));
        assert_eq!(wide.vectors, 7_420_000 * (8 + 512 * 4));
        assert_eq!(codes.vectors, 7_420_000 * (8 + 512));
        assert_eq!(wide.total() - wide.vectors, codes.total() - codes.vectors);
        // The integer kernel's lists: their codes and each task's batch on top; the vectors are
        // not quantised whole.
        let int8 = kmeans::Memory::estimate(
            7_420_000,
            1 << 20,
            512,
            Element::U8,
            2,
            Assignment::Approx {
                lists: 0,
                probes: 8,
                kernel: Kernel::Int8,
            },
            false,
        );
        assert_eq!(int8.codes, 0);
        let more = int8.index - codes.index;
        assert!((800_000_000..1_100_000_000).contains(&more), "{more}");
    }
}
