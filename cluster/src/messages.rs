//! The messages of distributed k-means, on top of frames.
//!
//! Control messages travel as [`Frame::Control`] with a JSON body (small: names, ids, timings);
//! bulk data (partial sums, centroid ranges) follows a message that announces its length, as
//! [`Frame::Chunk`]s whose offsets must arrive in sequence. Every frame carries its own CRC, so a
//! blob needs no checksum of its own. Floats whose exact bits matter travel as their bit patterns.
//!
//! | from → to | message | then |
//! |---|---|---|
//! | driver → worker | [`Message::Load`] | worker answers [`Message::Loaded`] or [`Message::Refused`] |
//! | driver → worker | [`Message::Step`] | worker sends [`Message::Working`] beats, then [`Message::StepDone`] + blob |
//! | worker → worker | [`Message::Range`] + blob | receiver answers [`Message::Received`] |

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::connection::{Connection, ConnectionError};
use crate::frame::Frame;

/// Build identity exchanged at load: workers of another build are refused.
pub const BUILD: &str = concat!("vocab ", env!("CARGO_PKG_VERSION"));

/// Errors of message exchange.
#[derive(Debug, Error)]
pub enum MessageError {
    /// The connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// Nothing arrived in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The peer closed the connection.
    #[error("the peer closed the connection")]
    Closed,
    /// The peer could not be dialled.
    #[error("{0}")]
    Unreachable(String),
    /// The body is not a message of this build.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The peer refused or reported an error.
    #[error("{0}")]
    Remote(String),
    /// A valid message that does not belong here.
    #[error("unexpected message: {0}")]
    Unexpected(String),
}

/// Driver to worker: cache these partitions (the static data) for a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Job id.
    pub job: u64,
    /// Partition folder, as the worker sees it.
    pub dir: String,
    /// Digest of the driver's partition manifest.
    pub manifest: u32,
    /// Partition indices this worker maps.
    pub partitions: Vec<u32>,
    /// The driver's build.
    pub build: String,
}

/// Worker to driver: partitions cached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loaded {
    /// Vectors in the worker's partitions.
    pub rows: u64,
    /// Bits of the largest absolute value in them (f32).
    pub max_abs_bits: u32,
    /// Nonzero values per binary exponent (`vocab_pipeline::kmeans::partial::magnitudes`).
    #[serde(default)]
    pub magnitudes: Vec<u64>,
    /// The worker's build.
    pub build: String,
    /// Digest of the worker's copy of the manifest.
    pub manifest: u32,
}

/// Driver to worker: run one iteration on the broadcast centroids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Job id.
    pub job: u64,
    /// Membership epoch: bumped whenever partitions are reassigned.
    pub epoch: u64,
    /// 1-based iteration.
    pub iteration: u64,
    /// Broadcast id of the centroids.
    pub centroids: u64,
    /// Centroids.
    pub k: u64,
    /// Values per centroid.
    pub dims: u64,
    /// Fixed-point scale of the partial sums.
    pub scale: i32,
    /// Workers in range order: worker `j` reduces centroid range `j`.
    pub workers: Vec<String>,
    /// Stage-1 (local) aggregation: ship one merged partial per node, or one per map task.
    pub stage1: bool,
    /// The map tasks' full-pass kernel is the int8 one (the f32 GEMM otherwise).
    #[serde(default)]
    pub int8: bool,
}

/// Worker to driver: the iteration's reduced range follows as a blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDone {
    /// Seconds in the map tasks.
    pub map_seconds: f64,
    /// Seconds merging the map tasks' partials (stage 1).
    pub stage1_seconds: f64,
    /// Seconds from receiving the step to the end of stage 1.
    pub mapped_at: f64,
    /// Seconds from receiving the step until the worker's range was reduced (end of stage 2).
    pub reduced_at: f64,
    /// Bytes this worker sent to other workers in stage 2.
    pub stage2_bytes: u64,
    /// Map tasks that ran.
    pub tasks: u64,
    /// Vectors whose label pruning kept without a search.
    pub kept: u64,
    /// Inertia per map unit: `(unit key, f64 bits)`.
    pub units: Vec<(u64, u64)>,
    /// First centroid of the worker's range.
    pub start: u64,
    /// One past its last centroid.
    pub end: u64,
    /// Length of the blob that follows.
    pub len: u64,
}

/// Worker to worker: a slice of partial sums for the receiver's range follows as a blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// Job id.
    pub job: u64,
    /// Membership epoch.
    pub epoch: u64,
    /// Iteration.
    pub iteration: u64,
    /// Sender's position in [`Step::workers`].
    pub from: u32,
    /// Number of workers (senders the receiver waits for).
    pub workers: u32,
    /// First centroid of the range.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// Values per centroid.
    pub dims: u64,
    /// Partials in the blob (1 with stage-1 aggregation, else one per map task).
    pub tasks: u64,
    /// Length of the blob that follows.
    pub len: u64,
}

/// The messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// See [`Load`].
    Load(Load),
    /// See [`Loaded`].
    Loaded(Loaded),
    /// A worker refuses a request; the text says why.
    Refused {
        /// Why.
        message: String,
    },
    /// See [`Step`].
    Step(Step),
    /// Heartbeat of a worker busy with a step.
    Working,
    /// See [`StepDone`].
    StepDone(StepDone),
    /// See [`Range`].
    Range(Range),
    /// A range blob was received and added.
    Received,
}

