//! Other tools' vector formats, read and written record by record like vocab's own.
//!
//! - **`.npy`** (NumPy): a 2-D array, one vector per row, of `float32`, `float64` (read as the
//!   nearest `f32`) or `uint8` (read as the whole numbers 0 to 255), little-endian, C or Fortran
//!   order; read memory-mapped through `ndarray-npy`, written as `float32` in C order.
//! - **`.fvecs` / `.bvecs`** (faiss, the ANN benchmarks): per vector its dimension as a
//!   little-endian `i32`, then that many `f32` values (fvecs) or bytes (bvecs, read as 0 to 255;
//!   written only when every value is such a whole number).
//! - **`.csv`**: comma-separated, one vector per line, with an optional header (a first line with
//!   a field that is not a number). A header opening `picture_id,row,col` marks those columns as
//!   the record's photo and patch position; vocab writes feature records with it and
//!   vocabularies as `v1,...,vD`.
//!
//! Only CSV with that header carries picture id, row and column: reading any other of these
//! formats, record `i` is picture `i` at row and column 0; writing one drops them.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use ndarray::ArrayView2;
use ndarray_npy::{ViewElement, ViewNpyError, ViewNpyExt};
use tempfile::NamedTempFile;

use super::{Record, StoreError, io_err};

/// Every format a reader accepts, for refusals.
pub const ACCEPTED: &str = "vocab's binary (.bin) and text (`picture_id row col f1 ... fD` a \
     line) formats, .npy (2-D float32, float64 or uint8), .fvecs, .bvecs and .csv \
     (comma-separated, optional header)";

/// The formats besides vocab's text, for a refusal of a text line.
pub const OTHERS: &str = "vocab's binary format, .npy (2-D float32, float64 or uint8), .fvecs, \
     .bvecs and .csv (comma-separated, optional header), told by magic or extension";

/// The magic that opens a `.npy` file.
pub const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Largest dimension a `.fvecs`/`.bvecs` record may declare: 2^24 values.
const MAX_VECS_DIMS: usize = 1 << 24;

fn format_err(path: &Path, message: impl Into<String>) -> StoreError {
    StoreError::Format {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn record_err(path: &Path, location: String, message: impl Into<String>) -> StoreError {
    StoreError::Record {
        path: path.to_path_buf(),
        location,
        message: message.into(),
    }
}

/// `v` as the nearest `f32`; a finite value past the `f32` range is an error (the message for
/// value `j`, 0-based), not an infinity.
fn narrow(v: f64) -> Result<f32, impl Fn(usize) -> String> {
    let narrow = v as f32;
    if v.is_finite() && narrow.is_infinite() {
        Err(move |j: usize| format!("value {} ({v:e}) is past the float32 range", j + 1))
    } else {
        Ok(narrow)
    }
}

/// The picture id of the `index`-th record (0-based) of a format without ids.
fn implicit_id(path: &Path, index: u64) -> Result<u32, StoreError> {
    u32::try_from(index).map_err(|_| {
        record_err(
            path,
            format!("record {}", index + 1),
            "is past the 4,294,967,296 records a picture id can number",
        )
    })
}

/// A `.npy` element type vocab reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NpyElement {
    F32,
    F64,
    U8,
}

impl NpyElement {
    fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F64 => 8,
            Self::U8 => 1,
        }
    }
}

/// Where a 2-D array's data lies in its `.npy` file.
#[derive(Debug, Clone, Copy)]
struct NpyLayout {
    element: NpyElement,
    /// Byte offset of element `[0, 0]`.
    offset: usize,
    rows: usize,
    cols: usize,
    /// Strides in elements (C order: `[cols, 1]`; Fortran: `[1, rows]`).
    strides: [usize; 2],
}

fn npy_layout<A: ViewElement>(
    bytes: &[u8],
    element: NpyElement,
) -> Result<NpyLayout, ViewNpyError> {
    let view = ArrayView2::<A>::view_npy(bytes)?;
    let (rows, cols) = view.dim();
    let strides = view.strides();
    Ok(NpyLayout {
        element,
        // Both pointers lie in `bytes` (an empty array's at its end at most).
        offset: (view.as_ptr() as usize).saturating_sub(bytes.as_ptr() as usize),
        rows,
        cols,
        strides: [
            usize::try_from(strides[0]).unwrap_or(0),
            usize::try_from(strides[1]).unwrap_or(0),
        ],
    })
}

