//! The control messages of the daemons, on top of frames: how a driver forms a team of workers
//! for a job (`crate::net::transport::tcp::team`). Once formed, the team's traffic is
//! [`Frame::Data`] of the TCP transport.
//!
//! Control messages travel as [`Frame::Control`] with a JSON body (small: names, ids).
//!
//! | from → to | message | then |
//! |---|---|---|
//! | driver → worker | [`Message::Join`] | worker links up with the other members, answers [`Message::Joined`], [`Message::Unlinked`] or [`Message::Refused`] |
//! | worker → worker | [`Message::Link`] | the connection becomes the pair's link of the team |

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::net::connection::{Connection, ConnectionError};
use crate::net::frame::Frame;

/// Build identity exchanged when a team forms: members of another build are refused.
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

/// Driver to worker: become member `rank` of the team `members` of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Join {
    /// Job id.
    pub job: u64,
    /// Formation of the team within the job (a new one after every failure).
    pub epoch: u64,
    /// The members' names by rank; rank 0 is the driver.
    pub members: Vec<String>,
    /// The receiver's rank.
    pub rank: u64,
    /// The driver's build.
    pub build: String,
}

/// Worker to worker: this connection is the link of `rank` (the dialer) in a team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Job id.
    pub job: u64,
    /// Formation.
    pub epoch: u64,
    /// The dialer's rank.
    pub rank: u64,
}

/// The messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// See [`Join`].
    Join(Join),
    /// See [`Link`].
    Link(Link),
    /// The worker has a link to every member.
    Joined,
    /// The worker could not link with member `node` (so the driver knows whom to suspect).
    Unlinked {
        /// The member.
        node: String,
        /// What happened.
        reason: String,
    },
    /// A worker refuses a request; the text says why.
    Refused {
        /// Why.
        message: String,
    },
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
            Self::Join(_) => "join",
            Self::Link(_) => "link",
            Self::Joined => "joined",
            Self::Unlinked { .. } => "unlinked",
            Self::Refused { .. } => "refused",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_an_error() {
        let messages = [
            Message::Join(Join {
                job: 1,
                epoch: 2,
                members: vec!["driver".into(), "a".into(), "b".into()],
                rank: 2,
                build: BUILD.into(),
            }),
            Message::Link(Link {
                job: 1,
                epoch: 2,
                rank: 1,
            }),
            Message::Joined,
            Message::Unlinked {
                node: "b".into(),
                reason: "timed out".into(),
            },
            Message::Refused {
                message: "no".into(),
            },
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
            decode(b"{\"joined\":null,\"x\":1}"),
            Err(MessageError::Malformed(_))
        ));
    }
}
