//! `vocab bench collectives` (with the `mpi` feature): vocab's collectives against MPI's on the
//! ranks of one MPI job.

use std::time::Instant;

use anyhow::{Context, ensure};
use vocab_pipeline::kmeans::Partial;

/// `vocab bench collectives`, on every rank of an MPI job: vocab's chain broadcast and stage 2
/// against `MPI_Bcast`, `MPI_Reduce_scatter_block` and `MPI_Allreduce` on the same ranks and
/// bytes, alternating. Each timing runs from a barrier to a barrier (the slowest rank's time).
pub fn collectives(
    transport: &vocab_cluster::net::transport::mpi::MpiTransport,
    args: &crate::cli::BenchCollectivesArgs,
) -> anyhow::Result<()> {
    use vocab_cluster::collective::Algorithm;
    use vocab_cluster::collective::{BroadcastPlan, Team};
    use vocab_cluster::net::transport::Transport;

    let world = transport.world();
    let (rank, w) = (transport.rank(), transport.size());
    let team = Team::ranks(transport);
    let chunk = usize::try_from(args.chunk_size)?.max(8);
    let plan = BroadcastPlan {
        algorithm: Algorithm::Chain,
        chunk,
        chains: 1,
    };
    let mut rows = String::new();
    for &bytes in &args.bytes {
        let bytes = usize::try_from(bytes)?;
        ensure!(
            bytes >= 8 * 64 * w && bytes < i32::MAX as usize,
            "--bytes {bytes}: between {} and 2 GiB for {w} ranks",
            8 * 64 * w
        );
        let mut buffers = CollectiveBuffers::new(bytes, rank, w);
        for round in 0..=args.repeat {
            let cases = collective_round(world, &team, plan, chunk, rank, &mut buffers)?;
            if round == 0 || rank != 0 {
                continue; // warm-up
            }
            for (collective, implementation, seconds) in cases {
                let row = format!(
                    "{},{w},{bytes},{collective},{implementation},{round},{seconds:.6}",
                    args.label
                );
                println!("{row}");
                rows.push_str(&row);
                rows.push('\n');
            }
        }
    }
    if let (0, Some(path)) = (rank, &args.csv) {
        append_rows(path, &rows)?;
    }
    Ok(())
}

/// The data of one message size in [`collectives`], made alike on every rank (the sums scaled
/// by the rank).
struct CollectiveBuffers {
    /// The broadcast's bytes, and the buffer they are broadcast in.
    message: Vec<u8>,
    buf: Vec<u8>,
    /// Stage 2's centroids and their dims.
    k: usize,
    dims: usize,
    /// This rank's sums for vocab's stage 2.
    partial: Partial,
    /// The same words for MPI's reductions, and their outputs.
    send: Vec<i64>,
    scattered: Vec<i64>,
    reduced: Vec<i64>,
}

impl CollectiveBuffers {
    /// The buffers for `bytes` on rank `rank` of `w`.
    fn new(bytes: usize, rank: usize, w: usize) -> Self {
        let message: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        let buf = vec![0u8; bytes];
        // Stage 2: k centroids of 63 dims (64 words each) of sums per rank.
        let dims = 63;
        let k = bytes / 8 / (dims + 1);
        // Every centroid holds vectors, so every piece ships dense (a centroid without vectors
        // would be left out of a sparse piece and the stage would move nothing).
        let partial = Partial::from_dense(
            dims,
            0,
            vec![1; k],
            (0..k * dims).map(|i| (i * (rank + 1)) as i64).collect(),
        );
        let words = k * (dims + 1) / w * w;
        let send: Vec<i64> = (0..words).map(|i| (i * (rank + 1)) as i64).collect();
        let scattered = vec![0i64; words / w];
        let reduced = vec![0i64; words];
        Self {
            message,
            buf,
            k,
            dims,
            partial,
            send,
            scattered,
            reduced,
        }
    }
}

/// One round of [`collectives`] (`chunk`: stage 2's piece size): each case timed from a barrier to a barrier, in order, as
/// (collective, implementation, seconds). The broadcasts must deliver the message.
fn collective_round(
    world: &mpi::topology::SimpleCommunicator,
    team: &vocab_cluster::collective::Team<'_>,
    plan: vocab_cluster::collective::BroadcastPlan,
    chunk: usize,
    rank: usize,
    b: &mut CollectiveBuffers,
) -> anyhow::Result<Vec<(&'static str, &'static str, f64)>> {
    use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
    use mpi::topology::Communicator;
    use vocab_cluster::collective::{broadcast, reduce_ranges};

    let timed = |f: &mut dyn FnMut() -> anyhow::Result<()>| -> anyhow::Result<f64> {
        world.barrier();
        let started = Instant::now();
        f()?;
        world.barrier();
        Ok(started.elapsed().as_secs_f64())
    };
    let mut cases: Vec<(&str, &str, f64)> = Vec::new();
    let seconds = timed(&mut || {
        if rank == 0 {
            b.buf.copy_from_slice(&b.message);
        }
        broadcast(team, plan, &mut b.buf)?;
        ensure!(
            b.buf == b.message,
            "rank {rank}: the chain broadcast delivered other bytes"
        );
        Ok(())
    })?;
    cases.push(("broadcast", "vocab-chain", seconds));
    let seconds = timed(&mut || {
        if rank == 0 {
            b.buf.copy_from_slice(&b.message);
        }
        world.process_at_rank(0).broadcast_into(&mut b.buf[..]);
        ensure!(
            b.buf == b.message,
            "rank {rank}: MPI_Bcast delivered other bytes"
        );
        Ok(())
    })?;
    cases.push(("broadcast", "MPI_Bcast", seconds));
    let seconds = timed(&mut || {
        reduce_ranges(team, std::slice::from_ref(&b.partial), b.k, b.dims, chunk)?;
        Ok(())
    })?;
    cases.push(("stage2", "vocab-ranges", seconds));
    let seconds = timed(&mut || {
        world.reduce_scatter_block_into(&b.send[..], &mut b.scattered[..], SystemOperation::sum());
        Ok(())
    })?;
    cases.push(("stage2", "MPI_Reduce_scatter_block", seconds));
    let seconds = timed(&mut || {
        world.all_reduce_into(&b.send[..], &mut b.reduced[..], SystemOperation::sum());
        Ok(())
    })?;
    cases.push(("stage2", "MPI_Allreduce", seconds));
    Ok(cases)
}

/// Appends the CSV `rows` of [`collectives`] to `path`, with the header if the file is new.
fn append_rows(path: &std::path::Path, rows: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut file = vocab_pipeline::output::append(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    if file.metadata().map(|m| m.len() == 0).unwrap_or(false) {
        writeln!(
            file,
            "label,ranks,bytes,collective,implementation,run,seconds"
        )?;
    }
    file.write_all(rows.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