impl Message {
    /// Encodes as a control frame.
    pub fn to_frame(&self) -> Frame {
        // Serialising these plain structs cannot fail.
        let body = serde_json::to_vec(self).unwrap_or_default();
        Frame::Control(Bytes::from(body))
    }

    /// Short name for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Load(_) => "load",
            Self::Loaded(_) => "loaded",
            Self::Refused { .. } => "refused",
            Self::Step(_) => "step",
            Self::Working => "working",
            Self::StepDone(_) => "step_done",
            Self::Range(_) => "range",
            Self::Received => "received",
        }
    }
}

/// Decodes a control frame's body.
pub fn decode(body: &[u8]) -> Result<Message, MessageError> {
    serde_json::from_slice(body).map_err(|e| MessageError::Malformed(e.to_string()))
}

/// Sends `message`.
pub async fn send(conn: &mut Connection, message: &Message) -> Result<(), MessageError> {
    Ok(conn.write_frame(&message.to_frame()).await?)
}

/// Receives the next message within `deadline`; [`Message::Refused`] and error frames become
/// [`MessageError::Remote`].
pub async fn recv(conn: &mut Connection, deadline: Duration) -> Result<Message, MessageError> {
    match tokio::time::timeout(deadline, conn.read_frame()).await {
        Err(_) => Err(MessageError::Timeout(deadline)),
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(None)) => Err(MessageError::Closed),
        Ok(Ok(Some(Frame::Control(body)))) => match decode(&body)? {
            Message::Refused { message } => Err(MessageError::Remote(message)),
            message => Ok(message),
        },
        Ok(Ok(Some(Frame::Error { message }))) => Err(MessageError::Remote(message)),
        Ok(Ok(Some(other))) => Err(MessageError::Unexpected(other.describe())),
    }
}

/// Sends `data` as chunks of at most `chunk` bytes (rounded down to a multiple of 8, so 8-byte
/// values never straddle chunks) under transfer `id`.
pub async fn send_blob(
    conn: &mut Connection,
    id: u64,
    data: &[u8],
    chunk: usize,
) -> Result<(), MessageError> {
    let chunk = (chunk / 8 * 8).max(8);
    let total = data.len() as u64;
    let data = Bytes::copy_from_slice(data);
    let mut at = 0;
    while at < data.len() {
        let end = (at + chunk).min(data.len());
        conn.write_frame(&Frame::Chunk {
            id,
            offset: at as u64,
            total,
            data: data.slice(at..end),
        })
        .await?;
        at = end;
    }
    Ok(())
}

/// Receives a blob of `len` bytes under transfer `id`, handing each chunk to `sink` with its
/// offset; each chunk must arrive within `deadline`.
pub async fn recv_blob(
    conn: &mut Connection,
    id: u64,
    len: u64,
    deadline: Duration,
    mut sink: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<(), MessageError> {
    let mut received = 0u64;
    while received < len {
        let frame = match tokio::time::timeout(deadline, conn.read_frame()).await {
            Err(_) => return Err(MessageError::Timeout(deadline)),
            Ok(result) => result?.ok_or(MessageError::Closed)?,
        };
        match frame {
            Frame::Chunk {
                id: got,
                offset,
                total,
                data,
            } if got == id && total == len && offset == received => {
                if data.is_empty() {
                    return Err(MessageError::Malformed("empty chunk".into()));
                }
                sink(offset, &data).map_err(MessageError::Malformed)?;
                received += data.len() as u64;
            }
            Frame::Error { message } => return Err(MessageError::Remote(message)),
            Frame::Control(body) => {
                return Err(match decode(&body)? {
                    Message::Refused { message } => MessageError::Remote(message),
                    other => MessageError::Unexpected(other.name().into()),
                });
            }
            other => {
                return Err(MessageError::Malformed(format!(
                    "expected chunk at offset {received} of transfer {id}, got {}",
                    other.describe()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_an_error() {
        let messages = [
            Message::Load(Load {
                job: 1,
                dir: "/data/parts".into(),
                manifest: 7,
                partitions: vec![0, 3],
                build: BUILD.into(),
            }),
            Message::StepDone(StepDone {
                map_seconds: 0.1,
                stage1_seconds: 0.2,
                mapped_at: 0.3,
                reduced_at: 0.4,
                stage2_bytes: 4,
                tasks: 2,
                kept: 0,
                units: vec![(1 << 32, 1.5f64.to_bits())],
                start: 0,
                end: 5,
                len: 40,
            }),
            Message::Working,
        ];
        for m in messages {
            let Frame::Control(body) = m.to_frame() else {
                panic!("not a control frame")
            };
            assert_eq!(decode(&body).expect("decode"), m);
        }
        assert!(matches!(
            decode(b"{\"nope\":1}"),
            Err(MessageError::Malformed(_))
        ));
        assert!(matches!(
            decode(b"{\"working\":null,\"x\":1}"),
            Err(MessageError::Malformed(_))
        ));
    }
}