/// The rows of a memory-mapped `.npy` file.
#[derive(Debug)]
pub(super) struct NpyRows {
    map: memmap2::Mmap,
    layout: NpyLayout,
    next: usize,
}

impl NpyRows {
    pub(super) fn open(path: &Path, file: &File) -> Result<Self, StoreError> {
        // SAFETY: the map is read only; a file truncated under it is the caller's mistake, as
        // for every memory-mapped input (partitions alike).
        let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| io_err(path, e))?;
        let explain = |e: ViewNpyError| match e {
            ViewNpyError::WrongNdim(_, n) => format_err(
                path,
                format!("holds a {n}-D array; vocab reads 2-D arrays, one vector per row"),
            ),
            ViewNpyError::NonNativeEndian => format_err(
                path,
                "holds big-endian values; vocab reads little-endian float32, float64 or uint8",
            ),
            ViewNpyError::WrongDescriptor(d) => format_err(
                path,
                format!("holds elements of type {d}; vocab reads float32, float64 or uint8"),
            ),
            other => format_err(path, format!("not a readable .npy file: {other}")),
        };
        let layout = npy_layout::<f32>(&map, NpyElement::F32)
            .or_else(|e| match e {
                ViewNpyError::WrongDescriptor(_) => npy_layout::<f64>(&map, NpyElement::F64),
                e => Err(e),
            })
            .or_else(|e| match e {
                ViewNpyError::WrongDescriptor(_) => npy_layout::<u8>(&map, NpyElement::U8),
                e => Err(e),
            })
            .map_err(|e| match e {
                // The last try's descriptor names u8; name the file's own instead.
                ViewNpyError::WrongDescriptor(_) => npy_layout::<f32>(&map, NpyElement::F32)
                    .map_or_else(explain, |_| {
                        format_err(path, "holds elements vocab does not read")
                    }),
                e => explain(e),
            })?;
        if layout.cols == 0 {
            return Err(format_err(path, "holds vectors of no values"));
        }
        Ok(Self {
            map,
            layout,
            next: 0,
        })
    }

    /// Values per row.
    pub(super) fn dims(&self) -> usize {
        self.layout.cols
    }

    /// Rows in the file.
    pub(super) fn count(&self) -> u64 {
        self.layout.rows as u64
    }

    pub(super) fn next_into(
        &mut self,
        path: &Path,
        record: &mut Record,
    ) -> Result<bool, StoreError> {
        let NpyLayout {
            element,
            offset,
            rows,
            cols,
            strides,
        } = self.layout;
        if self.next == rows {
            return Ok(false);
        }
        let i = self.next;
        record.picture_id = implicit_id(path, i as u64)?;
        record.row = 0;
        record.col = 0;
        record.values.clear();
        let size = element.size();
        // In bounds: `view_npy` checked that the file holds every element of the shape.
        let at = |j: usize| offset + (i * strides[0] + j * strides[1]) * size;
        let map = &self.map[..];
        for j in 0..cols {
            let b = &map[at(j)..at(j) + size];
            let v = match element {
                NpyElement::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                NpyElement::F64 => {
                    let v = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    narrow(v).map_err(|m| record_err(path, format!("row {}", i + 1), m(j)))?
                }
                NpyElement::U8 => f32::from(b[0]),
            };
            record.values.push(v);
        }
        self.next += 1;
        Ok(true)
    }
}

/// The records of a `.fvecs` or `.bvecs` file.
#[derive(Debug)]
pub(super) struct VecsRows {
    input: BufReader<File>,
    bytes: bool,
    dims: usize,
    count: u64,
    next: u64,
    buf: Vec<u8>,
}

