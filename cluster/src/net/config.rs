//! Cluster files: which nodes exist, on which racks, in which chain order, and the runtime's
//! settings.
//!
//! ```toml
//! [settings]
//! chunk_size = 262144         # bytes per broadcast chunk
//! socket_buffer = 4194304     # SO_SNDBUF / SO_RCVBUF, bytes
//! chains = 1                  # parallel chains of the multi-chain broadcast
//! connect_timeout_ms = 5000
//! io_timeout_ms = 30000
//! retries = 3
//! secret_file = "secret"      # relative to this file
//!
//! [[nodes]]
//! name = "n1"
//! address = "10.0.0.1:7070"
//! rack = "r1"
//! ```
//!
//! The chain visits racks in the order they first appear and, within a rack, nodes in file order,
//! so that a broadcast crosses each inter-rack link once; `order = ["n3", "n1", ...]` overrides it
//! with an explicit permutation of all node names.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

/// Largest chunk the wire format allows (frames are size-limited).
pub const MAX_CHUNK_SIZE: usize = 16 << 20;

/// Errors of cluster files.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read cluster file {path}")]
    Read {
        /// Cluster file.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for a cluster file (the message names the key and line).
    #[error("invalid cluster file {path}: {message}")]
    Parse {
        /// Cluster file.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// The file parses but breaks a rule.
    #[error("invalid cluster file {path}: {message}")]
    Invalid {
        /// Cluster file.
        path: PathBuf,
        /// The rule broken.
        message: String,
    },
}

/// Runtime settings, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Bytes per broadcast chunk.
    pub chunk_size: usize,
    /// Socket send/receive buffer size in bytes.
    pub socket_buffer: usize,
    /// Parallel chains of the multi-chain broadcast.
    pub chains: usize,
    /// Connection timeout in milliseconds.
    pub connect_timeout_ms: u64,
    /// Read/write timeout in milliseconds.
    pub io_timeout_ms: u64,
    /// Attempts after a failure before giving up.
    pub retries: u32,
    /// File holding the shared secret, relative to the cluster file.
    pub secret_file: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            chunk_size: 256 << 10,
            socket_buffer: 4 << 20,
            chains: 1,
            connect_timeout_ms: 5_000,
            io_timeout_ms: 30_000,
            retries: 3,
            secret_file: None,
        }
    }
}

/// One node as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// `host:port` the node's worker listens on.
    pub address: SocketAddr,
    /// Rack the node sits in.
    #[serde(default = "default_rack")]
    pub rack: String,
}

fn default_rack() -> String {
    "rack0".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    #[serde(default)]
    settings: Settings,
    nodes: Vec<Node>,
    order: Option<Vec<String>>,
}

/// A validated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// Runtime settings; `secret_file` is resolved against the cluster file's folder.
    pub settings: Settings,
    /// Nodes in file order.
    pub nodes: Vec<Node>,
    /// Chain order: indices into `nodes`.
    pub chain: Vec<usize>,
}

impl Cluster {
    /// Reads and validates a cluster file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = vocab_pipeline::input::read_text(path, vocab_pipeline::input::MAX_RECORD_BYTES)
            .map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Self::parse(&text, path)
    }

    /// Validates cluster-file text; `path` names the file in errors and anchors `secret_file`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let raw: RawCluster = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        if raw.nodes.is_empty() {
            return Err(invalid("lists no nodes".into()));
        }
        let mut names = HashSet::new();
        let mut addresses = HashSet::new();
        for node in &raw.nodes {
            if node.name.is_empty() {
                return Err(invalid("a node has an empty name".into()));
            }
            if !names.insert(node.name.as_str()) {
                return Err(invalid(format!("node name {:?} appears twice", node.name)));
            }
            if !addresses.insert(node.address) {
                return Err(invalid(format!("address {} appears twice", node.address)));
            }
        }
        let s = &raw.settings;
        if s.chunk_size == 0 || s.chunk_size > MAX_CHUNK_SIZE {
            return Err(invalid(format!(
                "settings.chunk_size {} must be 1..={MAX_CHUNK_SIZE}",
                s.chunk_size
            )));
        }
        if s.socket_buffer == 0 {
            return Err(invalid("settings.socket_buffer must be positive".into()));
        }
        if s.chains == 0 || s.chains > raw.nodes.len() {
            return Err(invalid(format!(
                "settings.chains {} must be 1..={} (the node count)",
                s.chains,
                raw.nodes.len()
            )));
        }
        if s.connect_timeout_ms == 0 || s.io_timeout_ms == 0 {
            return Err(invalid("timeouts must be positive".into()));
        }
        let chain = match &raw.order {
            Some(order) => explicit_order(&raw.nodes, order).map_err(invalid)?,
            None => rack_order(&raw.nodes),
        };
        let mut settings = raw.settings;
        if let Some(secret) = &settings.secret_file {
            let base = path.parent().unwrap_or(Path::new("."));
            settings.secret_file = Some(base.join(secret));
        }
        Ok(Self {
            settings,
            nodes: raw.nodes,
            chain,
        })
    }

    /// The node a node forwards to in the chain, if any.
    pub fn successor(&self, name: &str) -> Option<&Node> {
        let pos = self
            .chain
            .iter()
            .position(|&i| self.nodes[i].name == name)?;
        self.chain.get(pos + 1).map(|&i| &self.nodes[i])
    }

    /// Nodes in chain order.
    pub fn chain_nodes(&self) -> impl Iterator<Item = &Node> {
        self.chain.iter().map(|&i| &self.nodes[i])
    }
}

