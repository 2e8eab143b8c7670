//! Vocabulary files, run metadata, and checkpoints of a k-means run.
//!
//! **Vocabulary**: text, one centroid per line (values only, shortest round-trip floats); or
//! binary, a feature file (see [`crate::store`]) whose record `j` is centroid `j`
//! (`picture_id = j`, row and col 0); or another tool's format, a centroid per row: `.npy`,
//! `.fvecs`, `.bvecs`, or CSV (values only, header `v1,...,vD` when vocab writes it). Readers
//! accept every one and detect which.
//!
//! **Checkpoint** of a run writing `<out>`: the folder `<out>.ckpt/` holds `iter-NNNNNN.bin`
//! (the centroids after iteration N, binary vocabulary format) and `state.toml` (iteration,
//! history, seed, k, dims, input checksum, the centroid file's name and payload checksum).
//! Each iteration writes its centroid file first, then replaces `state.toml` atomically, then
//! removes older centroid files: whenever the process stops, `state.toml` names a complete file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Centroids, IterationStats, KMeansError, State};
use crate::atomic;
use crate::store::{FeatureReader, FeatureWriter, Format, Record, StoreError};

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes centroids as a vocabulary file.
pub fn write_vocabulary(
    path: &Path,
    centroids: &Centroids,
    format: Format,
) -> Result<(), StoreError> {
    if format == Format::Bin {
        write_vocabulary_bin(path, centroids)?;
        return Ok(());
    }
    let mut w = FeatureWriter::values_only(path, format, centroids.dims())?;
    for j in 0..centroids.k() {
        w.write(j as u32, 0, 0, centroids.row(j))?;
    }
    w.finish()?;
    Ok(())
}

/// Writes centroids as a binary vocabulary; returns the file's payload checksum.
fn write_vocabulary_bin(path: &Path, centroids: &Centroids) -> Result<u32, StoreError> {
    let mut w = FeatureWriter::create(path, Format::Bin, centroids.dims())?;
    for j in 0..centroids.k() {
        w.write(j as u32, 0, 0, centroids.row(j))?;
    }
    let checksum = w.payload_checksum();
    w.finish()?;
    Ok(checksum)
}

/// Reads a vocabulary file: vocab's text (values only) or binary, or `.npy`, `.fvecs`, `.bvecs`,
/// CSV.
pub fn read_vocabulary(path: &Path) -> Result<Centroids, StoreError> {
    let bad = |location: String, message: String| StoreError::Record {
        path: path.to_path_buf(),
        location,
        message,
    };
    let mut data = Vec::new();
    let dims = match Format::detect(path)? {
        Format::Bin | Format::Npy | Format::Fvecs | Format::Bvecs | Format::Csv => {
            let mut reader = FeatureReader::open(path)?;
            let mut record = Record::default();
            while reader.next_into(&mut record)? {
                data.extend_from_slice(&record.values);
            }
            reader.dims().unwrap_or(0)
        }
        Format::Text => {
            let mut input =
                std::io::BufReader::new(crate::input::open(path).map_err(|e| io_err(path, e))?);
            let (mut line, mut line_no) = (String::new(), 0u64);
            let mut dims = None;
            loop {
                let n =
                    crate::store::read_line(&mut input, &mut line).map_err(|e| match e.kind() {
                        std::io::ErrorKind::InvalidData => StoreError::Format {
                            path: path.to_path_buf(),
                            message: format!(
                                "not UTF-8 text, and opens with no magic vocab knows (bad \
                                 magic); vocab reads {}",
                                crate::store::ACCEPTED
                            ),
                        },
                        std::io::ErrorKind::InvalidInput => {
                            bad(format!("line {}", line_no + 1), e.to_string())
                        }
                        _ => io_err(path, e),
                    })?;
                if n == 0 {
                    break;
                }
                line_no += 1;
                if line.trim().is_empty() {
                    continue;
                }
                let location = format!("line {line_no}");
                let start = data.len();
                for field in line.split_ascii_whitespace() {
                    let v: f32 = field.parse().map_err(|_| {
                        let field = crate::input::prefix(field, 32);
                        bad(location.clone(), format!("value {field} is not a number"))
                    })?;
                    data.push(v);
                }
                if let Some(message) = crate::store::out_of_bounds(&data[start..]) {
                    return Err(bad(location, message));
                }
                let len = data.len() - start;
                match dims {
                    None => dims = Some(len),
                    Some(d) if d != len => {
                        return Err(bad(
                            location,
                            format!("has {len} values, earlier lines have {d}"),
                        ));
                    }
                    Some(_) => {}
                }
            }
            dims.unwrap_or(0)
        }
    };
    if dims == 0 || data.is_empty() {
        return Err(StoreError::Format {
            path: path.to_path_buf(),
            message: "holds no centroids".into(),
        });
    }
    Ok(Centroids::new(data, dims))
}

