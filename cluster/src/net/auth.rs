//! Mutual challenge-response authentication with the cluster's shared secret.
//!
//! ```text
//! client -> Hello     { name, client_nonce }
//! server -> Challenge { server_nonce }
//! client -> Response  { HMAC(secret, "vocab-client" | server_nonce | client_nonce | name) }
//! server    checks the client's proof (or sends Error and drops the connection), then
//! server -> Welcome   { HMAC(secret, "vocab-server" | client_nonce | server_nonce | name) }
//! client    checks the server's proof
//! ```
//!
//! HMAC-SHA256, 32-byte nonces from the operating system's generator, constant-time comparison.
//! Then both sides seal every frame ([`crate::net::connection::Seal`]) under a key a direction,
//! `HMAC(secret, "vocab-frames-client" | client_nonce | server_nonce | name)` and `...-server`:
//! fresh for every connection, known only to the two proved ends.
//! The secret never crosses the wire; both sides prove they know it, so an outsider can neither
//! join (and then read broadcasts or inject data) nor impersonate a worker. The connecting side
//! proves itself first: a stranger who connects to a worker receives nothing computed from the
//! secret, so it cannot test guesses of the secret offline. Whoever receives a proof could, so
//! secrets below an entropy floor ([`MIN_SECRET_BITS`]) are refused. Every step has a deadline,
//! so a silent peer cannot hold a connection open.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use thiserror::Error;

use crate::net::connection::{Connection, ConnectionError, Seal};
use crate::net::frame::{Frame, NONCE_LEN};

/// Shortest accepted secret, in bytes (a floor under the entropy floor, which 64 hex digits of 32
/// random bytes pass and 32 hex digits of 16 usually do not).
pub const MIN_SECRET_LEN: usize = 16;

/// Least estimated entropy of an accepted secret, in bits ([`entropy_bits`]).
pub const MIN_SECRET_BITS: f64 = 128.0;

/// Labels of the two directions' frame keys.
const CLIENT_FRAMES: &[u8] = b"vocab-frames-client";
const SERVER_FRAMES: &[u8] = b"vocab-frames-server";

/// Largest secret file read.
const MAX_SECRET_FILE: u64 = 4096;

/// How to make a secret that passes, for the messages that refuse one (32 random bytes: the
/// estimate asks for more than 128 bits' worth of characters, so 16 random bytes in hex fall
/// short of it).
pub const SECRET_HINT: &str = "use 32 random bytes, e.g. (umask 077; head -c 32 /dev/urandom | \
     od -An -tx1 | tr -d ' \\n' > secret), or let vocab cluster local write one";

