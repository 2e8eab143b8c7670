//! The command line's part of the one way out ([`vocab_pipeline::output`]): every path flag of
//! every command is an input or an output, decided here once by its name, so a flag added later
//! is guarded without a line of its own.

use clap::ArgMatches;
use std::path::{Path, PathBuf};

use vocab_pipeline::output::{self, Refused};

/// The path flags that name what a command writes; every other path flag is an input.
pub const OUTPUT_FLAGS: &[&str] = &["out", "work", "dir", "csv"];

/// A path flag's value, as the user gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathFlag {
    /// The flag's id (`features`; a positional's name: `config`).
    pub id: String,
    /// Its value.
    pub path: PathBuf,
    /// Whether it names an output ([`OUTPUT_FLAGS`]).
    pub output: bool,
}

impl PathFlag {
    /// `--features a.bin` (a positional: its value alone).
    pub fn name(&self, positional: bool) -> String {
        if positional {
            self.path.display().to_string()
        } else {
            format!("--{} {}", self.id.replace('_', "-"), self.path.display())
        }
    }
}

/// The path flags given to the command `matches` chose, outermost command first, with whether
/// each is positional.
pub fn path_flags(command: &clap::Command, matches: &ArgMatches) -> Vec<(PathFlag, bool)> {
    let mut found = Vec::new();
    let (mut command, mut matches) = (command, matches);
    loop {
        for arg in command.get_arguments() {
            if arg.get_value_hint() != clap::ValueHint::AnyPath {
                continue;
            }
            let id = arg.get_id().as_str();
            let Ok(Some(values)) = matches.try_get_raw(id) else {
                continue;
            };
            for value in values {
                let flag = PathFlag {
                    id: id.to_string(),
                    path: PathBuf::from(value),
                    output: OUTPUT_FLAGS.contains(&id),
                };
                found.push((flag, arg.is_positional()));
            }
        }
        match matches.subcommand() {
            Some((name, sub)) => match command.find_subcommand(name) {
                Some(next) => (command, matches) = (next, sub),
                None => break,
            },
            None => break,
        }
    }
    found
}

/// Registers every input path flag of the command line, then claims every output: an output
/// that is an input, lies inside an input folder, holds one, would replace one through a side
/// file, or is a device node, FIFO or socket is refused before any work.
pub fn guard(command: &clap::Command, matches: &ArgMatches) -> Result<(), Refused> {
    let flags = path_flags(command, matches);
    for (flag, positional) in flags.iter().filter(|(f, _)| !f.output) {
        output::protect(flag.name(*positional), &flag.path);
    }
    for (flag, _) in flags.iter().filter(|(f, _)| f.output) {
        claim_flag(flag)?;
    }
    Ok(())
}

/// Claims an output flag's path; the refusal names the flag.
fn claim_flag(flag: &PathFlag) -> Result<(), Refused> {
    output::claim(&flag.path).map_err(|e| rename(e, &flag.name(false)))
}

/// The refusal with its output named as the flag that gave it (`--out v.bin`).
fn rename(e: Refused, flag: &str) -> Refused {
    let out = PathBuf::from(flag);
    match e {
        Refused::IsInput { input, .. } => Refused::IsInput { out, input },
        Refused::InsideInput { input, .. } => Refused::InsideInput { out, input },
        Refused::HoldsInput { input, .. } => Refused::HoldsInput { out, input },
        Refused::SideFile { side, input, .. } => Refused::SideFile { out, side, input },
        Refused::NotRegular { what, .. } => Refused::NotRegular { out, what },
        Refused::Link { .. } => Refused::Link { out },
    }
}