impl VecsRows {
    pub(super) fn open(path: &Path, file: File, bytes: bool) -> Result<Self, StoreError> {
        let len = file.metadata().map_err(|e| io_err(path, e))?.len();
        let mut input = BufReader::with_capacity(1 << 20, file);
        let mut head = [0u8; 4];
        let what = if bytes { "bvecs" } else { "fvecs" };
        if len == 0 {
            // No vectors (as an empty .npy or CSV may hold), of no known dimension.
            return Ok(Self {
                input,
                bytes,
                dims: 0,
                count: 0,
                next: 0,
                buf: Vec::new(),
            });
        }
        input.read_exact(&mut head).map_err(|_| {
            format_err(
                path,
                format!("is shorter than one .{what} record's dimension"),
            )
        })?;
        let dims = i32::from_le_bytes(head);
        let dims = usize::try_from(dims)
            .ok()
            .filter(|&d| (1..=MAX_VECS_DIMS).contains(&d))
            .ok_or_else(|| {
                format_err(
                    path,
                    format!(
                        "opens with dimension {dims}, not 1 to {MAX_VECS_DIMS}: not a .{what} file"
                    ),
                )
            })?;
        let record = 4 + dims as u64 * if bytes { 1 } else { 4 };
        if len % record != 0 {
            return Err(format_err(
                path,
                format!(
                    "is {len} bytes, not a whole number of {dims}-value .{what} records \
                     ({record} bytes each)"
                ),
            ));
        }
        input
            .seek(SeekFrom::Start(0))
            .map_err(|e| io_err(path, e))?;
        Ok(Self {
            input,
            bytes,
            dims,
            count: len / record,
            next: 0,
            buf: vec![0; record as usize],
        })
    }

    /// Values per vector (unknown in an empty file).
    pub(super) fn dims(&self) -> Option<usize> {
        (self.dims > 0).then_some(self.dims)
    }

    pub(super) fn count(&self) -> u64 {
        self.count
    }

    /// Whether the file is `.bvecs`.
    pub(super) fn bytes(&self) -> bool {
        self.bytes
    }

    pub(super) fn next_into(
        &mut self,
        path: &Path,
        record: &mut Record,
    ) -> Result<bool, StoreError> {
        if self.next == self.count {
            return Ok(false);
        }
        self.input
            .read_exact(&mut self.buf)
            .map_err(|e| io_err(path, e))?;
        let dims = i32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if usize::try_from(dims).ok() != Some(self.dims) {
            return Err(record_err(
                path,
                format!("record {}", self.next + 1),
                format!("declares {dims} values, earlier records {}", self.dims),
            ));
        }
        record.picture_id = implicit_id(path, self.next)?;
        record.row = 0;
        record.col = 0;
        record.values.clear();
        let body = &self.buf[4..];
        if self.bytes {
            record.values.extend(body.iter().map(|&b| f32::from(b)));
        } else {
            record.values.extend(
                body.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
        }
        self.next += 1;
        Ok(true)
    }
}

/// The records of a comma-separated file.
#[derive(Debug)]
pub(super) struct CsvRows {
    reader: csv::Reader<crate::input::Records<File>>,
    row: csv::StringRecord,
    /// Whether the first three columns are picture id, row and column.
    meta: bool,
    /// Values per record, once the first is read.
    dims: Option<usize>,
    /// A record read while looking for the header, not yet returned.
    pending: bool,
    next: u64,
}

/// Whether a CSV field is a number (a header's fields are not, or not all).
fn numeric(field: &str) -> bool {
    field.trim().parse::<f64>().is_ok()
}

impl CsvRows {
    pub(super) fn open(path: &Path, file: File) -> Result<Self, StoreError> {
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(crate::input::Records::new(file));
        let mut rows = Self {
            reader,
            row: csv::StringRecord::new(),
            meta: false,
            dims: None,
            pending: false,
            next: 0,
        };
        if rows.read(path)? {
            // A line of numbers is data, never a header (whatever the numbers are).
            if rows.row.iter().all(numeric) {
                rows.pending = true;
            } else {
                if rows.row.get(0).is_some_and(|f| f.trim().is_empty()) {
                    return Err(format_err(
                        path,
                        "its header's first column has no name (a pandas index?): vocab reads a \
                         vector a line, so write it without the index (to_csv(index=False))",
                    ));
                }
                let names: Vec<String> = rows
                    .row
                    .iter()
                    .take(3)
                    .map(|f| f.trim().to_ascii_lowercase())
                    .collect();
                rows.meta = names == ["picture_id", "row", "col"];
            }
        }
        Ok(rows)
    }

