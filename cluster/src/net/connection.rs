//! Frames over a TCP stream: `read_frame` / `write_frame` with a buffered reader and writer.
//!
//! A clean end of stream between frames is `Ok(None)`; an end of stream inside a frame is
//! [`ConnectionError::Reset`]. The read buffer grows to at most one frame (header + payload limit).
//!
//! **Sealed frames.** Once the handshake proved both sides ([`crate::net::auth`]), each direction
//! has a key derived from the secret and both nonces ([`Seal`]), and every frame is followed by a
//! [`TAG_LEN`]-byte tag: HMAC-SHA256 under that key of the frame's sequence number in its
//! direction (0, 1, ...; not sent) and its bytes, truncated. A frame altered on the way (its CRC
//! fixed or not), replayed, reordered, dropped, or sent on another connection does not verify,
//! and ends the connection with [`ConnectionError::Forged`] before its payload is decoded.

use bytes::{Buf, BufMut, BytesMut};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::net::frame::{DEFAULT_MAX_PAYLOAD, Frame, FrameError, HEADER_LEN};

/// Errors of a connection; all of them end it.
#[derive(Debug, Error)]
pub enum ConnectionError {
    /// Socket error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent bytes that are not a valid frame.
    #[error("protocol error: {0}")]
    Frame(#[from] FrameError),
    /// The peer closed the stream in the middle of a frame.
    #[error("connection reset by peer in the middle of a frame")]
    Reset,
    /// A sealed frame's tag does not verify: altered, replayed, reordered or dropped on the way.
    #[error(
        "frame {seq} failed its authentication (altered, replayed, reordered or dropped on the \
         way)"
    )]
    Forged {
        /// Its sequence number in its direction.
        seq: u64,
    },
}

/// Bytes of the tag after every sealed frame (HMAC-SHA256 truncated to 128 bits).
pub const TAG_LEN: usize = 16;

/// One direction's sealing: its key and the sequence number of its next frame.
#[derive(Clone)]
pub struct Seal {
    key: Hmac<Sha256>,
    next: u64,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal").field("next", &self.next).finish()
    }
}

impl Seal {
    /// A direction sealed under `key`, its first frame numbered 0.
    pub fn new(key: &[u8]) -> Self {
        // HMAC takes a key of any length.
        let key = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
        Self { key, next: 0 }
    }

    /// The MAC of the next frame's bytes, its number counted.
    fn mac(&mut self, frame: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.key.clone();
        mac.update(&self.next.to_le_bytes());
        mac.update(frame);
        self.next = self.next.wrapping_add(1);
        mac
    }
}

/// A framed TCP connection: a [`FrameReader`] and a [`FrameWriter`] over the halves of one
/// socket, which [`Connection::into_split`] hands out to run on their own.
#[derive(Debug)]
pub struct Connection {
    reader: FrameReader,
    writer: FrameWriter,
}

/// The reading half of a [`Connection`].
#[derive(Debug)]
pub struct FrameReader {
    stream: OwnedReadHalf,
    buffer: BytesMut,
    max_payload: usize,
    read: u64,
    seal: Option<Seal>,
}

/// The writing half of a [`Connection`].
#[derive(Debug)]
pub struct FrameWriter {
    /// Written a whole encoded frame at a time (no buffer of its own: a handshake's
    /// connection holds only what its frames need).
    stream: OwnedWriteHalf,
    encoded: BytesMut,
    written: u64,
    seal: Option<Seal>,
}

impl Connection {
    /// Wraps a connected socket with the default payload limit.
    pub fn new(socket: TcpStream) -> Self {
        Self::with_limit(socket, DEFAULT_MAX_PAYLOAD)
    }

    /// Changes the payload limit for the frames read from now on (a small one during the
    /// handshake, the full one once the peer authenticated).
    pub fn set_limit(&mut self, max_payload: usize) {
        self.reader.max_payload = max_payload;
    }

    /// Wraps a connected socket, refusing frames whose payload exceeds `max_payload`.
    pub fn with_limit(socket: TcpStream, max_payload: usize) -> Self {
        let (read, write) = socket.into_split();
        Self {
            reader: FrameReader {
                stream: read,
                // A handshake's small limit, a small buffer; grown as frames need.
                buffer: BytesMut::with_capacity((HEADER_LEN + max_payload + TAG_LEN).min(64 << 10)),
                max_payload,
                read: 0,
                seal: None,
            },
            writer: FrameWriter {
                stream: write,
                encoded: BytesMut::new(),
                written: 0,
                seal: None,
            },
        }
    }

