//! Memory in figures for people: sizes in units, a k-means memory plan's parts, and this
//! machine's total memory (the plan, `vocab kmeans` and `config check` use them).

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