    fn read(&mut self, path: &Path) -> Result<bool, StoreError> {
        self.reader.read_record(&mut self.row).map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => record_err(
                    path,
                    format!("line {line}"),
                    format!("has {len} fields, earlier lines have {expected_len}"),
                ),
                csv::ErrorKind::Utf8 { .. } => {
                    record_err(path, format!("line {line}"), "not UTF-8 text")
                }
                _ => format_err(path, e.to_string()),
            }
        })
    }

    /// Whether the first three columns are picture id, row and column.
    pub(super) fn names_pictures(&self) -> bool {
        self.meta
    }

    /// Values per record, once one is read (or pending).
    pub(super) fn dims(&self) -> Option<usize> {
        self.dims.or_else(|| {
            self.pending
                .then(|| self.row.len().saturating_sub(if self.meta { 3 } else { 0 }))
        })
    }

    pub(super) fn next_into(
        &mut self,
        path: &Path,
        record: &mut Record,
    ) -> Result<bool, StoreError> {
        if !std::mem::take(&mut self.pending) && !self.read(path)? {
            return Ok(false);
        }
        let line = self.row.position().map_or(self.next + 1, |p| p.line());
        let location = format!("line {line}");
        let mut fields = self.row.iter().map(str::trim);
        if self.meta {
            let mut int = |name: &str, max: u64| -> Result<u64, StoreError> {
                let field = fields.next().unwrap_or("");
                let v: u64 = field.parse().map_err(|_| {
                    let field = crate::input::prefix(field, 32);
                    record_err(
                        path,
                        location.clone(),
                        format!("{name} {field} is not an integer"),
                    )
                })?;
                if v > max {
                    return Err(record_err(
                        path,
                        location.clone(),
                        format!("{name} {v} exceeds {max}"),
                    ));
                }
                Ok(v)
            };
            record.picture_id = int("picture_id", u64::from(u32::MAX))? as u32;
            record.row = int("row", u64::from(u16::MAX))? as u16;
            record.col = int("col", u64::from(u16::MAX))? as u16;
        } else {
            record.picture_id = implicit_id(path, self.next)?;
            record.row = 0;
            record.col = 0;
        }
        record.values.clear();
        for (j, field) in fields.enumerate() {
            let v: f64 = field.parse().map_err(|_| {
                let field = crate::input::prefix(field, 32);
                record_err(
                    path,
                    location.clone(),
                    format!("value {field} is not a number"),
                )
            })?;
            let v = narrow(v).map_err(|m| record_err(path, location.clone(), m(j)))?;
            record.values.push(v);
        }
        if record.values.is_empty() {
            return Err(record_err(path, location, "holds no values"));
        }
        self.dims = Some(record.values.len());
        self.next += 1;
        Ok(true)
    }
}

/// Where a writer of another tool's format puts its records.
#[derive(Debug)]
pub(super) enum ForeignSink {
    /// The values as raw little-endian `f32`, the `.npy` header added by `finish`.
    Npy { raw: BufWriter<NamedTempFile> },
    /// `.fvecs` (`bytes` false) or `.bvecs`.
    Vecs {
        out: BufWriter<NamedTempFile>,
        bytes: bool,
    },
    /// Comma-separated values, picture id, row and column first when `meta`.
    Csv {
        /// Boxed: the writer holds its own buffer inline.
        out: Box<csv::Writer<NamedTempFile>>,
        meta: bool,
    },
}

impl ForeignSink {
    /// `.npy` written to a temporary file beside `path`.
    pub(super) fn npy(path: &Path) -> Result<Self, StoreError> {
        let raw = crate::atomic::temp_beside(path).map_err(|e| io_err(path, e))?;
        Ok(Self::Npy {
            raw: BufWriter::with_capacity(1 << 20, raw),
        })
    }

    pub(super) fn vecs(path: &Path, bytes: bool) -> Result<Self, StoreError> {
        let out = crate::atomic::temp_beside(path).map_err(|e| io_err(path, e))?;
        Ok(Self::Vecs {
            out: BufWriter::with_capacity(1 << 20, out),
            bytes,
        })
    }

    /// CSV with its header: `picture_id,row,col,v1,...` when `meta`, else `v1,...`.
    pub(super) fn csv(path: &Path, dims: usize, meta: bool) -> Result<Self, StoreError> {
        let tmp = crate::atomic::temp_beside(path).map_err(|e| io_err(path, e))?;
        let mut out = csv::WriterBuilder::new().from_writer(tmp);
        let err = |e| csv_err(path, e);
        if meta {
            for name in ["picture_id", "row", "col"] {
                out.write_field(name).map_err(err)?;
            }
        }
        for i in 1..=dims {
            out.write_field(format!("v{i}")).map_err(err)?;
        }
        out.write_record(None::<&[u8]>).map_err(err)?;
        Ok(Self::Csv {
            out: Box::new(out),
            meta,
        })
    }

