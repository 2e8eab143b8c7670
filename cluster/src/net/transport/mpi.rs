//! MPI ranks as a team: point-to-point `MPI_Isend`/`MPI_Irecv` through rsmpi (cargo feature
//! `mpi`), for jobs launched by `mpirun` or `srun`.
//!
//! MPI is initialised with `MPI_THREAD_FUNNELED`: only the thread that created the transport
//! calls MPI (the map tasks run on rayon's threads but never touch MPI). rsmpi's counts are C
//! `int`s, so a buffer travels in [`pieces`] of at most `i32::MAX` bytes with one tag, which MPI
//! delivers in order. A rank that dies ends the job (MPI's default error handler), which is the
//! failure model `--resume` is built for.

use std::time::Duration;

use mpi::Threading;
use mpi::datatype::Equivalence;
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{Recv, Send, Tag, Transport, TransportError, check_peers, pieces};

/// Largest piece one MPI call carries (bytes).
const MAX_PIECE: usize = i32::MAX as usize;

/// This process's rank of `MPI_COMM_WORLD`.
pub struct MpiTransport {
    world: SimpleCommunicator,
    host: String,
    // Finalises MPI when dropped; declared last so the communicator goes first.
    _universe: Universe,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiTransport")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("host", &self.host)
            .finish()
    }
}

impl MpiTransport {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<Self, TransportError> {
        let (universe, _) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| TransportError::Start("MPI was already initialised".into()))?;
        let world = universe.world();
        let host = mpi::environment::processor_name()
            .map_err(|e| TransportError::Start(format!("processor name: {e}")))?;
        Ok(Self {
            world,
            host,
            _universe: universe,
        })
    }

    /// Ends every rank of the job with `code` (`MPI_Abort`).
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// `MPI_COMM_WORLD`, for MPI's own collectives (benchmarks).
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn host(&self) -> String {
        self.host.clone()
    }

    fn wait_idle(&self, from: usize, tag: Tag) {
        let process = self.world.process_at_rank(from as i32);
        let mut pause = Duration::from_micros(50);
        while process.immediate_probe_with_tag(i32::from(tag)).is_none() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }

    fn exchange(&self, sends: &[Send<'_>], recvs: &mut [Recv<'_>]) -> Result<(), TransportError> {
        check_peers(self.size(), sends, recvs)?;
        let mut lengths: Vec<(usize, Tag, usize)> = Vec::new();
        let counts = mpi::request::scope(|scope| {
            let mut receiving = Vec::new();
            for r in recvs.iter_mut() {
                let process = self.world.process_at_rank(r.from as i32);
                let tag = i32::from(r.tag);
                for piece in r.buf.chunks_mut(MAX_PIECE) {
                    lengths.push((r.from, r.tag, piece.len()));
                    receiving.push(process.immediate_receive_into_with_tag(scope, piece, tag));
                }
            }
            let mut sending = Vec::new();
            for s in sends {
                let process = self.world.process_at_rank(s.to as i32);
                for piece in pieces(s.data.len(), MAX_PIECE) {
                    sending.push(process.immediate_send_with_tag(
                        scope,
                        &s.data[piece],
                        i32::from(s.tag),
                    ));
                }
            }
            let counts: Vec<i32> = receiving
                .into_iter()
                .map(|r| r.wait().count(u8::equivalent_datatype()))
                .collect();
            for s in sending {
                s.wait();
            }
            counts
        });
        for (&(from, tag, want), got) in lengths.iter().zip(counts) {
            if usize::try_from(got).ok() != Some(want) {
                return Err(TransportError::Length {
                    from,
                    tag,
                    got: usize::try_from(got).unwrap_or(0),
                    want,
                });
            }
        }
        Ok(())
    }
}
