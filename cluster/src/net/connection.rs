//! Frames over a TCP stream: `read_frame` / `write_frame` with a buffered reader and writer.
//!
//! A clean end of stream between frames is `Ok(None)`; an end of stream inside a frame is
//! [`ConnectionError::Reset`]. The read buffer grows to at most one frame (header + payload limit).

use bytes::{Buf, BytesMut};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
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
}

/// The writing half of a [`Connection`].
#[derive(Debug)]
pub struct FrameWriter {
    stream: BufWriter<OwnedWriteHalf>,
    encoded: BytesMut,
    written: u64,
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
                buffer: BytesMut::with_capacity(64 << 10),
                max_payload,
                read: 0,
            },
            writer: FrameWriter {
                stream: BufWriter::with_capacity(256 << 10, write),
                encoded: BytesMut::new(),
                written: 0,
            },
        }
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
        loop {
            if let Some((frame, used)) = Frame::parse(&self.buffer, self.max_payload)? {
                self.buffer.advance(used);
                self.read += used as u64;
                return Ok(Some(frame));
            }
            // Reserve for the whole frame once its header is known (bounded by the limit).
            if let Some(header) = Frame::check(&self.buffer, self.max_payload)? {
                let want = HEADER_LEN + header.len;
                self.buffer.reserve(want.saturating_sub(self.buffer.len()));
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