/// Errors of authentication; the connection is dropped after any of them.
#[derive(Debug, Error)]
pub enum AuthError {
    /// The secret file could not be read.
    #[error("cannot read secret file {}", path.display())]
    SecretFile {
        /// Secret file.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The secret is too short or too predictable.
    #[error("secret file {} holds a guessable secret ({what}); {SECRET_HINT}", path.display())]
    WeakSecret {
        /// Secret file.
        path: PathBuf,
        /// What makes it guessable.
        what: String,
    },
    /// The secret file can be read by other users (as ssh refuses such keys).
    #[error("secret file {} is readable by other users (mode {mode:o}); run: chmod 600 {}", path.display(), path.display())]
    OpenSecret {
        /// Secret file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The peer could not prove it knows the secret.
    #[error("peer {0} failed authentication")]
    Failed(String),
    /// The peer did not follow the handshake.
    #[error("unexpected message during authentication: {0}")]
    Unexpected(String),
    /// The peer was silent for too long.
    #[error("authentication timed out")]
    Timeout,
    /// The connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
}

/// The cluster's shared secret.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A secret from bytes (at least [`MIN_SECRET_LEN`]; checked by [`Secret::load`]).
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// Reads a secret file (surrounding whitespace is ignored). On Unix a file that group or
    /// others may read is refused.
    pub fn load(path: &Path) -> Result<Self, AuthError> {
        // An input of whatever command reads it: nothing the command writes may replace it.
        vocab_pipeline::output::protect(format!("the secret file {}", path.display()), path);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|source| AuthError::SecretFile {
                path: path.to_path_buf(),
                source,
            })?;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(AuthError::OpenSecret {
                    path: path.to_path_buf(),
                    mode,
                });
            }
        }
        let bytes = vocab_pipeline::input::read(path, MAX_SECRET_FILE).map_err(|source| {
            AuthError::SecretFile {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Self::checked(&bytes, path)
    }

    /// A secret read from elsewhere than a file of its own (`origin` names where, e.g. a
    /// worker's standard input), by [`Secret::load`]'s rules: at most 4 KiB read, surrounding
    /// whitespace ignored, refused below [`MIN_SECRET_LEN`] bytes or [`MIN_SECRET_BITS`] bits.
    pub fn read_from(input: impl std::io::Read, origin: &Path) -> Result<Self, AuthError> {
        use std::io::Read as _;
        let mut bytes = Vec::new();
        let io = |source| AuthError::SecretFile {
            path: origin.to_path_buf(),
            source,
        };
        input
            .take(MAX_SECRET_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_SECRET_FILE {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("holds more than the {MAX_SECRET_FILE} bytes a secret may"),
            )));
        }
        Self::checked(&bytes, origin)
    }

    fn checked(bytes: &[u8], path: &Path) -> Result<Self, AuthError> {
        let trimmed = bytes.trim_ascii();
        let bits = entropy_bits(trimmed);
        let what = if trimmed.len() < MIN_SECRET_LEN {
            format!("{} bytes, fewer than {MIN_SECRET_LEN}", trimmed.len())
        } else if bits < MIN_SECRET_BITS {
            format!("about {bits:.0} bits of entropy, fewer than {MIN_SECRET_BITS:.0}")
        } else {
            return Ok(Self(trimmed.to_vec()));
        };
        Err(AuthError::WeakSecret {
            path: path.to_path_buf(),
            what,
        })
    }

    /// The secret as it is written to a file or a pipe.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    fn mac(&self, label: &[u8], first: &[u8], second: &[u8], name: &str) -> Hmac<Sha256> {
        // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(label);
        mac.update(first);
        mac.update(second);
        mac.update(name.as_bytes());
        mac
    }

    fn proof(&self, label: &[u8], first: &[u8], second: &[u8], name: &str) -> [u8; NONCE_LEN] {
        self.mac(label, first, second, name)
            .finalize()
            .into_bytes()
            .into()
    }

    fn verify(&self, label: &[u8], first: &[u8], second: &[u8], name: &str, proof: &[u8]) -> bool {
        self.mac(label, first, second, name)
            .verify_slice(proof)
            .is_ok()
    }
}

/// A cautious estimate of the entropy of `secret`, in bits: its length times the smaller of two
/// empirical Shannon entropies per byte, of its bytes and of the differences between neighbours.
/// Repeated words, small alphabets and runs (`abcd...`, `0123...`) score low; 32 random bytes,
/// or their 64 hex digits, score over 150.
pub fn entropy_bits(secret: &[u8]) -> f64 {
    fn per_symbol(symbols: impl Iterator<Item = u8>) -> f64 {
        let mut counts = [0usize; 256];
        let mut n = 0usize;
        for s in symbols {
            counts[usize::from(s)] += 1;
            n += 1;
        }
        let n = n.max(1) as f64;
        counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / n;
                -p * p.log2()
            })
            .sum()
    }
    let bytes = per_symbol(secret.iter().copied());
    let steps = per_symbol(secret.windows(2).map(|w| w[1].wrapping_sub(w[0])));
    secret.len() as f64 * bytes.min(steps)
}

fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut n);
    n
}

async fn next(conn: &mut Connection, deadline: Duration) -> Result<Frame, AuthError> {
    match tokio::time::timeout(deadline, conn.read_frame()).await {
        Err(_) => Err(AuthError::Timeout),
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(None)) => Err(AuthError::Unexpected("connection closed".into())),
        Ok(Ok(Some(frame))) => Ok(frame),
    }
}

