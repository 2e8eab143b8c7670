//! The MPI engine's process model: under `mpirun` or `srun` every rank starts the same
//! `vocab` command line; rank 0 runs the command (driving k-means and mapping its share), every
//! other rank serves every job of rank 0 (`vocab_cluster::jobs::serve`) until it is told to leave.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use vocab_cluster::engine::Members;
use vocab_cluster::net::transport::Transport;

use crate::cli::Command;
use crate::progress::Ui;
use vocab_cluster::net::transport::Kind as TransportKind;

/// Rank 0's handle on the MPI job: the transport, every rank's host, and their racks.
#[derive(Clone)]
pub struct Mpi<'a> {
    /// The ranks.
    pub transport: &'a dyn Transport,
    /// Hosts, by rank.
    pub members: Members,
    /// Host -> rack (`--racks`); empty: every host is a rack of its own.
    pub racks: BTreeMap<String, String>,
}

/// Reads a rack map: a TOML file of `"host" = "rack"` lines.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn read_racks(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = vocab_pipeline::input::read_text(path, vocab_pipeline::input::MAX_RECORD_BYTES)
        .with_context(|| format!("cannot read the rack map {}", path.display()))?;
    toml::from_str(&text).with_context(|| {
        format!(
            "rack map {}: expected lines of \"host\" = \"rack\"",
            path.display()
        )
    })
}

/// Whether `command` runs under MPI: its `--engine` says `mpi` ([`Command::engine`]), or it is
/// the collectives' benchmark, which runs only there.
pub fn wants_mpi(command: &Command) -> bool {
    command.engine() == Some(TransportKind::Mpi)
        || matches!(
            command,
            Command::Bench(crate::cli::BenchCommand::Collectives(_))
        )
}

/// Runs `command` as one rank of an MPI job.
#[cfg(feature = "mpi")]
pub fn main(command: Command, ui: &Ui) -> anyhow::Result<()> {
    use vocab_cluster::engine;
    use vocab_cluster::net::transport::mpi::MpiTransport;

    use crate::faults::ExitAt;

    let transport = MpiTransport::init().context("starting MPI")?;
    let rank = transport.rank();
    if let Command::Bench(crate::cli::BenchCommand::Collectives(args)) = &command {
        // Every rank runs the benchmark's collectives itself.
        return crate::bench_cmd::collectives(&transport, args);
    }
    if rank != 0 {
        let faults = match &command {
            Command::Kmeans(crate::cli::KmeansArgs { team, .. })
            | Command::Mixture(crate::cli::MixtureArgs { team, .. }) => {
                match parse_fault(team.exit_rank_at.as_deref())? {
                    Some((r, step)) if r == rank => ExitAt {
                        step: Some(step),
                        ..ExitAt::default()
                    },
                    _ => ExitAt::default(),
                }
            }
            Command::Run(args) => match parse_fault(args.exit_rank_in_round.as_deref())? {
                Some((r, round)) if r == rank => ExitAt {
                    round: Some(round),
                    ..ExitAt::default()
                },
                _ => ExitAt::default(),
            },
            _ => ExitAt::default(),
        };
        if let Err(e) = vocab_cluster::jobs::serve(&transport, &faults) {
            // The root waits for this rank: end the whole job rather than leave it hanging.
            eprintln!("error: rank {rank} on {}: {e}", transport.host());
            transport.abort(1);
        }
        return Ok(());
    }
    let racks = match &command {
        Command::Kmeans(args) => args.team.racks.as_deref(),
        Command::Mixture(args) => args.team.racks.as_deref(),
        Command::Run(args) => args.racks.as_deref(),
        _ => None,
    }
    .map(read_racks)
    .transpose();
    let racks = match racks {
        Ok(r) => r.unwrap_or_default(),
        Err(e) => {
            eprintln!("error: {e:#}");
            let _ = engine::exit(&transport);
            return Err(e);
        }
    };
    let members = match engine::hello(&transport) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: starting the MPI job: {e}");
            transport.abort(1);
        }
    };
    let mpi = Mpi {
        transport: &transport,
        members,
        racks,
    };
    let result = match &command {
        Command::Kmeans(args) => parse_fault(args.team.exit_rank_at.as_deref()),
        Command::Mixture(args) => parse_fault(args.team.exit_rank_at.as_deref()),
        Command::Run(args) => parse_fault(args.exit_rank_in_round.as_deref()),
        _ => Ok(None),
    }
    .and_then(|fault| match fault {
        Some((0, _)) => Err(anyhow::anyhow!(
            "fault injection: rank 0 drives; name another rank"
        )),
        _ => crate::dispatch(command, ui, Some(&mpi)),
    });
    // The other ranks wait for rank 0's next command, whatever happened here: let them go.
    if let Err(e) = engine::exit(&transport) {
        eprintln!("error: releasing the other ranks: {e}");
        transport.abort(1);
    }
    result
}

/// Without the `mpi` feature there is no MPI engine: say how to get one.
#[cfg(not(feature = "mpi"))]
pub fn main(_command: Command, _ui: &Ui) -> anyhow::Result<()> {
    anyhow::bail!(
        "--engine mpi: this vocab was built without MPI; install an MPI library and build with \
         `cargo build --release --features mpi` or install with `cargo install --locked --path . \
         --features mpi` (cluster/README.md: Running with MPI)"
    )
}

/// Parses the hidden `--exit-rank-at R:N` and `--exit-rank-in-round R:N`.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn parse_fault(text: Option<&str>) -> anyhow::Result<Option<(usize, u64)>> {
    let Some(text) = text else { return Ok(None) };
    let parsed = text
        .split_once(':')
        .and_then(|(r, n)| Some((r.parse().ok()?, n.parse().ok()?)));
    parsed
        .map(Some)
        .with_context(|| format!("{text}: expected RANK:N (a fault injection flag)"))
}
