//! The photo stages (features, encode) sharded over a team: every member decodes and describes
//! contiguous ranges of the collection with its own threads, the root writes the results in
//! picture-id order, so the files are byte for byte those of one machine.
//!
//! A job starts with [`PhotoRoot::start`]: the root broadcasts the stage's settings and the
//! collection's listing (relative paths, as every member sees the photo folder) and, for encode,
//! the vocabulary; each member rebuilds the collection, checks that photos the root sees are
//! there too, and answers. Then [`PhotoRoot::round`] deals a run of photos out in contiguous
//! ranges (rank order is photo order) and gathers each member's results: per photo its size and
//! patches, or the reason it was skipped. The root checks every piece (counts, lengths, positions
//! inside the photo, finite values) before anything is written.
//!
//! Rounds are small (a few dozen photos per member), so memory at the root is bounded and a
//! round lost with a member is cheap to redo: the TCP driver redoes it on a new team
//! ([`PhotoDriver`]); results already written stay written.
//!
//! Files: `job` (settings, checks, a member's work), `member` and `root` (the two halves),
//! `wire` (a round's piece), `source` (rounds and saved rounds as a stage's source of results),
//! `driver` (the daemons' side), `team` (either root behind one type: what a caller starts).

mod driver;
pub(crate) mod job;
pub(crate) mod member;
mod root;
mod source;
mod team;
mod wire;

#[cfg(test)]
mod tests;

pub use self::driver::PhotoDriver;
pub use self::job::{Elsewhere, PhotoStage, TAG};
pub use self::member::{Current, Photos, Slot};
pub use self::root::{MemberTime, PhotoRoot, shard_photos};
pub use self::source::{Journal, Journaled, Rounds};
pub use self::team::PhotoTeam;
pub use self::wire::{Expect, Reader, Value, take_piece};