    /// Appends one record; `index` (1-based) names it in errors.
    pub(super) fn write(
        &mut self,
        path: &Path,
        index: u64,
        (picture_id, row, col): (u32, u16, u16),
        values: &[f32],
    ) -> Result<(), StoreError> {
        match self {
            Self::Npy { raw } => {
                for v in values {
                    raw.write_all(&v.to_le_bytes())
                        .map_err(|e| io_err(path, e))?;
                }
            }
            Self::Vecs { out, bytes } => {
                let dims = i32::try_from(values.len())
                    .ok()
                    .filter(|&d| d as usize <= MAX_VECS_DIMS)
                    .ok_or_else(|| {
                        format_err(
                            path,
                            format!(
                                "vectors of {} values: .fvecs/.bvecs as vocab reads them hold at \
                                 most {MAX_VECS_DIMS}",
                                values.len()
                            ),
                        )
                    })?;
                out.write_all(&dims.to_le_bytes())
                    .map_err(|e| io_err(path, e))?;
                if *bytes {
                    let body = values
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| {
                            if v.fract() == 0.0 && (0.0..=255.0).contains(&v) {
                                Ok(v as u8)
                            } else {
                                Err(record_err(
                                    path,
                                    format!("record {index}"),
                                    format!(
                                        "value {} ({v}) is not a whole number 0 to 255, which \
                                         .bvecs holds (write .fvecs or .npy)",
                                        i + 1
                                    ),
                                ))
                            }
                        })
                        .collect::<Result<Vec<u8>, _>>()?;
                    out.write_all(&body).map_err(|e| io_err(path, e))?;
                } else {
                    for v in values {
                        out.write_all(&v.to_le_bytes())
                            .map_err(|e| io_err(path, e))?;
                    }
                }
            }
            Self::Csv { out, meta } => {
                // A field at a time, straight into the writer: a wide vector is never held as
                // a string a value.
                let err = |e| csv_err(path, e);
                if *meta {
                    for n in [u64::from(picture_id), u64::from(row), u64::from(col)] {
                        out.write_field(n.to_string()).map_err(err)?;
                    }
                }
                let mut buf = ryu::Buffer::new();
                for &v in values {
                    out.write_field(buf.format(v)).map_err(err)?;
                }
                out.write_record(None::<&[u8]>).map_err(err)?;
            }
        }
        Ok(())
    }

    /// The finished file, not yet renamed into place.
    pub(super) fn finish(
        self,
        path: &Path,
        count: u64,
        dims: usize,
    ) -> Result<NamedTempFile, StoreError> {
        match self {
            Self::Npy { raw } => {
                let mut raw = raw.into_inner().map_err(|e| io_err(path, e.into_error()))?;
                let mut npy = crate::atomic::temp_beside(path).map_err(|e| io_err(path, e))?;
                let rows = usize::try_from(count)
                    .map_err(|_| format_err(path, "more rows than this machine can address"))?;
                ndarray_npy::write_zeroed_npy::<f32, _>(npy.as_file(), (rows, dims))
                    .map_err(|e| format_err(path, format!("cannot write the .npy header: {e}")))?;
                // The header, then the data: the data is the file's last rows x dims x 4 bytes.
                let len = npy.as_file().metadata().map_err(|e| io_err(path, e))?.len();
                let data = count * dims as u64 * 4;
                let file = npy.as_file_mut();
                file.seek(SeekFrom::Start(len - data))
                    .map_err(|e| io_err(path, e))?;
                let source = raw.as_file_mut();
                source
                    .seek(SeekFrom::Start(0))
                    .map_err(|e| io_err(path, e))?;
                let copied = io::copy(source, file).map_err(|e| io_err(path, e))?;
                if copied != data {
                    return Err(format_err(
                        path,
                        format!("wrote {copied} bytes of values, expected {data}"),
                    ));
                }
                Ok(npy)
            }
            Self::Vecs { out, .. } => out.into_inner().map_err(|e| io_err(path, e.into_error())),
            Self::Csv { out, .. } => out.into_inner().map_err(|e| io_err(path, e.into_error())),
        }
    }
}

fn csv_err(path: &Path, e: csv::Error) -> StoreError {
    match e.into_kind() {
        csv::ErrorKind::Io(source) => io_err(path, source),
        other => format_err(path, format!("{other:?}")),
    }
}
