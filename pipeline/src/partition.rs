//! Partitioned feature stores: the static data that map tasks load once and keep in memory.
//!
//! `split` streams a feature file (text or binary) into `P` partition files whose sizes differ by
//! at most one record, in input order: partition `i` holds a contiguous range of the input. Each
//! partition is a binary feature file (see [`crate::store`]), and the directory gets
//! `manifest.toml`:
//!
//! ```toml
//! version = 1
//! dims = 512
//! element = "f32"
//! count = 7500                 # records in all partitions
//! source = "features.bin"      # the input, as given
//! source_checksum = 123456789  # CRC-32 of the input's records in binary record layout
//! [[partitions]]
//! file = "part-0000.bin"
//! count = 938
//! checksum = 987654321         # the partition's payload CRC-32 (also in its header)
//! ```
//!
//! The source checksum is computed over the records' canonical binary bytes, so a text file and its
//! binary conversion have the same checksum.
//!
//! [`PartitionSet::open`] memory-maps every partition and checks it against the manifest (present,
//! length, header, dims, count, payload checksum, finite values) before anything uses it: a bad
//! partition is an error naming its file, never a silently smaller data set. A record's values are
//! then read in place: the values of record `r` are `f32`s `r * (dims + 2) + 2 ..` of the payload,
//! which [`Matrix`] expresses as a row stride; a u8 partition's are bytes `r * (dims + 8) + 8 ..`,
//! held as they are ([`Codes`]) and decoded a block of rows at a time by whatever reads them
//! ([`Rows`]), so a u8 set costs a quarter of its f32 values' memory.

use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use crate::atomic;
use crate::store::{
    BinHeader, Element, FeatureReader, FeatureWriter, Format, HEADER_LEN, RECORD_HEAD, Record,
    StoreError,
};

/// File name of a partition directory's manifest.
pub const MANIFEST: &str = "manifest.toml";

/// A read-only, row-major matrix of `f32` whose rows may be spaced wider than they are long.
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    data: &'a [f32],
    rows: usize,
    dims: usize,
    stride: usize,
}

impl<'a> Matrix<'a> {
    /// A matrix of `rows x dims` values, row `r` starting at `data[r * stride]`.
    ///
    /// # Panics
    /// If `stride < dims` or `data` is too short.
    pub fn new(data: &'a [f32], rows: usize, dims: usize, stride: usize) -> Self {
        assert!(
            stride >= dims,
            "stride {stride} shorter than a row of {dims}"
        );
        assert!(
            rows == 0 || (rows - 1) * stride + dims <= data.len(),
            "matrix data too short"
        );
        Self {
            data,
            rows,
            dims,
            stride,
        }
    }

    /// A dense `rows x dims` matrix.
    pub fn dense(data: &'a [f32], dims: usize) -> Self {
        Self::new(data, data.len() / dims.max(1), dims, dims)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Distance in `f32`s between consecutive rows.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> &'a [f32] {
        &self.data[r * self.stride..][..self.dims]
    }

    /// Rows `start..end` as a matrix.
    pub fn slice(&self, start: usize, end: usize) -> Matrix<'a> {
        assert!(
            start <= end && end <= self.rows,
            "rows {start}..{end} outside 0..{}",
            self.rows
        );
        if start == end {
            return Matrix {
                data: &[],
                rows: 0,
                dims: self.dims,
                stride: self.stride,
            };
        }
        Matrix {
            data: &self.data[start * self.stride..],
            rows: end - start,
            dims: self.dims,
            stride: self.stride,
        }
    }

    /// The raw data, starting at row 0 (for GEMM with [`Matrix::stride`]).
    pub fn as_ptr(&self) -> *const f32 {
        self.data.as_ptr()
    }
}

/// A read-only, row-major matrix of u8 codes (value `byte / 255`, [`Element::U8`]) whose rows
/// may be spaced wider than they are long.
#[derive(Debug, Clone, Copy)]
pub struct Codes<'a> {
    data: &'a [u8],
    rows: usize,
    dims: usize,
    stride: usize,
}

impl<'a> Codes<'a> {
    /// A matrix of `rows x dims` codes, row `r` starting at `data[r * stride]`.
    ///
    /// # Panics
    /// If `stride < dims` or `data` is too short.
    pub fn new(data: &'a [u8], rows: usize, dims: usize, stride: usize) -> Self {
        assert!(
            stride >= dims,
            "stride {stride} shorter than a row of {dims}"
        );
        assert!(
            rows == 0 || (rows - 1) * stride + dims <= data.len(),
            "code data too short"
        );
        Self {
            data,
            rows,
            dims,
            stride,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Rows `start..end`.
    ///
    /// # Panics
    /// If the range is outside the rows.
    pub fn slice(&self, start: usize, end: usize) -> Codes<'a> {
        assert!(
            start <= end && end <= self.rows,
            "rows {start}..{end} outside 0..{}",
            self.rows
        );
        let data = if start == end {
            &[][..]
        } else {
            &self.data[start * self.stride..]
        };
        Codes {
            data,
            rows: end - start,
            ..*self
        }
    }

    /// The codes of row `r`.
    pub fn row(&self, r: usize) -> &'a [u8] {
        &self.data[r * self.stride..][..self.dims]
    }

