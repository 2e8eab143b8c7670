//! An encoding's parameters, checked: how photos are described (dense sampling), how patches
//! find their words, how histograms are pooled and normalised; and [`Encoding`], what is
//! recorded beside a histogram file so that models encode new photos alike.

use crate::features::{FeatureParams, FeatureParamsError};
use crate::hog::PATCH_SIDE;
use crate::image_io::MAX_PIXELS;
use crate::kmeans::{Kernel, approx};
use crate::params::Broken;
use crate::patch::Sampling;

/// Spatial pyramid levels at most (5 levels: 341 cells of k words each).
pub const MAX_PYRAMID: usize = 5;
/// Words of a soft assignment at most.
pub const MAX_SOFT: usize = 64;
/// Most patch scales an encoding may use.
pub const MAX_SCALES: usize = 4;
/// Largest patch side of a scale: 8x the base (the photo downscaled 8 times).
pub const MAX_SCALE_SIDE: usize = 320;

/// Histogram normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Norm {
    /// Divide by the sum.
    #[default]
    L1,
    /// Square root of the L1-normalised histogram.
    Hellinger,
}

/// Soft assignment: each patch counts toward its `words` nearest words, word `j` with weight
/// `exp(-sharpness (d_j / d_1 - 1))` (`d` squared distances, `d_1` the nearest's), the weights
/// of a patch normalised to sum 1 (van Gemert et al.'s kernel codebook, localised to the
/// nearest words as Liu et al. do). A patch on its word (`d_1 = 0`) counts toward it alone.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Soft {
    /// Nearest words a patch counts toward (at least 2).
    pub words: usize,
    /// How fast the weight falls with distance.
    pub sharpness: f32,
}

impl Soft {
    /// The weights of one patch's words from their squared distances, nearest first (entries
    /// past the vocabulary, infinite, weigh 0).
    pub fn weights(&self, dists: &[f32], out: &mut [f32]) {
        let nearest = dists.first().copied().unwrap_or(0.0);
        if nearest.is_nan() || nearest <= 0.0 {
            out.fill(0.0);
            if let Some(first) = out.first_mut() {
                *first = 1.0;
            }
            return;
        }
        let mut sum = 0f32;
        for (w, &d) in out.iter_mut().zip(dists) {
            *w = if d.is_finite() {
                (-self.sharpness * (d / nearest - 1.0)).exp()
            } else {
                0.0
            };
            sum += *w;
        }
        for w in out.iter_mut() {
            *w /= sum;
        }
    }
}

/// How a histogram file was made: written beside it (`<out>.encoding.json`) so that models trained
/// on it can encode new photos the same way.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Encoding {
    /// The vocabulary file (as given to `vocab encode`, made absolute).
    pub vocabulary: String,
    /// Words in it.
    pub k: usize,
    /// Dense grid step.
    pub stride: usize,
    /// `l1` or `hellinger`.
    pub norm: String,
    /// Pyramid levels.
    pub pyramid: usize,
    /// Downscale limit.
    pub max_side: Option<usize>,
    /// Photos whose header declares more pixels are skipped (absent: the default,
    /// [`MAX_PIXELS`]).
    #[serde(
        default = "default_max_pixels",
        skip_serializing_if = "is_default_max_pixels"
    )]
    pub max_pixels: u64,
    /// Soft assignment (none: each patch to its nearest word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft: Option<Soft>,
    /// How patches found their words (absent in older records: f32).
    #[serde(default, skip_serializing_if = "Kernel::is_f32")]
    pub kernel: Kernel,
    /// Patch sides the photo is described at (absent in older records: the base 40 alone).
    #[serde(default = "base_scale", skip_serializing_if = "is_base_scale")]
    pub scales: Vec<usize>,
    /// Words found by the approximate search instead of the exact one (absent: exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approx: Option<approx::Search>,
}

/// The base scale alone: 40-px patches of the photo as it is.
pub fn base_scale() -> Vec<usize> {
    vec![PATCH_SIDE]
}

/// Whether `scales` is the base scale alone.
pub fn is_base_scale(scales: &Vec<usize>) -> bool {
    scales.as_slice() == [PATCH_SIDE]
}

