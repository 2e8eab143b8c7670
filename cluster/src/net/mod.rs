//! The network layer: the wire format and what carries it. `frame` (the wire enum), `connection`
//! (frames over a buffered stream), `auth` (the handshake), `peer` (dialling a node), `messages`
//! (the daemons' control messages), `config` (the cluster file), and the transports a team runs
//! on (`transport`: TCP, MPI, in memory). Nothing here knows a collective, an engine or a job.

pub mod auth;
pub mod config;
pub mod connection;
pub mod frame;
pub mod messages;
pub mod peer;
pub mod transport;
