//! Feature files: the text format of the paper, vocab's binary format and other tools' formats,
//! streamed both ways.
//!
//! A feature record is `(picture_id, row, col, values)`: the photo, the top-left pixel of the
//! patch, and its descriptor.
//!
//! **Text** (the paper's own): one record per line, `picture_id row col f1 ... fD`, separated by
//! single spaces. Values are printed in the shortest form that parses back to the same `f32`.
//!
//! **Binary** (`.bin`), little-endian, designed to be memory-mapped:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `VOCABFEA` |
//! | 8 | 2 | format version (1) |
//! | 10 | 1 | element type (1 = f32, 2 = u8) |
//! | 11 | 1 | reserved, 0 |
//! | 12 | 4 | dims `D` |
//! | 16 | 8 | record count `N` |
//! | 24 | 4 | CRC-32 (IEEE) of the payload (all records) |
//! | 28 | 4 | CRC-32 of bytes 0..28 |
//! | 32 | N x (8 + E D) | records: `picture_id u32, row u16, col u16`, then `D` values of `E` bytes |
//!
//! Values are `f32` (`E = 4`) or, for partitions written with [`Element::U8`], one byte each
//! (`round(255 v)` of values in `[0, 1]`, read back as `byte / 255`). The header is 32 bytes;
//! `f32` records are multiples of 4 bytes, so a mapped `f32` file's values are 4-byte aligned. Readers reject a wrong magic, a newer version, an unknown element type, a bad
//! header checksum, a file shorter or longer than the header says, and a payload whose checksum
//! does not match (reported when the stream reaches its end). Non-finite values are rejected with
//! the record index (binary) or line (text).
//!
//! Other tools' formats (`.npy`, `.fvecs`, `.bvecs`, `.csv`) are read and written alike
//! ([`foreign`]); a reader tells them by magic (`VOCABFEA`, `\x93NUMPY`) or extension.
//!
//! Writers write to a temporary file beside the destination and rename it into place when
//! finished, so a feature file exists whole or not at all.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::atomic;

mod error;
mod foreign;

pub use error::StoreError;

pub use foreign::ACCEPTED;
use foreign::{CsvRows, ForeignSink, NpyRows, VecsRows};

/// Magic number that opens a binary feature file.
pub const MAGIC: [u8; 8] = *b"VOCABFEA";
/// Binary format version written by this build; readers accept this and older.
pub const VERSION: u16 = 1;
/// Size of the binary header in bytes.
pub const HEADER_LEN: usize = 32;
/// Bytes of a binary record before its values: `picture_id u32, row u16, col u16`.
pub const RECORD_HEAD: usize = 8;
/// Element type code of `f32` values.
pub const ELEM_F32: u8 = 1;
/// Element type code of `u8` values (`value = byte / 255`).
pub const ELEM_U8: u8 = 2;

/// The value a [`Element::U8`] byte stands for: `byte / 255`, the one decoding every reader of
/// u8 records uses.
#[inline]
pub fn u8_value(byte: u8) -> f32 {
    f32::from(byte) / 255.0
}

/// How values are stored in a binary file.
///
/// `U8` keeps `round(255 v)` for values in `[0, 1]` (HOG values after L2-Hys lie there): 4x smaller
/// files, at most 1/510 absolute error; readers return `byte / 255`. Writers refuse values outside
/// `[0, 1]` rather than clamp them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Element {
    /// 4-byte floats.
    #[default]
    F32,
    /// One byte per value, scale 1/255.
    U8,
}

impl Element {
    /// The header's code.
    pub fn code(self) -> u8 {
        match self {
            Self::F32 => ELEM_F32,
            Self::U8 => ELEM_U8,
        }
    }

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::U8 => 1,
        }
    }

    /// Name used in manifests (`f32`, `u8`).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::U8 => "u8",
        }
    }

    /// Parses a manifest name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "f32" => Some(Self::F32),
            "u8" => Some(Self::U8),
            _ => None,
        }
    }
}

/// On-disk format of a feature file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// `picture_id row col f1 ... f512` per line (the paper's format).
    Text,
    /// vocab's checksummed, memory-mappable binary format.
    Bin,
    /// NumPy's `.npy`: a 2-D array, one vector per row.
    Npy,
    /// faiss's and the ANN benchmarks' `.fvecs`: dimension, then `f32` values, per vector.
    Fvecs,
    /// `.bvecs`: dimension, then byte values, per vector.
    Bvecs,
    /// Comma-separated values with a header.
    Csv,
}

