//! An evaluation's confusion matrix as a file (`<model>.confusion.csv`: a header `truth` then
//! the classes, a row per true class with its counts by predicted class), written beside the
//! model and read back by the run's report.

use std::path::Path;

use anyhow::{Context, ensure};

use crate::tables;

/// Photos of each true class (rows) by predicted class (columns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confusion {
    /// The classes, in the model's order.
    pub classes: Vec<String>,
    /// Counts, `counts[truth][predicted]`.
    pub counts: Vec<Vec<usize>>,
}

/// Most classes a confusion file may hold (more are not written: [`Confusion::write`]).
const MAX_CLASSES: usize = 4096;
/// Most photos one cell may count (`u32::MAX`: no evaluation scores more).
const MAX_COUNT: usize = u32::MAX as usize;

impl Confusion {
    /// Writes it at `path` (whole or not at all); with more than [`MAX_CLASSES`] classes there
    /// is no file (the report then says it cannot show the confusion).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        if self.classes.len() > MAX_CLASSES {
            return Ok(());
        }
        let header: Vec<&str> = std::iter::once("truth")
            .chain(self.classes.iter().map(String::as_str))
            .collect();
        let rows = self.classes.iter().zip(&self.counts).map(|(class, row)| {
            std::iter::once(class.clone())
                .chain(row.iter().map(usize::to_string))
                .collect::<Vec<String>>()
        });
        let text = tables::csv_text(&header, rows)?;
        vocab_pipeline::atomic::write(path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Reads one written by [`Confusion::write`]: a square of counts (each at most
    /// `u32::MAX`) under the classes.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = vocab_pipeline::input::read_text(path, vocab_pipeline::input::MAX_RECORD_BYTES)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader
            .headers()
            .with_context(|| format!("cannot read the header of {}", path.display()))?;
        let classes: Vec<String> = header.iter().skip(1).map(str::to_string).collect();
        ensure!(
            header.get(0) == Some("truth") && (1..=MAX_CLASSES).contains(&classes.len()),
            "{}: not a confusion matrix (a header `truth` then 1 to {MAX_CLASSES} classes)",
            path.display()
        );
        let mut counts = Vec::with_capacity(classes.len());
        for (i, record) in reader.records().enumerate() {
            let record = record.with_context(|| format!("cannot read {}", path.display()))?;
            let row: Option<Vec<usize>> = (record.iter().skip(1))
                .map(|c| c.parse().ok().filter(|&n| n <= MAX_COUNT))
                .collect();
            match (record.get(0), row) {
                (Some(name), Some(row))
                    if classes.get(i).is_some_and(|c| c == name) && row.len() == classes.len() =>
                {
                    counts.push(row)
                }
                _ => anyhow::bail!(
                    "{}: row {} is not class {:?}'s counts",
                    path.display(),
                    i + 1,
                    classes.get(i)
                ),
            }
        }
        ensure!(
            counts.len() == classes.len(),
            "{}: {} rows for {} classes",
            path.display(),
            counts.len(),
            classes.len()
        );
        Ok(Self { classes, counts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confusion_file_reads_back_and_refuses_what_is_not_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("m.json.confusion.csv");
        let matrix = Confusion {
            classes: vec!["coast".into(), "open, country".into()],
            counts: vec![vec![3, 1], vec![0, 4]],
        };
        matrix.write(&path).expect("write");
        assert_eq!(Confusion::read(&path).expect("read"), matrix);
        for bad in [
            "truth,a,b\na,1,2\n",
            "truth,a,b\na,1,2\nc,0,1\n",
            "truth,a,b\na,1,x\nb,0,1\n",
            "class,a\na,1\n",
        ] {
            std::fs::write(&path, bad).expect("write");
            assert!(Confusion::read(&path).is_err(), "{bad}");
        }
    }
}