/// Client side: proves this node is `name` of the cluster and checks the server's proof.
pub async fn client_handshake(
    conn: &mut Connection,
    secret: &Secret,
    name: &str,
    deadline: Duration,
) -> Result<(), AuthError> {
    let mine = nonce();
    conn.write_frame(&Frame::Hello {
        name: name.to_string(),
        nonce: mine,
    })
    .await?;
    let theirs = match next(conn, deadline).await? {
        Frame::Challenge { nonce } => nonce,
        Frame::Error { message } => {
            return Err(AuthError::Failed(format!("server said: {message}")));
        }
        other => return Err(AuthError::Unexpected(other.describe())),
    };
    conn.write_frame(&Frame::Response {
        proof: secret.proof(b"vocab-client", &theirs, &mine, name),
    })
    .await?;
    match next(conn, deadline).await? {
        Frame::Welcome { proof }
            if secret.verify(b"vocab-server", &mine, &theirs, name, &proof) =>
        {
            conn.seal(
                Seal::new(&secret.proof(CLIENT_FRAMES, &mine, &theirs, name)),
                Seal::new(&secret.proof(SERVER_FRAMES, &mine, &theirs, name)),
            );
            Ok(())
        }
        Frame::Welcome { .. } => Err(AuthError::Failed(
            conn.peer_addr().map_or("server".into(), |a| a.to_string()),
        )),
        Frame::Error { message } => Err(AuthError::Failed(format!("server said: {message}"))),
        other => Err(AuthError::Unexpected(other.describe())),
    }
}

/// Server side: returns the authenticated peer's name, or an error after which the caller drops
/// the connection.
pub async fn server_handshake(
    conn: &mut Connection,
    secret: &Secret,
    deadline: Duration,
) -> Result<String, AuthError> {
    let hello = server_hello(conn, deadline).await?;
    server_prove(conn, secret, hello, deadline).await
}

/// A client's first frame: the name it claims and its nonce (nothing proved yet).
#[derive(Debug)]
pub struct Hello {
    name: String,
    nonce: [u8; crate::net::frame::NONCE_LEN],
}

/// Server side, first half of [`server_handshake`]: reads the client's [`Hello`].
pub async fn server_hello(conn: &mut Connection, deadline: Duration) -> Result<Hello, AuthError> {
    match next(conn, deadline).await? {
        Frame::Hello { name, nonce } => Ok(Hello { name, nonce }),
        other => Err(AuthError::Unexpected(other.describe())),
    }
}

