//! A small seeded slice of the mutation harness of `eval/robustness/` (the full run: at least
//! 10,000 mutants a reader, `cargo run --release -p vocab-cluster --example mutants`): every
//! reader of vocab's inputs, a few hundred mutants each, every outcome a result that holds or a
//! clear error, no panic, memory within its bound.

mod engine;

#[global_allocator]
static COUNTING: engine::Counting = engine::Counting;

#[test]
fn every_reader_holds_against_a_seeded_slice_of_mutants() {
    let mut failures = Vec::new();
    for reader in engine::readers() {
        // The seed itself is read as it is.
        let scratch = tempfile::tempdir().expect("scratch");
        let (outcome, _, _) = engine::run_one(&reader, scratch.path(), &reader.seed);
        assert_eq!(outcome, engine::Outcome::Accepted, "{}'s seed", reader.name);
        let tally = engine::run(&reader, 0x5eed, 150);
        assert!(tally.refused > 0, "{}: no mutant was refused", reader.name);
        for (i, why) in &tally.failed {
            failures.push(format!("{} mutant {i}: {why}", reader.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
