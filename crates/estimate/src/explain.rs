//! Explanation records: how each reported number was derived, with the values put in.

use serde::{Deserialize, Serialize};

/// The derivation of one reported number, for the page's "show formula" and the CLI's docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The formula in symbols, e.g. `KV = kv_bytes_per_token × context × batch`.
    pub formula: String,
    /// The same formula with the values put in.
    pub values: String,
    /// The result with its unit.
    pub result: String,
    /// What is a model (not arithmetic) about it, or where the inputs come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Explanation {
    pub(crate) fn new(
        formula: impl Into<String>,
        values: impl Into<String>,
        result: impl Into<String>,
    ) -> Self {
        Explanation {
            formula: formula.into(),
            values: values.into(),
            result: result.into(),
            note: None,
        }
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// Bytes with a binary-prefix unit for display: `1.50 GiB (1610612736 B)`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {} ({b} B)", UNITS[i])
    }
}
