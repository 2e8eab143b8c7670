//! Values of flags and keys that several stages share, parsed once.

/// A seed (`--seed`, `--split-seed`): at most `2^63 - 1`, since configs, checkpoints and run
/// records keep it as TOML's signed 64-bit integer; a larger one is refused before any work.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let seed: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number from 0"))?;
    if seed > i64::MAX as u64 {
        return Err(format!(
            "{seed} is past the largest seed, 2^63 - 1 = {}: the files that record a seed keep \
             it as a signed 64-bit integer",
            i64::MAX
        ));
    }
    Ok(seed)
}