    /// Seals every frame from now on: those written under `write`, those read under `read`
    /// (the handshake's end; see the module docs).
    pub fn seal(&mut self, write: Seal, read: Seal) {
        self.writer.seal = Some(write);
        self.reader.seal = Some(read);
    }

    /// The peer's address, if the socket knows it.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.reader.stream.peer_addr().ok()
    }

    /// Reads the next frame; `Ok(None)` when the peer closed cleanly between frames.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ConnectionError> {
        self.reader.read_frame().await
    }

    /// Writes one frame and flushes it.
    pub async fn write_frame(&mut self, frame: &Frame) -> Result<(), ConnectionError> {
        self.writer.write_frame(frame).await
    }

    /// Bytes of whole frames written so far (headers included).
    pub fn bytes_written(&self) -> u64 {
        self.writer.written
    }

    /// Bytes of whole frames read so far (headers included).
    pub fn bytes_read(&self) -> u64 {
        self.reader.read
    }

    /// The two halves, to read and write from different tasks.
    pub fn into_split(self) -> (FrameReader, FrameWriter) {
        (self.reader, self.writer)
    }
}

impl FrameReader {
    /// Reads the next frame; `Ok(None)` when the peer closed cleanly between frames.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ConnectionError> {
        let tag = if self.seal.is_some() { TAG_LEN } else { 0 };
        loop {
            if let Some(header) = Frame::check(&self.buffer, self.max_payload)? {
                let body = HEADER_LEN + header.len;
                let want = body + tag;
                if self.buffer.len() >= want {
                    if let Some(seal) = &mut self.seal {
                        let seq = seal.next;
                        // Verified before a byte of the payload is decoded.
                        (seal.mac(&self.buffer[..body]))
                            .verify_truncated_left(&self.buffer[body..want])
                            .map_err(|_| ConnectionError::Forged { seq })?;
                    }
                    // Whole: `check` passed and `body` bytes are buffered.
                    let parsed = Frame::parse(&self.buffer[..body], self.max_payload)?;
                    let (frame, _) = parsed.ok_or(ConnectionError::Reset)?;
                    self.buffer.advance(want);
                    self.read += want as u64;
                    return Ok(Some(frame));
                }
                // Reserve for the whole frame once its header is known (bounded by the limit).
                self.buffer.reserve(want - self.buffer.len());
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err(ConnectionError::Reset)
                };
            }
        }
    }
}