    /// Row `r`'s values into `out` (`dims` long).
    #[inline]
    pub fn decode_row(&self, r: usize, out: &mut [f32]) {
        for (v, &b) in out.iter_mut().zip(self.row(r)) {
            *v = crate::store::u8_value(b);
        }
    }
}

/// Vectors as a partition holds them: `f32` values, or u8 codes that whatever reads them decodes
/// a block of rows at a time (the same values [`crate::store::FeatureReader`] returns, so every
/// result computed from them is what the decoded `f32`s give).
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    /// `f32` values, read in place.
    F32(Matrix<'a>),
    /// u8 codes, read in place.
    U8(Codes<'a>),
}

impl<'a> From<Matrix<'a>> for Rows<'a> {
    fn from(m: Matrix<'a>) -> Self {
        Self::F32(m)
    }
}

impl<'a> Rows<'a> {
    /// Dense `f32` rows ([`Matrix::dense`]).
    pub fn dense(data: &'a [f32], dims: usize) -> Self {
        Self::F32(Matrix::dense(data, dims))
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        match self {
            Self::F32(m) => m.rows,
            Self::U8(c) => c.rows,
        }
    }

    /// Values per row.
    pub fn dims(&self) -> usize {
        match self {
            Self::F32(m) => m.dims,
            Self::U8(c) => c.dims,
        }
    }

    /// How the values are held.
    pub fn element(&self) -> Element {
        match self {
            Self::F32(_) => Element::F32,
            Self::U8(_) => Element::U8,
        }
    }

    /// Rows `start..end`.
    ///
    /// # Panics
    /// If the range is outside the rows.
    pub fn slice(&self, start: usize, end: usize) -> Rows<'a> {
        match self {
            Self::F32(m) => Self::F32(m.slice(start, end)),
            Self::U8(c) => Self::U8(c.slice(start, end)),
        }
    }

    /// The rows as `f32`s: in place, or decoded into `buf` (dense).
    pub fn to_f32<'s>(&self, buf: &'s mut Vec<f32>) -> Matrix<'s>
    where
        'a: 's,
    {
        match self {
            Self::F32(m) => *m,
            Self::U8(c) => {
                buf.resize(c.rows * c.dims, 0.0);
                for (r, out) in buf.chunks_exact_mut(c.dims.max(1)).enumerate() {
                    c.decode_row(r, out);
                }
                Matrix::new(buf, c.rows, c.dims, c.dims)
            }
        }
    }

    /// Row `r` as `f32`s: in place, or decoded into `buf`.
    pub fn row<'s>(&self, r: usize, buf: &'s mut Vec<f32>) -> &'s [f32]
    where
        'a: 's,
    {
        match self {
            Self::F32(m) => m.row(r),
            Self::U8(c) => {
                buf.resize(c.dims, 0.0);
                c.decode_row(r, buf);
                buf
            }
        }
    }

    /// Appends row `r`'s values to `out`.
    pub fn extend_row(&self, r: usize, out: &mut Vec<f32>) {
        match self {
            Self::F32(m) => out.extend_from_slice(m.row(r)),
            Self::U8(c) => out.extend(c.row(r).iter().map(|&b| crate::store::u8_value(b))),
        }
    }

    /// Calls `f` with each row's index and values, in order (u8 rows decoded one at a time).
    #[inline]
    pub fn for_each_row(&self, mut f: impl FnMut(usize, &[f32])) {
        match self {
            Self::F32(m) => (0..m.rows).for_each(|r| f(r, m.row(r))),
            Self::U8(c) => {
                let mut buf = vec![0.0; c.dims];
                for r in 0..c.rows {
                    c.decode_row(r, &mut buf);
                    f(r, &buf);
                }
            }
        }
    }
}

/// The manifest of a partition directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Manifest format version.
    pub version: u32,
    /// Values per record.
    pub dims: usize,
    /// Element type of the stored values.
    pub element: String,
    /// Records in all partitions.
    pub count: u64,
    /// The input file, as given to `split`.
    pub source: String,
    /// CRC-32 of the input's records in binary record layout.
    pub source_checksum: u32,
    /// The partitions, in input order.
    pub partitions: Vec<PartitionEntry>,
}