/// Server side, second half of [`server_handshake`]: challenges the client of `hello` and
/// returns its name once it proved it holds the secret.
pub async fn server_prove(
    conn: &mut Connection,
    secret: &Secret,
    hello: Hello,
    deadline: Duration,
) -> Result<String, AuthError> {
    let Hello {
        name,
        nonce: theirs,
    } = hello;
    let mine = nonce();
    conn.write_frame(&Frame::Challenge { nonce: mine }).await?;
    let response = next(conn, deadline).await?;
    let ok = matches!(&response, Frame::Response { proof } if secret.verify(b"vocab-client", &mine, &theirs, &name, proof));
    if !ok {
        // Tell an honest but misconfigured peer why; an attacker learns nothing new.
        let _ = conn
            .write_frame(&Frame::Error {
                message: "authentication failed".into(),
            })
            .await;
        return Err(AuthError::Failed(name));
    }
    let proof = secret.proof(b"vocab-server", &theirs, &mine, &name);
    conn.write_frame(&Frame::Welcome { proof }).await?;
    conn.seal(
        Seal::new(&secret.proof(SERVER_FRAMES, &theirs, &mine, &name)),
        Seal::new(&secret.proof(CLIENT_FRAMES, &theirs, &mine, &name)),
    );
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    const DEADLINE: Duration = Duration::from_secs(5);

    async fn handshake(
        server_secret: &[u8],
        client_secret: &[u8],
    ) -> (Result<String, AuthError>, Result<(), AuthError>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server_secret = Secret::from_bytes(server_secret);
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("accept");
            let mut conn = Connection::new(socket);
            server_handshake(&mut conn, &server_secret, DEADLINE).await
        });
        let mut conn = Connection::new(TcpStream::connect(addr).await.expect("connect"));
        let client = client_handshake(
            &mut conn,
            &Secret::from_bytes(client_secret),
            "n7",
            DEADLINE,
        )
        .await;
        // A failed client drops its connection, as callers do.
        drop(conn);
        (server.await.expect("server task"), client)
    }

    /// Feeds `input` (raw bytes, then close) to a server handshake on loopback.
    fn handshake_with(input: Vec<u8>) -> Result<String, AuthError> {
        use tokio::io::AsyncWriteExt;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let client = tokio::spawn(async move {
                let mut socket = TcpStream::connect(addr).await.expect("connect");
                let _ = socket.write_all(&input).await;
                let _ = socket.shutdown().await;
                // Keep reading until the server closes, so its writes do not fail early.
                let mut sink = Vec::new();
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut socket, &mut sink).await;
            });
            let (socket, _) = listener.accept().await.expect("accept");
            let mut conn = Connection::with_limit(socket, 1024);
            let secret = Secret::from_bytes(b"fuzzing-secret-0123456789".to_vec());
            let result = server_handshake(&mut conn, &secret, Duration::from_millis(500)).await;
            drop(conn);
            let _ = client.await;
            result
        })
    }

    proptest::proptest! {
        // A short, bounded run on every test; a longer one:
        // PROPTEST_CASES=20000 cargo test -p vocab-cluster handshake_fuzz (about 10 s).
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48)
        ))]
        /// Random bytes, and random bytes behind a valid Hello, never authenticate, never panic,
        /// and end within the deadline.
        #[test]
        fn handshake_fuzz(
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            behind_hello in proptest::prelude::any::<bool>(),
        ) {
            let mut input = Vec::new();
            if behind_hello {
                let hello = Frame::Hello { name: "intruder".into(), nonce: [7; 32] };
                let mut buf = bytes::BytesMut::new();
                hello.encode(&mut buf);
                input.extend_from_slice(&buf);
            }
            input.extend_from_slice(&raw);
            let started = std::time::Instant::now();
            let result = handshake_with(input);
            proptest::prop_assert!(result.is_err(), "authenticated: {:?}", result);
            proptest::prop_assert!(started.elapsed() < Duration::from_secs(3));
        }
    }

    #[tokio::test]
    async fn peers_with_the_same_secret_authenticate() {
        let (server, client) =
            handshake(b"0123456789abcdef-cluster", b"0123456789abcdef-cluster").await;
        assert_eq!(server.expect("server side"), "n7");
        client.expect("client side");
    }

    #[tokio::test]
    async fn a_wrong_secret_fails_on_both_sides() {
        let (server, client) =
            handshake(b"0123456789abcdef-cluster", b"0123456789abcdef-outside").await;
        // The server sees the client's proof fail first and says so.
        assert!(matches!(client, Err(AuthError::Failed(_))), "{client:?}");
        assert!(matches!(server, Err(AuthError::Failed(_))), "{server:?}");
    }

    /// A stranger who connects learns nothing computed from the secret before proving itself:
    /// the challenge is the same bytes whatever the secret, and a wrong proof ends the
    /// connection with an error that carries no proof either.
    #[tokio::test]
    async fn a_stranger_receives_nothing_that_depends_on_the_secret() {
        for secret in [&b"first-secret-0123456789"[..], b"second-secret-987654321"] {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let secret = Secret::from_bytes(secret);
            let server = tokio::spawn(async move {
                let (socket, _) = listener.accept().await.expect("accept");
                let mut conn = Connection::new(socket);
                server_handshake(&mut conn, &secret, DEADLINE).await
            });
            let mut conn = Connection::new(TcpStream::connect(addr).await.expect("connect"));
            let hello = Frame::Hello {
                name: "stranger".into(),
                nonce: [1; NONCE_LEN],
            };
            conn.write_frame(&hello).await.expect("hello");
            let challenge = conn.read_frame().await.expect("read").expect("frame");
            // Only a nonce: an encoded challenge is the header and 32 bytes.
            let Frame::Challenge { .. } = challenge else {
                panic!("{challenge:?}");
            };
            let mut encoded = bytes::BytesMut::new();
            challenge.encode(&mut encoded);
            assert_eq!(encoded.len(), crate::net::frame::HEADER_LEN + NONCE_LEN);
            let guess = Frame::Response {
                proof: [9; NONCE_LEN],
            };
            conn.write_frame(&guess).await.expect("response");
            let answer = conn.read_frame().await.expect("read");
            assert!(
                matches!(&answer, Some(Frame::Error { message }) if message == "authentication failed"),
                "{answer:?}"
            );
            assert!(server.await.expect("server").is_err());
        }
    }

    #[test]
    fn guessable_secrets_score_below_the_floor() {
        let mut random = [0u8; 32];
        rand::rng().fill_bytes(&mut random);
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        for good in [&random[..], hex.as_bytes()] {
            assert!(
                entropy_bits(good) >= MIN_SECRET_BITS,
                "{}",
                entropy_bits(good)
            );
        }
        for weak in [
            &b"passwordpassword"[..],
            b"0123456789abcdef0123456789abcdef",
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
            b"correct horse battery staple",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(
                entropy_bits(weak) < MIN_SECRET_BITS,
                "{}: {}",
                String::from_utf8_lossy(weak),
                entropy_bits(weak)
            );
        }
    }

    #[tokio::test]
    async fn a_silent_peer_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (socket, _) = listener.accept().await.expect("accept");
        let mut conn = Connection::new(socket);
        let secret = Secret::from_bytes(b"0123456789abcdef");
        let err = server_handshake(&mut conn, &secret, Duration::from_millis(100))
            .await
            .expect_err("timeout");
        assert!(matches!(err, AuthError::Timeout), "{err:?}");
    }

    #[test]
    fn secret_files_are_checked() {
        let dir = std::env::temp_dir().join(format!("vocab-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let write = |name: &str, text: &str, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("mode");
            path
        };
        let weak = write("weak", "short\n", 0o600);
        assert!(matches!(
            Secret::load(&weak),
            Err(AuthError::WeakSecret { .. })
        ));
        let guessable = write("guessable", "passwordpasswordpassword\n", 0o600);
        let err = Secret::load(&guessable).expect_err("guessable").to_string();
        assert!(
            err.contains("bits of entropy") && err.contains("urandom"),
            "{err}"
        );
        // Readable by the group or by everyone: refused, naming the file and the fix.
        for mode in [0o644, 0o640, 0o604] {
            let open = write("open", "0123456789abcdef0123\n", mode);
            let err = Secret::load(&open).expect_err("open secret");
            assert!(matches!(err, AuthError::OpenSecret { .. }), "{err}");
            assert!(
                err.to_string().contains("chmod 600") && err.to_string().contains("open"),
                "{err}"
            );
        }
        let good = write(
            "good",
            "  9f2c4e81b7a03d56e1f08c9b42d7a6e3f5c1098b7d2e4a6c\n",
            0o600,
        );
        assert_eq!(
            Secret::load(&good).expect("load").0,
            b"9f2c4e81b7a03d56e1f08c9b42d7a6e3f5c1098b7d2e4a6c"
        );
        // Read from a pipe: the same rules, and no more than 4 KiB.
        let hex = b"9f2c4e81b7a03d56e1f08c9b42d7a6e3f5c1098b7d2e4a6c\n";
        assert_eq!(
            Secret::read_from(&hex[..], Path::new("<stdin>"))
                .expect("from a pipe")
                .0,
            hex.trim_ascii()
        );
        let err = Secret::read_from(&[b'a'; 5000][..], Path::new("<stdin>")).expect_err("long");
        assert!(
            vocab_pipeline::chain(&err).contains("more than the 4096 bytes"),
            "{err}"
        );
        // A FIFO named as the secret is refused at once, not waited on.
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Secret::load(&fifo).expect_err("fifo");
        assert!(
            vocab_pipeline::chain(&err).contains("is a FIFO"),
            "{}",
            vocab_pipeline::chain(&err)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