/// Settings of the encoding stage.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EncodeParams {
    /// Dense sampling and decoding (the sampling must be dense).
    pub features: FeatureParams,
    /// Normalisation.
    pub norm: Norm,
    /// Pyramid levels (1 = plain bag of words).
    pub levels: usize,
    /// Soft assignment (none: each patch to its nearest word).
    pub soft: Option<Soft>,
    /// How patches find their words: the f32 GEMM ([`assign`], [`nearest_few`]) or integer
    /// products with exact re-ranking ([`quant::assign_quantized`],
    /// [`quant::nearest_few_quantized`]: the arg-min of direct distances).
    pub kernel: Kernel,
    /// Patch sides, the base [`PATCH_SIDE`] first, then larger ones ascending (see the module
    /// docs).
    pub scales: Vec<usize>,
    /// Each patch to the word the approximate search finds ([`approx`], for very large
    /// vocabularies; hard assignment with the f32 kernel only: ignored with `soft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approx: Option<approx::Search>,
}

fn default_max_pixels() -> u64 {
    MAX_PIXELS
}

fn is_default_max_pixels(pixels: &u64) -> bool {
    *pixels == MAX_PIXELS
}

impl EncodeParams {
    /// Checks the rules of the parameters, the vocabulary's size `k` where it is known: dense
    /// sampling by [`FeatureParams::check`], 1 to [`MAX_PYRAMID`] pyramid levels, soft
    /// assignment over 2 to [`MAX_SOFT`] words (no more than the vocabulary's) with a positive
    /// sharpness, the base scale then up to [`MAX_SCALES`] larger sides ascending, at most
    /// [`MAX_SCALE_SIDE`], and an approximate search for the nearest word alone on the f32
    /// kernel with at least one probe.
    pub fn check(&self, k: Option<usize>) -> Result<(), EncodeParamsError> {
        self.features.check().map_err(EncodeParamsError::Features)?;
        if let Sampling::Random { .. } = self.features.sampling {
            return Err(EncodeParamsError::NotDense);
        }
        if !(1..=MAX_PYRAMID).contains(&self.levels) {
            return Err(EncodeParamsError::Pyramid(self.levels));
        }
        if let Some(soft) = self.soft {
            if !(2..=MAX_SOFT).contains(&soft.words) {
                return Err(EncodeParamsError::SoftWords(soft.words));
            }
            if let Some(k) = k.filter(|&k| soft.words > k) {
                return Err(EncodeParamsError::SoftOverVocabulary {
                    words: soft.words,
                    k,
                });
            }
            if !(soft.sharpness.is_finite() && soft.sharpness > 0.0) {
                return Err(EncodeParamsError::Sharpness(soft.sharpness));
            }
        }
        let ascending = self.scales.windows(2).all(|w| w[0] < w[1]);
        if self.scales.first() != Some(&PATCH_SIDE)
            || !ascending
            || self.scales.len() > MAX_SCALES
            || self.scales.iter().any(|&s| s > MAX_SCALE_SIDE)
        {
            return Err(EncodeParamsError::Scales(self.scales.clone()));
        }
        if let Some(search) = self.approx {
            if self.soft.is_some() {
                return Err(EncodeParamsError::ApproxSoft);
            }
            if self.kernel != Kernel::F32 {
                return Err(EncodeParamsError::ApproxKernel);
            }
            if search.probes == 0 {
                return Err(EncodeParamsError::Probes);
            }
        }
        Ok(())
    }
}

impl Encoding {
    /// The checked parameters the histograms were made with (a file read back: nothing in it
    /// is trusted before this).
    pub fn params(&self) -> Result<EncodeParams, EncodeParamsError> {
        let norm = match self.norm.as_str() {
            "l1" => Norm::L1,
            "hellinger" => Norm::Hellinger,
            other => return Err(EncodeParamsError::Norm(other.to_string())),
        };
        let params = EncodeParams {
            features: FeatureParams {
                sampling: Sampling::Dense {
                    stride: self.stride,
                },
                max_side: self.max_side,
                max_pixels: self.max_pixels,
            },
            norm,
            levels: self.pyramid,
            soft: self.soft,
            kernel: self.kernel,
            scales: self.scales.clone(),
            approx: self.approx,
        };
        params.check(Some(self.k))?;
        Ok(params)
    }
}

/// Length of an encoded vector: `k` words per cell, `sum 4^l` cells over the levels.
pub fn encoded_len(k: usize, levels: usize) -> usize {
    k * (0..levels.max(1)).map(|l| 1usize << (2 * l)).sum::<usize>()
}

impl EncodeParams {
    /// Values of an encoding of a vocabulary of `k` words with these parameters.
    pub fn len(&self, k: usize) -> usize {
        encoded_len(k, self.levels.max(1))
    }
}

