//! Links measured between the members (`--order auto`): where they are kept (beside the cluster
//! file, or beside the vocabulary under MPI), read back for the next run, and saved.

use std::path::{Path, PathBuf};

use crate::settings::TeamSettings;
use vocab_cluster::collective::Probe;
use vocab_cluster::collective::calibration::Order;
use vocab_cluster::collective::calibration::{Auto, Calibration};
use vocab_cluster::collective::topology::Saved;

/// Where the measured links of a cluster file go.
pub fn links_path(cluster: &Path) -> PathBuf {
    vocab_pipeline::output::side(cluster, "links.json")
}

/// `--order auto`: measure the links with the default probes and choose the chain for a
/// broadcast of `bytes` (the centroids', the mixture's).
pub fn auto_order(team: &TeamSettings, bytes: f64) -> Option<Auto> {
    (team.order == Order::Auto).then(|| Auto {
        probe: Probe::default(),
        bytes,
    })
}

/// Where `--order auto` keeps its measured links: beside the cluster file (`--cluster`), or
/// beside the vocabulary under MPI; none for loopback workers.
pub fn links_file(team: &TeamSettings) -> Option<PathBuf> {
    if team.order != Order::Auto {
        return None;
    }
    team.engine.links_beside(&team.out).map(links_path)
}

/// Links measured before, if `path` holds them (a file that does not parse is reported and
/// measured anew).
pub fn read_links(path: &Path) -> Option<Saved> {
    let text =
        vocab_pipeline::input::read_text(path, vocab_pipeline::input::MAX_RECORD_BYTES).ok()?;
    match serde_json::from_str(&text) {
        Ok(saved) => Some(saved),
        Err(e) => {
            eprintln!(
                "kmeans: ignoring {} (measuring the links anew): {e}",
                path.display()
            );
            None
        }
    }
}

/// Saves a calibration's links for the next run (best effort: a failure is reported).
pub fn save_links(path: &Path, c: &Calibration, labels: &[String]) {
    if c.reused {
        return;
    }
    let saved = Saved::new(labels, &c.links, c.seconds);
    let written = serde_json::to_vec_pretty(&saved)
        .map_err(std::io::Error::other)
        .and_then(|text| vocab_pipeline::atomic::write(path, &text));
    if let Err(e) = written {
        eprintln!(
            "kmeans: cannot save the measured links to {}: {e}",
            path.display()
        );
    }
}
