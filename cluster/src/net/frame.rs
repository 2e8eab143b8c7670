//! The wire format: versioned, length-delimited, checksummed frames with explicit message kinds.
//!
//! Every frame is a 12-byte header then the payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `VC` |
//! | 2 | 1 | protocol version ([`PROTOCOL_VERSION`]) |
//! | 3 | 1 | message kind |
//! | 4 | 4 | payload length, little-endian |
//! | 8 | 4 | CRC-32 of header bytes 0..8 and the payload, little-endian |
//!
//! After the handshake each frame is followed by a 16-byte tag that authenticates it
//! ([`crate::net::connection::Seal`]).
//!
//! [`Frame::check`] validates a header before any payload is buffered: a wrong magic, another
//! version, an unknown kind or a length above the connection's limit is an error straight away, so
//! a peer cannot make the reader allocate more than the limit. Payload fields are little-endian;
//! strings are a `u16` length then UTF-8 bytes. Decoding never panics on any input (a property
//! test feeds it random bytes).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Protocol version spoken by this build (8: a photo job's description may resize photos for a
/// patch side and its encoding pool horizontal strips, which an older worker would ignore; 7: a
/// photo job's stage names the descriptors made
/// elsewhere it reads, and a cut of partitions born on the nodes its records' values; 6:
/// k-means' stage-3 piece is typed words, no JSON; 5: every frame after the handshake is
/// sealed, see [`crate::net::connection`]; 4: a photo job's description may ask for mirrored
/// photos).
pub const PROTOCOL_VERSION: u8 = 8;
/// Magic bytes opening every frame.
pub const MAGIC: [u8; 2] = *b"VC";
/// Header length in bytes.
pub const HEADER_LEN: usize = 12;
/// Default payload limit: a broadcast chunk of the largest allowed size plus its fields.
pub const DEFAULT_MAX_PAYLOAD: usize = crate::net::config::MAX_CHUNK_SIZE + 64;
/// Length of authentication nonces and proofs.
pub const NONCE_LEN: usize = 32;

/// Why bytes are not a valid frame. Any of these closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The first two bytes are not `VC`.
    #[error("bad magic {0:02x?}: not a vocab peer")]
    BadMagic([u8; 2]),
    /// The peer speaks another protocol version.
    #[error("protocol version {0}, this build speaks {PROTOCOL_VERSION}")]
    Version(u8),
    /// Unknown message kind.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// Payload above the limit.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Announced payload length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Checksum mismatch.
    #[error("frame checksum mismatch")]
    Checksum,
    /// The payload does not decode as its kind.
    #[error("malformed {kind} payload: {message}")]
    Malformed {
        /// Message kind name.
        kind: &'static str,
        /// What is wrong.
        message: &'static str,
    },
}

/// The messages of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Client opens authentication: who it is, and its nonce.
    Hello {
        /// Node name (or `driver`).
        name: String,
        /// Client nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// Server answers with its nonce (and nothing that depends on the secret: the connecting
    /// side proves itself first).
    Challenge {
        /// Server nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// Client's proof of the secret.
    Response {
        /// HMAC proving the client knows the secret.
        proof: [u8; NONCE_LEN],
    },
    /// Authentication succeeded: the server's proof of the secret over both nonces.
    Welcome {
        /// HMAC proving the server knows the secret.
        proof: [u8; NONCE_LEN],
    },
    /// Liveness probe.
    Ping {
        /// Echoed sequence number.
        seq: u64,
    },
    /// Answer to a ping.
    Pong {
        /// The ping's sequence number.
        seq: u64,
    },
    /// The peer reports an error and will close.
    Error {
        /// Message.
        message: String,
    },
    /// A control message of the daemons (JSON; see `crate::net::messages`).
    Control(Bytes),
    /// A message of a team's transport (`crate::net::transport::tcp`): a piece of the bytes one
    /// member sends another with `tag`.
    Data {
        /// The transport tag.
        tag: u16,
        /// The bytes.
        data: Bytes,
    },
}

const HELLO: u8 = 1;
const CHALLENGE: u8 = 2;
const RESPONSE: u8 = 3;
const WELCOME: u8 = 4;
const PING: u8 = 5;
const PONG: u8 = 6;
const ERROR: u8 = 7;
const CONTROL: u8 = 8;
const DATA: u8 = 9;

/// A validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message kind.
    pub kind: u8,
    /// Payload length.
    pub len: usize,
    /// Payload checksum.
    pub crc: u32,
}