impl Format {
    /// The format an output path's extension asks for: `.txt`/`.text` text, `.npy`, `.fvecs`,
    /// `.bvecs`, `.csv`, and vocab's binary format for every other name.
    pub fn for_path(path: &Path) -> Self {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("txt" | "text") => Self::Text,
            Some("npy") => Self::Npy,
            Some("fvecs") => Self::Fvecs,
            Some("bvecs") => Self::Bvecs,
            Some("csv") => Self::Csv,
            _ => Self::Bin,
        }
    }

    /// Its name on the command line and in summaries.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Bin => "bin",
            Self::Npy => "npy",
            Self::Fvecs => "fvecs",
            Self::Bvecs => "bvecs",
            Self::Csv => "csv",
        }
    }

    /// How numpy and pandas read a file of this format, for summaries; `None` where the
    /// reading is the format's own (vocab's, faiss's).
    pub fn reading(self) -> Option<&'static str> {
        match self {
            Self::Csv => Some(
                "a header line, then a row a line: numpy.loadtxt(f, delimiter=\",\", \
                 skiprows=1) or pandas.read_csv(f)",
            ),
            Self::Npy => Some("numpy.load(f)"),
            Self::Text => Some("numpy.loadtxt(f)"),
            Self::Bin | Self::Fvecs | Self::Bvecs => None,
        }
    }

    /// Whether records in this format keep their picture id, row and column.
    pub fn keeps_positions(self) -> bool {
        matches!(self, Self::Text | Self::Bin | Self::Csv)
    }

    /// Detects the format of an existing file: vocab's binary and `.npy` by their magic, then
    /// `.fvecs`, `.bvecs` and `.csv` by extension, else vocab's text format.
    pub fn detect(path: &Path) -> Result<Self, StoreError> {
        let mut file = crate::input::open(path).map_err(|source| io_err(path, source))?;
        let mut head = [0u8; MAGIC.len()];
        let mut filled = 0;
        while filled < head.len() {
            match file.read(&mut head[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(io_err(path, source)),
            }
        }
        if filled == head.len() && head == MAGIC {
            return Ok(Self::Bin);
        }
        if head[..filled].starts_with(foreign::NPY_MAGIC) {
            return Ok(Self::Npy);
        }
        Ok(match Self::for_path(path) {
            format @ (Self::Fvecs | Self::Bvecs | Self::Csv) => format,
            _ => Self::Text,
        })
    }
}

/// The largest magnitude a value of a `dims`-value vector may have: the power of two below
/// `sqrt(f32::MAX / (4 dims))`, so that any squared distance between two such vectors (and each
/// vector's squared norm) is a finite `f32`. For 512 values, 2^58 (about 2.9e17).
pub fn magnitude_bound(dims: usize) -> f32 {
    let limit = (f64::from(f32::MAX) / (4.0 * dims.max(1) as f64)).sqrt();
    2f32.powi(limit.log2().floor() as i32)
}

/// The first value of `values` that is not finite or exceeds [`magnitude_bound`], as the message
/// that refuses its record (`value 3 (1e20) is ...`).
pub fn out_of_bounds(values: &[f32]) -> Option<String> {
    let bound = magnitude_bound(values.len());
    let pos = values
        .iter()
        .position(|v| !v.is_finite() || v.abs() > bound)?;
    let v = values[pos];
    Some(if v.is_finite() {
        format!(
            "value {} ({v:e}) exceeds {bound:e} in magnitude, the most a vector of {} values may \
             hold (its squared distances would overflow f32); rescale the features",
            pos + 1,
            values.len()
        )
    } else {
        format!("value {} is not finite ({v})", pos + 1)
    })
}

/// Longest line a text feature or vocabulary file may hold: 4 MiB, some 250,000 values.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// Reads one line of at most [`MAX_LINE_BYTES`] into `line` (cleared first); `Ok(0)` at the end.
/// A longer line is an error saying so, read no further than the limit.
pub(crate) fn read_line(input: &mut impl BufRead, line: &mut String) -> io::Result<usize> {
    line.clear();
    // Bytes first: a cut inside a character is a long line, not bad text.
    let mut bytes = std::mem::take(line).into_bytes();
    let n = input
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', &mut bytes)?;
    if n > MAX_LINE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is longer than {MAX_LINE_BYTES} bytes, the most a line may hold"),
        ));
    }
    *line = String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))?;
    Ok(n)
}

/// A file longer than its header describes: bytes appended after the last record.
pub(crate) fn trailing(path: &Path, expected: u64, actual: u64) -> StoreError {
    StoreError::Format {
        path: path.to_path_buf(),
        message: format!(
            "{} trailing bytes after the last record (the header describes {expected} bytes)",
            actual - expected
        ),
    }
}

fn io_err(path: &Path, source: io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One feature record, owning its values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Photo the patch comes from.
    pub picture_id: u32,
    /// Row of the patch's top-left pixel.
    pub row: u16,
    /// Column of the patch's top-left pixel.
    pub col: u16,
    /// Descriptor values.
    pub values: Vec<f32>,
}

impl Record {
    /// Feeds the record in binary record layout to a CRC-32 (what a binary payload CRC covers),
    /// so a text file and its binary conversion hash alike.
    pub fn hash_into(&self, crc: &mut crc32fast::Hasher) {
        hash_record(crc, self.picture_id, self.row, self.col, &self.values);
    }
}

