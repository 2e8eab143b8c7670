//! `vocab clean`: what a finished run no longer needs, dropped from its work directory. Kept:
//! the steps the last finished run used (its `report/steps.csv`) and the report. Dropped: the
//! temporary folders interrupted runs left (`.tmp-`, `.resume-`, `.old-`), the steps of keys no
//! longer used (a changed setting's), the partitions made at the nodes for samples no longer
//! used, and, with `--encodings`, the encodings whose models are trained (a run after that
//! does not make them again unless a model needs them).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::cli::CleanArgs;
use crate::memory::human;
use crate::run::step::{STAGES, WorkLock, default_work};

/// What a clean drops, and why.
#[derive(Debug, PartialEq, Eq)]
struct Drop {
    path: PathBuf,
    why: &'static str,
}

/// `vocab clean`.
pub fn clean(args: &CleanArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let work = match (&args.work, &args.config) {
        (Some(work), _) => work.clone(),
        (None, Some(config)) => default_work(config),
        (None, None) => bail!("name the run's config (vocab clean CONFIG) or its --work DIR"),
    };
    anyhow::ensure!(
        work.join(".lock").is_file(),
        "{} is not a vocab work directory (it has no .lock); nothing removed",
        work.display()
    );
    // A run on it now would lose what it is writing.
    let _lock = WorkLock::acquire(&work)?;
    let steps = work.join("report").join("steps.csv");
    let text = std::fs::read_to_string(&steps).with_context(|| {
        format!(
            "{} holds no finished run ({} cannot be read): run it to the end first; nothing \
             removed",
            work.display(),
            steps.display()
        )
    })?;
    let used = used_steps(&text).with_context(|| format!("reading {}", steps.display()))?;
    // The partitions made at the nodes are in `nodes/` unless the config puts them elsewhere;
    // without the config they are left alone.
    let nodes = match &args.config {
        Some(config) => crate::config::load(config)?.partition.folder.is_none(),
        None => false,
    };
    let drops = to_drop(&work, &used, (args.encodings, nodes))?;
    let mut freed = 0u64;
    for drop in &drops {
        let bytes = size(&drop.path);
        freed += bytes;
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        if !args.dry_run {
            std::fs::remove_dir_all(&drop.path)
                .with_context(|| format!("cannot remove {}", drop.path.display()))?;
        }
        writeln!(
            out,
            "  {verb} {} ({}, {})",
            drop.path.display(),
            human(bytes as f64),
            drop.why
        )?;
    }
    writeln!(
        out,
        "clean: {} folder{} {}, {} {}; the {} steps of the last finished run kept",
        drops.len(),
        if drops.len() == 1 { "" } else { "s" },
        if args.dry_run { "to remove" } else { "removed" },
        human(freed as f64),
        if args.dry_run { "to free" } else { "freed" },
        used.len(),
    )?;
    Ok(())
}

/// `stage/label-key` of every step `steps.csv` lists.
fn used_steps(text: &str) -> anyhow::Result<BTreeSet<String>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut used = BTreeSet::new();
    for row in reader.records() {
        let row = row?;
        match (row.get(0), row.get(1), row.get(2)) {
            (Some(stage), Some(label), Some(key)) => {
                used.insert(format!("{stage}/{label}-{key}"));
            }
            _ => bail!("a row without stage, step and key: {row:?}"),
        }
    }
    Ok(used)
}

/// The folders of `work` to drop, given the steps `used` by its last finished run: in the
/// stages' folders, with `encodings` the encode steps too, and with `nodes` the partitions
/// made at the nodes in `nodes/`. Nothing else of the work directory is touched.
fn to_drop(
    work: &Path,
    used: &BTreeSet<String>,
    (encodings, nodes): (bool, bool),
) -> anyhow::Result<Vec<Drop>> {
    let mut drops = Vec::new();
    // The partitions made at the nodes are kept per sample: `nodes/parts-<features key>`.
    let samples: BTreeSet<&str> = (used.iter())
        .filter_map(|s| s.strip_prefix("features/"))
        .filter_map(|s| s.rsplit_once('-').map(|(_, key)| key))
        .collect();
    for stage in entries(work)? {
        let name = file_name(&stage);
        let known = STAGES.contains(&name.as_str()) && name != "report";
        if !stage.is_dir() || stage.is_symlink() || !(known || (nodes && name == "nodes")) {
            continue;
        }
        for entry in entries(&stage)? {
            if !entry.is_dir() || entry.is_symlink() {
                continue;
            }
            let step = file_name(&entry);
            let why = if name == "nodes" {
                let key = step.strip_prefix("parts-").unwrap_or_default();
                (!samples.contains(key)).then_some("partitions of a sample no longer used")
            } else if [".tmp-", ".resume-", ".old-"]
                .iter()
                .any(|p| step.starts_with(p))
            {
                Some("left by an interrupted run")
            } else if !used.contains(&format!("{name}/{step}")) {
                Some("a step the last finished run did not use")
            } else if encodings && name == "encode" {
                Some("encodings of trained models")
            } else {
                None
            };
            if let Some(why) = why {
                drops.push(Drop { path: entry, why });
            }
        }
    }
    Ok(drops)
}

fn entries(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        all.push(
            entry
                .with_context(|| format!("cannot list {}", dir.display()))?
                .path(),
        );
    }
    all.sort();
    Ok(all)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Bytes of the files below `dir` (links not followed).
fn size(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_runs_steps_are_kept_and_the_rest_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path();
        for folder in [
            "features/sample-aaa",
            "features/sample-old",
            "features/.tmp-sample-bbb",
            "kmeans/.resume-k8-ccc",
            "kmeans/k8-ddd",
            "encode/k8-eee",
            "svm/k8-kind-fff",
            "nodes/parts-aaa",
            "nodes/parts-old",
            "report",
        ] {
            std::fs::create_dir_all(work.join(folder)).expect("folder");
        }
        let csv = "stage,step,key,seconds,cached\nfeatures,sample,aaa,1,false\n\
                   kmeans,k8,ddd,1,false\nencode,k8,eee,1,false\nsvm,k8-kind,fff,1,false\n";
        let used = used_steps(csv).expect("steps");
        let names = |drops: Vec<Drop>| -> Vec<String> {
            let rel = |p: &Path| p.strip_prefix(work).expect("below").display().to_string();
            drops.iter().map(|d| rel(&d.path)).collect()
        };
        std::fs::create_dir_all(work.join("mine/keep")).expect("a folder of the user's");
        let dropped = names(to_drop(work, &used, (false, true)).expect("drops"));
        assert_eq!(
            dropped,
            [
                "features/.tmp-sample-bbb",
                "features/sample-old",
                "kmeans/.resume-k8-ccc",
                "nodes/parts-old"
            ]
        );
        let dropped = names(to_drop(work, &used, (true, false)).expect("drops"));
        assert!(
            dropped.contains(&"encode/k8-eee".to_string()),
            "{dropped:?}"
        );
        // Without the config's word, the nodes' partitions are left alone.
        assert!(
            !dropped.iter().any(|d| d.starts_with("nodes/")),
            "{dropped:?}"
        );
        assert!(used_steps("stage,step,key\nfeatures\n").is_err());
    }
}