impl Manifest {
    /// Identity of the partitioned data: CRC-32 over dims, element type, counts and checksums
    /// (not the source path, which differs between copies of the same data).
    pub fn digest(&self) -> u32 {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.version.to_le_bytes());
        crc.update(&(self.dims as u64).to_le_bytes());
        crc.update(self.element.as_bytes());
        crc.update(&self.count.to_le_bytes());
        crc.update(&self.source_checksum.to_le_bytes());
        for p in &self.partitions {
            crc.update(p.file.as_bytes());
            crc.update(&p.count.to_le_bytes());
            crc.update(&p.checksum.to_le_bytes());
        }
        crc.finalize()
    }

    /// The manifest of partitions written in order (their reports), from a source named
    /// `source`: the source checksum is their records' CRCs combined.
    pub fn assemble(dims: usize, element: Element, source: String, parts: &[PartReport]) -> Self {
        let mut crc = crc32fast::Hasher::new();
        for p in parts {
            crc.combine(&crc32fast::Hasher::new_with_initial_len(
                p.source_crc,
                p.source_len,
            ));
        }
        Self {
            version: 1,
            dims,
            element: element.name().into(),
            count: parts.iter().map(|p| p.entry.count).sum(),
            source,
            source_checksum: crc.finalize(),
            partitions: parts.iter().map(|p| p.entry.clone()).collect(),
        }
    }

    /// The element type (validated when the manifest was read).
    pub fn element_type(&self) -> Element {
        Element::from_name(&self.element).unwrap_or_default()
    }
}

/// One partition in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionEntry {
    /// File name inside the directory.
    pub file: String,
    /// Records in the partition.
    pub count: u64,
    /// Payload CRC-32 of the partition file.
    pub checksum: u32,
}

fn format_err(path: &Path, message: impl Into<String>) -> StoreError {
    StoreError::Format {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Sizes of `parts` contiguous ranges of `count` records, differing by at most one.
pub fn partition_sizes(count: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| count / parts + u64::from(i < count % parts))
        .collect()
}

/// Splits a feature file into `parts` partitions in `out_dir`, streaming.
///
/// The set is built in a folder beside `out_dir` and moved into place only when complete, so a
/// failure (damage late in the input, a full disk) leaves an existing set at `out_dir` as it
/// was. An existing `out_dir` is replaced only if it is empty or holds nothing but a partition
/// set (`manifest.toml`, `part-NNNN.bin`); anything else in it is refused, naming the file.
pub fn split(
    input: &Path,
    parts: usize,
    out_dir: &Path,
    element: Element,
) -> Result<Manifest, StoreError> {
    crate::output::check_folder(out_dir).map_err(|e| io_err(out_dir, e.into()))?;
    if out_dir.exists() {
        let entries = std::fs::read_dir(out_dir).map_err(|e| io_err(out_dir, e))?;
        for entry in entries {
            let name = entry.map_err(|e| io_err(out_dir, e))?.file_name();
            let name = name.to_string_lossy();
            let ours = name == MANIFEST
                || (name.starts_with("part-") && name.ends_with(".bin"))
                || name.starts_with(crate::atomic::TEMP_PREFIX);
            if !ours {
                return Err(format_err(
                    out_dir,
                    format!(
                        "holds {name}, which is not part of a partition set; choose a new or \
                         empty folder"
                    ),
                ));
            }
        }
    }
    let parent = match out_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = out_dir
        .file_name()
        .map_or_else(|| "parts".into(), |n| n.to_string_lossy().into_owned());
    let building = parent.join(format!(".{name}.building-{}", std::process::id()));
    let retired = parent.join(format!(".{name}.replaced-{}", std::process::id()));
    for leftover in [&building, &retired] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover).map_err(|e| io_err(leftover, e))?;
        }
    }
    crate::output::create_dir_all(&parent).map_err(|e| io_err(&parent, e))?;
    let manifest = match split_into(input, parts, &building, element) {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&building);
            return Err(e);
        }
    };
    // Swap: the old set steps aside, the new one takes its name, then the old one goes.
    let had_old = out_dir.exists();
    if had_old {
        std::fs::rename(out_dir, &retired).map_err(|e| io_err(out_dir, e))?;
    }
    if let Err(e) = std::fs::rename(&building, out_dir) {
        if had_old {
            let _ = std::fs::rename(&retired, out_dir);
        }
        let _ = std::fs::remove_dir_all(&building);
        return Err(io_err(out_dir, e));
    }
    if had_old {
        // Mapped files of the old set stay readable until unmapped.
        let _ = std::fs::remove_dir_all(&retired);
    }
    Ok(manifest)
}