/// Feeds a record in binary record layout (`f32` values) to a CRC-32 ([`Record::hash_into`]).
pub fn hash_record(
    crc: &mut crc32fast::Hasher,
    picture_id: u32,
    row: u16,
    col: u16,
    values: &[f32],
) {
    crc.update(&picture_id.to_le_bytes());
    crc.update(&row.to_le_bytes());
    crc.update(&col.to_le_bytes());
    for v in values {
        crc.update(&v.to_le_bytes());
    }
}

/// Streaming writer of a feature file in either format.
#[derive(Debug)]
pub struct FeatureWriter {
    path: PathBuf,
    element: Element,
    dims: usize,
    count: u64,
    crc: crc32fast::Hasher,
    sink: Sink,
}

/// Where a [`FeatureWriter`] puts its records.
#[derive(Debug)]
enum Sink {
    /// vocab's binary format (the header written by `finish`).
    Bin(BufWriter<NamedTempFile>),
    /// vocab's text format; values only when `positions` is false (a vocabulary).
    Text {
        out: BufWriter<NamedTempFile>,
        line: String,
        positions: bool,
    },
    /// Another tool's format.
    Foreign(ForeignSink),
}

impl FeatureWriter {
    /// Starts a feature file of `dims`-dimensional records at `path` (created on [`finish`]).
    ///
    /// [`finish`]: FeatureWriter::finish
    pub fn create(path: &Path, format: Format, dims: usize) -> Result<Self, StoreError> {
        Self::create_with(path, format, dims, Element::F32)
    }

    /// Like [`create`](FeatureWriter::create), storing binary values as `element`
    /// (text files always hold the values as written).
    pub fn create_with(
        path: &Path,
        format: Format,
        dims: usize,
        element: Element,
    ) -> Result<Self, StoreError> {
        Self::start(path, format, dims, element, true)
    }

    /// A file of bare vectors (a vocabulary: centroid `j` is record `j`): text and CSV leave out
    /// picture id, row and column; vocab's binary format keeps them as written.
    pub fn values_only(path: &Path, format: Format, dims: usize) -> Result<Self, StoreError> {
        Self::start(path, format, dims, Element::F32, false)
    }

    fn start(
        path: &Path,
        format: Format,
        dims: usize,
        element: Element,
        positions: bool,
    ) -> Result<Self, StoreError> {
        let plain = || -> Result<_, StoreError> {
            let tmp = atomic::temp_beside(path).map_err(|source| io_err(path, source))?;
            Ok(BufWriter::with_capacity(1 << 20, tmp))
        };
        let sink = match format {
            Format::Bin => {
                let mut out = plain()?;
                // Placeholder header, rewritten by `finish` once count and checksum are known.
                out.write_all(&[0u8; HEADER_LEN])
                    .map_err(|source| io_err(path, source))?;
                Sink::Bin(out)
            }
            Format::Text => Sink::Text {
                out: plain()?,
                line: String::new(),
                positions,
            },
            Format::Npy => Sink::Foreign(ForeignSink::npy(path)?),
            Format::Fvecs => Sink::Foreign(ForeignSink::vecs(path, false)?),
            Format::Bvecs => Sink::Foreign(ForeignSink::vecs(path, true)?),
            Format::Csv => Sink::Foreign(ForeignSink::csv(path, dims, positions)?),
        };
        Ok(Self {
            path: path.to_path_buf(),
            element,
            dims,
            count: 0,
            crc: crc32fast::Hasher::new(),
            sink,
        })
    }

    /// Dimensionality of the records.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// CRC-32 of the payload written so far (binary files; what the header will record).
    pub fn payload_checksum(&self) -> u32 {
        self.crc.clone().finalize()
    }