/// A rule [`EncodeParams`] break.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeParamsError {
    /// A rule of the photos' description.
    Features(FeatureParamsError),
    /// Random sampling: an encoding describes every patch on a grid.
    NotDense,
    /// Pyramid levels outside `1..=MAX_PYRAMID`.
    Pyramid(usize),
    /// Soft assignment over fewer than 2 or more than [`MAX_SOFT`] words.
    SoftWords(usize),
    /// Soft assignment over more words than the vocabulary has.
    SoftOverVocabulary {
        /// Words of the soft assignment.
        words: usize,
        /// Words of the vocabulary.
        k: usize,
    },
    /// A sharpness that is not a positive number.
    Sharpness(f32),
    /// Patch sides that are not the base then larger ones, ascending, within the limits.
    Scales(Vec<usize>),
    /// The approximate search with soft assignment.
    ApproxSoft,
    /// The approximate search with another kernel than f32.
    ApproxKernel,
    /// The approximate search visiting no list.
    Probes,
    /// A normalisation other than `l1` or `hellinger` (a file read back).
    Norm(String),
}

impl Broken for EncodeParamsError {
    fn key(&self) -> &'static str {
        match self {
            Self::Features(e) => e.key(),
            Self::NotDense => "sampling",
            Self::Pyramid(_) => "pyramid",
            Self::SoftWords(_) | Self::SoftOverVocabulary { .. } => "soft",
            Self::Sharpness(_) => "sharpness",
            Self::Scales(_) => "scales",
            Self::ApproxSoft => "assign",
            Self::ApproxKernel => "kernel",
            Self::Probes => "probes",
            Self::Norm(_) => "norm",
        }
    }

    fn value(&self) -> String {
        match self {
            Self::Features(e) => e.value(),
            Self::NotDense => "random".into(),
            Self::Pyramid(n) | Self::SoftWords(n) => n.to_string(),
            Self::SoftOverVocabulary { words, .. } => words.to_string(),
            Self::Sharpness(s) => s.to_string(),
            Self::Scales(sides) => (sides.iter().map(usize::to_string))
                .collect::<Vec<_>>()
                .join(","),
            Self::ApproxSoft => "approx".into(),
            Self::ApproxKernel => "int8".into(),
            Self::Probes => "0".into(),
            Self::Norm(n) => n.clone(),
        }
    }

    fn rule(&self) -> String {
        match self {
            Self::Features(e) => e.rule(),
            Self::NotDense => "an encoding describes every patch on a grid (dense)".into(),
            Self::Pyramid(_) => format!("must be 1 to {MAX_PYRAMID} levels"),
            Self::SoftWords(_) => {
                format!("must be 0 (the nearest word alone) or 2 to {MAX_SOFT} words")
            }
            Self::SoftOverVocabulary { k, .. } => format!("more words than the vocabulary's {k}"),
            Self::Sharpness(_) => "must be a positive number".into(),
            Self::Scales(_) => format!(
                "must be {PATCH_SIDE} followed by up to {} larger patch sides, ascending, at \
                 most {MAX_SCALE_SIDE} (e.g. 40,64)",
                MAX_SCALES - 1
            ),
            Self::ApproxSoft => "finds each patch's nearest word only: drop soft".into(),
            Self::ApproxKernel => {
                "is a kernel of the exact search; the approximate one uses f32".into()
            }
            Self::Probes => "must be at least 1 list".into(),
            Self::Norm(_) => "must be l1 or hellinger".into(),
        }
    }
}

impl std::fmt::Display for EncodeParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::params::show(self, f)
    }
}

