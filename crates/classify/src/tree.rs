//! The compiled engine. (Being replaced by the decision tree; this first version scans.)

use crate::rule::{linear, Key, Rule};
use crate::NO_MATCH;

/// A compiled, immutable rule list.
pub struct Classifier {
    rules: Vec<Rule>,
}

impl Classifier {
    /// Compiles `rules`; earlier rules win.
    pub fn compile(rules: &[Rule]) -> Classifier {
        Classifier {
            rules: rules.to_vec(),
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The index of the first rule `k` matches, or [`NO_MATCH`].
    pub fn classify(&self, k: &Key) -> u32 {
        linear(&self.rules, k).unwrap_or(NO_MATCH)
    }

    /// `out[i] = classify(&keys[i])`.
    pub fn classify_batch(&self, keys: &[Key], out: &mut [u32]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify(k);
        }
    }

    /// Memory the compiled form uses.
    pub fn bytes(&self) -> usize {
        self.rules.len() * std::mem::size_of::<Rule>()
    }
}