    /// Appends one record.
    pub fn write(
        &mut self,
        picture_id: u32,
        row: u16,
        col: u16,
        values: &[f32],
    ) -> Result<(), StoreError> {
        if values.len() != self.dims {
            return Err(StoreError::Record {
                path: self.path.clone(),
                location: format!("record {}", self.count + 1),
                message: format!("has {} values, file holds {}", values.len(), self.dims),
            });
        }
        // What a reader would refuse is never written: a non-finite or out-of-bounds value
        // stops the writer, naming the record (the command names what carried it).
        if let Some(message) = out_of_bounds(values) {
            return Err(StoreError::Record {
                path: self.path.clone(),
                location: format!("record {} (picture {picture_id})", self.count + 1),
                message,
            });
        }
        let result = match &mut self.sink {
            Sink::Bin(out) => {
                let mut head = [0u8; 8];
                head[..4].copy_from_slice(&picture_id.to_le_bytes());
                head[4..6].copy_from_slice(&row.to_le_bytes());
                head[6..].copy_from_slice(&col.to_le_bytes());
                self.crc.update(&head);
                let body = match self.element {
                    Element::F32 => f32_bytes(values),
                    Element::U8 => u8_bytes(values).map_err(|(pos, v)| StoreError::Record {
                        path: self.path.clone(),
                        location: format!("record {}", self.count + 1),
                        message: format!(
                            "value {} ({v}) is outside [0, 1], which u8 storage holds",
                            pos + 1
                        ),
                    })?,
                };
                self.crc.update(&body);
                out.write_all(&head).and_then(|()| out.write_all(&body))
            }
            Sink::Text {
                out,
                line,
                positions,
            } => {
                use std::fmt::Write as _;
                line.clear();
                if *positions {
                    let _ = write!(line, "{picture_id} {row} {col} ");
                }
                let mut buf = ryu::Buffer::new();
                for (i, &v) in values.iter().enumerate() {
                    if i > 0 {
                        line.push(' ');
                    }
                    line.push_str(buf.format(v));
                }
                line.push('\n');
                out.write_all(line.as_bytes())
            }
            Sink::Foreign(sink) => {
                sink.write(&self.path, self.count + 1, (picture_id, row, col), values)?;
                Ok(())
            }
        };
        result.map_err(|source| io_err(&self.path, source))?;
        self.count += 1;
        Ok(())
    }

    /// Completes the file: writes the header (binary), syncs, and renames it into place.
    pub fn finish(self) -> Result<u64, StoreError> {
        let Self {
            path,
            element,
            dims,
            count,
            crc,
            sink,
            ..
        } = self;
        let tmp = match sink {
            Sink::Bin(out) => {
                let mut tmp = out
                    .into_inner()
                    .map_err(|e| io_err(&path, e.into_error()))?;
                let header = encode_header(dims, count, crc.finalize(), element);
                let file = tmp.as_file_mut();
                file.seek(SeekFrom::Start(0))
                    .map_err(|source| io_err(&path, source))?;
                file.write_all(&header)
                    .map_err(|source| io_err(&path, source))?;
                tmp
            }
            Sink::Text { out, .. } => out
                .into_inner()
                .map_err(|e| io_err(&path, e.into_error()))?,
            Sink::Foreign(sink) => sink.finish(&path, count, dims)?,
        };
        atomic::persist(tmp, &path).map_err(|source| io_err(&path, source))?;
        Ok(count)
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Quantises values in `[0, 1]` to bytes; `Err((index, value))` for the first value outside.
fn u8_bytes(values: &[f32]) -> Result<Vec<u8>, (usize, f32)> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if (0.0..=1.0).contains(&v) {
                Ok((v * 255.0).round() as u8)
            } else {
                Err((i, v))
            }
        })
        .collect()
}

pub(crate) fn encode_header(
    dims: usize,
    count: u64,
    payload_crc: u32,
    element: Element,
) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h[10] = element.code();
    h[12..16].copy_from_slice(&(dims as u32).to_le_bytes());
    h[16..24].copy_from_slice(&count.to_le_bytes());
    h[24..28].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32fast::hash(&h[..28]);
    h[28..].copy_from_slice(&header_crc.to_le_bytes());
    h
}

/// The decoded header of a binary feature file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinHeader {
    /// Format version of the file.
    pub version: u16,
    /// Values per record.
    pub dims: usize,
    /// Number of records.
    pub count: u64,
    /// CRC-32 of the payload.
    pub payload_crc: u32,
    /// How values are stored.
    pub element: Element,
}

impl BinHeader {
    /// Bytes per record.
    pub fn record_len(&self) -> usize {
        RECORD_HEAD + self.element.size() * self.dims
    }

    /// Total file length the header implies ([`BinHeader::parse`] refuses a header whose length
    /// does not fit a `u64`; a header built by hand saturates, which no file matches).
    pub fn file_len(&self) -> u64 {
        implied_len(self.count, self.record_len()).unwrap_or(u64::MAX)
    }