/// Racks in order of first appearance; nodes of a rack in file order.
fn rack_order(nodes: &[Node]) -> Vec<usize> {
    let mut racks: Vec<&str> = Vec::new();
    for node in nodes {
        if !racks.contains(&node.rack.as_str()) {
            racks.push(&node.rack);
        }
    }
    racks
        .iter()
        .flat_map(|rack| {
            nodes
                .iter()
                .enumerate()
                .filter(move |(_, n)| n.rack == *rack)
                .map(|(i, _)| i)
        })
        .collect()
}

fn explicit_order(nodes: &[Node], order: &[String]) -> Result<Vec<usize>, String> {
    let mut chain = Vec::with_capacity(order.len());
    for name in order {
        let idx = nodes
            .iter()
            .position(|n| &n.name == name)
            .ok_or_else(|| format!("order names unknown node {name:?}"))?;
        if chain.contains(&idx) {
            return Err(format!("order names node {name:?} twice"));
        }
        chain.push(idx);
    }
    if chain.len() != nodes.len() {
        let missing: Vec<&str> = nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !chain.contains(i))
            .map(|(_, n)| n.name.as_str())
            .collect();
        return Err(format!("order leaves out nodes {missing:?}"));
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[settings]
chunk_size = 262144
secret_file = "secret"

[[nodes]]
name = "a1"
address = "127.0.0.1:7001"
rack = "a"

[[nodes]]
name = "b1"
address = "127.0.0.1:7002"
rack = "b"

[[nodes]]
name = "a2"
address = "127.0.0.1:7003"
rack = "a"
"#;

    fn parse(text: &str) -> Result<Cluster, ConfigError> {
        Cluster::parse(text, Path::new("/etc/vocab/cluster.toml"))
    }

    fn names(c: &Cluster) -> Vec<&str> {
        c.chain_nodes().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn chain_groups_nodes_by_rack() {
        let c = parse(FILE).expect("valid");
        assert_eq!(names(&c), ["a1", "a2", "b1"]);
        assert_eq!(c.successor("a2").map(|n| n.name.as_str()), Some("b1"));
        assert_eq!(c.successor("b1"), None);
        assert_eq!(c.settings.chunk_size, 262_144);
        assert_eq!(c.settings.socket_buffer, Settings::default().socket_buffer);
        assert_eq!(
            c.settings.secret_file.as_deref(),
            Some(Path::new("/etc/vocab/secret"))
        );
    }

    #[test]
    fn explicit_order_overrides_racks() {
        let c = parse(&format!("order = [\"b1\", \"a2\", \"a1\"]\n{FILE}")).expect("valid");
        assert_eq!(names(&c), ["b1", "a2", "a1"]);
    }

    #[test]
    fn broken_files_name_the_rule() {
        let cases = [
            (
                FILE.replace("7003", "7001"),
                "address 127.0.0.1:7001 appears twice",
            ),
            (
                FILE.replace("\"a2\"", "\"a1\""),
                "node name \"a1\" appears twice",
            ),
            (FILE.replace("262144", "0"), "settings.chunk_size 0"),
            (
                format!("order = [\"b1\", \"a1\"]\n{FILE}"),
                "order leaves out nodes [\"a2\"]",
            ),
            (
                format!("order = [\"b1\", \"zz\", \"a1\"]\n{FILE}"),
                "unknown node \"zz\"",
            ),
            (FILE.replace("chunk_size", "chunk_sise"), "chunk_sise"),
            (FILE.replace("127.0.0.1:7002", "not-an-address"), "line 13"),
            ("[settings]\n".to_string(), "nodes"),
        ];
        for (text, expected) in cases {
            let msg = parse(&text).expect_err(expected).to_string();
            assert!(
                msg.contains(expected) && msg.contains("cluster.toml"),
                "expected {expected:?} in {msg}"
            );
        }
    }
}