/// [`split`] into a new folder `out_dir`.
fn split_into(
    input: &Path,
    parts: usize,
    out_dir: &Path,
    element: Element,
) -> Result<Manifest, StoreError> {
    if parts == 0 {
        return Err(format_err(input, "cannot split into 0 partitions"));
    }
    // The record count decides the sizes: binary files say it, text files need a counting pass.
    let mut reader = FeatureReader::open(input)?;
    let mut record = Record::default();
    let count = match reader.count() {
        Some(n) => n,
        None => {
            let mut n = 0;
            while reader.next_into(&mut record)? {
                n += 1;
            }
            reader = FeatureReader::open(input)?;
            n
        }
    };
    if count < parts as u64 {
        return Err(format_err(
            input,
            format!("holds {count} records, fewer than {parts} partitions"),
        ));
    }
    crate::output::create_dir_all(out_dir).map_err(|e| io_err(out_dir, e))?;
    let mut dims = None;
    let mut reports = Vec::with_capacity(parts);
    for (idx, size) in partition_sizes(count, parts).into_iter().enumerate() {
        let mut writer: Option<PartWriter> = None;
        for _ in 0..size {
            if !reader.next_into(&mut record)? {
                return Err(format_err(input, "ended before the records it announced"));
            }
            let w = match &mut writer {
                Some(w) => w,
                None => {
                    dims = Some(record.values.len());
                    writer.insert(PartWriter::create(
                        out_dir,
                        idx,
                        record.values.len(),
                        element,
                    )?)
                }
            };
            w.write(record.picture_id, record.row, record.col, &record.values)?;
        }
        // Sizes are at least 1 (count >= parts), so every partition has a writer.
        match writer {
            Some(w) => reports.push(w.finish()?),
            None => return Err(format_err(input, "holds an empty partition")),
        }
    }
    if reader.next_into(&mut record)? {
        return Err(format_err(input, "holds more records than it announced"));
    }
    let manifest = Manifest::assemble(
        dims.unwrap_or(0),
        element,
        input.display().to_string(),
        &reports,
    );
    write_manifest(out_dir, &manifest)?;
    Ok(manifest)
}

/// Writes `manifest` as `dir/manifest.toml` (whole or not at all).
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), StoreError> {
    let path = dir.join(MANIFEST);
    let text = toml::to_string(manifest).map_err(|e| format_err(&path, e.to_string()))?;
    atomic::write(&path, text.as_bytes()).map_err(|e| io_err(&path, e))
}

/// File name of partition `index` in a partition folder.
pub fn part_file(index: usize) -> String {
    format!("part-{index:04}.bin")
}

/// What writing one partition gave: its manifest entry and the CRC-32 of its records in the
/// source's binary record layout (with their length, so that the partitions' CRCs combine into
/// the source checksum in partition order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartReport {
    /// The partition's manifest entry.
    pub entry: PartitionEntry,
    /// CRC-32 of its records as the source holds them.
    pub source_crc: u32,
    /// Bytes that CRC covers.
    pub source_len: u64,
}

/// Writes one partition file (`part-NNNN.bin` in a folder), the same bytes however its records
/// arrive: [`split`] from a feature file, a cluster node from the records it described.
#[derive(Debug)]
pub struct PartWriter {
    file: String,
    writer: FeatureWriter,
    source: crc32fast::Hasher,
}

impl PartWriter {
    /// Starts partition `index` of `dims`-dimensional records stored as `element` in `dir`.
    pub fn create(
        dir: &Path,
        index: usize,
        dims: usize,
        element: Element,
    ) -> Result<Self, StoreError> {
        let file = part_file(index);
        let writer = FeatureWriter::create_with(&dir.join(&file), Format::Bin, dims, element)?;
        Ok(Self {
            file,
            writer,
            source: crc32fast::Hasher::new(),
        })
    }

    /// Appends one record.
    pub fn write(
        &mut self,
        picture_id: u32,
        row: u16,
        col: u16,
        values: &[f32],
    ) -> Result<(), StoreError> {
        self.writer.write(picture_id, row, col, values)?;
        crate::store::hash_record(&mut self.source, picture_id, row, col, values);
        Ok(())
    }

    /// Completes the file and reports it.
    pub fn finish(self) -> Result<PartReport, StoreError> {
        let checksum = self.writer.payload_checksum();
        let count = self.writer.finish()?;
        Ok(PartReport {
            entry: PartitionEntry {
                file: self.file,
                count,
                checksum,
            },
            source_len: self.source.total_len(),
            source_crc: self.source.finalize(),
        })
    }
}

