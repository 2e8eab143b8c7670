//! Parameters that check themselves, as linfa's parameter guards do: a stage's parameter type
//! has a `check()` returning its own error enum, one variant per broken rule. Each variant says
//! which parameter broke the rule by its config key (the command line's flag is the key with
//! dashes), the value given and the rule ([`Broken`]), so the command line, a config, a member
//! of a job and a file read back (a model, `.encoding.json`) report a broken rule alike.

/// A broken rule, as people read it: `key = value: rule`.
pub trait Broken: std::error::Error {
    /// The parameter's config key (`pyramid`).
    fn key(&self) -> &'static str;
    /// The value given.
    fn value(&self) -> String;
    /// What the parameter must be.
    fn rule(&self) -> String;
}

/// Writes a [`Broken`] rule as `key = value: rule` (the `Display` of every parameter error).
pub(crate) fn show(broken: &dyn Broken, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(
        f,
        "{} = {}: {}",
        broken.key(),
        broken.value(),
        broken.rule()
    )
}