/// What a finished run records beside its vocabulary (`<out>.meta.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Centroids.
    pub k: usize,
    /// Values per centroid.
    pub dims: usize,
    /// Vectors clustered.
    pub n: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Whether the tolerance stopped the run before `max_iter`.
    pub converged: bool,
    /// Inertia of the last assignment.
    pub final_inertia: f64,
    /// Seed.
    pub seed: u64,
    /// Initialisation (`random`, `kmeans++`, or the given file).
    pub init: String,
    /// CRC-32 of the input records (binary record layout), as in partition manifests.
    pub input_checksum: u32,
    /// Wall time of all iterations, seconds.
    pub seconds: f64,
    /// How vectors were assigned: `f32` (GEMM full pass), `int8` (integer full pass, exact
    /// re-ranking) or `pruned` (Yinyang bounds); empty in files written before it was recorded.
    #[serde(default)]
    pub assignment: String,
    /// With approximate assignment: how often it found the exact nearest centroid, on a sample,
    /// against the final centroids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<super::approx::Recall>,
}

/// Writes a small TOML file atomically.
pub fn write_toml<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let text = toml::to_string(value).map_err(|e| StoreError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    write_text(path, &text)
}

/// Writes a small text file atomically.
pub fn write_text(path: &Path, text: &str) -> Result<(), StoreError> {
    atomic::write(path, text.as_bytes()).map_err(|e| io_err(path, e))
}

/// The checkpoint folder of a run writing `out`.
pub fn checkpoint_dir(out: &Path) -> PathBuf {
    crate::output::side(out, "ckpt")
}

/// `state.toml` of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointState {
    /// Format version.
    pub version: u32,
    /// Centroids.
    pub k: usize,
    /// Values per centroid.
    pub dims: usize,
    /// Seed of the run.
    pub seed: u64,
    /// CRC-32 of the input records.
    pub input_checksum: u32,
    /// Iterations done.
    pub iteration: u64,
    /// Whether the run had converged.
    pub converged: bool,
    /// Centroid file in the checkpoint folder.
    pub centroids: String,
    /// Its payload CRC-32.
    pub centroids_checksum: u32,
    /// Per-iteration history.
    pub history: Vec<IterationStats>,
    /// How vectors were assigned (as in [`RunMeta`]); empty in checkpoints from before it was
    /// recorded, which any run may resume.
    #[serde(default)]
    pub assignment: String,
}