/// Reads a partition directory's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, StoreError> {
    let path = dir.join(MANIFEST);
    let text = crate::input::read_text(&path, crate::input::MAX_RECORD_BYTES)
        .map_err(|e| io_err(&path, e))?;
    let manifest: Manifest = toml::from_str(&text).map_err(|e| format_err(&path, e.to_string()))?;
    if manifest.version != 1 || Element::from_name(&manifest.element).is_none() {
        return Err(format_err(
            &path,
            format!(
                "unsupported manifest (version {}, element {:?})",
                manifest.version, manifest.element
            ),
        ));
    }
    let total = manifest
        .partitions
        .iter()
        .try_fold(0u64, |sum, p| sum.checked_add(p.count))
        .ok_or_else(|| format_err(&path, "the partitions' record counts overflow when added"))?;
    if total != manifest.count {
        return Err(format_err(
            &path,
            format!(
                "partitions hold {total} records, manifest says {}",
                manifest.count
            ),
        ));
    }
    Ok(manifest)
}

/// Whether `path` looks like the partition of `entry` without reading its payload: the header
/// (dims, count, checksum, element type) and the file's length agree. [`Partition::open`]
/// verifies the payload when the partition is loaded.
pub fn looks_whole(path: &Path, entry: &PartitionEntry, dims: usize, element: Element) -> bool {
    use std::io::Read;
    let mut head = [0u8; HEADER_LEN];
    let Ok(mut file) = crate::input::open(path) else {
        return false;
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return false;
    };
    if file.read_exact(&mut head).is_err() {
        return false;
    }
    BinHeader::parse(&head, path).is_ok_and(|h| {
        h.dims == dims
            && h.count == entry.count
            && h.payload_crc == entry.checksum
            && h.element == element
            && h.file_len() == len
    })
}

/// How much of a partition [`Partition::open`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Header, length, manifest entry, payload checksum and every value finite: data a map task
    /// will read in full.
    Full,
    /// Header, length and manifest entry only; the payload is mapped, not read. For the cluster
    /// driver, which reads only the rows it samples for the initial centroids (checked finite
    /// there) while every worker verifies its own partitions in full.
    Header,
}

/// One memory-mapped, verified partition.
#[derive(Debug)]
pub struct Partition {
    path: PathBuf,
    map: Mmap,
    rows: usize,
    dims: usize,
    element: Element,
}

impl Partition {
    /// Maps `path` and checks it against its manifest entry, the set's dims and element type
    /// (and, with [`Verify::Full`], its payload).
    ///
    /// A u8 partition stays as its codes ([`Rows::U8`]): its values are decoded by the code that
    /// reads them, a block of rows at a time.
    pub fn open(
        path: &Path,
        entry: &PartitionEntry,
        dims: usize,
        element: Element,
        verify: Verify,
    ) -> Result<Self, StoreError> {
        let file = crate::input::open(path).map_err(|e| io_err(path, e))?;
        // SAFETY: the map is read-only and partition files are never modified in place: writers
        // create a new file and rename it over the old one, which leaves existing maps intact.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| io_err(path, e))?;
        let head: &[u8; HEADER_LEN] = map
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| format_err(path, "truncated header"))?;
        let header = BinHeader::parse(head, path)?;
        if header.dims != dims {
            return Err(format_err(
                path,
                format!("has {} dims, manifest says {dims}", header.dims),
            ));
        }
        if header.count != entry.count {
            return Err(format_err(
                path,
                format!(
                    "has {} records, manifest says {}",
                    header.count, entry.count
                ),
            ));
        }
        if header.payload_crc != entry.checksum {
            return Err(format_err(
                path,
                "checksum differs from the manifest's (file replaced?)",
            ));
        }
        if (map.len() as u64) > header.file_len() {
            return Err(crate::store::trailing(
                path,
                header.file_len(),
                map.len() as u64,
            ));
        }
        if (map.len() as u64) < header.file_len() {
            return Err(StoreError::Truncated {
                path: path.to_path_buf(),
                expected: header.file_len(),
                actual: map.len() as u64,
            });
        }
        if verify == Verify::Full {
            let actual = crc32fast::hash(&map[HEADER_LEN..]);
            if actual != header.payload_crc {
                return Err(StoreError::Checksum {
                    path: path.to_path_buf(),
                    expected: header.payload_crc,
                    actual,
                });
            }
        }
        if header.element != element {
            return Err(format_err(
                path,
                format!(
                    "stores {}, manifest says {}",
                    header.element.name(),
                    element.name()
                ),
            ));
        }
        let part = Self {
            path: path.to_path_buf(),
            map,
            rows: header.count as usize,
            dims,
            element,
        };
        // Codes lie in [0, 1] by construction; f32 values are checked when read in full.
        let (Verify::Full, Rows::F32(m)) = (verify, part.vectors()) else {
            return Ok(part);
        };
        for r in 0..m.rows() {
            if let Some(message) = crate::store::out_of_bounds(m.row(r)) {
                return Err(StoreError::Record {
                    path: path.to_path_buf(),
                    location: format!("record {}", r + 1),
                    message,
                });
            }
        }
        Ok(part)
    }

    /// The partition's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The vectors, in place in the mapped file.
    pub fn vectors(&self) -> Rows<'_> {
        let payload = &self.map[HEADER_LEN..];
        if self.element == Element::U8 {
            let data = payload.get(RECORD_HEAD..).unwrap_or(&[]);
            return Rows::U8(Codes::new(
                data,
                self.rows,
                self.dims,
                self.dims + RECORD_HEAD,
            ));
        }
        // The map is page-aligned and the header is 32 bytes, so the payload is 4-byte aligned.
        let floats: &[f32] = bytemuck::try_cast_slice(payload).unwrap_or(&[]);
        if self.rows == 0 {
            return Rows::F32(Matrix::new(&[], 0, self.dims, self.dims + 2));
        }
        Rows::F32(Matrix::new(
            &floats[2..],
            self.rows,
            self.dims,
            self.dims + 2,
        ))
    }
}