    /// Parses and validates a header; `path` names the file in errors.
    pub fn parse(bytes: &[u8; HEADER_LEN], path: &Path) -> Result<Self, StoreError> {
        let bad = |message: String| StoreError::Format {
            path: path.to_path_buf(),
            message,
        };
        if bytes[..8] != MAGIC {
            return Err(bad("not a vocab binary feature file (bad magic)".into()));
        }
        let le32 = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        if crc32fast::hash(&bytes[..28]) != le32(28) {
            return Err(bad("header checksum mismatch".into()));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version == 0 || version > VERSION {
            return Err(bad(format!(
                "format version {version} is newer than this build reads ({VERSION})"
            )));
        }
        let element = match bytes[10] {
            ELEM_F32 => Element::F32,
            ELEM_U8 => Element::U8,
            code => return Err(bad(format!("unknown element type code {code}"))),
        };
        let dims = le32(12) as usize;
        if dims == 0 {
            return Err(bad("header declares zero dimensions".into()));
        }
        let mut count = [0u8; 8];
        count.copy_from_slice(&bytes[16..24]);
        let header = Self {
            version,
            dims,
            count: u64::from_le_bytes(count),
            payload_crc: le32(24),
            element,
        };
        if implied_len(header.count, header.record_len()).is_none() {
            return Err(bad(format!(
                "header declares {} records of {dims} values: more bytes than any file holds",
                header.count
            )));
        }
        Ok(header)
    }
}

/// The length of a binary file of `count` records of `record_len` bytes, if it fits a `u64`.
fn implied_len(count: u64, record_len: usize) -> Option<u64> {
    count
        .checked_mul(u64::try_from(record_len).ok()?)?
        .checked_add(HEADER_LEN as u64)
}

/// Streaming reader of a feature file in either format.
#[derive(Debug)]
pub struct FeatureReader {
    path: PathBuf,
    inner: Inner,
    /// Records returned so far.
    index: u64,
}

#[derive(Debug)]
enum Inner {
    Bin {
        header: BinHeader,
        input: BufReader<File>,
        crc: crc32fast::Hasher,
        buf: Vec<u8>,
    },
    Text {
        input: BufReader<File>,
        dims: Option<usize>,
        line: String,
        line_no: u64,
    },
    Npy(NpyRows),
    Vecs(VecsRows),
    Csv(CsvRows),
}

impl FeatureReader {
    /// Opens a feature file, detecting its format.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let format = Format::detect(path)?;
        let file = crate::input::open(path).map_err(|source| io_err(path, source))?;
        let mut input = BufReader::with_capacity(1 << 20, file);
        let inner = match format {
            Format::Bin => {
                let mut raw = [0u8; HEADER_LEN];
                input.read_exact(&mut raw).map_err(|_| StoreError::Format {
                    path: path.to_path_buf(),
                    message: "truncated header".into(),
                })?;
                let header = BinHeader::parse(&raw, path)?;
                let actual = input
                    .get_ref()
                    .metadata()
                    .map_err(|source| io_err(path, source))?
                    .len();
                let expected = header.file_len();
                if actual < expected {
                    return Err(StoreError::Truncated {
                        path: path.to_path_buf(),
                        expected,
                        actual,
                    });
                }
                if actual > expected {
                    return Err(trailing(path, expected, actual));
                }
                let buf = vec![0u8; header.record_len()];
                Inner::Bin {
                    header,
                    input,
                    crc: crc32fast::Hasher::new(),
                    buf,
                }
            }
            Format::Text => Inner::Text {
                input,
                dims: None,
                line: String::new(),
                line_no: 0,
            },
            Format::Npy => Inner::Npy(NpyRows::open(path, input.get_ref())?),
            Format::Fvecs | Format::Bvecs => Inner::Vecs(VecsRows::open(
                path,
                input.into_inner(),
                format == Format::Bvecs,
            )?),
            Format::Csv => Inner::Csv(CsvRows::open(path, input.into_inner())?),
        };
        Ok(Self {
            path: path.to_path_buf(),
            inner,
            index: 0,
        })
    }

    /// The file's format.
    pub fn format(&self) -> Format {
        match &self.inner {
            Inner::Bin { .. } => Format::Bin,
            Inner::Text { .. } => Format::Text,
            Inner::Npy(_) => Format::Npy,
            Inner::Vecs(rows) if rows.bytes() => Format::Bvecs,
            Inner::Vecs(_) => Format::Fvecs,
            Inner::Csv(_) => Format::Csv,
        }
    }

    /// Whether records carry their own picture id, row and column (vocab's formats, CSV under a
    /// `picture_id,row,col` header) rather than their place in the file.
    pub fn names_pictures(&self) -> bool {
        match &self.inner {
            Inner::Bin { .. } | Inner::Text { .. } => true,
            Inner::Csv(rows) => rows.names_pictures(),
            Inner::Npy(_) | Inner::Vecs(_) => false,
        }
    }

    /// Values per record: from the header (binary, `.npy`, `.fvecs`/`.bvecs`) or the first
    /// record read (text, CSV).
    pub fn dims(&self) -> Option<usize> {
        match &self.inner {
            Inner::Bin { header, .. } => Some(header.dims),
            Inner::Text { dims, .. } => *dims,
            Inner::Npy(rows) => Some(rows.dims()),
            Inner::Vecs(rows) => rows.dims(),
            Inner::Csv(rows) => rows.dims(),
        }
    }

    /// The payload checksum recorded in the header (binary files).
    pub fn payload_checksum(&self) -> Option<u32> {
        match &self.inner {
            Inner::Bin { header, .. } => Some(header.payload_crc),
            _ => None,
        }
    }

    /// Number of records, when the format says it up front (binary, `.npy`, `.fvecs`/`.bvecs`).
    pub fn count(&self) -> Option<u64> {
        match &self.inner {
            Inner::Bin { header, .. } => Some(header.count),
            Inner::Npy(rows) => Some(rows.count()),
            Inner::Vecs(rows) => Some(rows.count()),
            Inner::Text { .. } | Inner::Csv(_) => None,
        }
    }

