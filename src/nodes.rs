//! Where a command's distributed jobs run, picked once: the settings name an engine
//! ([`Backend`]), and [`start`] turns it into the library's [`Nodes`] for each job: the ranks
//! of the MPI job this process is rank 0 of, or TCP workers (a cluster file's, or loopback
//! workers started for the job, logging beside its output). Every job (k-means, the photo
//! stages) starts from what it returns; nothing else in the binary asks which engine it is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use vocab_cluster::engine::Nodes;
use vocab_cluster::net::config::Cluster;

use crate::daemons::{LocalCluster, Loopback};
use crate::ranks::Mpi;
use crate::settings::Backend;

/// The nodes of one job, started, with what the job says of them.
pub struct Started<'a> {
    /// Where the members are.
    pub nodes: Nodes<'a>,
    /// Host -> rack of the ranks (`--racks`; empty on TCP workers, whose cluster file says).
    pub racks: BTreeMap<String, String>,
    /// What is said of the nodes and kept until the job ends.
    pub place: Place,
}

/// What a job says of its nodes; loopback workers started for it stop when it is dropped
/// (drop it after the job has let them go).
pub struct Place {
    /// For summaries: `MPI ranks`, `loopback workers, logs in DIR`, `the workers of FILE`.
    pub what: String,
    /// For errors: `the MPI ranks`, `the cluster of FILE`, `2 loopback workers (logs in DIR)`.
    pub whence: String,
    /// Loopback workers started for the job: how many, and where they log.
    pub loopback: Option<(usize, PathBuf)>,
    _local: Option<Loopback>,
}

/// Refuses an engine that does not match the process: `--engine mpi` outside rank 0 of an
/// MPI job, or an MPI job asked to run elsewhere.
pub fn check(engine: &Backend, mpi: Option<&Mpi<'_>>) -> anyhow::Result<()> {
    anyhow::ensure!(
        engine.is_mpi() == mpi.is_some(),
        "--engine mpi: this process is not rank 0 of an MPI job"
    );
    Ok(())
}

/// The nodes of a job on the distributed `engine` (`mpi`: this process is rank 0 of that MPI
/// job): the ranks, or the TCP workers of `--cluster`, or loopback workers started now (their
/// logs in `logs`).
pub fn start<'a>(
    engine: &Backend,
    mpi: Option<&'a Mpi<'a>>,
    logs: &Path,
) -> anyhow::Result<Started<'a>> {
    check(engine, mpi)?;
    if let Some(mpi) = mpi {
        return Ok(Started {
            nodes: Nodes::Ranks {
                transport: Box::new(mpi.transport),
                members: &mpi.members,
            },
            racks: mpi.racks.clone(),
            place: Place {
                what: "MPI ranks".into(),
                whence: "the MPI ranks".into(),
                loopback: None,
                _local: None,
            },
        });
    }
    let (path, local) = match engine.cluster_file() {
        Some(path) => (path.to_path_buf(), None),
        None => {
            let n = engine.local_nodes();
            anyhow::ensure!(n > 0, "the TCP engine runs on TCP workers");
            let tmp = tempfile::tempdir().context("cannot create a folder for local workers")?;
            let threads = (rayon::current_num_threads() / n).max(1);
            let keep = crate::daemons::Keep::InMemory;
            let local = LocalCluster::start(tmp.path(), n, 1, threads, logs, keep)?;
            (local.path.clone(), Some((local, tmp)))
        }
    };
    let (cluster, secret) = match &local {
        Some((local, _)) => (Cluster::load(&path)?, local.secret.clone()),
        None => crate::daemons::load(&path)?,
    };
    // The loopback workers' cluster file is a temporary one: messages name the workers and
    // their logs, never that file.
    let (what, whence) = match &local {
        Some(_) => (
            format!("loopback workers, logs in {}", logs.display()),
            format!(
                "{} loopback workers (logs in {})",
                engine.local_nodes(),
                logs.display()
            ),
        ),
        None => (
            format!("the workers of {}", path.display()),
            format!("the cluster of {}", path.display()),
        ),
    };
    Ok(Started {
        nodes: Nodes::Workers { cluster, secret },
        racks: BTreeMap::new(),
        place: Place {
            what,
            whence,
            loopback: local
                .as_ref()
                .map(|_| (engine.local_nodes(), logs.to_path_buf())),
            _local: local,
        },
    })
}
