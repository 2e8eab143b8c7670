//! The root's half of the engine: where a job's members are ([`Nodes`]), the hello, job
//! commands, the links measured, the exit.

use std::time::Instant;

use serde::Serialize;

use super::command::{CONTROL, Control, envelope};
use super::error::{EngineError, decode, encode};
use super::member::Hello;
use crate::collective::topology::Links;
use crate::collective::{MAX_CONTROL, Probe, Team, broadcast_message, calibrate, gather};
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::messages::BUILD;
use crate::net::transport::Transport;

/// The hosts of every rank, gathered once per process at the root (members send theirs when
/// they start serving).
#[derive(Debug, Clone)]
pub struct Members {
    /// Host of each rank.
    pub hosts: Vec<String>,
}

/// Where a job's members are.
pub enum Nodes<'a> {
    /// A team of ranks (MPI, or threads of one process): its transport and every rank's host
    /// ([`hello`]); rank 0 is this process.
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

/// Gathers every rank's host at the root; call once, before the first job. A member of
/// another build is refused.
pub fn hello(transport: &dyn Transport) -> Result<Members, EngineError> {
    let control = Team::ranks(transport);
    let mine = Hello {
        host: transport.host(),
        build: BUILD.into(),
    };
    let all = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
    let mut hosts = Vec::with_capacity(all.len());
    for (rank, bytes) in all.iter().enumerate() {
        let hello: Hello = decode(rank, bytes)?;
        if hello.build != BUILD {
            return Err(EngineError::Refused {
                rank,
                host: hello.host,
                reason: format!("it runs {}, the root runs {BUILD}", hello.build),
            });
        }
        hosts.push(hello.host);
    }
    Ok(Members { hosts })
}

/// Sends every member the command `body` of the job tagged `tag` (members in
/// [`super::serve`] hand it to that job).
pub fn send(transport: &dyn Transport, tag: &str, body: &[u8]) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    broadcast_message(&control, Some(&envelope(tag, body)))?;
    Ok(())
}

/// [`send`] with the command as JSON.
pub fn send_json<T: Serialize>(
    transport: &dyn Transport,
    tag: &str,
    command: &T,
) -> Result<(), EngineError> {
    send(transport, tag, &encode(command))
}

/// Measures every link of the team from the root (members must be in [`super::serve`]).
pub fn calibrate_links(
    transport: &dyn Transport,
    probe: Probe,
) -> Result<(Links, f64), EngineError> {
    let started = Instant::now();
    let control = Team::ranks(transport);
    let command = Control::Calibrate {
        small: probe.small as u64,
        pings: probe.pings as u64,
        large: probe.large as u64,
    };
    send_json(transport, CONTROL, &command)?;
    let links = calibrate(&control, probe)?.unwrap_or(Links {
        latency: Vec::new(),
        bandwidth: Vec::new(),
    });
    links.check().map_err(|e| EngineError::Malformed {
        rank: 0,
        reason: vocab_pipeline::chain(&e),
    })?;
    Ok((links, started.elapsed().as_secs_f64()))
}

/// Tells every member to leave [`super::serve`].
pub fn exit(transport: &dyn Transport) -> Result<(), EngineError> {
    send_json(transport, CONTROL, &Control::Exit)
}