/// Registers a path a config names as an input (`[dataset] path`), named by its key.
pub fn protect_config(key: &str, path: &Path) {
    output::protect(format!("{key} {}", path.display()), path);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every path flag of every command, with its part: adding a path flag fails this test until
    /// it is listed here, as an input or (by its name) an output.
    #[test]
    fn every_path_flag_is_an_input_or_an_output() {
        fn walk(command: &clap::Command, prefix: &str, out: &mut Vec<String>) {
            for arg in command.get_arguments() {
                if arg.get_value_hint() == clap::ValueHint::AnyPath {
                    let id = arg.get_id().as_str();
                    let part = if OUTPUT_FLAGS.contains(&id) {
                        "out"
                    } else {
                        "in"
                    };
                    out.push(format!("{prefix} {id} {part}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{prefix} {}", sub.get_name()), out);
            }
        }
        let mut found = Vec::new();
        walk(&super::super::Cli::command(), "vocab", &mut found);
        let listed: Vec<&str> = found.iter().map(String::as_str).collect();
        assert_eq!(listed, EVERY_PATH_FLAG, "{found:#?}");
    }

    /// Every seed flag of every command refuses a seed past `2^63 - 1` (what the files that
    /// record it hold) before any work; a seed flag added without the parser fails here.
    #[test]
    fn every_seed_flag_refuses_what_no_record_holds() {
        fn walk(command: &clap::Command, seen: &mut usize) {
            for arg in command.get_arguments() {
                if arg.get_id().as_str().contains("seed") {
                    *seen += 1;
                    let long = arg.get_long().expect("a seed flag");
                    let alone = clap::Command::new("t").arg(arg.clone().required(false));
                    let parse = |v: &str| {
                        alone
                            .clone()
                            .try_get_matches_from(["t", &format!("--{long}"), v])
                    };
                    assert!(parse("9223372036854775807").is_ok(), "--{long}");
                    assert!(parse("9223372036854775808").is_err(), "--{long}");
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, seen);
            }
        }
        let mut seen = 0;
        walk(&super::super::Cli::command(), &mut seen);
        assert!(seen >= 7, "{seen} seed flags");
    }

    const EVERY_PATH_FLAG: &[&str] = &[
        "vocab features input in",
        "vocab features out out",
        "vocab features labels in",
        "vocab features from in",
        "vocab features cluster in",
        "vocab convert input in",
        "vocab convert out out",
        "vocab datasets photos out out",
        "vocab datasets synth out out",
        "vocab datasets scene15 from in",
        "vocab datasets scene15 out out",
        "vocab encode vocabulary in",
        "vocab encode input in",
        "vocab encode labels in",
        "vocab encode out out",
        "vocab encode from in",
        "vocab encode cluster in",
        "vocab join parts in",
        "vocab join out out",
        "vocab train histograms in",
        "vocab train mirrored in",
        "vocab train labels in",
        "vocab train split in",
        "vocab train out out",
        "vocab evaluate model in",
        "vocab evaluate histograms in",
        "vocab evaluate labels in",
        "vocab evaluate mirrored in",
        "vocab classify model in",
        "vocab classify input in",
        "vocab classify out out",
        "vocab classify from in",
        "vocab partition features in",
        "vocab partition out out",
        "vocab kmeans features in",
        "vocab kmeans init_centroids in",
        "vocab kmeans cluster in",
        "vocab kmeans racks in",
        "vocab kmeans out out",
        "vocab mixture features in",
        "vocab mixture cluster in",
        "vocab mixture racks in",
        "vocab mixture out out",
        "vocab words vocabulary in",
        "vocab words input in",
        "vocab words labels in",
        "vocab words out out",
        "vocab run config in",
        "vocab run dataset in",
        "vocab run labels in",
        "vocab run test in",
        "vocab run test_labels in",
        "vocab run test_from in",
        "vocab run work out",
        "vocab run cluster in",
        "vocab run racks in",
        "vocab clean config in",
        "vocab clean work out",
        "vocab config check config in",
        "vocab config check dataset in",
        "vocab config check labels in",
        "vocab config check test in",
        "vocab config check test_labels in",
        "vocab config check test_from in",
        "vocab config show config in",
        "vocab worker cluster in",
        "vocab cluster local dir out",
        "vocab cluster status cluster in",
        "vocab cluster calibrate cluster in",
        "vocab bench broadcast cluster in",
        "vocab bench broadcast csv out",
        "vocab bench gather cluster in",
        "vocab bench gather csv out",
        "vocab bench hog input in",
        "vocab bench hog labels in",
        "vocab bench hog out out",
        "vocab bench collectives csv out",
        "vocab bench assign features in",
        "vocab bench assign vocabulary in",
    ];
}
