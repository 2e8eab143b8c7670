//! The cluster runtime of vocab (placeholder crate boundary; see ARCHITECTURE.md).