impl std::error::Error for EncodeParamsError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters of `vocab encode` with no flag.
    fn plain() -> EncodeParams {
        EncodeParams {
            features: FeatureParams {
                sampling: Sampling::Dense { stride: 8 },
                max_side: None,
                max_pixels: MAX_PIXELS,
            },
            norm: Norm::L1,
            levels: 1,
            soft: None,
            kernel: Kernel::F32,
            scales: base_scale(),
            approx: None,
        }
    }

    /// `change` applied to the plain parameters breaks the rule `want` names (`key = value:
    /// rule`), or none.
    fn check(change: impl FnOnce(&mut EncodeParams), k: Option<usize>, want: Option<&str>) {
        let mut p = plain();
        change(&mut p);
        let got = p.check(k).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), want, "{p:?}");
    }

    #[test]
    fn every_rule_is_its_own_error_naming_key_value_and_rule() {
        check(|_| {}, Some(4), None);
        let soft = |words| {
            Some(Soft {
                words,
                sharpness: 10.0,
            })
        };
        check(
            |p| p.levels = 0,
            None,
            Some("pyramid = 0: must be 1 to 5 levels"),
        );
        check(
            |p| p.levels = 6,
            None,
            Some("pyramid = 6: must be 1 to 5 levels"),
        );
        check(|p| p.levels = 5, None, None);
        for words in [0, 1, 65] {
            let want =
                format!("soft = {words}: must be 0 (the nearest word alone) or 2 to 64 words");
            check(|p| p.soft = soft(words), None, Some(&want));
        }
        check(
            |p| p.soft = soft(8),
            Some(4),
            Some("soft = 8: more words than the vocabulary's 4"),
        );
        check(|p| p.soft = soft(4), Some(4), None);
        check(
            |p| {
                p.soft = Some(Soft {
                    words: 2,
                    sharpness: f32::NAN,
                })
            },
            None,
            Some("sharpness = NaN: must be a positive number"),
        );
        for sides in [
            vec![],
            vec![64, 40],
            vec![40, 40],
            vec![40, 400],
            vec![40, 48, 56, 64, 72],
        ] {
            let shown: Vec<String> = sides.iter().map(usize::to_string).collect();
            let want = format!(
                "scales = {}: must be 40 followed by up to 3 larger patch sides, ascending, at \
                 most 320 (e.g. 40,64)",
                shown.join(",")
            );
            check(|p| p.scales = sides.clone(), None, Some(&want));
        }
        check(|p| p.scales = vec![40, 64, 128, 320], None, None);
        let search = approx::Search {
            lists: 0,
            probes: 8,
        };
        check(|p| p.approx = Some(search), None, None);
        check(
            |p| (p.approx, p.soft) = (Some(search), soft(2)),
            None,
            Some("assign = approx: finds each patch's nearest word only: drop soft"),
        );
        check(
            |p| (p.approx, p.kernel) = (Some(search), Kernel::Int8),
            None,
            Some("kernel = int8: is a kernel of the exact search; the approximate one uses f32"),
        );
        check(
            |p| {
                p.approx = Some(approx::Search {
                    lists: 0,
                    probes: 0,
                })
            },
            None,
            Some("probes = 0: must be at least 1 list"),
        );
        check(
            |p| p.features.sampling = Sampling::Dense { stride: 0 },
            None,
            Some("stride = 0: must be at least 1 pixel"),
        );
        check(
            |p| {
                p.features.sampling = Sampling::Random {
                    per_image: 5,
                    seed: 1,
                }
            },
            None,
            Some("sampling = random: an encoding describes every patch on a grid (dense)"),
        );
        check(
            |p| p.features.max_side = Some(39),
            None,
            Some("max_side = 39: smaller than a 40x40 patch"),
        );
        check(
            |p| p.features.max_pixels = 0,
            None,
            Some("max_pixels = 0: 1 or more megapixels"),
        );
    }

    #[test]
    fn an_encoding_read_back_gives_its_parameters_checked_or_the_broken_rule() {
        let encoding = |text: &str| -> Encoding { serde_json::from_str(text).expect("json") };
        let plain_text = r#"{"vocabulary": "v.bin", "k": 16, "stride": 8, "norm": "l1",
            "pyramid": 1, "max_side": null}"#;
        assert_eq!(encoding(plain_text).params(), Ok(plain()));
        let hostile = [
            (
                r#""soft": {"words": 0, "sharpness": 10.0}"#,
                "soft = 0: must be 0",
            ),
            (
                r#""soft": {"words": 40, "sharpness": 10.0}"#,
                "vocabulary's 16",
            ),
            (r#""max_pixels": 0"#, "max_pixels = 0"),
            (r#""scales": [40, 1000000]"#, "scales = 40,1000000"),
        ];
        for (field, want) in hostile {
            let text = plain_text.replacen('{', &format!("{{{field}, "), 1);
            let err = encoding(&text).params().expect_err(field).to_string();
            assert!(err.contains(want), "{field}: {err}");
        }
        for (text, want) in [
            (
                plain_text.replace("\"l1\"", "\"l2\""),
                "norm = l2: must be l1 or hellinger",
            ),
            (
                plain_text.replace("\"pyramid\": 1", "\"pyramid\": 40"),
                "pyramid = 40",
            ),
            (
                plain_text.replace("\"stride\": 8", "\"stride\": 0"),
                "stride = 0",
            ),
        ] {
            let err = encoding(&text).params().expect_err(&text).to_string();
            assert!(err.starts_with(want), "{text}: {err}");
        }
        // A record keeps its pixel limit; the default stays out of the file.
        let mut e = encoding(plain_text);
        assert!(
            !serde_json::to_string(&e)
                .expect("json")
                .contains("max_pixels")
        );
        e.max_pixels = 5_000_000;
        let text = serde_json::to_string(&e).expect("json");
        assert_eq!(
            encoding(&text).params().map(|p| p.features.max_pixels),
            Ok(5_000_000)
        );
    }
}
