//! Dialing cluster nodes: TCP with the configured socket buffers and timeouts, then the client
//! side of the authentication handshake.

use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpSocket;

use crate::net::auth::{AuthError, Secret, client_handshake};
use crate::net::config::{Cluster, Node};
use crate::net::connection::Connection;

/// Why a node could not be reached.
#[derive(Debug, Error)]
pub enum DialError {
    /// The cluster file has no such node.
    #[error("node {0} is not in the cluster file")]
    Unknown(String),
    /// TCP connection failed or timed out.
    #[error("cannot connect to {node} at {address}: {reason}")]
    Connect {
        /// Node name.
        node: String,
        /// Its address.
        address: std::net::SocketAddr,
        /// What happened.
        reason: String,
    },
    /// The node did not authenticate.
    #[error("node {node}")]
    Auth {
        /// Node name.
        node: String,
        /// Underlying error.
        source: AuthError,
    },
}

/// Connects to `node` as `me` and authenticates.
pub async fn dial(
    cluster: &Cluster,
    node: &Node,
    secret: &Secret,
    me: &str,
) -> Result<Connection, DialError> {
    let s = &cluster.settings;
    let connect_err = |reason: String| DialError::Connect {
        node: node.name.clone(),
        address: node.address,
        reason,
    };
    let socket = if node.address.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|e| connect_err(e.to_string()))?;
    // Buffer sizes are hints to the kernel; failing to set them is not fatal.
    let _ = socket.set_send_buffer_size(s.socket_buffer as u32);
    let _ = socket.set_recv_buffer_size(s.socket_buffer as u32);
    let stream = match tokio::time::timeout(
        Duration::from_millis(s.connect_timeout_ms),
        socket.connect(node.address),
    )
    .await
    {
        Err(_) => return Err(connect_err("timed out".into())),
        Ok(Err(e)) => return Err(connect_err(vocab_pipeline::chain(&e))),
        Ok(Ok(stream)) => stream,
    };
    let _ = stream.set_nodelay(true);
    let mut conn = Connection::new(stream);
    client_handshake(
        &mut conn,
        secret,
        me,
        Duration::from_millis(s.io_timeout_ms),
    )
    .await
    .map_err(|source| DialError::Auth {
        node: node.name.clone(),
        source,
    })?;
    Ok(conn)
}

/// Looks a node up by name, then dials it.
pub async fn dial_name(
    cluster: &Cluster,
    name: &str,
    secret: &Secret,
    me: &str,
) -> Result<Connection, DialError> {
    let node = cluster
        .nodes
        .iter()
        .find(|n| n.name == name)
        .ok_or_else(|| DialError::Unknown(name.to_string()))?;
    dial(cluster, node, secret, me).await
}

/// Dials `node` and times an authenticated ping/pong round trip (bounded by the I/O timeout).
pub async fn ping(
    cluster: &Cluster,
    node: &Node,
    secret: &Secret,
    me: &str,
) -> Result<Duration, PingError> {
    let started = std::time::Instant::now();
    let mut conn = dial(cluster, node, secret, me).await?;
    conn.write_frame(&crate::net::frame::Frame::Ping { seq: 1 })
        .await?;
    let deadline = Duration::from_millis(cluster.settings.io_timeout_ms);
    match tokio::time::timeout(deadline, conn.read_frame()).await {
        Err(_) => Err(PingError::Timeout),
        Ok(Ok(Some(crate::net::frame::Frame::Pong { seq: 1 }))) => Ok(started.elapsed()),
        Ok(Ok(Some(other))) => Err(PingError::Unexpected(other.describe())),
        Ok(Ok(None)) => Err(PingError::Closed),
        Ok(Err(e)) => Err(e.into()),
    }
}

/// Why a node did not answer a ping.
#[derive(Debug, Error)]
pub enum PingError {
    /// Dialing or the handshake failed.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The connection failed.
    #[error("the ping failed")]
    Connection(#[from] crate::net::connection::ConnectionError),
    /// No answer in time.
    #[error("no answer before the timeout")]
    Timeout,
    /// An answer that is not the pong.
    #[error("answered {0}")]
    Unexpected(String),
    /// The node hung up.
    #[error("closed the connection")]
    Closed,
}
