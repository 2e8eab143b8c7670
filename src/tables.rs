//! Tables vocab writes for people and for tools: Markdown cells that keep their table whole, and
//! CSV rows quoted as CSV (through the `csv` crate), whatever a photo or class is named.

/// `text` as one Markdown table cell: `|` and `\` escaped, line breaks as spaces.
pub fn md_cell(text: &str) -> String {
    let mut cell = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '|' => cell.push_str("\\|"),
            '\\' => cell.push_str("\\\\"),
            '\n' | '\r' => cell.push(' '),
            c => cell.push(c),
        }
    }
    cell
}

/// CSV text of `header` and `rows`, each field quoted where CSV needs it.
pub fn csv_text<R, F>(header: &[&str], rows: R) -> anyhow::Result<String>
where
    R: IntoIterator<Item = Vec<F>>,
    F: AsRef<[u8]>,
{
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(header)?;
    for row in rows {
        out.write_record(row)?;
    }
    let bytes = out
        .into_inner()
        .map_err(|e| anyhow::anyhow!("cannot format a table: {e}"))?;
    Ok(String::from_utf8(bytes)?)
}

/// `  v.csv (csv): a header line, ...`: how numpy or pandas reads the vectors just written to
/// `path` in `format`, when the format has a one-line answer.
pub fn how_to_read(
    out: &mut dyn std::io::Write,
    path: &std::path::Path,
    format: vocab_pipeline::store::Format,
) -> std::io::Result<()> {
    match format.reading() {
        Some(how) => writeln!(out, "  {} ({}): {how}", path.display(), format.name()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_rows_survive_any_name() {
        assert_eq!(md_cell("a|b\\c\nd"), "a\\|b\\\\c d");
        let text = csv_text(&["path", "class"], [vec!["a,b\"c.jpg", "x\ny"]]).expect("csv");
        assert_eq!(text, "path,class\n\"a,b\"\"c.jpg\",\"x\ny\"\n");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let row = reader.records().next().expect("row").expect("parsed");
        assert_eq!((&row[0], &row[1]), ("a,b\"c.jpg", "x\ny"));
    }
}