impl Frame {
    /// A short description for logs and errors: the kind and the payload size, never the
    /// payload (a peer's frame may be megabytes, and its bytes do not belong in a log).
    pub fn describe(&self) -> String {
        let (name, bytes) = match self {
            Self::Hello { name, .. } => ("hello", name.len()),
            Self::Challenge { .. } => ("challenge", 0),
            Self::Response { .. } => ("response", 0),
            Self::Welcome { .. } => ("welcome", 0),
            Self::Ping { .. } => ("ping", 0),
            Self::Pong { .. } => ("pong", 0),
            Self::Error { message } => ("error", message.len()),
            Self::Control(body) => ("control", body.len()),
            Self::Data { data, .. } => ("data", data.len()),
        };
        if bytes == 0 {
            format!("a {name} frame")
        } else {
            format!("a {name} frame ({bytes} bytes)")
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Self::Hello { .. } => HELLO,
            Self::Challenge { .. } => CHALLENGE,
            Self::Response { .. } => RESPONSE,
            Self::Welcome { .. } => WELCOME,
            Self::Ping { .. } => PING,
            Self::Pong { .. } => PONG,
            Self::Error { .. } => ERROR,
            Self::Control(_) => CONTROL,
            Self::Data { .. } => DATA,
        }
    }

    /// Validates the header at the start of `buf`; `Ok(None)` if fewer than [`HEADER_LEN`] bytes.
    pub fn check(buf: &[u8], max_payload: usize) -> Result<Option<Header>, FrameError> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let magic = [buf[0], buf[1]];
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        if buf[2] != PROTOCOL_VERSION {
            return Err(FrameError::Version(buf[2]));
        }
        let kind = buf[3];
        if !(HELLO..=DATA).contains(&kind) {
            return Err(FrameError::UnknownKind(kind));
        }
        let len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        if len > max_payload {
            return Err(FrameError::TooLarge {
                len,
                max: max_payload,
            });
        }
        let crc = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
        Ok(Some(Header { kind, len, crc }))
    }

    /// Decodes one frame from the start of `buf`: `Ok(None)` when more bytes are needed, else the
    /// frame and the number of bytes it used.
    pub fn parse(buf: &[u8], max_payload: usize) -> Result<Option<(Frame, usize)>, FrameError> {
        let Some(header) = Self::check(buf, max_payload)? else {
            return Ok(None);
        };
        let end = HEADER_LEN + header.len;
        if buf.len() < end {
            return Ok(None);
        }
        let payload = &buf[HEADER_LEN..end];
        if frame_crc(&buf[..8], payload) != header.crc {
            return Err(FrameError::Checksum);
        }
        Ok(Some((decode_payload(header.kind, payload)?, end)))
    }

    /// Appends the encoded frame to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let start = out.len();
        out.put_slice(&MAGIC);
        out.put_u8(PROTOCOL_VERSION);
        out.put_u8(self.kind());
        out.put_u32_le(0);
        out.put_u32_le(0);
        match self {
            Self::Hello { name, nonce } => {
                put_str(out, name);
                out.put_slice(nonce);
            }
            Self::Challenge { nonce } => out.put_slice(nonce),
            Self::Response { proof } | Self::Welcome { proof } => out.put_slice(proof),
            Self::Ping { seq } | Self::Pong { seq } => out.put_u64_le(*seq),
            Self::Error { message } => put_str(out, message),
            Self::Control(payload) => out.put_slice(payload),
            Self::Data { tag, data } => {
                out.put_u16_le(*tag);
                out.put_slice(data);
            }
        }
        let len = (out.len() - start - HEADER_LEN) as u32;
        out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
        let crc = frame_crc(&out[start..start + 8], &out[start + HEADER_LEN..]);
        out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The frame checksum: CRC-32 over the first 8 header bytes (magic, version, kind, length) and
/// the payload, so a damaged kind or length is caught as surely as damaged data.
fn frame_crc(head: &[u8], payload: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(head);
    crc.update(payload);
    crc.finalize()
}

fn put_str(out: &mut BytesMut, s: &str) {
    // Strings are names and messages: cut at 65,535 bytes on a character boundary.
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.put_u16_le(end as u16);
    out.put_slice(&s.as_bytes()[..end]);
}