    /// Reads the next record into `record`; `Ok(false)` at a clean, verified end of file.
    pub fn next_into(&mut self, record: &mut Record) -> Result<bool, StoreError> {
        let more = match &mut self.inner {
            Inner::Bin {
                header,
                input,
                crc,
                buf,
            } => {
                if self.index == header.count {
                    let actual = std::mem::take(crc).finalize();
                    if actual != header.payload_crc {
                        return Err(StoreError::Checksum {
                            path: self.path.clone(),
                            expected: header.payload_crc,
                            actual,
                        });
                    }
                    return Ok(false);
                }
                input
                    .read_exact(buf)
                    .map_err(|source| io_err(&self.path, source))?;
                crc.update(buf);
                record.picture_id = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                record.row = u16::from_le_bytes([buf[4], buf[5]]);
                record.col = u16::from_le_bytes([buf[6], buf[7]]);
                record.values.clear();
                match header.element {
                    Element::F32 => record.values.extend(
                        buf[8..]
                            .chunks_exact(4)
                            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    ),
                    Element::U8 => record.values.extend(buf[8..].iter().map(|&b| u8_value(b))),
                }
                true
            }
            Inner::Text {
                input,
                dims,
                line,
                line_no,
            } => loop {
                let n = match read_line(input, line) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                        return Err(StoreError::Record {
                            path: self.path.clone(),
                            location: format!("line {}", *line_no + 1),
                            message: e.to_string(),
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                        return Err(StoreError::Format {
                            path: self.path.clone(),
                            message: format!(
                                "line {}: not UTF-8 text, and opens with no magic vocab knows \
                                 (bad magic); vocab reads {ACCEPTED}",
                                *line_no + 1
                            ),
                        });
                    }
                    Err(source) => return Err(io_err(&self.path, source)),
                };
                if n == 0 {
                    break false;
                }
                *line_no += 1;
                if line.trim().is_empty() {
                    continue;
                }
                parse_text_line(line, dims, record).map_err(|message| StoreError::Record {
                    path: self.path.clone(),
                    location: format!("line {line_no}"),
                    message,
                })?;
                break true;
            },
            Inner::Npy(rows) => rows.next_into(&self.path, record)?,
            Inner::Vecs(rows) => rows.next_into(&self.path, record)?,
            Inner::Csv(rows) => rows.next_into(&self.path, record)?,
        };
        if !more {
            return Ok(false);
        }
        self.index += 1;
        if let Some(message) = out_of_bounds(&record.values) {
            let location = match &self.inner {
                Inner::Text { line_no, .. } => format!("line {line_no}"),
                _ => format!("record {}", self.index),
            };
            return Err(StoreError::Record {
                path: self.path.clone(),
                location,
                message,
            });
        }
        Ok(true)
    }
}

fn parse_text_line(
    line: &str,
    dims: &mut Option<usize>,
    record: &mut Record,
) -> Result<(), String> {
    let mut fields = line.split_ascii_whitespace();
    let mut int_field = |name: &str, max: u64| -> Result<u64, String> {
        let field = fields.next().ok_or_else(|| format!("missing {name}"))?;
        let v: u64 = field.parse().map_err(|_| {
            let field = crate::input::prefix(field, 32);
            format!(
                "{name} {field} is not an integer: vocab's text format is `picture_id row col \
                 f1 ... fD` a line; vocab also reads {}",
                foreign::OTHERS
            )
        })?;
        if v > max {
            return Err(format!("{name} {v} exceeds {max}"));
        }
        Ok(v)
    };
    record.picture_id = int_field("picture_id", u64::from(u32::MAX))? as u32;
    record.row = int_field("row", u64::from(u16::MAX))? as u16;
    record.col = int_field("col", u64::from(u16::MAX))? as u16;
    record.values.clear();
    for field in fields {
        let v: f32 = field.parse().map_err(|_| {
            let field = crate::input::prefix(field, 32);
            format!("value {field} is not a number")
        })?;
        record.values.push(v);
    }
    match *dims {
        None if record.values.is_empty() => return Err("record has no values".into()),
        None => *dims = Some(record.values.len()),
        Some(d) if d != record.values.len() => {
            return Err(format!(
                "has {} values, earlier lines have {d}",
                record.values.len()
            ));
        }
        Some(_) => {}
    }
    Ok(())
}