impl FrameWriter {
    /// Writes one frame and flushes it.
    pub async fn write_frame(&mut self, frame: &Frame) -> Result<(), ConnectionError> {
        self.encoded.clear();
        frame.encode(&mut self.encoded);
        if let Some(seal) = &mut self.seal {
            let tag = seal.mac(&self.encoded).finalize().into_bytes();
            self.encoded.put_slice(&tag[..TAG_LEN]);
        }
        self.stream.write_all(&self.encoded).await?;
        self.stream.flush().await?;
        self.written += self.encoded.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use tokio::net::TcpListener;

    async fn pair() -> (Connection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        (Connection::new(server), client)
    }

    #[tokio::test]
    async fn frames_cross_the_wire_and_clean_eof_is_none() {
        let (mut server, client) = pair().await;
        let mut client = Connection::new(client);
        let chunk = Frame::Data {
            tag: 1,
            data: Bytes::from(vec![7u8; 300_000]),
        };
        client
            .write_frame(&Frame::Ping { seq: 9 })
            .await
            .expect("write");
        client.write_frame(&chunk).await.expect("write");
        drop(client);
        assert_eq!(
            server.read_frame().await.expect("read"),
            Some(Frame::Ping { seq: 9 })
        );
        assert_eq!(server.read_frame().await.expect("read"), Some(chunk));
        assert_eq!(server.read_frame().await.expect("eof"), None);
    }

    /// The bytes of `frame` sealed as the `seq`-th frame under `key`.
    fn sealed(key: &[u8], seq: u64, frame: &Frame) -> Vec<u8> {
        let mut seal = Seal::new(key);
        seal.next = seq;
        let mut bytes = BytesMut::new();
        frame.encode(&mut bytes);
        let tag = seal.mac(&bytes).finalize().into_bytes();
        bytes.put_slice(&tag[..TAG_LEN]);
        bytes.to_vec()
    }

    /// A data frame of `n` bytes of `fill`.
    fn data(n: usize, fill: u8) -> Frame {
        Frame::Data {
            tag: 3,
            data: Bytes::from(vec![fill; n]),
        }
    }

    #[tokio::test]
    async fn sealed_frames_cross_and_their_tags_bind_key_order_and_bytes() {
        let key = [5u8; 32];
        // Honest: a sealed writer to a sealed reader, both directions.
        let (mut server, client) = pair().await;
        let mut client = Connection::new(client);
        client.seal(Seal::new(&key), Seal::new(&[6u8; 32]));
        server.seal(Seal::new(&[6u8; 32]), Seal::new(&key));
        for i in 0..3u8 {
            client.write_frame(&data(1000, i)).await.expect("write");
            server
                .write_frame(&Frame::Pong { seq: i.into() })
                .await
                .expect("write");
        }
        for i in 0..3u8 {
            assert_eq!(
                server.read_frame().await.expect("read"),
                Some(data(1000, i))
            );
            assert_eq!(
                client.read_frame().await.expect("read"),
                Some(Frame::Pong { seq: i.into() })
            );
        }
        // What a relay might send in place of frames 0 and 1, each to a fresh reader.
        let first = sealed(&key, 0, &data(64, 1));
        let second = sealed(&key, 1, &data(64, 2));
        // A bit of the data flipped and the CRC made right again: only the tag tells.
        let mut altered = vec![1u8; 64];
        altered[8] ^= 1;
        let mut recrc = BytesMut::new();
        Frame::Data {
            tag: 3,
            data: Bytes::from(altered),
        }
        .encode(&mut recrc);
        let mut recrc = recrc.to_vec();
        recrc.extend_from_slice(&first[first.len() - TAG_LEN..]);
        let cases: [(&str, Vec<u8>); 5] = [
            ("a bit flipped, CRC fixed", recrc),
            ("replayed", [first.clone(), first.clone()].concat()),
            ("reordered", [second.clone(), first.clone()].concat()),
            ("dropped", second.clone()),
            ("under another key", sealed(&[9u8; 32], 0, &data(64, 1))),
        ];
        for (what, bytes) in cases {
            let (mut server, mut raw) = pair().await;
            server.seal(Seal::new(&[6u8; 32]), Seal::new(&key));
            raw.write_all(&bytes).await.expect("write");
            drop(raw);
            let mut outcome = Ok(None);
            for _ in 0..2 {
                outcome = server.read_frame().await;
                if !matches!(outcome, Ok(Some(_))) {
                    break;
                }
            }
            assert!(
                matches!(outcome, Err(ConnectionError::Forged { .. })),
                "{what}: {outcome:?}"
            );
        }
    }

    #[tokio::test]
    async fn eof_inside_a_frame_and_garbage_are_errors() {
        let (mut server, mut client) = pair().await;
        let mut bytes = BytesMut::new();
        Frame::Pong { seq: 1 }.encode(&mut bytes);
        client
            .write_all(&bytes[..bytes.len() - 3])
            .await
            .expect("write");
        drop(client);
        assert!(matches!(
            server.read_frame().await,
            Err(ConnectionError::Reset)
        ));

        let (mut server, mut client) = pair().await;
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let err = server.read_frame().await.expect_err("garbage");
        assert!(err.to_string().contains("bad magic"), "{err}");
    }

    #[tokio::test]
    async fn oversized_frames_are_refused_from_the_header() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut client = Connection::new(TcpStream::connect(addr).await.expect("connect"));
        let (server, _) = listener.accept().await.expect("accept");
        let mut server = Connection::with_limit(server, 1024);
        let big = Frame::Data {
            tag: 1,
            data: Bytes::from(vec![0u8; 5000]),
        };
        client.write_frame(&big).await.expect("write");
        let err = server.read_frame().await.expect_err("too large");
        assert!(
            err.to_string().contains("exceeds the limit of 1024"),
            "{err}"
        );
    }
}