/// All partitions of a directory, loaded once and kept (the static data of the Map-Collective model).
#[derive(Debug)]
pub struct PartitionSet {
    /// The manifest the partitions were checked against.
    pub manifest: Manifest,
    /// The partitions, in manifest order.
    pub partitions: Vec<Partition>,
}

impl PartitionSet {
    /// Opens and verifies every partition listed in `dir/manifest.toml`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_subset(dir, None, Verify::Full)
    }

    /// Opens the listed partitions only (all with `None`), checked as `verify` says.
    pub fn open_subset(
        dir: &Path,
        which: Option<&[usize]>,
        verify: Verify,
    ) -> Result<Self, StoreError> {
        let manifest = read_manifest(dir)?;
        let indices: Vec<usize> = match which {
            Some(w) => w.to_vec(),
            None => (0..manifest.partitions.len()).collect(),
        };
        let mut partitions = Vec::with_capacity(indices.len());
        for idx in indices {
            let entry = manifest.partitions.get(idx).ok_or_else(|| {
                format_err(&dir.join(MANIFEST), format!("has no partition {idx}"))
            })?;
            let element = Element::from_name(&manifest.element).unwrap_or_default();
            partitions.push(Partition::open(
                &dir.join(&entry.file),
                entry,
                manifest.dims,
                element,
                verify,
            )?);
        }
        Ok(Self {
            manifest,
            partitions,
        })
    }

    /// The partitions' vectors, as held.
    pub fn vectors(&self) -> Vec<Rows<'_>> {
        self.partitions.iter().map(Partition::vectors).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write_features(path: &Path, format: Format, n: u32, dims: usize) {
        let mut w = FeatureWriter::create(path, format, dims).expect("create");
        for i in 0..n {
            let values: Vec<f32> = (0..dims).map(|d| i as f32 + d as f32 / 100.0).collect();
            w.write(i, (i % 7) as u16, (i % 5) as u16, &values)
                .expect("write");
        }
        w.finish().expect("finish");
    }

    #[test]
    fn sizes_differ_by_at_most_one() {
        assert_eq!(partition_sizes(10, 3), vec![4, 3, 3]);
        assert_eq!(partition_sizes(9, 3), vec![3, 3, 3]);
        assert_eq!(partition_sizes(2, 2), vec![1, 1]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn every_vector_lands_in_exactly_one_partition_in_order(n in 1u32..60, parts in 1usize..9, text in any::<bool>()) {
            prop_assume!(n as usize >= parts);
            let dir = tempfile::tempdir().expect("tempdir");
            let input = dir.path().join(if text { "f.txt" } else { "f.bin" });
            write_features(&input, if text { Format::Text } else { Format::Bin }, n, 3);
            let manifest = split(&input, parts, &dir.path().join("parts"), Element::F32).expect("split");
            let set = PartitionSet::open(&dir.path().join("parts")).expect("open");
            let mut seen = Vec::new();
            for m in set.vectors() {
                m.for_each_row(|_, row| seen.push(row[0] as u32));
            }
            prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
            let sizes: Vec<u64> = manifest.partitions.iter().map(|p| p.count).collect();
            prop_assert!(sizes.iter().max().expect("max") - sizes.iter().min().expect("min") <= 1);
            // The partitions' record CRCs combine into the CRC of the whole input's records.
            let mut whole = crc32fast::Hasher::new();
            let mut reader = FeatureReader::open(&input).expect("reopen");
            let mut record = Record::default();
            while reader.next_into(&mut record).expect("record") {
                record.hash_into(&mut whole);
            }
            prop_assert_eq!(manifest.source_checksum, whole.finalize());
        }
    }

    #[test]
    fn a_failed_split_leaves_the_existing_set_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (good, parts) = (dir.path().join("good.bin"), dir.path().join("parts"));
        write_features(&good, Format::Bin, 20, 3);
        let before = split(&good, 4, &parts, Element::F32).expect("split");
        let files = |d: &Path| -> Vec<(String, Vec<u8>)> {
            let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
                .expect("dir")
                .map(|e| {
                    let p = e.expect("entry").path();
                    let name = p.file_name().expect("name").to_string_lossy().into_owned();
                    (name, std::fs::read(&p).expect("read"))
                })
                .collect();
            all.sort();
            all
        };
        let kept = files(&parts);
        // Damage late in the input: a bad payload checksum is only seen at the end.
        let bad = dir.path().join("bad.bin");
        let mut bytes = std::fs::read(&good).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&bad, &bytes).expect("write");
        let err = split(&bad, 2, &parts, Element::F32).expect_err("damaged input");
        assert!(err.to_string().contains("bad.bin"), "{err}");
        assert_eq!(files(&parts), kept, "the old set is untouched");
        assert_eq!(read_manifest(&parts).expect("manifest"), before);
        // Nothing is left beside it.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
        // A good split replaces the set whole (fewer partitions: no stale part files).
        split(&good, 2, &parts, Element::F32).expect("replace");
        assert_eq!(files(&parts).len(), 3);
        // A folder that holds something else is refused, naming the stranger.
        std::fs::write(parts.join("notes.txt"), "mine").expect("write");
        let err = split(&good, 2, &parts, Element::F32).expect_err("refused");
        assert!(err.to_string().contains("notes.txt"), "{err}");
    }

    #[test]
    fn text_and_binary_sources_have_the_same_checksum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (txt, bin) = (dir.path().join("f.txt"), dir.path().join("f.bin"));
        write_features(&txt, Format::Text, 10, 4);
        write_features(&bin, Format::Bin, 10, 4);
        let a = split(&txt, 2, &dir.path().join("a"), Element::F32).expect("a");
        let b = split(&bin, 2, &dir.path().join("b"), Element::F32).expect("b");
        assert_eq!(a.source_checksum, b.source_checksum);
        assert_eq!(a.partitions, b.partitions);
    }

    #[test]
    fn damaged_partitions_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("f.bin");
        write_features(&input, Format::Bin, 12, 4);
        let parts = dir.path().join("parts");
        let expect_err = |what: &str, damage: &dyn Fn()| {
            split(&input, 3, &parts, Element::F32).expect("split");
            damage();
            let msg = PartitionSet::open(&parts).expect_err(what).to_string();
            assert!(msg.contains("part-0001.bin"), "{what}: {msg}");
            msg
        };
        let p1 = parts.join("part-0001.bin");
        expect_err("missing", &|| std::fs::remove_file(&p1).expect("rm"));
        let msg = expect_err("truncated", &|| {
            let b = std::fs::read(&p1).expect("read");
            std::fs::write(&p1, &b[..b.len() - 4]).expect("write");
        });
        assert!(msg.contains("truncated"), "{msg}");
        let msg = expect_err("appended", &|| {
            let mut b = std::fs::read(&p1).expect("read");
            b.extend_from_slice(&[0; 6]);
            std::fs::write(&p1, &b).expect("write");
        });
        assert!(
            msg.contains("6 trailing bytes") && !msg.contains("truncated"),
            "{msg}"
        );
        let msg = expect_err("flipped bit", &|| {
            let mut b = std::fs::read(&p1).expect("read");
            let last = b.len() - 1;
            b[last] ^= 1;
            std::fs::write(&p1, &b).expect("write");
        });
        assert!(msg.contains("checksum"), "{msg}");
        // A header-only open (the cluster driver's) maps the damaged payload without reading it,
        // but still refuses a wrong length.
        let set = PartitionSet::open_subset(&parts, None, Verify::Header).expect("header only");
        assert_eq!(set.vectors().iter().map(Rows::rows).sum::<usize>(), 12);
        let msg = expect_err("truncated, header only", &|| {
            let b = std::fs::read(&p1).expect("read");
            std::fs::write(&p1, &b[..b.len() - 4]).expect("write");
        });
        assert!(msg.contains("truncated"), "{msg}");
        let short = PartitionSet::open_subset(&parts, None, Verify::Header).expect_err("short");
        assert!(short.to_string().contains("truncated"), "{short}");
        let msg = expect_err("other dims", &|| {
            write_features(&p1, Format::Bin, 4, 5);
        });
        assert!(msg.contains("has 5 dims, manifest says 4"), "{msg}");
        // A count whose file length overflows a u64, with a valid header CRC and the same count
        // in the manifest: refused from the header, on a full and on a header-only open.
        let huge = 4 + (1u64 << 61);
        let craft = || {
            let mut b = std::fs::read(&p1).expect("read");
            let crc = u32::from_le_bytes(b[24..28].try_into().expect("crc"));
            b[..HEADER_LEN].copy_from_slice(&crate::store::encode_header(
                4,
                huge,
                crc,
                Element::F32,
            ));
            std::fs::write(&p1, &b).expect("write");
            let mut manifest = read_manifest(&parts).expect("manifest");
            manifest.partitions[1].count = huge;
            manifest.count = huge + 8;
            let text = toml::to_string(&manifest).expect("toml");
            std::fs::write(parts.join(MANIFEST), text).expect("write manifest");
        };
        let msg = expect_err("count overflowing the length", &craft);
        assert!(msg.contains("more bytes than any file holds"), "{msg}");
        craft();
        let msg = PartitionSet::open_subset(&parts, None, Verify::Header)
            .expect_err("header only")
            .to_string();
        assert!(msg.contains("more bytes than any file holds"), "{msg}");
        // Counts whose sum overflows are refused by the manifest's reader.
        split(&input, 3, &parts, Element::F32).expect("split");
        let mut manifest = read_manifest(&parts).expect("manifest");
        for p in &mut manifest.partitions {
            p.count = i64::MAX as u64; // TOML's largest integer; three overflow a u64
        }
        let text = toml::to_string(&manifest).expect("toml");
        std::fs::write(parts.join(MANIFEST), text).expect("write manifest");
        let msg = PartitionSet::open(&parts).expect_err("sum").to_string();
        assert!(msg.contains("overflow"), "{msg}");
    }

    #[test]
    fn u8_partitions_dequantise_within_half_a_step() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("f.bin");
        let mut w = FeatureWriter::create(&input, Format::Bin, 3).expect("create");
        for i in 0..20u32 {
            let v = [i as f32 / 19.0, 0.123, 1.0 - i as f32 / 40.0];
            w.write(i, 0, 0, &v).expect("write");
        }
        w.finish().expect("finish");
        let parts = dir.path().join("parts");
        let manifest = split(&input, 3, &parts, Element::U8).expect("split");
        assert_eq!(manifest.element, "u8");
        let set = PartitionSet::open(&parts).expect("open");
        // Held as codes; decoded, the values the feature reader returns for the same records.
        let mut reader = FeatureReader::open(&parts.join("part-0000.bin")).expect("reader");
        let mut record = Record::default();
        let (mut r, mut buf, mut block) = (0, Vec::new(), Vec::new());
        for (p, m) in set.vectors().into_iter().enumerate() {
            assert_eq!(m.element(), Element::U8);
            if p > 0 {
                reader =
                    FeatureReader::open(&parts.join(format!("part-{p:04}.bin"))).expect("reader");
            }
            let whole = m.to_f32(&mut block);
            for row in 0..m.rows() {
                let want = [r as f32 / 19.0, 0.123, 1.0 - r as f32 / 40.0];
                for (a, b) in m.row(row, &mut buf).iter().zip(want) {
                    assert!((a - b).abs() <= 0.5 / 255.0 + 1e-7, "{a} vs {b}");
                }
                assert!(reader.next_into(&mut record).expect("record"));
                assert_eq!(record.values, m.row(row, &mut buf));
                assert_eq!(whole.row(row), &record.values[..]);
                let tail = m.slice(row, m.rows());
                assert_eq!(tail.row(0, &mut buf), &record.values[..]);
                r += 1;
            }
        }
        assert_eq!(r, 20);
        // A manifest that disagrees with the files' element type is refused, naming the file.
        let text = std::fs::read_to_string(parts.join(MANIFEST)).expect("manifest");
        std::fs::write(parts.join(MANIFEST), text.replace("\"u8\"", "\"f32\"")).expect("write");
        let msg = PartitionSet::open(&parts)
            .expect_err("element mismatch")
            .to_string();
        assert!(
            msg.contains("part-0000.bin") && msg.contains("stores u8, manifest says f32"),
            "{msg}"
        );
    }

    #[test]
    fn too_few_records_for_the_partitions_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("f.bin");
        write_features(&input, Format::Bin, 2, 4);
        let msg = split(&input, 3, &dir.path().join("p"), Element::F32)
            .expect_err("2 < 3")
            .to_string();
        assert!(msg.contains("fewer than 3 partitions"), "{msg}");
    }
}
