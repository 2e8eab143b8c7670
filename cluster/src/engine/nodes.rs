//! Where a job's members are, as a job is started: a team of ranks this process is rank 0 of,
//! or the TCP workers of a cluster file. Every job's root half starts from it, so a caller
//! picks the nodes once and hands them to whichever job it runs.

use super::root::Members;
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::transport::Transport;

/// Where a job's members are.
pub enum Nodes<'a> {
    /// A team of ranks (MPI, or threads of one process): its transport and every rank's host
    /// ([`super::hello`]); rank 0 is this process.
    Ranks {
        /// The team.
        transport: Box<dyn Transport + 'a>,
        /// Hosts, by rank.
        members: &'a Members,
    },
    /// The TCP workers of a cluster file, driven from this process (with recovery).
    Workers {
        /// The cluster file.
        cluster: Cluster,
        /// Its secret.
        secret: Secret,
    },
}

impl std::fmt::Debug for Nodes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ranks { members, .. } => f.debug_tuple("Ranks").field(members).finish(),
            Self::Workers { cluster, .. } => f.debug_tuple("Workers").field(cluster).finish(),
        }
    }
}
