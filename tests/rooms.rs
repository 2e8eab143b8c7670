//! Rooms kept to size (issue 50): no file of the binary over 450 lines and no function of it over
//! 100, no test file over 600 lines, no library file whose code before its tests passes 1,000.
//! A file that grows past its room is split by what its parts own.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Lines a file of the binary (`src/`) holds at most.
const BINARY_FILE: usize = 450;
/// Lines a function of the binary holds at most, from its signature to its closing brace.
const BINARY_FUNCTION: usize = 100;
/// Lines a test file holds at most.
const TEST_FILE: usize = 600;
/// Lines of a library file before its `#[cfg(test)]` module, at most.
const LIBRARY_FILE: usize = 1000;

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).expect("a source file")
}

/// A test file: under a `tests` folder, or a `tests.rs` module.
fn is_test_file(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "tests")
        || path.file_name().is_some_and(|n| n == "tests.rs")
}

/// `line` without its comment, string and character literals (braces in them do not count).
fn code_of(line: &str) -> String {
    let mut code = String::new();
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            '\'' if !in_string => {
                // A character literal ('{', '\n') or a lifetime ('a): skip the literal only.
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            _ if in_string => {}
            _ => code.push(c),
        }
    }
    code
}

/// The functions of `source` longer than `most` lines: name, first line, lines.
fn long_functions(source: &str, most: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let code = code_of(line);
        let Some(at) = code.find("fn ") else {
            continue;
        };
        let before = code[..at].trim();
        let signature = before.is_empty()
            || before
                .split_whitespace()
                .all(|w| w.starts_with("pub") || ["const", "async", "unsafe"].contains(&w));
        if !signature {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened) = (0i64, false);
        for (end, line) in lines.iter().enumerate().skip(start) {
            let code = code_of(line);
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if !opened && code.trim_end().ends_with(';') {
                break; // a declaration without a body
            }
            if opened && depth <= 0 {
                let length = end - start + 1;
                if length > most {
                    long.push((name.clone(), start + 1, length));
                }
                break;
            }
        }
    }
    long
}

#[test]
fn the_binary_keeps_its_rooms() {
    let mut over = Vec::new();
    for path in rust_files(&Path::new(ROOT).join("src")) {
        let source = text(&path);
        let lines = source.lines().count();
        if lines > BINARY_FILE {
            over.push(format!("{}: {lines} lines", path.display()));
        }
        for (name, line, length) in long_functions(&source, BINARY_FUNCTION) {
            over.push(format!(
                "{}:{line}: fn {name}, {length} lines",
                path.display()
            ));
        }
    }
    assert!(
        over.is_empty(),
        "past {BINARY_FILE} lines a file or {BINARY_FUNCTION} a function:\n{}",
        over.join("\n")
    );
}

#[test]
fn test_files_and_libraries_keep_their_rooms() {
    let root = Path::new(ROOT);
    let mut over = Vec::new();
    for folder in ["tests", "src", "pipeline", "cluster", "datasets"] {
        let dir = root.join(folder);
        if !dir.is_dir() {
            continue;
        }
        for path in rust_files(&dir) {
            let source = text(&path);
            if is_test_file(&path) {
                let lines = source.lines().count();
                if lines > TEST_FILE {
                    over.push(format!("{}: {lines} lines of tests", path.display()));
                }
            } else if folder != "src" {
                let code = source
                    .lines()
                    .take_while(|l| !l.starts_with("#[cfg(test)]"))
                    .count();
                if code > LIBRARY_FILE {
                    over.push(format!("{}: {code} lines before its tests", path.display()));
                }
            }
        }
    }
    assert!(
        over.is_empty(),
        "past {TEST_FILE} lines a test file or {LIBRARY_FILE} a library file:\n{}",
        over.join("\n")
    );
}

#[test]
fn a_long_function_is_found() {
    let short = "fn a() {\n    let s = \"}}}\";\n}\n";
    assert!(long_functions(short, 3).is_empty());
    assert_eq!(long_functions(short, 2), [("a".to_string(), 1, 3)]);
    let body = "    x();\n".repeat(5);
    let long = format!("pub(crate) fn b(c: char) -> bool {{\n{body}    c == '{{'\n}}\n");
    assert_eq!(long_functions(&long, 5), [("b".to_string(), 1, 8)]);
    assert!(long_functions("fn d();\n", 0).is_empty());
}
