//! Transports: how the members of a team move bytes between each other.
//!
//! The collectives (`crate::collective`) are written once against [`Transport`]: members are
//! numbered `0..size`, and the one primitive, [`Transport::exchange`], posts a set of sends and
//! a set of receives at once and returns when all of them completed. Posting both sides
//! together is what a pipelined chain needs (a member receives chunk `i + 1` while it forwards
//! chunk `i`) and what MPI's non-blocking point-to-point calls do.
//!
//! * [`memory::MemoryTransport`]: members are threads of one process (tests of the collectives).
//! * `mpi::MpiTransport` (cargo feature `mpi`): MPI ranks, `MPI_Isend`/`MPI_Irecv` through rsmpi.
//! * [`tcp::TcpTransport`]: the driver and the worker daemons, over the cluster's
//!   authenticated connections.
//!
//! Messages between two members with the same tag arrive in the order they were sent (MPI's
//! non-overtaking rule); a receive names the exact length it expects, and a message of another
//! length is an error. Empty messages are not sent at all: a zero-length send and a zero-length
//! receive both complete at once.

use std::ops::Range;

use thiserror::Error;

pub mod memory;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod tcp;

/// The transports a distributed run can be asked for (the command line's `--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Kind {
    /// vocab's authenticated TCP worker daemons.
    Tcp,
    /// MPI ranks (mpirun, srun).
    Mpi,
}

/// Message tag. MPI guarantees tags up to 32,767 on every implementation.
pub type Tag = u16;

/// One send of an exchange.
#[derive(Debug)]
pub struct Send<'a> {
    /// Receiving member.
    pub to: usize,
    /// Tag.
    pub tag: Tag,
    /// Bytes.
    pub data: &'a [u8],
}

/// One receive of an exchange: exactly `buf.len()` bytes from `from` with `tag`.
#[derive(Debug)]
pub struct Recv<'a> {
    /// Sending member.
    pub from: usize,
    /// Tag.
    pub tag: Tag,
    /// Where the bytes go.
    pub buf: &'a mut [u8],
}

/// Errors of a transport.
#[derive(Debug, Error)]
pub enum TransportError {
    /// A member that is not in the team.
    #[error("member {member} is outside the team of {size}")]
    NoSuchMember {
        /// The member named.
        member: usize,
        /// Team size.
        size: usize,
    },
    /// A message of another length than the receive expected: the peers disagree on the
    /// protocol.
    #[error("message from member {from} (tag {tag}) has {got} bytes, {want} expected")]
    Length {
        /// Sender.
        from: usize,
        /// Tag.
        tag: Tag,
        /// Bytes that arrived.
        got: usize,
        /// Bytes expected.
        want: usize,
    },
    /// The peer is gone (its end of the transport was dropped).
    #[error("member {member} left the team")]
    Gone {
        /// The member.
        member: usize,
    },
    /// The link to a member broke or fell silent.
    #[error("link to member {member} is down: {reason}")]
    Link {
        /// The member.
        member: usize,
        /// What happened.
        reason: String,
    },
    /// Nothing arrived in time.
    #[error("no message from member {from} (tag {tag}) within {seconds} s")]
    Timeout {
        /// Sender.
        from: usize,
        /// Tag.
        tag: Tag,
        /// Seconds waited.
        seconds: u64,
    },
    /// The transport could not start.
    #[error("cannot start the transport: {0}")]
    Start(String),
}

/// Point-to-point messages between the numbered members of a team.
pub trait Transport {
    /// This member's number.
    fn rank(&self) -> usize;

    /// Members in the team.
    fn size(&self) -> usize;

    /// The host this member runs on (racks default to host names).
    fn host(&self) -> String;

    /// Posts every send and every receive at once; returns when all completed. A member may
    /// appear in several sends or receives (they match in order per peer and tag).
    fn exchange(&self, sends: &[Send<'_>], recvs: &mut [Recv<'_>]) -> Result<(), TransportError>;

    /// Waits, without spinning, until a message from `from` with `tag` is there to receive.
    /// Members that idle between jobs call this before a receive: MPI's blocking receive
    /// busy-polls and would take a core from the work rank 0 does meanwhile. The default
    /// returns at once (the receive itself blocks).
    fn wait_idle(&self, from: usize, tag: Tag) {
        let _ = (from, tag);
    }

    /// Sends `data` to `to` (completes when the transport took the bytes).
    fn send(&self, to: usize, tag: Tag, data: &[u8]) -> Result<(), TransportError> {
        self.exchange(&[Send { to, tag, data }], &mut [])
    }

    /// Receives exactly `buf.len()` bytes from `from`.
    fn recv(&self, from: usize, tag: Tag, buf: &mut [u8]) -> Result<(), TransportError> {
        self.exchange(&[], &mut [Recv { from, tag, buf }])
    }
}

impl<T: Transport + ?Sized> Transport for &T {
    fn rank(&self) -> usize {
        (**self).rank()
    }

    fn size(&self) -> usize {
        (**self).size()
    }

    fn host(&self) -> String {
        (**self).host()
    }

    fn exchange(&self, sends: &[Send<'_>], recvs: &mut [Recv<'_>]) -> Result<(), TransportError> {
        (**self).exchange(sends, recvs)
    }

    fn wait_idle(&self, from: usize, tag: Tag) {
        (**self).wait_idle(from, tag);
    }
}

impl TransportError {
    /// The member a failure points at, when it is about one (a link down, a member gone or
    /// silent).
    pub fn suspect(&self) -> Option<usize> {
        match self {
            Self::Gone { member } | Self::Link { member, .. } => Some(*member),
            Self::Timeout { from, .. } => Some(*from),
            _ => None,
        }
    }
}

/// Checks that every peer of an exchange is in the team.
pub(crate) fn check_peers(
    size: usize,
    sends: &[Send<'_>],
    recvs: &[Recv<'_>],
) -> Result<(), TransportError> {
    let bad = sends
        .iter()
        .map(|s| s.to)
        .chain(recvs.iter().map(|r| r.from))
        .find(|&m| m >= size);
    match bad {
        Some(member) => Err(TransportError::NoSuchMember { member, size }),
        None => Ok(()),
    }
}

/// The pieces a buffer of `len` bytes travels in when one call carries at most `max` bytes
/// (MPI counts are C `int`s: at most 2^31 - 1 elements per call). Both sides cut the same way,
/// and pieces with one tag between two members arrive in order, so they reassemble in place.
pub fn pieces(len: usize, max: usize) -> impl Iterator<Item = Range<usize>> {
    let max = max.max(1);
    (0..len.div_ceil(max)).map(move |i| i * max..((i + 1) * max).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_tile_the_buffer_within_the_limit() {
        for (len, max) in [(0, 4), (1, 4), (4, 4), (5, 4), (9, 4), (10, 1), (7, 100)] {
            let all: Vec<Range<usize>> = pieces(len, max).collect();
            let mut next = 0;
            for r in &all {
                assert_eq!(r.start, next, "len {len} max {max}");
                assert!(!r.is_empty() && r.len() <= max, "len {len} max {max}");
                next = r.end;
            }
            assert_eq!(next, len);
            assert_eq!(all.len(), len.div_ceil(max));
        }
        // The MPI limit on a buffer above 2^31 bytes: two full pieces and a remainder.
        let big = (1usize << 32) + 5;
        let max = i32::MAX as usize;
        let all: Vec<Range<usize>> = pieces(big, max).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].end, big);
        assert!(all.iter().all(|r| r.len() <= max));
    }
}