/// Copies a feature file into another format (or the same one), streaming. Returns the count.
pub fn convert(input: &Path, output: &Path, format: Format) -> Result<u64, StoreError> {
    let mut reader = FeatureReader::open(input)?;
    let mut record = Record::default();
    if !reader.next_into(&mut record)? {
        return Err(StoreError::Format {
            path: input.to_path_buf(),
            message: "holds no records, so its dimensionality is unknown".into(),
        });
    }
    let mut writer = FeatureWriter::create(output, format, record.values.len())?;
    loop {
        writer.write(record.picture_id, record.row, record.col, &record.values)?;
        if !reader.next_into(&mut record)? {
            break;
        }
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u32, dims: usize) -> Vec<Record> {
        (0..n)
            .map(|i| Record {
                picture_id: i,
                row: (i * 3) as u16,
                col: (i * 7) as u16,
                values: (0..dims)
                    .map(|d| (i as f32 + 0.1) * (d as f32 + 1.0).sqrt() * 1e-3)
                    .collect(),
            })
            .collect()
    }

    fn write_all(path: &Path, format: Format, records: &[Record]) {
        let mut w = FeatureWriter::create(path, format, records[0].values.len()).expect("create");
        for r in records {
            w.write(r.picture_id, r.row, r.col, &r.values)
                .expect("write");
        }
        w.finish().expect("finish");
    }

    fn read_all(path: &Path) -> Result<Vec<Record>, StoreError> {
        let mut reader = FeatureReader::open(path)?;
        let mut out = Vec::new();
        let mut r = Record::default();
        while reader.next_into(&mut r)? {
            out.push(r.clone());
        }
        Ok(out)
    }

    #[test]
    fn long_lines_and_tokens_and_devices_are_refused_briefly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("long.txt");
        // One line over the limit: refused at the limit, the error short.
        let mut text = String::from("0 0 0 ");
        text.push_str(&"1".repeat(MAX_LINE_BYTES));
        std::fs::write(&path, &text).expect("write");
        let err = read_all(&path).expect_err("long line").to_string();
        assert!(
            err.contains("line 1: is longer than 4194304 bytes"),
            "{err}"
        );
        assert!(err.len() < 200, "{err}");
        // A long bad token is quoted by its start.
        let token = "x".repeat(1 << 20);
        std::fs::write(&path, format!("{token} 0 0 1.0\n")).expect("write");
        let err = read_all(&path).expect_err("bad id").to_string();
        // (The token quoted short; the refusal then lists the formats vocab reads.)
        assert!(
            err.contains("picture_id \"xxxx") && err.len() < 200 + foreign::OTHERS.len(),
            "{err}"
        );
        std::fs::write(&path, format!("0 0 0 {token}\n")).expect("write");
        let err = read_all(&path).expect_err("bad value").to_string();
        assert!(err.contains("value \"xxxx") && err.len() < 200, "{err}");
        let err = crate::chain(&read_all(Path::new("/dev/zero")).expect_err("device"));
        assert!(err.contains("is a device"), "{err}");
        // A vocabulary too.
        std::fs::write(&path, format!("0.5 {token}\n")).expect("write");
        let err = crate::kmeans::files::read_vocabulary(&path)
            .expect_err("vocabulary")
            .to_string();
        assert!(err.contains("value \"xxxx") && err.len() < 200, "{err}");
    }

    #[test]
    fn vectors_at_the_magnitude_bound_have_finite_squared_distances() {
        for dims in [1, 8, 512, 100_000] {
            let b = magnitude_bound(dims);
            let (x, c) = (vec![b; dims], vec![-b; dims]);
            let d2: f32 = x.iter().zip(&c).map(|(a, b)| (a - b) * (a - b)).sum();
            assert!(d2.is_finite(), "{dims}: {d2}");
            assert!(out_of_bounds(&x).is_none());
            let mut over = x.clone();
            over[dims - 1] = 2.0 * b;
            let msg = out_of_bounds(&over).expect("refused");
            assert!(msg.starts_with(&format!("value {dims} (")), "{msg}");
        }
        assert_eq!(magnitude_bound(512), 2f32.powi(58));
    }

    #[test]
    fn both_formats_round_trip_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let records = sample(20, 512);
        for (name, format) in [("f.txt", Format::Text), ("f.bin", Format::Bin)] {
            let path = dir.path().join(name);
            write_all(&path, format, &records);
            assert_eq!(Format::detect(&path).expect("detect"), format);
            assert_eq!(read_all(&path).expect("read"), records, "{name}");
        }
    }

    #[test]
    fn u8_storage_quantises_within_half_a_step_and_refuses_out_of_range() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q.bin");
        let values: Vec<f32> = (0..=100).map(|i| i as f32 / 100.0).collect();
        let mut w = FeatureWriter::create_with(&path, Format::Bin, values.len(), Element::U8)
            .expect("create");
        w.write(1, 2, 3, &values).expect("write");
        w.finish().expect("finish");
        assert_eq!(
            std::fs::metadata(&path).expect("meta").len(),
            (HEADER_LEN + 8 + 101) as u64
        );
        let back = read_all(&path).expect("read");
        for (a, b) in back[0].values.iter().zip(&values) {
            assert!((a - b).abs() <= 0.5 / 255.0 + 1e-7, "{a} vs {b}");
        }
        let mut w = FeatureWriter::create_with(&path, Format::Bin, 2, Element::U8).expect("create");
        let msg = w
            .write(0, 0, 0, &[0.5, 1.5])
            .expect_err("out of range")
            .to_string();
        assert!(
            msg.contains("record 1: value 2 (1.5) is outside [0, 1]"),
            "{msg}"
        );
    }

    #[test]
    fn conversion_both_ways_is_lossless() {
        let dir = tempfile::tempdir().expect("tempdir");
        let records = sample(9, 17);
        let (txt, bin, txt2) = (
            dir.path().join("a.txt"),
            dir.path().join("b.bin"),
            dir.path().join("c.txt"),
        );
        write_all(&txt, Format::Text, &records);
        assert_eq!(convert(&txt, &bin, Format::Bin).expect("to bin"), 9);
        assert_eq!(convert(&bin, &txt2, Format::Text).expect("to text"), 9);
        assert_eq!(read_all(&bin).expect("bin"), records);
        assert_eq!(
            std::fs::read(&txt).expect("a"),
            std::fs::read(&txt2).expect("c")
        );
    }

    /// Writes a valid binary file, lets `damage` alter its bytes, and returns the read error.
    fn damaged(damage: impl FnOnce(&mut Vec<u8>)) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.bin");
        write_all(&path, Format::Bin, &sample(4, 8));
        let mut bytes = std::fs::read(&path).expect("read");
        damage(&mut bytes);
        std::fs::write(&path, &bytes).expect("write");
        match read_all(&path) {
            Ok(_) => panic!("damaged file was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn damaged_binary_files_are_rejected_with_a_reason() {
        type Damage = Box<dyn FnOnce(&mut Vec<u8>)>;
        let cases: Vec<(&str, Damage)> = vec![
            ("bad magic", Box::new(|b| b[0] = b'X')),
            ("header checksum", Box::new(|b| b[16] ^= 1)),
            ("truncated", Box::new(|b| b.truncate(b.len() - 5))),
            ("after the last record", Box::new(|b| b.push(0))),
            ("payload checksum", Box::new(|b| b[HEADER_LEN + 12] ^= 0x40)),
            (
                "newer than this build",
                Box::new(|b| {
                    b[8] = 9;
                    let crc = crc32fast::hash(&b[..28]);
                    b[28..32].copy_from_slice(&crc.to_le_bytes());
                }),
            ),
        ];
        for (expected, damage) in cases {
            let msg = damaged(damage);
            assert!(msg.contains(expected), "expected {expected:?} in {msg:?}");
            assert!(msg.contains("f.bin"), "error names the file: {msg}");
        }
    }

    #[test]
    fn malformed_text_lines_are_rejected_with_the_line_number() {
        let cases = [
            (
                "0 0 0 1 2\n1 0 0 1\n",
                "line 2: has 1 values, earlier lines have 2",
            ),
            ("0 0 0 1 x\n", "line 1: value \"x\" is not a number"),
            ("0 70000 0 1\n", "line 1: row 70000 exceeds 65535"),
            ("\n0 0 0 1 NaN\n", "line 2: value 2 is not finite"),
            ("0 0\n", "line 1: missing col"),
            ("0 0 0\n", "line 1: record has no values"),
        ];
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.txt");
        for (text, expected) in cases {
            std::fs::write(&path, text).expect("write");
            let msg = read_all(&path).expect_err("must fail").to_string();
            assert!(msg.contains(expected), "expected {expected:?} in {msg:?}");
        }
    }

    #[test]
    fn unfinished_writer_leaves_nothing_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.bin");
        {
            let mut w = FeatureWriter::create(&path, Format::Bin, 2).expect("create");
            w.write(0, 0, 0, &[1.0, 2.0]).expect("write");
        }
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "temp file removed"
        );
    }

    #[test]
    fn writer_rejects_a_record_of_the_wrong_length() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w =
            FeatureWriter::create(&dir.path().join("f.bin"), Format::Bin, 3).expect("create");
        let msg = w
            .write(0, 0, 0, &[1.0])
            .expect_err("wrong length")
            .to_string();
        assert!(msg.contains("has 1 values, file holds 3"), "{msg}");
    }

    proptest::proptest! {
        #[test]
        fn text_values_parse_back_exactly(bits in proptest::collection::vec(proptest::num::f32::NORMAL | proptest::num::f32::ZERO | proptest::num::f32::SUBNORMAL, 1..40)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("p.txt");
            // Values past the magnitude bound are refused (tested elsewhere): scaled into it by a
            // power of two, the rest kept as drawn.
            let bound = magnitude_bound(bits.len());
            let values = bits.iter().map(|&v| if v.abs() > bound { v * 2f32.powi(-80) } else { v }).collect();
            let rec = Record { picture_id: 1, row: 2, col: 3, values };
            write_all(&path, Format::Text, std::slice::from_ref(&rec));
            let back = read_all(&path).expect("read");
            proptest::prop_assert_eq!(back, vec![rec]);
        }
    }
}
