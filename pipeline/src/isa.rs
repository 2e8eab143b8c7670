//! Which instruction sets the hand-written kernels may use.
//!
//! Every kernel with a SIMD build (the HOG descriptor, the int8 products) picks the widest build
//! the CPU has, at run time. `VOCAB_MAX_ISA` caps that choice, as oneDNN's `ONEDNN_MAX_CPU_ISA`
//! does: `portable`, `avx2` or `avx512` (the widest level allowed; unset means no cap). Results
//! do not depend on the level (the kernels are exact or bit-identical builds of one code, tested
//! against each other); only the speed does, which is what the cap is for: measuring one build
//! against another on the same machine (`eval/encode_bench`, `eval/large_k`).

use std::sync::OnceLock;

use thiserror::Error;

/// The environment variable that caps the level.
pub const ENV: &str = "VOCAB_MAX_ISA";

/// Instruction-set levels, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Plain Rust, any CPU.
    Portable,
    /// AVX2 and FMA.
    Avx2,
    /// AVX-512 (F, BW) with VNNI, besides AVX2 and FMA.
    Avx512,
}

impl Level {
    /// The level's name, as [`ENV`] spells it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

/// A bad [`ENV`] value.
#[derive(Debug, Error)]
#[error("{ENV}={value:?} is not an instruction-set level (portable, avx2 or avx512)")]
pub struct IsaError {
    value: String,
}

/// The cap [`ENV`] sets, if any.
///
/// # Errors
/// If the variable is set to anything but a level's name (or is not Unicode).
pub fn cap_from_env() -> Result<Option<Level>, IsaError> {
    match std::env::var_os(ENV) {
        None => Ok(None),
        Some(value) => {
            let text = value.to_string_lossy();
            [Level::Portable, Level::Avx2, Level::Avx512]
                .into_iter()
                .find(|level| level.name() == text.trim())
                .map(Some)
                .ok_or_else(|| IsaError {
                    value: text.into_owned(),
                })
        }
    }
}

/// The widest level this CPU has.
pub fn detected() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("fma");
        if avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
            return Level::Avx512;
        }
        if avx2 {
            return Level::Avx2;
        }
    }
    Level::Portable
}

/// The level kernels use: the widest the CPU has, capped by [`ENV`] (read once; a bad value is
/// the binary's to report through [`cap_from_env`], and caps nothing here).
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cpu = detected();
        match cap_from_env() {
            Ok(Some(cap)) => cpu.min(cap),
            _ => cpu,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_never_exceeds_the_cpu() {
        assert!(level() <= detected());
        assert!(Level::Portable < Level::Avx2 && Level::Avx2 < Level::Avx512);
    }
}