fn decode_payload(kind: u8, mut p: &[u8]) -> Result<Frame, FrameError> {
    let name = match kind {
        HELLO => "hello",
        CHALLENGE => "challenge",
        RESPONSE => "response",
        WELCOME => "welcome",
        PING => "ping",
        PONG => "pong",
        CONTROL => "control",
        DATA => "data",
        _ => "error",
    };
    let short = |message| FrameError::Malformed {
        kind: name,
        message,
    };
    let need = |p: &[u8], n: usize| {
        if p.remaining() < n {
            Err(short("payload too short"))
        } else {
            Ok(())
        }
    };
    let take_arr = |p: &mut &[u8]| -> Result<[u8; NONCE_LEN], FrameError> {
        need(p, NONCE_LEN)?;
        let mut a = [0u8; NONCE_LEN];
        p.copy_to_slice(&mut a);
        Ok(a)
    };
    let take_str = |p: &mut &[u8]| -> Result<String, FrameError> {
        need(p, 2)?;
        let len = p.get_u16_le() as usize;
        need(p, len)?;
        let s = std::str::from_utf8(&p[..len])
            .map_err(|_| short("string is not UTF-8"))?
            .to_string();
        p.advance(len);
        Ok(s)
    };
    let frame = match kind {
        HELLO => {
            let name = take_str(&mut p)?;
            Frame::Hello {
                name,
                nonce: take_arr(&mut p)?,
            }
        }
        CHALLENGE => Frame::Challenge {
            nonce: take_arr(&mut p)?,
        },
        RESPONSE => Frame::Response {
            proof: take_arr(&mut p)?,
        },
        WELCOME => Frame::Welcome {
            proof: take_arr(&mut p)?,
        },
        PING | PONG => {
            need(p, 8)?;
            let seq = p.get_u64_le();
            if kind == PING {
                Frame::Ping { seq }
            } else {
                Frame::Pong { seq }
            }
        }
        CONTROL => {
            let payload = Bytes::copy_from_slice(p);
            p = &[];
            Frame::Control(payload)
        }
        DATA => {
            need(p, 2)?;
            let tag = p.get_u16_le();
            let data = Bytes::copy_from_slice(p);
            p = &[];
            Frame::Data { tag, data }
        }
        _ => Frame::Error {
            message: take_str(&mut p)?,
        },
    };
    if p.has_remaining() {
        return Err(short("trailing bytes"));
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(frame: &Frame) -> BytesMut {
        let mut out = BytesMut::new();
        frame.encode(&mut out);
        out
    }

    fn frames() -> impl Strategy<Value = Frame> {
        let arr = any::<[u8; NONCE_LEN]>();
        prop_oneof![
            (".{0,40}", arr).prop_map(|(name, nonce)| Frame::Hello { name, nonce }),
            arr.prop_map(|nonce| Frame::Challenge { nonce }),
            arr.prop_map(|proof| Frame::Response { proof }),
            arr.prop_map(|proof| Frame::Welcome { proof }),
            any::<u64>().prop_map(|seq| Frame::Ping { seq }),
            any::<u64>().prop_map(|seq| Frame::Pong { seq }),
            ".{0,60}".prop_map(|message| Frame::Error { message }),
            proptest::collection::vec(any::<u8>(), 0..100)
                .prop_map(|p| Frame::Control(Bytes::from(p))),
            (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..100)).prop_map(|(tag, p)| {
                Frame::Data {
                    tag,
                    data: Bytes::from(p),
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(frame in frames()) {
            let bytes = encoded(&frame);
            prop_assert_eq!(Frame::parse(&bytes, DEFAULT_MAX_PAYLOAD), Ok(Some((frame, bytes.len()))));
            // Every strict prefix asks for more bytes instead of failing or guessing.
            for cut in [0, 1, HEADER_LEN - 1, HEADER_LEN, bytes.len() - 1] {
                if cut < bytes.len() {
                    prop_assert_eq!(Frame::parse(&bytes[..cut], DEFAULT_MAX_PAYLOAD), Ok(None));
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Frame::parse(&bytes, 1 << 10);
        }

        #[test]
        fn random_payloads_behind_a_valid_header_never_panic(kind in 1u8..=DATA, payload in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut buf = BytesMut::new();
            buf.put_slice(&MAGIC);
            buf.put_u8(PROTOCOL_VERSION);
            buf.put_u8(kind);
            buf.put_u32_le(payload.len() as u32);
            let crc = frame_crc(&buf[..8], &payload);
            buf.put_u32_le(crc);
            buf.put_slice(&payload);
            let _ = Frame::parse(&buf, 1 << 10);
        }

        #[test]
        fn a_corrupted_frame_is_rejected(frame in frames(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut bytes = encoded(&frame);
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
            // Header damage is caught by the header checks or the length/CRC; payload damage by
            // the CRC. A damaged length may make the frame look incomplete: never a wrong frame.
            if let Ok(Some((decoded, _))) = Frame::parse(&bytes, DEFAULT_MAX_PAYLOAD) {
                prop_assert!(false, "accepted a damaged frame: {decoded:?}");
            }
        }
    }

    #[test]
    fn oversized_and_foreign_headers_fail_before_the_payload_arrives() {
        let mut header = BytesMut::new();
        header.put_slice(&MAGIC);
        header.put_u8(PROTOCOL_VERSION);
        header.put_u8(DATA);
        header.put_u32_le(u32::MAX);
        header.put_u32_le(0);
        assert_eq!(
            Frame::check(&header, 1 << 20),
            Err(FrameError::TooLarge {
                len: u32::MAX as usize,
                max: 1 << 20
            })
        );
        header[2] = PROTOCOL_VERSION + 1;
        assert_eq!(
            Frame::check(&header, 1 << 20),
            Err(FrameError::Version(PROTOCOL_VERSION + 1))
        );
        header[2] = PROTOCOL_VERSION;
        header[3] = 77;
        assert_eq!(
            Frame::check(&header, 1 << 20),
            Err(FrameError::UnknownKind(77))
        );
        assert_eq!(
            Frame::check(b"GET / HTTP/1.1\r\n", 1 << 20),
            Err(FrameError::BadMagic(*b"GE"))
        );
    }
}
