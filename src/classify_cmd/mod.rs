//! `vocab train`, `vocab evaluate` and `vocab classify`.

mod classify;
mod confusion;
mod evaluate;
mod records;
mod split;
mod train;

pub use self::classify::classify;
pub use self::confusion::Confusion;
pub use self::evaluate::{Scores, evaluate, evaluate_on};
pub(crate) use self::records::read_encoding;
pub use self::train::{train, train_on};
