//! Each stage's settings, checked in exactly one place whatever their source.
//!
//! A stage's command (`vocab features`, `vocab encode`, ...) and `vocab run` build the same
//! settings type, one from clap's arguments, the other from a config section; the checks are the
//! constructors here. A rule broken is an [`Invalid`] naming the setting by its config key; the
//! command line shows it as a flag (`--pyramid 9: ...`), a config as its section, key and line
//! (`[encode] pyramid = 9, line 4: ...`).

mod model_settings;
mod photo_settings;
mod rules;
mod team_settings;
mod vocabulary_settings;

pub use self::model_settings::*;
pub use self::photo_settings::*;
pub use self::rules::*;
pub use self::team_settings::*;
pub use self::vocabulary_settings::*;

#[cfg(test)]
mod tests {
    use vocab_pipeline::kmeans::Assignment;

    use super::*;
    use crate::options::EncodeOptions;
    use vocab_pipeline::features::Descriptor;
    use vocab_pipeline::kmeans::InitMethod;
    use vocab_pipeline::patch::Mode;

    #[test]
    fn a_broken_rule_names_the_flag_or_the_key_with_the_value() {
        let e = EncodeOptions {
            pyramid: 9,
            ..EncodeOptions::default()
        }
        .params_for(None)
        .expect_err("pyramid 9");
        assert_eq!(e.flag(), "--pyramid 9: must be 1 to 5 levels");
        assert_eq!(e.to_string(), "pyramid = 9: must be 1 to 5 levels");
        let e = feature_params((Mode::Random, Descriptor::Hog), (0, 8, 0), (None, None), 1)
            .expect_err("no patches");
        assert_eq!(e.key, "per_image");
        let e = feature_params(
            (Mode::Random, Descriptor::Hog),
            (5, 8, 0),
            (Some(8), None),
            1,
        )
        .expect_err("small side");
        assert!(e.flag().starts_with("--max-side 8:"), "{}", e.flag());
        let e = feature_params(
            (Mode::Random, Descriptor::Hog),
            (5, 8, 0),
            (None, None),
            u64::MAX,
        )
        .expect_err("overflow");
        assert_eq!(e.key, "max_pixels");
        assert!(
            EncodeOptions {
                soft: 1,
                ..EncodeOptions::default()
            }
            .params_for(None)
            .is_err()
        );
        let grid = crate::options::DEFAULT_C_GRID;
        assert!(svm_rules(None, (1, &grid), 3).is_err());
        assert!(svm_rules(Some(0.0), (1, &grid), 3).is_err());
        assert!(svm_rules(Some(1.0), (1, &grid), 3).is_ok());
        let e = svm_rules(None, (5, &[1.0, 1.0]), 3).expect_err("twice");
        assert_eq!(
            e.to_string(),
            "c_grid = 1,1: must be distinct positive numbers"
        );
        assert!(svm_rules(None, (5, &[1.0, -1.0]), 3).is_err());
        assert!(svm_rules(None, (5, &[]), 3).is_err());
        assert!(svm_rules(None, (5, &[1.0; 17]), 3).is_err());
        assert!(svm_rules(None, (5, &[100.0, 1000.0]), 3).is_ok());
        let rules = |k, iterations, tol| {
            kmeans_rules(
                k,
                (iterations, tol),
                Some(InitMethod::Random),
                Assignment::default(),
            )
        };
        assert_eq!(rules(0, 10, 0.0).expect_err("k = 0").key, "k");
        assert_eq!(
            rules(4, 0, 0.0).expect_err("no iterations").key,
            "iterations"
        );
        assert_eq!(rules(4, 10, f64::NAN).expect_err("NaN").key, "tol");
        assert!(rules(4, 10, 0.0).is_ok());
    }
}
