//! The rule engine behind ACLs and QoS classes.
//!
//! A rule list (first match wins) is compiled off the fast path into a [`Classifier`], published
//! whole, and asked for the index of the first rule each packet [`Key`] matches. [`rule::linear`]
//! is the reference every engine is tested against.

pub mod fuzzing;
pub mod gen;
pub mod key;
pub mod rule;
mod tree;

pub use key::{extract, extract_at, extract_at_into};
pub use rule::{linear, Dim, Key, Rule, DIMS};
pub use tree::Classifier;

/// What [`Classifier::classify`] answers when no rule matches.
pub const NO_MATCH: u32 = u32::MAX;