/// Saves the state of a run (see the module docs for the protocol).
pub fn save_checkpoint(
    out: &Path,
    state: &State,
    seed: u64,
    input_checksum: u32,
    assignment: &str,
) -> Result<(), StoreError> {
    let dir = checkpoint_dir(out);
    crate::output::not_a_link(&dir).map_err(|e| io_err(&dir, e.into()))?;
    crate::output::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
    let name = format!("iter-{:06}.bin", state.iteration);
    let path = dir.join(&name);
    let centroids_checksum = write_vocabulary_bin(&path, &state.centroids)?;
    let meta = CheckpointState {
        version: 1,
        k: state.centroids.k(),
        dims: state.centroids.dims(),
        seed,
        input_checksum,
        iteration: state.iteration,
        converged: state.converged,
        centroids: name.clone(),
        centroids_checksum,
        history: state.history.clone(),
        assignment: assignment.into(),
    };
    write_toml(&dir.join("state.toml"), &meta)?;
    for entry in std::fs::read_dir(&dir)
        .map_err(|e| io_err(&dir, e))?
        .flatten()
    {
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.starts_with("iter-") && file != name {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Loads a checkpoint and checks that it belongs to this run (same k, dims, seed and input).
pub fn load_checkpoint(
    out: &Path,
    k: usize,
    seed: u64,
    input_checksum: u32,
    assignment: &str,
) -> Result<State, KMeansError> {
    let dir = checkpoint_dir(out);
    let state_path = dir.join("state.toml");
    // The run's own folder: a link there would be read through to somewhere else.
    crate::output::not_a_link(&dir).map_err(|e| KMeansError::Checkpoint {
        path: dir.clone(),
        message: e.rule(),
    })?;
    let bad = |message: String| KMeansError::Checkpoint {
        path: state_path.clone(),
        message,
    };
    let text = crate::input::read_text(&state_path, crate::input::MAX_RECORD_BYTES)
        .map_err(|e| bad(format!("cannot read: {e}")))?;
    let meta: CheckpointState = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if meta.k != k || meta.seed != seed || meta.input_checksum != input_checksum {
        return Err(bad(format!(
            "belongs to another run (k {}, seed {}, input checksum {}; this run: k {k}, seed {seed}, input checksum {input_checksum})",
            meta.k, meta.seed, meta.input_checksum
        )));
    }
    // Kernels and pruning can break near-ties differently: a run continues with its own.
    if !meta.assignment.is_empty() && meta.assignment != assignment {
        // Where only pruning differs (the int8 kernel prunes by default since issue 51, so an
        // int8 run from before asks for it now), the switch that resumes it.
        let exact = |name: &str| {
            [super::Kernel::F32, super::Kernel::Int8]
                .into_iter()
                .flat_map(|k| [super::Assignment::Full(k), super::Assignment::Pruned(k)])
                .find(|a| a.name() == name)
        };
        let (written, asked) = (meta.assignment.as_str(), assignment);
        let hint = match (exact(written), exact(asked)) {
            (Some(w), Some(a)) if w.kernel() == a.kernel() => {
                format!(" (prune {} resumes it)", w.pruned())
            }
            _ => String::new(),
        };
        return Err(bad(format!(
            "was written with assignment {written}; this run asks for {asked}{hint}"
        )));
    }
    if let Some(later) = meta.history.iter().find(|h| h.iteration > meta.iteration) {
        return Err(bad(format!(
            "records {} iterations done and a history of iteration {}",
            meta.iteration, later.iteration
        )));
    }
    // Only a file of the folder itself, by its plain name.
    if meta.centroids.contains(['/', '\\']) || meta.centroids.starts_with('.') {
        return Err(bad(format!(
            "names the centroid file {:?}, which is not a file of the folder",
            crate::input::prefix(&meta.centroids, 64)
        )));
    }
    let path = dir.join(&meta.centroids);
    if FeatureReader::open(&path)?.payload_checksum() != Some(meta.centroids_checksum) {
        return Err(bad(format!(
            "{} does not match its recorded checksum",
            meta.centroids
        )));
    }
    let centroids = read_vocabulary(&path)?;
    if centroids.k() != meta.k || centroids.dims() != meta.dims {
        return Err(bad(format!(
            "{} holds {} x {} centroids",
            meta.centroids,
            centroids.k(),
            centroids.dims()
        )));
    }
    Ok(State {
        iteration: meta.iteration,
        centroids,
        converged: meta.converged,
        history: meta.history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_round_trip_in_both_formats() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = Centroids::new(vec![0.1, 0.2, 0.3, 1e-7, 5.0, 0.0], 3);
        for (name, format) in [("v.txt", Format::Text), ("v.bin", Format::Bin)] {
            let path = dir.path().join(name);
            write_vocabulary(&path, &c, format).expect("write");
            assert_eq!(read_vocabulary(&path).expect("read"), c, "{name}");
        }
        let text = std::fs::read_to_string(dir.path().join("v.txt")).expect("text");
        assert_eq!(text, "0.1 0.2 0.3\n1e-7 5.0 0.0\n");
        // A binary vocabulary whose magic was damaged says so.
        let bin = dir.path().join("v.bin");
        let mut bytes = std::fs::read(&bin).expect("read");
        bytes[0] = b'X';
        std::fs::write(&bin, &bytes).expect("write");
        let err = read_vocabulary(&bin).expect_err("bad magic").to_string();
        assert!(err.contains("bad magic") && err.contains("v.bin"), "{err}");
    }

    #[test]
    fn checkpoints_round_trip_and_refuse_other_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("vocab.bin");
        let state = State {
            iteration: 3,
            centroids: Centroids::new(vec![1.0, 2.0, 3.0, 4.0], 2),
            history: vec![IterationStats {
                iteration: 3,
                inertia: 2.5,
                seconds: 0.1,
                splits: 0,
                kept: 0,
            }],
            converged: false,
        };
        save_checkpoint(&out, &state, 7, 99, "int8").expect("save");
        let next = State {
            iteration: 4,
            ..state.clone()
        };
        save_checkpoint(&out, &next, 7, 99, "int8").expect("save again");
        assert_eq!(load_checkpoint(&out, 2, 7, 99, "int8").expect("load"), next);
        let files: Vec<_> = std::fs::read_dir(checkpoint_dir(&out))
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            files.len(),
            2,
            "state.toml and the newest centroids only: {files:?}"
        );
        let msg = load_checkpoint(&out, 2, 8, 99, "int8")
            .expect_err("other seed")
            .to_string();
        assert!(msg.contains("belongs to another run"), "{msg}");
        let msg = load_checkpoint(&out, 2, 7, 99, "f32")
            .expect_err("other kernel")
            .to_string();
        assert!(
            msg.contains("assignment int8")
                && msg.contains("asks for f32")
                && !msg.contains("prune"),
            "{msg}"
        );
        // Only pruning differs: the message says which switch resumes the run.
        let msg = load_checkpoint(&out, 2, 7, 99, "pruned-int8")
            .expect_err("pruned")
            .to_string();
        assert!(
            msg.contains("asks for pruned-int8 (prune false resumes it)"),
            "{msg}"
        );
    }
}
