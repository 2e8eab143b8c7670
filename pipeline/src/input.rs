//! Opening what a user, a config or a model names as an input: regular files only, and small
//! files read against a limit.
//!
//! A FIFO, a device (`/dev/zero`) or a folder named as an input is refused before anything blocks
//! on it or reads without end: the file is opened without blocking and its type is taken from the
//! open descriptor (no window between a check and the open). Files read whole (models, records
//! beside histograms, manifests, configs, secrets) are checked against a limit before a byte is
//! read, and read no further than it.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Models, the largest file read whole: 15 one-vs-rest models of a 4,096-word, 3-level pyramid
/// through a kernel map are about 60 MB of JSON. Parsed, JSON of numbers takes up to 5 times its
/// size (a 100 MB model took 495 MB), so the limit is what the largest model needs, with room.
pub const MAX_MODEL_BYTES: u64 = 256 << 20;

/// Mixture files: a PCA of 512 x 512 and 4,096 Gaussians over 512 dims are some 100 MB of JSON
/// at most; the mixtures vocab makes are a few MB.
pub const MAX_MIXTURE_BYTES: u64 = 128 << 20;

/// Encoding records (`.encoding.json`): a few hundred bytes.
pub const MAX_ENCODING_BYTES: u64 = 1 << 20;

/// Records, manifests, configs and other small files read whole.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;

/// Labels CSVs read whole: a path and a few attributes a photo, some 100 bytes, for ten million.
pub const MAX_LABELS_BYTES: u64 = 1 << 30;

/// Opens `path` for reading if it is a regular file (following links); any other kind is an
/// [`io::ErrorKind::InvalidInput`] error saying what it is.
pub fn open(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting; it has no
    // effect on a regular file's reads.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    let what = if kind.is_file() {
        return Ok(file);
    } else if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is {what}; inputs are regular files"),
    ))
}

/// The bytes of the regular file `path`, refused when longer than `limit`.
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Err(too_large(len, limit));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // A file growing while it is read stops at the limit all the same.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// The text of the regular file `path` (UTF-8), refused when longer than `limit`.
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "is not UTF-8 text"))
}

fn too_large(len: u64, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("holds {len} bytes, more than the {limit} this file may hold"),
    )
}

/// The SHA-256 of the regular file `path`'s bytes, in hex: what binds an artifact to the content
/// of an input (a model to its vocabulary), whatever its path holds later.
pub fn digest(path: &Path) -> io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// The SHA-256 of `bytes` in hex, as [`digest`] gives it for a file of those bytes.
pub fn digest_bytes(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A CSV reader of the regular file `path`, its records bounded ([`Records`]).
pub fn csv(builder: &csv::ReaderBuilder, path: &Path) -> csv::Result<csv::Reader<Records<File>>> {
    Ok(builder.from_reader(Records::new(open(path)?)))
}

/// Longest CSV record read: 4 MiB, as a text feature file's line (`store::MAX_LINE_BYTES`).
pub const MAX_CSV_RECORD_BYTES: u64 = 4 << 20;

/// The bytes of a CSV file, refused past [`MAX_CSV_RECORD_BYTES`] in one record (a line ending
/// outside quotes ends a record, quotes read as the CSV reader reads them: a field that starts
/// with one is quoted until a lone closing one, `""` inside it is a quote): a 200 MB line, or a
/// quote never closed, is an error saying so after 4 MiB, not a record the CSV reader grows
/// without end.
#[derive(Debug)]
pub struct Records<R> {
    inner: R,
    in_record: u64,
    /// Inside a quoted field.
    quoted: bool,
    /// A quote seen inside a quoted field: it closes the field unless another follows.
    closing: bool,
    /// At the start of a field (a quote there opens a quoted field).
    field_start: bool,
}

impl<R> Records<R> {
    /// `inner`'s bytes, their records bounded.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            in_record: 0,
            quoted: false,
            closing: false,
            field_start: true,
        }
    }

    /// One byte through the state; `true` when it ends a record.
    fn step(&mut self, b: u8) -> bool {
        if self.quoted {
            if self.closing {
                self.closing = false;
                if b == b'"' {
                    return false; // "" inside a quoted field
                }
                self.quoted = false;
            } else {
                self.closing = b == b'"';
                return false;
            }
        }
        match b {
            b'\n' | b'\r' => {
                self.field_start = true;
                true
            }
            b',' => {
                self.field_start = true;
                false
            }
            b'"' if self.field_start => {
                self.quoted = true;
                self.field_start = false;
                false
            }
            _ => {
                self.field_start = false;
                false
            }
        }
    }
}

impl<R: Read> Read for Records<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if self.step(b) {
                self.in_record = 0;
                continue;
            }
            self.in_record += 1;
            if self.in_record > MAX_CSV_RECORD_BYTES {
                let why = if self.quoted {
                    "a quoted field longer than"
                } else {
                    "a line longer than"
                };
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "holds {why} {MAX_CSV_RECORD_BYTES} bytes (a CSV record is at most that; \
                         a quote never closed reads as one)"
                    ),
                ));
            }
        }
        Ok(n)
    }
}

/// At most `max` characters of `text` (a token from a file quoted in an error), marked when cut.
pub fn prefix(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{:?}... ({} bytes)", &text[..at], text.len()),
        None => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_their_limit_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.json");
        std::fs::write(&file, "0123456789").expect("write");
        assert_eq!(read_text(&file, 10).expect("at the limit"), "0123456789");
        let err = read(&file, 9).expect_err("over").to_string();
        assert!(err.contains("holds 10 bytes, more than the 9"), "{err}");
        let err = read(dir.path(), 9).expect_err("folder").to_string();
        assert!(err.contains("is a folder"), "{err}");
        // A FIFO without a writer: refused at once, not waited on.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo, 9).expect_err("fifo").to_string();
        assert!(err.contains("is a FIFO"), "{err}");
        let err = read(Path::new("/dev/zero"), 9)
            .expect_err("device")
            .to_string();
        assert!(err.contains("is a device"), "{err}");
        std::os::unix::fs::symlink(&file, dir.path().join("link")).expect("link");
        assert!(open(&dir.path().join("link")).is_ok(), "links are followed");
    }

    #[test]
    fn long_tokens_are_quoted_by_a_prefix() {
        assert_eq!(prefix("abc", 8), "\"abc\"");
        let long = "x".repeat(1000);
        assert_eq!(prefix(&long, 4), "\"xxxx\"... (1000 bytes)");
    }

    /// Records end at line endings outside quotes, as the CSV reader reads quotes: a stray quote
    /// inside a field, `""` in a quoted field, `\r` endings.
    #[test]
    fn csv_records_end_where_the_csv_reader_ends_them() {
        let ends = |text: &str| {
            let mut r = Records::new(text.as_bytes());
            text.bytes().filter(|&b| r.step(b)).count()
        };
        assert_eq!(ends("a,b\nc,d\n"), 2);
        assert_eq!(
            ends("5\" tall,x\ny\n"),
            2,
            "a quote inside a field is a character"
        );
        assert_eq!(ends("\"a\nb\",c\nd\n"), 2, "a line ending inside quotes");
        assert_eq!(
            ends("\"say \"\"hi\"\"\nthere\",c\nd\n"),
            2,
            "escaped quotes"
        );
        assert_eq!(ends("a\rb\rc\r"), 3, "\\r endings");
        // A quote never closed: one record to the end.
        assert_eq!(ends("\"a\nb\nc\n"), 0);
    }
}
